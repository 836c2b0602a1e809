"""Proactive life updates: the anti-spam policy, the stream consumer, control, and one walk in the
park turning into one group post, all under the simulated clock on real Redis and SQLite."""

from __future__ import annotations

import itertools
import json
import logging
from datetime import datetime, timedelta
from typing import Any

import pytest
import redis.asyncio as aioredis

from tests.conftest import at_time, make_character, make_engine, make_world
from tests.openai_stub import OpenAIStub
from yuiju.characters import load_card
from yuiju.config import ProactiveConfig, ProactiveGroup, YuijuConfig
from yuiju.llm import FunctionChatModel, LLMUnavailable, OpenAIChatModel
from yuiju.llm.model import ChatMessage, JsonSchema
from yuiju.memory.diary import DiaryVoice
from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.service import build_memory
from yuiju.memory.vectors import QdrantClientStore
from yuiju.message.channel import SendFailed
from yuiju.message.model import Conversation
from yuiju.message.output import OutputFilter
from yuiju.message.proactive import OUTBOX, ProactiveService, SharedEvent, memory_group_id
from yuiju.message.proactive_policy import GroupSituation, check_policy, effective_interval
from yuiju.storage.history import HistoryStore
from yuiju.storage.keys import Keys
from yuiju.world.clock import SimClock
from yuiju.world.policies.scripted import ScriptedPolicy

G = 100
"""The default target group (a QQ group)."""


def qq(group: int) -> Conversation:
    return Conversation.group("qq", group)


def gid(key: str) -> int:
    """An outbox record's group (``qq:100``) as the test's number."""
    return int(key.removeprefix("qq:"))


CARD = load_card("yuiju")


# -- fakes --------------------------------------------------------------------------------------


class FakeSender:
    def __init__(self, *, fail: set[int] | None = None, crash: bool = False) -> None:
        self.sent: list[tuple[int, str]] = []
        self.attempts: list[int] = []
        self.fail = fail or set()
        self.crash = crash

    async def send_group(self, group: Conversation, text: str) -> None:
        group_id = int(group.id)
        self.attempts.append(group_id)
        if self.crash:
            raise RuntimeError("the process died while sending")
        if group_id in self.fail:
            raise SendFailed(f"group {group_id}: the bot is not a member")
        self.sent.append((group_id, text))


class FakeGroups:
    """A group conversation; with ``auto_reply`` a friend answers each post a minute later."""

    def __init__(self, clock: SimClock, *, auto_reply: bool = False) -> None:
        self.clock = clock
        self.auto_reply = auto_reply
        self.messages: dict[int, list[dict[str, Any]]] = {}
        self.bot_posts: list[tuple[int, str, str]] = []

    def say(self, group_id: int, text: str, at: datetime, name: str = "小明") -> None:
        self.messages.setdefault(group_id, []).append(
            {"sender_id": "qq:1", "sender_name": name, "text": text, "time": at, "from_bot": False}
        )

    async def recent_messages(self, group: Conversation, limit: int) -> list[dict[str, Any]]:
        return sorted(self.messages.get(int(group.id), []), key=lambda m: m["time"])[-limit:]

    async def last_human_message_at(self, group: Conversation) -> datetime | None:
        times = [m["time"] for m in self.messages.get(int(group.id), []) if not m["from_bot"]]
        return max(times, default=None)

    async def record_bot_post(self, group: Conversation, text: str, *, source: str) -> None:
        group_id = int(group.id)
        now = self.clock.now()
        self.bot_posts.append((group_id, text, source))
        self.messages.setdefault(group_id, []).append(
            {"sender_id": "bot", "sender_name": "悠酱", "text": text, "time": now, "from_bot": True}
        )
        if self.auto_reply:
            self.say(group_id, "哇，听起来不错", now + timedelta(minutes=1))


