"""What each adapter's edge reads that alconna does not (`nonebot_plugin_yuiju.platforms`): whether a
quote is hers on Satori, where the adapter's one flag also means an @ or her nickname; and the id
of what a send delivered, whatever shape the platform answers in."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from nonebot.adapters.satori import Message, MessageSegment

from nonebot_plugin_yuiju.platforms import EDGES
from nonebot_plugin_yuiju.send import sent_message_id

SATORI_BOT = SimpleNamespace(
    self_id="qq:10001", get_self_id=lambda: "10001", config=SimpleNamespace(nickname=["悠酱"])
)


def satori_event(*segments: Any, to_me: bool, author: str | None = None) -> Any:
    """A Satori message as the adapter leaves it: the quote in ``reply`` (with its author when
    the server sent one), ``to_me`` as the adapter set it, the message as it arrived."""
    content = Message(MessageSegment.author(author)) if author else None
    quote = MessageSegment.quote("7", content=content)
    original = Message([quote, *segments])
    return SimpleNamespace(reply=quote, to_me=to_me, original_message=original)


def reply_to_me(event: Any) -> bool:
    return EDGES["Satori"].reply_to_me(SATORI_BOT, event)


def test_a_satori_quote_of_her_message_is_a_reply_to_her() -> None:
    assert reply_to_me(satori_event(MessageSegment.text("真的吗"), to_me=True))
    assert reply_to_me(satori_event(MessageSegment.text("真的吗"), to_me=False, author="10001"))


def test_a_satori_quote_of_someone_else_is_not_made_hers_by_an_at_or_her_name() -> None:
    # the adapter's to_me came from the @ or the leading nickname, not from the quote
    at_her = MessageSegment.at("10001")
    assert not reply_to_me(satori_event(at_her, MessageSegment.text(" 你看"), to_me=True))
    assert not reply_to_me(satori_event(MessageSegment.text("悠酱，你看"), to_me=True))
    assert not reply_to_me(satori_event(MessageSegment.text("对"), to_me=True, author="20003"))
    assert not reply_to_me(satori_event(MessageSegment.text("对"), to_me=False))


class Receipt:
    def __init__(self, *answers: Any, reply_id: str | None = None) -> None:
        self.msg_ids = list(answers)
        self.reply_id = reply_id

    def get_reply(self, index: int) -> Any:
        if self.reply_id is None:
            raise KeyError("message_id")  # alconna reading Feishu's answer at its top level
        return SimpleNamespace(id=self.reply_id)


def test_the_id_of_a_sent_message_is_read_from_any_answer_and_never_fails_the_send() -> None:
    assert sent_message_id(Receipt({"message_id": 5}, reply_id="5")) == "5"
    feishu = {"code": 0, "msg": "success", "data": {"message_id": "om_9", "chat_id": "oc_1"}}
    assert sent_message_id(Receipt(feishu)) == "om_9"
    assert sent_message_id(Receipt({"code": 0})) is None
    assert sent_message_id(Receipt()) is None


def test_a_telegram_command_addressed_to_her_by_username_is_a_mention_and_the_command() -> None:
    # in groups Telegram clients write commands as /status@her_bot
    from nonebot.adapters.telegram import Message as TgMessage
    from nonebot.adapters.telegram.message import Entity
    from nonebot_plugin_alconna.uniseg import UniMessage

    from nonebot_plugin_yuiju.uni import read_segments

    bot = SimpleNamespace(self_id="7000000001", username="yuiju_bot")
    edge = EDGES["Telegram"]
    for sent in (
        TgMessage([Entity.bot_command("/status@yuiju_bot"), Entity.text(" 今天")]),
        TgMessage([Entity.text("/status@yuiju_bot 今天")]),
    ):
        message = edge.message(bot, SimpleNamespace(original_message=sent))
        uni = UniMessage.of(message, adapter="Telegram")
        segments, mentions_me, _ = read_segments(
            uni, platform="tg", self_id=bot.self_id, bot_name="悠酱", her_ids=edge.her_ids(bot)
        )
        assert mentions_me and "".join(s.text for s in segments) == "@悠酱/status 今天"
    other = TgMessage([Entity.bot_command("/status@other_bot")])
    message = edge.message(bot, SimpleNamespace(original_message=other))
    assert str(message) == "/status@other_bot"


def test_telegram_names_a_person_by_their_names_and_a_channel_post_by_the_channel() -> None:
    sender = EDGES["Telegram"].sender
    person = SimpleNamespace(id=678, first_name="Alice", last_name="Liddell", username="al")
    assert sender(SimpleNamespace(from_=person)) == ("678", "Alice Liddell")
    channel = SimpleNamespace(id=-100123, title="公告")
    assert sender(SimpleNamespace(chat=channel)) == ("-100123", "公告")
