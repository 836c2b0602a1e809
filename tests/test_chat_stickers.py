"""Stickers (issue 19, stickers and pacing): a folder of named images she may send. The names are
offered in the stable prompt, the model sends one by its marker, the platform gets an image (its
name as text where there are no images), her context and the message log keep its name, and no
marker ever reaches a chat as text; a bad folder or file is a log line, never a crash."""

from __future__ import annotations

import base64
import logging
from pathlib import Path
from typing import Any

import pytest
from nonebot.adapters.onebot.v11 import Bot, Message, MessageSegment
from nonebot.adapters.onebot.v11.exception import ActionFailed
from nonebug import App

from tests.chatkit import RecordingSender, make_service
from tests.conftest import at_time
from tests.test_message_service import BOT, GROUP, FakeWorld, Kit
from yuiju.config import ChatConfig, GroupPolicy, YuijuConfig, default_toml
from yuiju.llm import FunctionChatModel
from yuiju.message.bot import load_stickers
from yuiju.message.model import Conversation, Outgoing
from yuiju.message.output import OutputFilter
from yuiju.message.recorder import CHAT_LOG
from yuiju.message.stickers import MAX_BYTES, StickerSet, card_folder
from yuiju.world.clock import SimClock

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
GIF = b"GIF89a" + b"\x00" * 32


def sticker_folder(tmp_path: Path, **files: bytes) -> Path:
    folder = tmp_path / "stickers"
    folder.mkdir()
    for name, data in (files or {"开心.png": PNG, "摸鱼.gif": GIF}).items():
        (folder / name).write_bytes(data)
    return folder


async def sticker_kit(
    redis: Any, stickers: StickerSet, *answers: str, history: Any = None, **cfg: Any
) -> Kit:
    replies = list(answers)
    model = FunctionChatModel(lambda m, s: replies.pop(0) if replies else "嗯")
    sender = RecordingSender()
    service = make_service(
        redis,
        cfg=ChatConfig(groups={str(GROUP): GroupPolicy()}, **cfg),
        clock=SimClock(at_time("2026-09-01 10:00")),
        sender=sender,
        model=model,
        world=FakeWorld(),
        history=history,
        stickers=stickers,
    )
    await service.ensure()
    return Kit(service, sender.sent, model)


def sent_messages(kit: Kit) -> list[Outgoing]:
    sender = kit.service.deps.sender
    assert isinstance(sender, RecordingSender)
    return sender.messages


# -- offered in a stable way, sent by a marker ----------------------------------------------------


async def test_her_sticker_names_are_in_the_stable_prompt_the_same_bytes_every_turn(
    redis: Any, tmp_path: Path
) -> None:
    kit = await sticker_kit(redis, StickerSet.load(sticker_folder(tmp_path)), "嗯嗯", "好呀")
    await kit.say("在吗", at=True)
    await kit.say("吃了吗", at=True, minutes=1)
    first, second = (call[0]["content"] for call in kit.model.calls)
    assert first == second
    assert "[表情包：名字]" in first and "开心、摸鱼" in first  # sorted by name
    assert "开心" not in kit.model.calls[0][1]["content"]  # not in the changing part


async def test_a_sticker_marker_is_sent_as_an_image_and_kept_as_its_name(
    redis: Any, tmp_path: Path, sqlite_history: Any
) -> None:
    folder = sticker_folder(tmp_path)
    kit = await sticker_kit(
        redis, StickerSet.load(folder), "好耶！\n[表情包：开心]", history=sqlite_history
    )
    outcome = await kit.say("我考了满分", at=True)
    text, image = sent_messages(kit)
    assert text.plain == "好耶！"
    [seg] = image.segments
    assert (seg.type, seg.sticker, seg.text) == ("image", True, "[开心]")
    assert Path(seg.ref or "") == (folder / "开心.png").resolve()
    assert outcome.replies == ["好耶！", "[表情包：开心]"]
    sid = f"group:qq:{GROUP}"
    recent = await kit.service.sessions.recent(sid, 10)
    assert [e.text for e in recent if e.from_bot] == ["好耶！", "[表情包：开心]"]
    _, items = await kit.service.sessions.context(sid)
    assert items[-1] == {"role": "assistant", "content": "好耶！\n[表情包：开心]"}
    await kit.service.drain()  # the message log is written in batches behind the turn
    logged = await sqlite_history.find(CHAT_LOG.name, eq={"session_id": sid}, sort="time")
    assert "[表情包：开心]" in [d["text"] for d in logged]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("[表情包：开心]", ["[开心]"]),
        ("[[sticker:开心]] 你来啦", ["[开心]", "你来啦"]),
        ("【表情包:摸鱼】", ["[摸鱼]"]),
        ("好的[表情包：不存在的]", ["好的"]),
        ("[表情包：开心][表情包：摸鱼]", ["[开心]"]),
        ("[表情包]", []),
    ],
    ids=["alone", "doubled-ascii-first", "full-width", "unknown", "two", "bare"],
)
async def test_no_marker_ever_reaches_a_chat_as_text(
    redis: Any, tmp_path: Path, answer: str, expected: list[str]
) -> None:
    kit = await sticker_kit(redis, StickerSet.load(sticker_folder(tmp_path)), answer)
    await kit.say("在吗", at=True)
    assert [m.plain for m in sent_messages(kit)] == expected
    assert all("表情包" not in m.plain and "sticker" not in m.plain for m in sent_messages(kit))