def writer(answer: dict[str, Any] | None = None) -> FunctionChatModel:
    """A model that always wants to send, with a fresh message each time."""
    counter = itertools.count(1)

    def fn(messages: list[ChatMessage], schema: JsonSchema | None) -> str:
        n = next(counter)
        return json.dumps(
            answer
            or {
                "shouldSend": True,
                "reason": "想分享",
                "message": f"刚去公园散了步，风好舒服（{n}）",
            },
            ensure_ascii=False,
        )

    return FunctionChatModel(fn)


def settings(**kw: Any) -> ProactiveGroup:
    return ProactiveGroup(**kw)


async def make_service(
    redis: aioredis.Redis,
    history: HistoryStore,
    *,
    clock: SimClock,
    groups: dict[int, ProactiveGroup] | None = None,
    model: Any = None,
    sender: FakeSender | None = None,
    ctx: FakeGroups | None = None,
    memory: Any = None,
    **extra: Any,
) -> tuple[ProactiveService, FakeSender, FakeGroups]:
    cfg = ProactiveConfig(groups={str(g): s for g, s in (groups or {G: settings()}).items()})
    sender = sender or FakeSender()
    ctx = ctx or FakeGroups(clock)
    service = ProactiveService(
        cfg=cfg,
        character_id="yuiju",
        card=CARD,
        redis=redis,
        keys=Keys(),
        history=history,
        clock=clock,
        chat_model=model if model is not None else writer(),
        memory=memory,
        sender=sender,
        group_context=ctx,
        block_ms=10,
        **extra,
    )
    await service.ensure()
    return service, sender, ctx


_ids = itertools.count(1)


async def emit(
    redis: aioredis.Redis, at: datetime, *, share: bool = True, name: str = "在公园散步"
) -> tuple[str, dict[str, str]]:
    """Add an ``action_completed`` event to the stream, as the engine does."""
    fields = {
        "type": "action_completed",
        "character_id": "yuiju",
        "time": at.isoformat(),
        "data": json.dumps(
            {
                "episode_id": f"bhv_test{next(_ids)}",
                "action": "walk_in_park",
                "name": name,
                "summary": f"yuiju在南风公园{name}，用了30分钟",
                "share": share,
            },
            ensure_ascii=False,
        ),
    }
    entry_id = await redis.xadd(Keys().events, fields)
    return entry_id, fields


async def post_at(service: ProactiveService, clock: SimClock, when: str) -> dict[str, Any]:
    """Move the clock to ``when``, emit a fresh shareable event and handle it for group G."""
    await clock.sleep_until(at_time(when))
    records = await service.handle(*await emit(service.redis, clock.now()))
    return next(r for r in records if r["group_id"] == qq(G).key)


# -- the pure policy ------------------------------------------------------------------------------


def test_policy_blocks_in_order_and_forced_posts_skip_all_but_sleep() -> None:
    now = at_time("2026-09-01 12:00")
    s = settings()
    age = timedelta(hours=2)
    assert check_policy(GroupSituation(now=now, enabled=True), s, max_event_age=age).allowed
    assert (
        check_policy(GroupSituation(now=now, enabled=False), s, max_event_age=age).code
        == "disabled"
    )
    assert (
        check_policy(GroupSituation(now=now, enabled=True, asleep=True), s, max_event_age=age).code
        == "asleep"
    )
    assert (
        check_policy(
            GroupSituation(now=now, enabled=True, event_age=timedelta(hours=3)),
            s,
            max_event_age=age,
        ).code
        == "stale"
    )
    busy = GroupSituation(
        now=now, enabled=False, posts_today=9, last_post_at=now, last_post_answered=False
    )
    assert check_policy(busy, s, max_event_age=age, forced=True).allowed
    asleep = GroupSituation(now=now, enabled=True, asleep=True)
    assert check_policy(asleep, s, max_event_age=age, forced=True).code == "asleep"


