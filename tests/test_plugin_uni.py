"""A platform other than OneBot through alconna's universal segments (`nonebot_plugin_yuiju.uni`):
the mapping a new adapter uses, into the same core chain."""

from __future__ import annotations

from typing import Any

from nonebot_plugin_alconna.uniseg import (
    At,
    AtAll,
    Emoji,
    File,
    Image,
    Other,
    Reply,
    Text,
    UniMessage,
)

from nonebot_plugin_yuiju.uni import entry_from_uni
from tests.conftest import at_time
from tests.test_message_service import make_kit
from yuiju.config import GroupPolicy
from yuiju.message.model import Conversation

TG_GROUP = Conversation.group("tg", "-1001")


def tg_entry(uni: UniMessage, **kw: Any) -> Any:
    return entry_from_uni(
        uni,
        platform="tg",
        conversation=TG_GROUP,
        user_id=kw.pop("user_id", "678"),
        sender_name="Alice",
        message_id=kw.pop("message_id", "42"),
        time=at_time("2026-09-01 10:00"),
        self_id="999",
        bot_name="悠酱",
        **kw,
    )


def test_universal_segments_read_as_the_core_keeps_them() -> None:
    uni = UniMessage(
        [
            Reply("41"),
            At("user", "999"),
            Text(" 看"),
            Emoji("1", "smile"),
            Image(url="https://x/y.png", sticker=True),
            Image(id="photo"),
            File(id="f", name="notes.pdf"),
            AtAll(),
            At("user", "555", display="Bob"),
        ]
    )
    entry = tg_entry(uni, reply_to_me=True)
    assert entry is not None and entry.mentions_me and entry.reply_to == "41"
    assert entry.user_id == "tg:678" and entry.session_id == "group:tg:-1001"
    assert entry.text == (
        "[回复 悠酱] @悠酱 看[表情：smile][表情包][图片][文件：notes.pdf]@全体成员@Bob"
    )
    kinds = [s.type for s in entry.segments]
    assert kinds == ["reply", "at", "text", "face", "sticker", "image", "file", "at", "at"]
    assert entry.segments[-1].ref == "tg:555"


def test_an_image_the_platform_names_keeps_its_name() -> None:
    uni = UniMessage([Image(url="https://x/y.png", name="cat.jpg"), Image(url="https://x/z")])
    entry = tg_entry(uni)
    assert entry is not None and entry.text == "[图片：cat.jpg][图片]"


def test_an_empty_or_unknown_message_is_a_marker_or_nothing() -> None:
    from nonebot.adapters.onebot.v11 import MessageSegment

    assert tg_entry(UniMessage([Text("  ")])) is None
    entry = tg_entry(UniMessage([Other(MessageSegment("poke", {}))]))
    assert entry is not None and entry.text == "[other]"


def test_her_own_message_is_hers() -> None:
    entry = tg_entry(UniMessage([Text("我刚放学")]), user_id="999")
    assert entry is not None and entry.from_bot


async def test_a_telegram_mention_is_answered_in_its_own_conversation(redis: Any) -> None:
    kit = await make_kit(redis, groups={"tg:-1001": GroupPolicy(reply="mention")})
    entry = tg_entry(UniMessage([At("user", "999"), Text(" 在吗")]))
    out = await kit.service.handle(entry)
    assert out.replies == ["嗯嗯，我在"]
    [message] = kit.service.deps.sender.messages
    assert message.conversation == TG_GROUP and message.plain == "嗯嗯，我在"
    quiet = tg_entry(UniMessage([Text("大家好")]), message_id="43")
    assert (await kit.service.handle(quiet)).reason == "not addressed to her"
