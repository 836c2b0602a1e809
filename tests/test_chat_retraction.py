"""A message taken back (撤回; issue 19, stickers and pacing) leaves her context, her recent
messages and the conversation window that becomes memory; the reply she was preparing to it is
cancelled; one already archived leaves her memory too (the chat memory and its vector, its line in
the conversation episode); the message log keeps that it was said and taken back, not its words.
The platforms' events map to one `Retraction`: OneBot v11 `group_recall`/`friend_recall`, Satori
`message-deleted`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from nonebug import App

from nonebot_plugin_yuiju.onebot import retraction
from tests.chatkit import qq_group
from tests.conftest import TZ, InstallService, at_time
from tests.test_message_service import BOT, GROUP, make_kit
from yuiju.config import YuijuConfig
from yuiju.memory.diary import DiaryVoice
from yuiju.memory.distill import CHAT_MEMORIES
from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.service import MemoryService, build_memory
from yuiju.memory.vectors import QdrantClientStore
from yuiju.message.model import Conversation, Retraction
from yuiju.message.recorder import CHAT_LOG
from yuiju.storage.history import HistoryStore

SID = f"group:qq:{GROUP}"
SECRET = "我的银行卡密码是 314159"


@pytest.fixture
async def memory(sqlite_history: HistoryStore) -> AsyncIterator[MemoryService]:
    store = await QdrantClientStore.open(collection="retract", dim=64, location=":memory:")
    try:
        yield await build_memory(
            YuijuConfig(),
            sqlite_history,
            SemanticMemory(store, HashingEmbedder(64)),
            character_id="yuiju",
            voice=DiaryVoice(name="悠酱", persona="你是悠酱。"),
        )
    finally:
        await store.close()


def taken_back(mid: int | str, *, group: int | None = GROUP, user: int = 5) -> Retraction:
    conversation = qq_group(group) if group else Conversation.private(f"qq:{user}")
    return Retraction(conversation=conversation, message_id=str(mid), user_id=f"qq:{user}")


async def test_a_recalled_message_leaves_her_context_recent_messages_and_window(
    redis: Any, sqlite_history: HistoryStore
) -> None:
    kit = await make_kit(redis, sqlite_history)
    await kit.say(SECRET)  # message 1: recorded, not answered
    await kit.say("今天天气不错", at=True)  # message 2: answered
    done = await kit.service.retract(taken_back(1))
    assert done.found and not done.cancelled
    sessions = kit.service.sessions
    _, items = await sessions.context(SID)
    contents = [str(i.get("content")) for i in items]
    assert not any("314159" in c for c in contents)
    assert sum("撤回了一条消息" in c for c in contents) == 1  # in its place: her answers still read
    assert "今天天气不错" in "".join(contents)
    assert [e.id for e in await sessions.recent(SID, 10)] == ["2", "bot-1"]
    window, _ = await sessions.window_peek(SID)
    assert [e.text for e in window] == ["@悠酱今天天气不错", "嗯嗯，我在"]
    [logged] = await sqlite_history.find(CHAT_LOG.name, eq={"session_id": SID, "id": "1"})
    assert logged["recalled"] is True and "314159" not in str(logged)
    again = await kit.service.retract(taken_back(1))  # a notice delivered twice changes nothing
    assert not again.found


async def test_recalling_the_message_she_is_answering_cancels_the_reply(redis: Any) -> None:
    writing, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: Any, schema: Any) -> str:
        writing.set()
        await release.wait()
        return "好的，我帮你记着"

    kit = await make_kit(redis, fn=slow)
    turn = asyncio.create_task(kit.say("帮我记一下我的密码 314159", at=True))
    await writing.wait()
    done = await kit.service.retract(taken_back(1))
    outcome = await turn
    assert done.cancelled and not outcome.answered
    assert outcome.reason == "its message was taken back"
    assert kit.sent == []
    _, items = await kit.service.sessions.context(SID)
    assert not any("314159" in str(i.get("content")) for i in items)


async def test_a_recall_that_overtakes_its_message_keeps_it_out(redis: Any) -> None:
    kit = await make_kit(redis)
    await kit.service.retract(taken_back(1))  # the notice was handled first
    outcome = await kit.say(SECRET, at=True)
    assert not outcome.answered and kit.sent == []
    assert await kit.service.sessions.recent(SID, 10) == []
    window, _ = await kit.service.sessions.window_peek(SID)
    assert window == []


async def test_her_own_recalled_line_leaves_her_recent_messages_and_window(redis: Any) -> None:
    kit = await make_kit(redis)
    await kit.say("在吗", at=True)
    [mine] = [e for e in await kit.service.sessions.recent(SID, 10) if e.from_bot]
    done = await kit.service.retract(
        Retraction(conversation=qq_group(GROUP), message_id=mine.id.removeprefix("bot-"), mine=True)
    )
    assert done.found
    assert [e.id for e in await kit.service.sessions.recent(SID, 10)] == ["1"]


async def test_a_recalled_message_already_archived_leaves_her_memory(
    redis: Any, sqlite_history: HistoryStore, memory: MemoryService
) -> None:
    kit = await make_kit(redis, sqlite_history, memory=memory, window_messages=2)
    await kit.say("我下周要去海边捡贝壳")
    await kit.say("下午去图书馆还书")  # the window is full: both are archived
    await kit.service.drain()
    assert len(await sqlite_history.find(CHAT_MEMORIES.name, eq={"character_id": "yuiju"})) == 2
    now = at_time("2026-09-01 12:00")
    found = await memory.memory_search("海边 贝壳", now=now, user_id="qq:5", group_id=f"qq:{GROUP}")
    assert any("贝壳" in m.text for m in found)

    done = await kit.service.retract(taken_back(1))
    assert done.found and done.forgotten == 1
    lines = await sqlite_history.find(CHAT_MEMORIES.name, eq={"character_id": "yuiju"})
    assert [d["text"] for d in lines] == ["下午去图书馆还书"]
    found = await memory.memory_search("海边 贝壳", now=now, user_id="qq:5", group_id=f"qq:{GROUP}")
    assert not any("贝壳" in m.text for m in found)
    [conversation] = await memory.episodes.between(
        "yuiju", at_time("2026-09-01 00:00"), now, type_="conversation"
    )
    said = [m["text"] for m in conversation.data["messages"]]
    assert said == ["下午去图书馆还书"] and conversation.data["message_count"] == 1
    window = conversation.typed()  # the chat window fits its model, nothing left over
    assert window is not None and not window.model_extra


# -- the platforms' events ------------------------------------------------------------------------


def test_onebot_recall_notices_map_to_one_retraction() -> None:
    group = retraction(
        {
            "post_type": "notice",
            "notice_type": "group_recall",
            "group_id": GROUP,
            "user_id": 5,
            "operator_id": 1,
            "message_id": -2147483000,
            "time": 1_788_000_000,
        },
        tz=TZ,
    )
    assert group is not None
    assert group.conversation == qq_group(GROUP) and group.message_id == "-2147483000"
    assert (group.user_id, group.operator_id) == ("qq:5", "qq:1")
    friend = retraction(
        {"notice_type": "friend_recall", "user_id": 7, "message_id": 9, "time": 1_788_000_000},
        tz=TZ,
    )
    assert friend is not None and friend.conversation.session_id == "private:qq:7"
    for bad in (
        {"notice_type": "group_recall", "group_id": GROUP, "user_id": 5},  # no message id
        {"notice_type": "group_recall", "user_id": 5, "message_id": 3},  # no group
        {"notice_type": "friend_recall", "user_id": "someone", "message_id": 3},
        {"notice_type": "group_increase", "group_id": 1, "user_id": 5},
    ):
        assert retraction(bad, tz=TZ) is None, bad


async def test_a_onebot_group_recall_notice_reaches_her(
    app: App, redis: Any, install_service: InstallService
) -> None:
    import nonebot
    from nonebot.adapters.onebot.v11 import Adapter, Bot, GroupRecallNoticeEvent

    import nonebot_plugin_yuiju.retractions as retractions

    kit = await make_kit(redis)
    await kit.say(SECRET)
    install_service(kit.service)
    async with app.test_matcher(retractions.onebot_recalls) as ctx:
        bot = ctx.create_bot(base=Bot, adapter=nonebot.get_adapter(Adapter), self_id=str(BOT))
        ctx.receive_event(
            bot,
            GroupRecallNoticeEvent(
                time=1_788_000_000,
                self_id=BOT,
                post_type="notice",
                notice_type="group_recall",
                user_id=5,
                group_id=GROUP,
                operator_id=5,
                message_id=1,
            ),
        )
    assert await kit.service.sessions.recent(SID, 10) == []


def satori_deleted(channel_type: int, *, user: str = "678") -> Any:
    from nonebot.adapters.satori.event import MessageDeletedEvent

    return MessageDeletedEvent.model_validate(
        {
            "sn": 1,
            "type": "message-deleted",
            "timestamp": 1_788_000_000_000,
            "login": {
                "sn": 1,
                "platform": "telegram",
                "status": 1,
                "adapter": "tg",
                "user": {"id": "999"},
            },
            "channel": {
                "id": "-1001" if channel_type == 0 else "private:678",
                "type": channel_type,
            },
            "user": {"id": user},
            "member": {},
            "message": {"id": "m77", "content": ""},
        }
    ).convert()


@dataclass
class SatoriLogin:
    """What the handler reads of a Satori bot: its adapter's name and its login's platform."""

    platform: str

    class adapter:  # the attribute a bot has
        @staticmethod
        def get_name() -> str:
            return "Satori"


def test_satori_message_deleted_maps_to_one_retraction() -> None:
    from nonebot_plugin_yuiju.retractions import satori_retraction

    public = satori_retraction(satori_deleted(0), platform="tg")
    assert public.conversation == Conversation.group("tg", "-1001")
    assert (public.message_id, public.user_id) == ("m77", "tg:678")
    direct = satori_retraction(satori_deleted(1), platform="tg")
    assert direct.conversation.session_id == "private:tg:678"


async def test_a_satori_message_deleted_event_reaches_her(redis: Any) -> None:
    from nonebot_plugin_yuiju.retractions import on_satori_deletion

    kit = await make_kit(redis)
    tg = Conversation.group("tg", "-1001")
    entry = kit.entry("x").model_copy(
        update={"id": "m77", "conversation": tg, "user_id": "tg:678", "text": SECRET}
    )
    await kit.service.handle(entry)
    assert len(await kit.service.sessions.recent(tg.session_id, 10)) == 1
    await on_satori_deletion(SatoriLogin("telegram"), satori_deleted(0), kit.service)  # type: ignore[arg-type]
    assert await kit.service.sessions.recent(tg.session_id, 10) == []