@pytest.mark.parametrize("character_id", ["yuiju", "kaede"])
def test_every_card_renders_the_proactive_prompts(character_id: str) -> None:
    now = at_time("2026-09-01 10:35")
    service = ProactiveService.__new__(ProactiveService)  # rendering needs only the card and config
    service.card, service.cfg = load_card(character_id), ProactiveConfig()
    service.output = OutputFilter(name=service.card.name, max_chars=service.cfg.max_message_chars)
    event = SharedEvent(
        event_id="1-0",
        time=now,
        episode_id="e",
        action="walk_in_park",
        name="在公园散步",
        summary="在南风公园散步",
        share=True,
        place="park",
        start=now - timedelta(minutes=35),
        end=now - timedelta(minutes=5),
        stats_after={"stamina": 70, "mood": 66},
    )
    system, user = service.render_prompt(
        event,
        qq(G),
        settings(label="读书会"),
        recent=[],
        own_posts=[],
        memories="",
        world=make_world(now),
        now=now,
        forced=True,
    )
    assert service.card.name in system["content"] and "读书会" in system["content"]
    assert "南风公园，10:00–10:30" in user["content"] and "体力 70" in user["content"]
    assert "最近没有消息" in user["content"] and "shouldSend 填 true" in user["content"]


def test_backoff_doubles_per_ignored_post_and_is_capped() -> None:
    s = settings(min_interval_minutes=120, backoff_factor=2, max_backoff_hours=10)
    assert [effective_interval(s, n) for n in range(4)] == [
        timedelta(hours=2),
        timedelta(hours=4),
        timedelta(hours=8),
        timedelta(hours=10),
    ]


# -- one event, one group -------------------------------------------------------------------------