async def test_an_unknown_sticker_name_is_left_out_with_a_line(
    redis: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kit = await sticker_kit(redis, StickerSet.load(sticker_folder(tmp_path)), "好的[表情包：跳舞]")
    with caplog.at_level(logging.INFO, logger="yuiju.message.output"):
        await kit.say("在吗", at=True)
    assert [m.plain for m in sent_messages(kit)] == ["好的"]
    [line] = [r.getMessage() for r in caplog.records if "跳舞" in r.getMessage()]
    assert "not among her stickers" in line and "开心" in line


async def test_without_stickers_a_marker_is_dropped_and_none_are_offered(redis: Any) -> None:
    kit = await sticker_kit(redis, StickerSet(), "好的\n[表情包：开心]")
    await kit.say("在吗", at=True)
    assert [m.plain for m in sent_messages(kit)] == ["好的"]
    assert "表情包" not in kit.model.calls[0][0]["content"]


def test_a_sticker_never_merges_with_a_short_line_nor_breaks_the_line_limit() -> None:
    stickers = StickerSet.load(Path(card_folder("yuiju")), configured=False)
    out = OutputFilter(name="悠酱", max_chars=40, max_lines=3, stickers=stickers)
    assert out.lines("嗯\n[表情包：开心]") == ["嗯", "[表情包：开心]"]
    assert out.lines("[表情包：开心]\n早上好呀，今天也要加油") == [
        "[表情包：开心]",
        "早上好呀，今天也要加油",
    ]
    many = "第一行说点什么\n第二行说点什么\n第三行说点什么\n第四行说点什么\n[表情包：开心]"
    lines = out.lines(many)
    assert len(lines) == 3 and lines[-1] == "[表情包：开心]"
    long = "很长很长的一句话" * 10 + "[表情包：困了]"
    assert out.lines(long)[-1] == "[表情包：困了]"  # cutting the words never cuts the marker
    one = OutputFilter(name="悠酱", max_chars=40, max_lines=1, stickers=stickers)
    assert one.lines("好的[表情包：开心]") == ["好的"]
    assert one.lines("[表情包：开心]") == ["[表情包：开心]"]


def test_a_marker_does_not_read_as_structured_output() -> None:
    stickers = StickerSet.load(Path(card_folder("yuiju")), configured=False)
    out = OutputFilter(name="悠酱", max_chars=100, stickers=stickers)
    assert out.review("[[sticker:开心]]").text == "[表情包：开心]"
    assert out.review("好呀 [[sticker: 摸鱼]]").text == "好呀\n[表情包：摸鱼]"
    assert out.review("[表情包：跳舞]").text == ""


# -- the folder -----------------------------------------------------------------------------------


def test_her_card_ships_stickers_that_load_cleanly(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="yuiju.message.stickers"):
        stickers = load_stickers(ChatConfig(), "yuiju")
    assert 3 <= len(stickers) <= 5 and "开心" in stickers.names
    assert caplog.records == []
    for name in stickers.names:
        sticker = stickers.get(name)
        assert sticker is not None and sticker.path.parent == card_folder("yuiju").resolve()
        assert sticker.path.read_bytes().startswith(b"\x89PNG")
        assert sticker.path.stat().st_size < 64 * 1024
    assert load_stickers(ChatConfig(), "yuiju@7").names == stickers.names  # copies share them
    assert len(load_stickers(ChatConfig(stickers=False), "yuiju")) == 0


def test_bad_sticker_files_are_left_out_each_with_its_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = sticker_folder(
        tmp_path,
        **{
            "开心.png": PNG,
            "notes.txt": b"hello",
            "假的.png": b"this is not a picture",
            "大.gif": GIF,
            "a[b].png": PNG,
            ".DS_Store": b"\x00",
            "开心.gif": GIF,
        },
    )
    with (folder / "大.gif").open("r+b") as f:
        f.truncate(MAX_BYTES + 1)
    (folder / "子目录").mkdir()
    with caplog.at_level(logging.WARNING, logger="yuiju.message.stickers"):
        stickers = StickerSet.load(folder)
    assert stickers.names == ("开心",)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 6, lines
    assert any("notes.txt" in line and "not a sticker" in line for line in lines)
    assert any("假的.png" in line and "not a PNG image" in line for line in lines)
    assert any("大.gif" in line and "shrink it" in line for line in lines)
    assert any("a[b].png" in line and "rename the file" in line for line in lines)
    assert any("开心.gif" in line and "already has the name" in line for line in lines)
    assert any("子目录" in line and "not a file" in line for line in lines)


def test_a_missing_sticker_folder_is_one_line_and_no_stickers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "nowhere"
    with caplog.at_level(logging.WARNING, logger="yuiju.message.stickers"):
        stickers = load_stickers(ChatConfig(sticker_folder=missing), "yuiju")
    assert len(stickers) == 0
    [line] = [r.getMessage() for r in caplog.records]
    assert str(missing) in line and "does not exist" in line and "sticker_folder" in line
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="yuiju.message.stickers"):
        assert len(load_stickers(ChatConfig(), "kaede")) == 0  # a card without stickers: normal
    assert caplog.records == []


