"""Typed events on the stream (issue 29): writers build one model per event type, the stored
entry keeps its shape, and every consumer reads an entry once at its edge with `parse_event`. An
entry that does not fit (hand-written, edited, another version's) costs that entry only: one
warning naming it, the field and the fix, the entry acknowledged, the consumer going on."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

import pytest
import redis.asyncio as aioredis
from pydantic import ValidationError

from tests.conftest import at_time, make_engine
from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.event_data import (
    EVENT_DATA,
    ActionCompleted,
    ActionStarted,
    CommandApplied,
    Conversation,
    ForgetRequest,
    OtherEvent,
    WeatherChanged,
    parse_event,
)
from yuiju.memory.indexer import GROUP, MemoryWorker
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.vectors import QdrantClientStore, Where
from yuiju.message.proactive import OUTBOX, record_id
from yuiju.storage.history import HistoryStore
from yuiju.storage.keys import Keys
from yuiju.web.app import _sse
from yuiju.world.clock import SimClock
from yuiju.world.commands import ForgetPerson
from yuiju.world.evolutions import Event, TickContext
from yuiju.world.state import WorldState
from yuiju.world.town import HAURA

NOW = at_time("2026-09-06 21:00")


def entry(type_: str, data: Any, *, time: str | None = None, cid: str = "yuiju") -> dict[str, str]:
    """Stream fields as the store writes them (``data`` a str is written as it is)."""
    return {
        "type": type_,
        "character_id": cid,
        "time": NOW.isoformat() if time is None else time,
        "data": data if isinstance(data, str) else json.dumps(data, ensure_ascii=False),
    }


def warnings_about(caplog: pytest.LogCaptureFixture, eid: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if f"entry {eid} " in r.getMessage()]


# -- the stored shape -----------------------------------------------------------------------------


def test_writers_data_keeps_the_keys_consumers_of_the_previous_version_read() -> None:
    ends = NOW + timedelta(minutes=30)
    solo = ActionStarted(
        episode_id="bhv_1", action="walk", name="散步", reason="想走走", ends_at=ends
    )
    assert solo.dump() == {
        "episode_id": "bhv_1",
        "action": "walk",
        "name": "散步",
        "reason": "想走走",
        "ends_at": ends.isoformat(),
    }  # no "with" for a solo start, and the time as ISO text, as before
    joint = solo.model_copy(update={"partners": ["kaede"]})
    assert joint.dump()["with"] == ["kaede"]
    talk = Conversation(
        episode_id="cnv_1", meeting_id="m1", partners=["kaede"], summary="聊天", source="model"
    )
    assert talk.dump() == {
        "episode_id": "cnv_1",
        "meeting_id": "m1",
        "with": ["kaede"],
        "summary": "聊天",
        "source": "model",
    }
    assert Event(talk, "yuiju").type == "conversation"
    assert Event(OtherEvent.of("rain_in_the_park", {"n": 1})).type == "rain_in_the_park"


async def test_every_event_the_engine_writes_reads_back_as_its_model_with_the_same_data(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(redis, sqlite_history, start="2026-09-01 20:00")
    await kit.engine.run(until=kit.clock.now() + timedelta(hours=30))
    seen = set()
    for eid, fields in await redis.xrange(kit.keys.events):
        event = parse_event(eid, fields)
        assert event is not None and not isinstance(event.data, OtherEvent), fields
        assert event.type == event.data.event_type == fields["type"]
        assert event.data.dump() == json.loads(fields["data"]), fields  # the same JSON back
        seen.add(event.type)
    assert {"character_created", "action_started", "action_completed", "new_day"} <= seen


def test_a_forget_command_reads_as_the_world_writes_it() -> None:
    command = ForgetPerson(
        id="qq:777",
        ids=["qq:777", "777"],
        names=["小明"],
        requested_by="admin:cli",
        request_id="r1",
    )
    applied = CommandApplied(command=command.model_dump(), result='{"forgot":"r1","state":{}}')
    got = parse_event("1-0", entry("command_applied", applied.dump()))
    assert got is not None and isinstance(got.data, CommandApplied)
    forget = got.data.forget()
    assert forget is not None
    request, result = forget
    assert request == ForgetRequest.model_validate(command.model_dump())
    assert (request.ids, request.request_id, result.forgot) == (["qq:777", "777"], "r1", "r1")
    other = CommandApplied(command={"type": "set_weather", "weather": "雪"}, result="weather set")
    assert other.forget() is None


def test_an_event_of_a_type_without_a_model_reads_as_other_with_its_data() -> None:
    got = parse_event("1-0", entry("rain_in_the_park", {"n": 1}, cid=""))
    assert got is not None and got.character_id is None
    assert isinstance(got.data, OtherEvent) and got.data.dump() == {"n": 1}
    assert set(EVENT_DATA) >= {"action_started", "action_completed", "conversation"}


def test_an_entry_with_fewer_keys_still_reads_with_the_defaults_readers_assumed() -> None:
    got = parse_event("1-0", entry("action_started", {"action": "sleep"}, time=""))
    assert got is not None and got.time is None
    assert isinstance(got.data, ActionStarted) and got.data.action == "sleep"
    assert got.data.partners is None and got.data.ends_at is None


# -- entries that do not fit ----------------------------------------------------------------------

UNFIT = [
    ("data", entry("action_completed", {"episode_id": "bhv_1", "share": "maybe"}), "data.share"),
    ("list", entry("action_completed", "[1, 2]"), "data: a JSON list"),
    ("json", entry("action_completed", "{not json"), "data: not JSON"),
    ("time", entry("action_completed", {"episode_id": "b"}, time="tomorrow"), "time: 'tomorrow'"),
    ("type", {"character_id": "yuiju", "data": "{}"}, "type: missing"),
    ("with", entry("conversation", {"episode_id": "c", "with": "kaede"}), "data.with"),
    (
        "forget",
        entry("command_applied", {"command": {"type": "forget_person", "id": "qq:1"}}),
        "data.command",
    ),
]


@pytest.mark.parametrize(("name", "fields", "field"), UNFIT, ids=[u[0] for u in UNFIT])
def test_an_unfit_entry_reads_as_none_with_one_warning_naming_entry_field_and_fix(
    caplog: pytest.LogCaptureFixture, name: str, fields: dict[str, str], field: str
) -> None:
    eid = f"90{[u[0] for u in UNFIT].index(name)}-0"  # an id of its own: warned once a process
    with caplog.at_level(logging.WARNING):
        assert parse_event(eid, fields) is None
        assert parse_event(eid, fields) is None  # read again (another consumer): not again
    (message,) = warnings_about(caplog, eid)
    assert field in message and "Fix:" in message and "memory/event_data.py" in message


async def test_the_memory_worker_skips_unfit_entries_and_indexes_the_rest(
    redis: aioredis.Redis, history: HistoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.test_memory_services import FixedClock, service

    store = await QdrantClientStore.open(collection="s", dim=64, location=":memory:")
    semantic = SemanticMemory(store, HashingEmbedder(64))
    try:
        m = await service(history, semantic)
        stream = "yuiju:events"
        worker = MemoryWorker(redis, stream, {"yuiju": m}, clock=FixedClock(), block_ms=10)
        await worker.ensure_group()
        done = {"episode_id": "bhv_ok", "action": "read", "name": "读书", "summary": "在图书馆读书"}
        bad = [
            await redis.xadd(stream, entry("action_completed", "[1]")),  # type: ignore[arg-type]
            await redis.xadd(stream, entry("conversation", {"with": "kaede"})),  # type: ignore[arg-type]
            await redis.xadd(stream, entry("action_started", {"action": 3})),  # type: ignore[arg-type]
            await redis.xadd(stream, entry("command_applied", "{x")),  # type: ignore[arg-type]
        ]
        await redis.xadd(stream, entry("action_completed", done))  # type: ignore[arg-type]
        with caplog.at_level(logging.WARNING):
            assert await worker.run_once(block=False) == 5
        assert (await redis.xpending(stream, GROUP))["pending"] == 0
        assert await semantic.store.count(Where(eq={"kind": "episode"})) == 1
        for eid in bad:
            assert len(warnings_about(caplog, eid)) == 1
    finally:
        await store.close()


async def test_proactive_posts_skip_an_unfit_entry_and_post_the_next(
    redis: aioredis.Redis, sqlite_history: HistoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.test_proactive import G, emit, make_service, qq

    clock = SimClock(at_time("2026-09-01 10:00"))
    service, sender, _ = await make_service(redis, sqlite_history, clock=clock)
    bad = await redis.xadd(Keys().events, entry("action_completed", '"shared!"'))  # type: ignore[arg-type]
    await emit(redis, clock.now())
    with caplog.at_level(logging.WARNING):
        assert await service.run_once(block=False) == 2
    assert service.failures == 0 and len(warnings_about(caplog, bad)) == 1
    assert [group for group, _ in sender.sent] == [G]  # the good one was posted
    assert await sqlite_history.get(OUTBOX.name, record_id(bad, qq(G))) is None


def test_the_observer_forwards_events_as_before_and_leaves_out_an_unfit_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = entry("action_completed", {"episode_id": "bhv_1", "name": "散步", "share": True})
    sent = _sse("1-0", good)
    assert sent is not None
    lines = sent.splitlines()
    assert lines[:2] == ["id: 1-0", "event: action_completed"]
    payload = json.loads(lines[2].removeprefix("data: "))
    assert payload == {
        "type": "action_completed",
        "character_id": "yuiju",
        "time": NOW.isoformat(),
        "data": {"episode_id": "bhv_1", "name": "散步", "share": True},
    }
    with caplog.at_level(logging.WARNING):
        assert _sse("88-0", entry("action_completed", "[1]")) is None
    assert warnings_about(caplog, "88-0")


def test_action_completed_defaults_to_not_shared() -> None:
    assert ActionCompleted().share is False


def test_an_evolution_emits_a_model_or_a_type_and_its_data_checked_where_it_is_written() -> None:
    world = WorldState(time=NOW, last_advanced_at=NOW)
    ctx = TickContext(from_time=NOW, to_time=NOW, world=world, characters={}, town=HAURA)
    ctx.emit(WeatherChanged(weather="雪", temperature="寒冷"))
    ctx.emit("weather_changed", weather="雨", temperature="清凉")  # a type with a model: validated
    ctx.emit("rain_in_the_park", "yuiju", place="park")  # a type of its own: kept as it is
    assert [(e.type, e.character_id, e.data.dump()) for e in ctx.events] == [
        ("weather_changed", None, {"weather": "雪", "temperature": "寒冷"}),
        ("weather_changed", None, {"weather": "雨", "temperature": "清凉"}),
        ("rain_in_the_park", "yuiju", {"place": "park"}),
    ]
    assert isinstance(ctx.events[1].data, WeatherChanged)
    with pytest.raises(ValidationError):
        ctx.emit("weather_changed", weather=["雪"])
    with pytest.raises(TypeError):
        ctx.emit(WeatherChanged(weather="雪"), place="park")