async def test_a_shareable_completion_is_posted_once_and_recorded(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    clock = SimClock(at_time("2026-09-01 10:00"))
    service, sender, ctx = await make_service(redis, sqlite_history, clock=clock)
    ctx.say(G, "今天好热啊", at_time("2026-09-01 08:30"))

    entry_id, fields = await emit(redis, clock.now())
    [record] = await service.handle(entry_id, fields)

    assert record["status"] == "sent" and record["code"] == "sent"
    assert sender.sent == [(G, "刚去公园散了步，风好舒服（1）")]
    assert ctx.bot_posts == [(G, "刚去公园散了步，风好舒服（1）", "proactive")]
    assert await sqlite_history.get(OUTBOX.name, record["_id"]) == record | {"time": record["time"]}
    prompt = service.chat_model.calls[0][1]["content"]  # type: ignore[union-attr]
    assert "在公园散步" in prompt and "今天好热啊" in prompt and "1 小时" in prompt
    assert "悠酱" in service.chat_model.calls[0][0]["content"]  # type: ignore[union-attr]

    assert await service.handle(entry_id, fields) == [record]  # the same event again: no new post
    assert len(sender.sent) == 1 and len(service.chat_model.calls) == 1  # type: ignore[union-attr]


async def test_an_event_not_meant_for_sharing_posts_nothing_and_records_nothing(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    clock = SimClock(at_time("2026-09-01 10:00"))
    service, sender, _ = await make_service(redis, sqlite_history, clock=clock)
    assert await service.handle(*await emit(redis, clock.now(), share=False)) == []
    assert sender.attempts == [] and await sqlite_history.count(OUTBOX.name) == 0


async def test_daily_cap_holds_and_resets_the_next_day(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    clock = SimClock(at_time("2026-09-01 09:00"))
    service, sender, _ = await make_service(
        redis,
        sqlite_history,
        clock=clock,
        groups={G: settings(min_interval_minutes=0)},
        ctx=FakeGroups(clock, auto_reply=True),
    )
    hours = ["09:00", "10:00", "11:00", "12:00", "13:00"]
    records = [await post_at(service, clock, f"2026-09-01 {h}") for h in hours]
    assert [r["code"] for r in records] == ["sent", "sent", "sent", "daily_cap", "daily_cap"]
    assert len(sender.sent) == 3 and len(service.chat_model.calls) == 3  # type: ignore[union-attr]
    assert (await post_at(service, clock, "2026-09-02 09:00"))["code"] == "sent"


async def test_min_interval_between_posts(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    clock = SimClock(at_time("2026-09-01 10:00"))
    service, _, _ = await make_service(
        redis, sqlite_history, clock=clock, ctx=FakeGroups(clock, auto_reply=True)
    )
    assert (await post_at(service, clock, "2026-09-01 10:00"))["code"] == "sent"
    skipped = await post_at(service, clock, "2026-09-01 11:30")
    assert skipped["code"] == "min_interval" and "还要等 31 分钟" in skipped["reason"]
    assert (await post_at(service, clock, "2026-09-01 12:00"))["code"] == "sent"
    assert len(service.chat_model.calls) == 2  # type: ignore[union-attr]  # no LLM call for a skip


async def test_quiet_hours_wrap_midnight(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    clock = SimClock(at_time("2026-09-01 22:59"))
    service, _, _ = await make_service(
        redis,
        sqlite_history,
        clock=clock,
        groups={G: settings(min_interval_minutes=0)},
        ctx=FakeGroups(clock, auto_reply=True),
    )
    codes = [
        (await post_at(service, clock, t))["code"]
        for t in ("2026-09-01 23:00", "2026-09-02 03:00", "2026-09-02 07:59", "2026-09-02 08:00")
    ]
    assert codes == ["quiet_hours", "quiet_hours", "quiet_hours", "sent"]


async def test_no_second_post_while_the_last_one_is_unanswered(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    clock = SimClock(at_time("2026-09-01 09:00"))
    service, sender, ctx = await make_service(redis, sqlite_history, clock=clock)
    assert (await post_at(service, clock, "2026-09-01 09:00"))["code"] == "sent"
    assert (await post_at(service, clock, "2026-09-01 13:00"))["code"] == "unanswered"
    assert (await post_at(service, clock, "2026-09-01 18:00"))["code"] == "unanswered"
    ctx.say(G, "悠酱去哪里散步了？", at_time("2026-09-01 09:20"))
    assert (await post_at(service, clock, "2026-09-01 18:30"))["code"] == "sent"
    assert len(sender.sent) == 2


async def test_ignored_posts_back_off_the_interval(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    clock = SimClock(at_time("2026-09-01 09:00"))
    service, _, ctx = await make_service(redis, sqlite_history, clock=clock)
    assert (await post_at(service, clock, "2026-09-01 09:00"))["code"] == "sent"
    ctx.say(
        G, "在吗", at_time("2026-09-01 11:00")
    )  # someone speaks, but 2 h later: the post was ignored
    backed = await post_at(service, clock, "2026-09-01 12:00")
    assert backed["code"] == "backoff" and "4:00:00" in backed["reason"]
    assert (await post_at(service, clock, "2026-09-01 13:00"))["code"] == "sent"
    [latest, first] = await service.recent_posts(qq(G))
    assert first["reply"]["within_window"] is False and latest["reply"] is None


async def test_no_post_while_she_sleeps(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    clock = SimClock(at_time("2026-09-01 10:00"))
    service, sender, _ = await make_service(redis, sqlite_history, clock=clock)
    await redis.set(Keys().character("yuiju"), make_character(asleep=True).model_dump_json())
    assert (await post_at(service, clock, "2026-09-01 10:00"))["code"] == "asleep"
    assert (await service.force(qq(G)))["code"] == "asleep"
    assert sender.attempts == []


async def test_no_post_into_an_active_conversation(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    clock = SimClock(at_time("2026-09-01 10:00"))
    service, _, ctx = await make_service(redis, sqlite_history, clock=clock)
    for minute, text in ((52, "晚上开黑吗"), (55, "来来来"), (58, "我先排队")):
        ctx.say(G, text, at_time(f"2026-09-01 09:{minute}"))
    assert (await post_at(service, clock, "2026-09-01 10:00"))["code"] == "active_conversation"
    assert service.chat_model.calls == []  # type: ignore[union-attr]
    # Ten minutes later the burst is over: the model sees the talk and judges relatedness itself.
    assert (await post_at(service, clock, "2026-09-01 10:10"))["code"] == "sent"
    assert "晚上开黑吗" in service.chat_model.calls[0][1]["content"]  # type: ignore[union-attr]


# -- bad input ------------------------------------------------------------------------------------


async def test_llm_failure_and_malformed_answers_are_recorded_as_skipped(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    clock = SimClock(at_time("2026-09-01 10:00"))

    def down(messages: list[ChatMessage], schema: JsonSchema | None) -> str:
        raise LLMUnavailable("stub: connection refused")

    service, sender, _ = await make_service(
        redis, sqlite_history, clock=clock, model=FunctionChatModel(down)
    )
    record = await post_at(service, clock, "2026-09-01 10:00")
    assert (record["status"], record["code"]) == (
        "skipped",
        "llm_invalid",
    ) and "connection refused" in record["reason"]

    garbage = FunctionChatModel(
        lambda m, s: '{"shouldSend": true, "reason": "想说", "message": ""}'
    )
    service2, sender2, _ = await make_service(redis, sqlite_history, clock=clock, model=garbage)
    record = await post_at(service2, clock, "2026-09-01 10:30")
    assert (record["status"], record["code"]) == ("skipped", "llm_invalid")
    assert len(garbage.calls) == 3 and "message 不能为空" in garbage.calls[1][-1]["content"]
    declined = writer({"shouldSend": False, "reason": "群里在聊别的", "message": ""})
    service3, _, _ = await make_service(redis, sqlite_history, clock=clock, model=declined)
    record = await post_at(service3, clock, "2026-09-01 11:00")
    assert (record["status"], record["code"]) == (
        "skipped",
        "declined",
    ) and "群里在聊别的" in record["reason"]
    assert sender.attempts == sender2.attempts == []


async def test_a_group_that_cannot_be_sent_to_is_reported_once_and_skipped(
    redis: aioredis.Redis, sqlite_history: HistoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    clock = SimClock(at_time("2026-09-01 09:00"))
    sender = FakeSender(fail={200})
    service, _, ctx = await make_service(
        redis,
        sqlite_history,
        clock=clock,
        sender=sender,
        ctx=FakeGroups(clock, auto_reply=True),
        groups={
            G: settings(min_interval_minutes=0, daily_cap=5),
            200: settings(min_interval_minutes=0),
        },
    )
    caplog.set_level(logging.WARNING, logger="yuiju.message.proactive")
    codes = []
    for hour in ("09:00", "10:00", "11:00"):
        await clock.sleep_until(at_time(f"2026-09-01 {hour}"))
        codes.append(
            {
                gid(r["group_id"]): r["code"]
                for r in await service.handle(*await emit(redis, clock.now()))
            }
        )
    assert codes == [
        {G: "sent", 200: "send_failed"},
        {G: "sent", 200: "unreachable"},
        {G: "sent", 200: "unreachable"},
    ]
    assert sender.attempts.count(200) == 1
    assert sum("cannot send to group qq:200" in r.getMessage() for r in caplog.records) == 1
    ctx.say(200, "机器人回来了吗", at_time("2026-09-01 11:30"))  # someone speaks there: try again
    sender.fail.clear()
    await clock.sleep_until(at_time("2026-09-01 12:00"))
    records = await service.handle(*await emit(redis, clock.now()))
    assert {gid(r["group_id"]): r["code"] for r in records} == {G: "sent", 200: "sent"}


# -- the stream: at-least-once, deduplicated ---------------------------------------------------------


async def test_a_restart_neither_loses_a_pending_event_nor_posts_twice(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    clock = SimClock(at_time("2026-09-01 10:00"))
    ctx = FakeGroups(clock, auto_reply=True)
    sender = FakeSender()
    first, _, _ = await make_service(
        redis,
        sqlite_history,
        clock=clock,
        sender=sender,
        ctx=ctx,
        groups={G: settings(min_interval_minutes=0)},
    )
    handled_id, handled_fields = await emit(redis, clock.now())
    lost_id, _ = await emit(redis, clock.now())
    # The first instance reads both, posts for the first, and dies before acknowledging anything.
    answer = await redis.xreadgroup(first.group, "proactive-1", {first.stream: ">"}, count=10)
    assert [e[0] for e in answer[0][1]] == [handled_id, lost_id]
    await first.handle(handled_id, handled_fields)
    assert len(sender.sent) == 1

    second, _, _ = await make_service(
        redis,
        sqlite_history,
        clock=clock,
        sender=sender,
        ctx=ctx,
        groups={G: settings(min_interval_minutes=0)},
    )
    assert await second.run_once(block=False) == 2
    assert len(sender.sent) == 2  # the pending second event posted once, the first not again
    assert (await redis.xpending(second.stream, second.group))["pending"] == 0
    assert await sqlite_history.count(OUTBOX.name) == 2


async def test_a_crash_while_sending_never_resends(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    clock = SimClock(at_time("2026-09-01 10:00"))
    crashing = FakeSender(crash=True)
    first, _, _ = await make_service(redis, sqlite_history, clock=clock, sender=crashing)
    await emit(redis, clock.now())
    with pytest.raises(RuntimeError):
        await first.run_once(block=False)
    assert (await redis.xpending(first.stream, first.group))["pending"] == 1

    sender = FakeSender()
    second, _, _ = await make_service(redis, sqlite_history, clock=clock, sender=sender)
    assert await second.run_once(block=False) == 1
    [record] = await second.records(qq(G))
    assert record["status"] == "uncertain" and sender.attempts == []


# -- control --------------------------------------------------------------------------------------


async def test_preview_force_and_switches(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    clock = SimClock(at_time("2026-09-01 10:00"))
    service, sender, ctx = await make_service(redis, sqlite_history, clock=clock)
    assert (await service.preview(qq(G)))["event"] is None
    assert (await service.force(qq(G)))["code"] == "no_event"

    await service.set_enabled(qq(G), False)
    assert (await post_at(service, clock, "2026-09-01 10:00"))["code"] == "disabled"
    preview = await service.preview(qq(G))
    assert preview["policy"]["code"] == "disabled" and preview["would_send"] is False
    assert preview["answer"]["message"] and sender.attempts == []

    await service.set_enabled(qq(G), True)
    preview = await service.preview(qq(G))
    assert preview["policy"]["allowed"] and preview["already_decided"]["code"] == "disabled"
    forced = await service.force(qq(G))
    assert forced["status"] == "sent" and forced["forced"] is True
    # Forced past the unanswered rule and quiet hours; counted like any post.
    await clock.sleep_until(at_time("2026-09-01 23:30"))
    assert (await service.force(qq(G)))["status"] == "sent"
    assert len(sender.sent) == 2 and len(ctx.bot_posts) == 2

    await service.set_enabled(qq(300), True)  # a group not in the config, switched on by an admin
    assert await service.target_groups() == [qq(G), qq(300)]


async def test_a_sent_post_is_remembered_and_recalled_before_the_next_one(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    store = await QdrantClientStore.open(collection="p", dim=64, location=":memory:")
    try:
        semantic = SemanticMemory(store, HashingEmbedder(64))
        memory = await build_memory(
            YuijuConfig(),
            sqlite_history,
            semantic,
            character_id="yuiju",
            voice=DiaryVoice(name="悠酱", persona="你是悠酱。"),
        )
        clock = SimClock(at_time("2026-09-01 10:00"))
        service, _, _ = await make_service(
            redis,
            sqlite_history,
            clock=clock,
            memory=memory,
            ctx=FakeGroups(clock, auto_reply=True),
        )
        assert (await post_at(service, clock, "2026-09-01 10:00"))["code"] == "sent"
        found = await memory.memory_search(
            "在公园散步", now=clock.now(), group_id=memory_group_id(qq(G))
        )
        assert any("刚去公园散了步" in r.text for r in found)
        assert (await post_at(service, clock, "2026-09-01 13:00"))["code"] == "sent"
        second_prompt = service.chat_model.calls[1][1]["content"]  # type: ignore[union-attr]
        memories = second_prompt.split("## 相关的回忆")[1]
        assert "刚去公园散了步，风好舒服（1）" in memories
        assert (
            "刚去公园散了步，风好舒服（1）"
            in second_prompt.split("## 你最近在这个群主动说过的话")[1]
        )
    finally:
        await store.close()


# -- end to end with the engine ---------------------------------------------------------------------

WALK = {
    "action": "在公园散步",
    "reason": "天气不错，想走走",
    "durationMinute": 30,
    "proactiveShareIntent": {"shouldShare": True, "reason": "公园里的风很舒服，想告诉大家"},
}
IDLE = {"action": "发呆", "reason": "歇一会儿", "durationMinute": 30}


@pytest.fixture
def park_start() -> dict[str, Any]:
    return {"yuiju": make_character(location="park")}


async def test_one_walk_in_the_park_becomes_exactly_one_group_post(
    redis: aioredis.Redis,
    sqlite_history: HistoryStore,
    park_start: dict[str, Any],
    openai_stub: OpenAIStub,
) -> None:
    """The engine, the event stream, the consumer and a real HTTP model (the local stub)."""
    post = "刚在南风公园走了半小时，风好舒服～"
    openai_stub.reply(
        json.dumps(
            {"shouldSend": True, "reason": "群里很安静，散步很舒服", "message": post},
            ensure_ascii=False,
        )
    )
    model = OpenAIChatModel(base_url=openai_stub.base_url, api_key=None, model="stub")
    kit = await make_engine(
        redis,
        sqlite_history,
        policy=ScriptedPolicy([WALK, IDLE, IDLE, IDLE]),
        start="2026-09-01 10:00",
        characters=park_start,
    )
    ctx = FakeGroups(kit.clock)
    ctx.say(G, "早上好", at_time("2026-09-01 08:00"))
    service, sender, _ = await make_service(
        redis, sqlite_history, clock=kit.clock, model=model, ctx=ctx
    )
    try:
        await kit.engine.run(until=at_time("2026-09-01 10:45"))
        await service.run_once(block=False)
        await kit.engine.run(until=at_time("2026-09-01 11:30"))
        await service.run_once(block=False)
    finally:
        await model.aclose()

    assert sender.sent == [(G, post)]
    assert ctx.bot_posts == [(G, post, "proactive")]
    [record] = await service.records(qq(G))
    assert record["status"] == "sent" and record["action"] == "walk_in_park"
    assert len(openai_stub.requests) == 1
    prompt = openai_stub.requests[0]["messages"][-1]["content"]
    assert (
        "公园里的风很舒服，想告诉大家" in prompt
        and "在公园散步30分钟" in prompt
        and "10:00–10:30" in prompt
    )
    assert "早上好" in prompt and "2 小时" in prompt
    assert (await redis.xpending(service.stream, service.group))["pending"] == 0


async def test_a_burst_of_shareable_events_stays_within_the_daily_cap(
    redis: aioredis.Redis, sqlite_history: HistoryStore, park_start: dict[str, Any]
) -> None:
    kit = await make_engine(
        redis,
        sqlite_history,
        policy=ScriptedPolicy(lambda _r: WALK),
        start="2026-09-01 10:00",
        characters=park_start,
    )
    clock = kit.clock
    service, sender, _ = await make_service(
        redis,
        sqlite_history,
        clock=clock,
        ctx=FakeGroups(clock, auto_reply=True),
        groups={G: settings(min_interval_minutes=0)},
    )
    moment = at_time("2026-09-01 10:00")
    while moment < at_time("2026-09-01 16:00"):
        moment += timedelta(minutes=30)
        await kit.engine.run(until=moment)
        await service.run_once(block=False)

    records = await service.records(qq(G), limit=100)
    assert len(records) >= 10  # every walk was decided
    assert len(sender.sent) == 3
    assert {r["code"] for r in records} == {"sent", "daily_cap"}