def test_yuiju_init_writes_the_sticker_and_pacing_settings() -> None:
    text = default_toml()
    for key in (
        "stickers = true",
        "sticker_folder",
        "chars_per_second",
        "read_chars_per_second",
        "max_pause_seconds",
    ):
        assert key in text, key
    YuijuConfig.model_validate({"chat": {"sticker_folder": "my-stickers"}})


# -- at the NoneBot edge --------------------------------------------------------------------------


def onebot_bot(ctx: Any) -> Bot:
    import nonebot
    from nonebot.adapters.onebot.v11 import Adapter

    return ctx.create_bot(base=Bot, adapter=nonebot.get_adapter(Adapter), self_id=str(BOT))


async def test_a_sticker_goes_to_onebot_as_image_bytes_marked_as_a_sticker(
    app: App, tmp_path: Path
) -> None:
    from nonebot_plugin_yuiju.send import NoneBotSender

    folder = sticker_folder(tmp_path)
    stickers = StickerSet.load(folder)
    group = Conversation.group("qq", GROUP)
    async with app.test_api() as ctx:
        bot = onebot_bot(ctx)
        sender = NoneBotSender(lambda: {"bot": bot})
        image = MessageSegment.image(PNG)
        image.data["subType"] = 1
        ctx.should_call_api(
            "send_msg",
            {"message_type": "group", "group_id": GROUP, "message": Message(image)},
            {"message_id": 81},
        )
        assert await sender.send(stickers.outgoing(group, "[表情包：开心]")) == "81"
    assert "base64://" + base64.b64encode(PNG).decode() == image.data["file"]


async def test_an_image_the_platform_refuses_goes_again_as_its_name(
    app: App, tmp_path: Path
) -> None:
    from nonebot_plugin_yuiju.send import NoneBotSender

    stickers = StickerSet.load(sticker_folder(tmp_path))
    group = Conversation.group("qq", GROUP)
    async with app.test_api() as ctx:
        bot = onebot_bot(ctx)
        sender = NoneBotSender(lambda: {"bot": bot})
        image = MessageSegment.image(PNG)
        image.data["subType"] = 1
        ctx.should_call_api(
            "send_msg",
            {"message_type": "group", "group_id": GROUP, "message": Message(image)},
            exception=ActionFailed(retcode=1200, msg="rich media transfer failed"),
        )
        ctx.should_call_api(
            "send_msg",
            {"message_type": "group", "group_id": GROUP, "message": Message("[开心]")},
            {"message_id": 82},
        )
        assert await sender.send(stickers.outgoing(group, "[表情包：开心]")) == "82"


async def test_a_sticker_file_gone_since_start_goes_as_its_name(app: App, tmp_path: Path) -> None:
    from nonebot_plugin_yuiju.send import NoneBotSender

    folder = sticker_folder(tmp_path)
    stickers = StickerSet.load(folder)
    (folder / "开心.png").unlink()
    async with app.test_api() as ctx:
        bot = onebot_bot(ctx)
        sender = NoneBotSender(lambda: {"bot": bot})
        ctx.should_call_api(
            "send_msg",
            {"message_type": "group", "group_id": GROUP, "message": Message("[开心]")},
            {"message_id": 83},
        )
        outgoing = stickers.outgoing(Conversation.group("qq", GROUP), "[表情包：开心]")
        assert await sender.send(outgoing) == "83"


# -- proactive posts ------------------------------------------------------------------------------


async def test_a_proactive_post_may_carry_a_sticker(
    redis: Any, sqlite_history: Any, tmp_path: Path
) -> None:
    from tests.test_proactive import G, post_at, writer
    from tests.test_proactive import make_service as make_proactive

    stickers = StickerSet.load(sticker_folder(tmp_path))
    clock = SimClock(at_time("2026-09-01 09:00"))
    model = writer(
        {"shouldSend": True, "reason": "想分享", "message": "散步回来啦\n[表情包：开心]"}
    )
    service, sender, _ = await make_proactive(
        redis,
        sqlite_history,
        clock=clock,
        model=model,
        output=OutputFilter(name="悠酱", max_chars=80, stickers=stickers),
    )
    record = await post_at(service, clock, "2026-09-01 10:00")
    assert record["status"] == "sent", record
    assert sender.sent == [(G, "散步回来啦\n[表情包：开心]")]
    system = model.calls[0][0]["content"]
    assert "[表情包：名字]" in system and "开心、摸鱼" in system
    # ...and the chat side's sender turns the marker line into the image
    kit = await sticker_kit(redis, stickers)
    await kit.service.send_group(Conversation.group("qq", G), "散步回来啦\n[表情包：开心]")
    assert [m.plain for m in sent_messages(kit)] == ["散步回来啦", "[开心]"]
    assert sent_messages(kit)[1].segments[0].sticker
