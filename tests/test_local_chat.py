"""The platforms served in-process (`message.local`): the web chat's and the terminal's people,
entries and event streams, over the same chat core as any group."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.chatkit import make_service
from tests.conftest import at_time
from tests.test_message_service import LEXICON, FakeWorld
from yuiju.characters import load_card
from yuiju.config import ChatConfig, YuijuConfig
from yuiju.llm import FunctionChatModel
from yuiju.message.channel import SendFailed
from yuiju.message.local import (
    BadName,
    ChatEvent,
    LocalChat,
    LocalSender,
    local_config,
    term_person,
    web_person,
)
from yuiju.message.model import Conversation, Entry, Outgoing
from yuiju.message.stickers import StickerSet, card_folder
from yuiju.world.clock import SimClock


def private_entry(person: str, text: str = "你好", *, n: int = 1) -> Entry:
    return Entry(
        id=f"m{n}",
        conversation=Conversation.private(person),
        user_id=person,
        sender_name=person.partition(":")[2],
        time=at_time("2026-09-01 10:00"),
        text=text,
    )


# -- the gate: a platform's private chats opened as a whole ------------------------------------


async def test_a_platform_wildcard_in_the_whitelist_opens_private_chats_on_that_platform_only(
    redis: Any,
) -> None:
    service = make_service(
        redis,
        cfg=ChatConfig(private_whitelist=["web:*"], max_pause_seconds=0),
        clock=SimClock(at_time("2026-09-01 10:00")),
        model=FunctionChatModel(lambda m, s: "嗯嗯"),
        world=FakeWorld(),
        lexicon=LEXICON,
    )
    assert (await service.handle(private_entry("web:alice"))).answered
    assert (await service.handle(private_entry("web:bob", n=2))).answered
    for stranger in ("qq:12345", "tg:678", "term:alice"):
        out = await service.handle(private_entry(stranger, n=3))
        assert (out.answered, out.reason) == (False, "private sender not whitelisted"), stranger


# -- names --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "person", "shown"),
    [
        ("小明", "web:小明", "小明"),
        ("  Alice ", "web:alice", "Alice"),
        ("ＡＢＣ１２", "web:abc12", "ABC12"),  # full-width letters are the same name
        ("mi_ko-2.0", "web:mi_ko-2.0", "mi_ko-2.0"),
        ("山田·太郎", "web:山田·太郎", "山田·太郎"),
    ],
)
def test_a_visitor_name_becomes_a_web_person(typed: str, person: str, shown: str) -> None:
    assert web_person(typed, load_card("yuiju")) == (person, shown)


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        ("", "空"),
        ("   ", "空"),
        ("a" * 21, "20"),
        ("tom lee", "空格"),
        ("a:b", ":"),
        ("<b>", "<"),
        ("qq:1", ":"),
        ("a\nb", "空格"),
        ("x*", "*"),
        ("😀", "😀"),
        ("悠酱", "她的名字"),
        ("YUIJU", "她的名字"),
    ],
)
def test_a_bad_visitor_name_is_refused_saying_why(typed: str, says: str) -> None:
    card = load_card("yuiju")
    if typed == "YUIJU" and "yuiju" not in {n.casefold() for n in card.nicknames}:
        pytest.skip("the card has no latin nickname")
    with pytest.raises(BadName, match=re.escape(says)):
        web_person(typed, card)


def test_a_terminal_user_becomes_a_term_person() -> None:
    assert term_person("alice") == ("term:alice", "alice")
    assert term_person("CORP\\bob smith") == ("term:CORP_bob_smith", "CORP\\bob smith")
    assert term_person("") == ("term:user", "user")


# -- the local chat over the core -----------------------------------------------------------------


def local_chat(redis: Any, cfg: ChatConfig | None = None, **parts: Any) -> LocalChat:
    clock = parts.pop("clock", None) or SimClock(at_time("2026-09-01 10:00"))
    sender = LocalSender(clock)
    full = local_config(
        YuijuConfig(chat=cfg or ChatConfig(max_pause_seconds=0)), web_token=parts.pop("token", True)
    )
    service = make_service(
        redis,
        cfg=full.chat,
        clock=clock,
        sender=sender,
        world=FakeWorld(),
        lexicon=LEXICON,
        **parts,
    )
    return LocalChat(service, sender)


async def test_a_web_visitor_talks_to_her_through_the_chat_core(redis: Any) -> None:
    seen: list[str] = []

    def answer(messages: list[dict[str, Any]], _: Any) -> str:
        seen.append(messages[-1]["content"])
        return "你好呀小明！\n今天我去了公园。"

    chat = local_chat(redis, model=FunctionChatModel(answer))
    with chat.listen(Conversation.private("web:小明")) as queue:
        out = await chat.say("web:小明", "小明", "你好", message_id="web-1")
        events = [queue.get_nowait() for _ in range(queue.qsize())]
    assert out.answered and out.replies == ["你好呀小明！", "今天我去了公园。"]
    assert [e.kind for e in events] == ["typing", "line", "line", "done"]
    assert [e.text for e in events if e.kind == "line"] == out.replies
    assert events[0].ref == events[-1].ref == "web-1" and events[-1].answered
    assert 'from="小明" id="web:小明"' in seen[0]  # the model reads who said it, as in a group
    history = await chat.history("web:小明")
    assert [(e.from_bot, e.text) for e in history] == [
        (False, "你好"),
        (True, "你好呀小明！"),
        (True, "今天我去了公园。"),
    ]
    assert history[0].session_id == "private:web:小明"


async def test_without_a_model_the_turn_says_why_and_the_message_is_recorded(redis: Any) -> None:
    chat = local_chat(redis, model=None)
    assert not chat.available and "[llm]" in (chat.why or "")
    events = [e async for e in chat.turn("term:alice", "alice", "在吗")]
    assert [e.kind for e in events] == ["done"]
    assert events[0].reason == "no chat model configured" and "base_url" in events[0].text
    assert [e.text for e in await chat.history("term:alice")] == ["在吗"]


async def test_a_turn_streams_her_lines_and_ends_with_its_own_done(redis: Any) -> None:
    chat = local_chat(redis, model=FunctionChatModel(lambda m, s: "你好呀！\n今天我去了公园。"))
    events = [e async for e in chat.turn("term:alice", "alice", "在吗")]
    assert [(e.kind, e.text) for e in events] == [
        ("typing", ""),
        ("line", "你好呀！"),
        ("line", "今天我去了公园。"),
        ("done", ""),
    ]
    assert events[-1].answered and ChatEvent.from_json(events[1].to_json()) == events[1]


async def test_her_sticker_reaches_the_listeners_by_name_with_its_text_for_the_terminal(
    redis: Any,
) -> None:
    stickers = StickerSet.load(Path(card_folder("yuiju")), configured=False)
    chat = local_chat(
        redis, model=FunctionChatModel(lambda m, s: "好耶！\n[表情包：开心]"), stickers=stickers
    )
    events = [e async for e in chat.turn("term:alice", "alice", "我考了满分")]
    lines = [(e.text, e.sticker) for e in events if e.kind == "line"]
    assert lines == [("好耶！", ""), ("[开心]", "开心")]  # the terminal prints the text
    sticker_line = next(e for e in events if e.sticker)
    assert ChatEvent.from_json(sticker_line.to_json()) == sticker_line
    assert '"sticker": "开心"' in sticker_line.to_json()


async def test_the_local_sender_refuses_other_platforms(redis: Any) -> None:
    sender = LocalSender(SimClock(at_time("2026-09-01 10:00")))
    with pytest.raises(SendFailed):
        await sender.send(Outgoing.text(Conversation.group("qq", 123), "你好"))
    assert (
        await sender.send(Outgoing.text(Conversation.private("web:a"), "你好")) or ""
    ).startswith("web-")


def test_web_admins_count_only_behind_a_page_token() -> None:
    cfg = YuijuConfig(chat=ChatConfig(admins=["web:boss", "qq:1", "term:root"]))
    assert local_config(cfg, web_token=True).chat.admins == ["web:boss", "qq:1", "term:root"]
    assert local_config(cfg, web_token=False).chat.admins == ["qq:1", "term:root"]
    local = local_config(cfg, web_token=False)
    assert {"web:*", "term:*"} <= set(local.chat.private_whitelist)
    assert not local.proactive.enabled and cfg.proactive.enabled
