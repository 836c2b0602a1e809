"""The engine: restart safety, the episode outbox, leases between engines, corrupt state."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import redis.asyncio as aioredis

import yuiju.world.engine
from tests.conftest import at_time, make_character, make_engine
from yuiju.memory.episodes import EpisodeRepo
from yuiju.storage.errors import StoreUnavailable
from yuiju.storage.history import HistoryStore
from yuiju.world.behavior import outbox_entry
from yuiju.world.engine import step_order
from yuiju.world.policies.scripted import ScriptedPolicy
from yuiju.world.store import dumps_doc

IDLE_30 = {"action": "发呆", "reason": "想放空一会儿", "durationMinute": 30}


def idle_forever() -> ScriptedPolicy:
    return ScriptedPolicy(lambda _request: IDLE_30)


class FlakyHistory:
    """A history store that is down (every put raises) until told otherwise."""

    def __init__(self, inner: HistoryStore, *, down: bool = True) -> None:
        self.inner = inner
        self.down = down
        self.fail_after: int | None = None
        """Once up: let this many more puts through, then fail one (a crash mid-batch)."""
        self.puts: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def put(self, collection: str, doc: Mapping[str, Any]) -> None:
        if self.fail_after == 0:
            self.fail_after = None
            raise StoreUnavailable("history store died mid-batch (test)")
        if self.down:
            raise StoreUnavailable("history store is down (test)")
        if self.fail_after is not None:
            self.fail_after -= 1
        self.puts.append(doc["_id"])
        await self.inner.put(collection, doc)

    async def put_many(self, collection: str, docs: Sequence[Mapping[str, Any]]) -> None:
        for doc in docs:  # one by one, so a failure can land mid-batch
            await self.put(collection, doc)


@pytest.fixture
def short_leases(monkeypatch: pytest.MonkeyPatch) -> int:
    """Leases that expire after 100 ms of wall time, so a crashed engine's lease runs out fast."""
    monkeypatch.setattr(yuiju.world.engine, "LEASE_TTL_MS", 100)
    return 100


async def test_a_restarted_engine_completes_the_running_action_exactly_once(
    redis: aioredis.Redis, history: HistoryStore, short_leases: int
) -> None:
    first = await make_engine(redis, history, policy=idle_forever(), start="2026-09-01 06:00")
    await first.engine.run(max_steps=1)
    started = await first.character()
    assert started is not None and started.running is not None
    eid = started.running.episode_id
    del first  # crash: no release, no clean-up; the lease runs out
    await asyncio.sleep(short_leases * 1.5 / 1000)

    second = await make_engine(redis, history, policy=idle_forever(), start="2026-09-01 06:45")
    await second.engine.run(max_steps=1)

    episodes = EpisodeRepo(history)
    done = await episodes.get(eid)
    assert done is not None and done.status == "completed"
    assert done.end_time == at_time("2026-09-01 06:30")
    assert second.stats.completions == 1
    her = await second.character()
    assert her is not None and her.last_action == "idle"
    count = await history.count("episodes")
    assert count == 1 + (her.running is not None)

    # A third start on the same stores changes nothing that already happened.
    await second.engine.release()
    third = await make_engine(redis, history, policy=idle_forever(), start="2026-09-01 06:50")
    await third.engine.run(max_steps=1)
    assert third.stats.completions == 0
    assert await history.count("episodes") == count
    assert (await episodes.get(eid)) == done


async def test_a_restart_before_ends_at_waits_for_the_action_to_end(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    first = await make_engine(
        redis, sqlite_history, policy=idle_forever(), start="2026-09-01 06:00"
    )
    await first.engine.run(max_steps=1)
    await first.engine.release()  # a clean stop

    second = await make_engine(
        redis, sqlite_history, policy=idle_forever(), start="2026-09-01 06:10"
    )
    await second.engine.run(until=at_time("2026-09-01 06:29"))
    assert second.stats.completions == 0 and second.stats.decisions == 0

    await second.engine.run(until=at_time("2026-09-01 06:30"))
    assert second.stats.completions == 1


async def test_episodes_stay_in_the_outbox_while_history_is_down_and_are_written_later(
    redis: aioredis.Redis, history: HistoryStore
) -> None:
    flaky = FlakyHistory(history, down=True)
    kit = await make_engine(redis, flaky, policy=idle_forever(), start="2026-09-01 06:00")  # type: ignore[arg-type]

    await kit.engine.run(until=at_time("2026-09-01 07:15"))  # idles at 06:00, 06:30, 07:00

    queued = await kit.store.peek_outbox(1000)
    assert [e.doc["status"] for e in queued] == [
        "running",
        "completed",
        "running",
        "completed",
        "running",
    ]
    assert await history.count("episodes") == 0
    assert kit.engine.outbox_failures >= 1
    her = await kit.character()
    assert her is not None and her.running is not None  # Redis state went on regardless

    flaky.down = False
    written = await kit.engine.flush_outbox()

    assert written == 5
    assert await kit.store.outbox_size() == 0
    assert await history.count("episodes") == 3
    statuses = Counter(d["status"] for d in await history.find("episodes", sort="time"))
    assert statuses == {"completed": 2, "running": 1}
    assert await kit.engine.flush_outbox(force=True) == 0  # nothing twice


async def test_a_flush_that_dies_halfway_is_replayed_without_duplicates(
    redis: aioredis.Redis, history: HistoryStore
) -> None:
    flaky = FlakyHistory(history, down=True)
    kit = await make_engine(redis, flaky, policy=idle_forever(), start="2026-09-01 06:00")  # type: ignore[arg-type]
    await kit.engine.run(until=at_time("2026-09-01 07:15"))
    assert await kit.store.outbox_size() == 5

    # the batch holds 5 versions of 3 episodes; only the last version of each is written:
    flaky.down, flaky.fail_after = False, 2  # two writes land, then it dies
    assert await kit.engine.flush_outbox(force=True) == 0
    assert await history.count("episodes") == 2
    assert await kit.store.outbox_size() == 5  # the whole batch stays queued

    assert await kit.engine.flush_outbox(force=True) == 5

    assert await kit.store.outbox_size() == 0
    docs = await history.find("episodes", sort="time")
    assert [d["status"] for d in docs] == ["completed", "completed", "running"]
    assert len({d["_id"] for d in docs}) == 3


async def test_a_second_engine_does_not_drive_a_character_the_first_holds(
    redis: aioredis.Redis, sqlite_history: HistoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    first = await make_engine(redis, sqlite_history, start="2026-09-01 06:00")  # utility
    await first.engine.run(max_steps=1)
    started = await first.character()
    assert started is not None and started.running is not None

    script = idle_forever()
    second = await make_engine(redis, sqlite_history, policy=script, start="2026-09-01 06:00")
    with caplog.at_level(logging.INFO, logger="yuiju.world.engine"):
        await second.engine.run(until=at_time("2026-09-01 08:00"))

    assert script.requests == []
    assert second.stats.decisions == 0 and second.stats.completions == 0
    assert await second.store.lease_holder("yuiju") == first.engine.token
    her = await second.character()
    assert her is not None and her.running == started.running  # not completed by the second
    assert "driven by another engine" in caplog.text

    await first.engine.release()  # the first stops: the second takes over
    await second.engine.run(max_steps=1)
    assert await second.store.lease_holder("yuiju") == second.engine.token
    assert second.stats.completions == 1


async def test_an_engine_that_lost_its_lease_stops_writing(redis: aioredis.Redis) -> None:
    kit = await make_engine(redis, None, policy=idle_forever(), start="2026-09-01 06:00")
    await kit.engine.run(max_steps=1)
    await redis.set(kit.keys.lease("yuiju"), "someone-else")  # taken over

    await kit.clock.sleep_until(at_time("2026-09-01 07:00"))
    await kit.engine.run_once()

    her = await kit.character()
    assert her is not None and her.running is not None
    assert her.running.started_at == at_time("2026-09-01 06:00")  # untouched
    assert kit.stats.completions == 0


async def test_a_step_writes_fenced_on_the_lease_its_inputs_name(redis: aioredis.Redis) -> None:
    from yuiju.world.behavior import StepInputs
    from yuiju.world.errors import LeaseLost

    kit = await make_engine(redis, None, policy=idle_forever(), start="2026-09-01 06:00")
    await kit.engine.run(max_steps=1)
    later = at_time("2026-09-01 07:00")

    with pytest.raises(LeaseLost):  # the engine's lease is not this one: nothing is written
        await kit.loop.step(later, StepInputs(lease_token="someone-else"))
    her = await kit.character()
    assert her is not None and her.running is not None
    assert her.running.started_at == at_time("2026-09-01 06:00")

    await kit.loop.step(later, StepInputs(lease_token=kit.engine.token))
    assert kit.stats.completions == 1


async def test_the_engine_sets_nothing_on_the_loops_it_drives(redis: aioredis.Redis) -> None:
    kit = await make_engine(
        redis,
        None,
        start="2026-09-05 10:00",
        characters={"yuiju": make_character(location="park"), "kaede": make_character(id="kaede")},
    )
    loops = list(kit.loops.values())
    before = [dict(vars(loop)) for loop in loops]
    changed: set[str] = set()

    def look() -> None:  # after every pass of the engine, while it holds the leases
        for loop, was in zip(loops, before, strict=True):
            changed.update(k for k, v in vars(loop).items() if was.get(k, changed) is not v)

    engine = yuiju.world.engine.Engine(
        clock=kit.clock, history=None, store=kit.store, ticker=kit.ticker, loops=loops, on_step=look
    )
    look()
    await engine.run(until=at_time("2026-09-05 14:00"))
    await engine.release()

    assert changed <= {"_clock_behind_reported"}


async def test_a_corrupt_character_is_logged_and_the_engine_keeps_running(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    kit = await make_engine(
        redis,
        None,
        policy=idle_forever(),
        start="2026-09-01 06:00",
        characters={"yuiju": make_character(), "mika": make_character(id="mika")},
    )
    await kit.engine.run(max_steps=1)
    bad_key = kit.keys.character("yuiju")
    await redis.set(bad_key, '{"id": "yuiju", "stamina": 500}')

    with caplog.at_level(logging.ERROR, logger="yuiju.world.engine"):
        await asyncio.wait_for(kit.engine.run(until=at_time("2026-09-01 09:00")), timeout=10)

    assert bad_key in caplog.text and "stamina" in caplog.text
    assert await redis.get(bad_key) == '{"id": "yuiju", "stamina": 500}'  # left for a human
    mika = await kit.character("mika")
    assert mika is not None and mika.running is not None
    assert mika.running.started_at >= at_time("2026-09-01 08:30")  # she kept living
    assert kit.stats.completions >= 5


async def test_the_world_keeps_advancing_while_one_character_is_corrupt(
    redis: aioredis.Redis,
) -> None:
    kit = await make_engine(
        redis,
        None,
        policy=idle_forever(),
        start="2026-09-01 06:00",
        characters={"yuiju": make_character(), "mika": make_character(id="mika")},
    )
    await kit.engine.run(max_steps=1)
    await redis.set(kit.keys.character("yuiju"), '{"id": "yuiju", "stamina": 500}')

    await asyncio.wait_for(kit.engine.run(until=at_time("2026-09-01 09:00")), timeout=10)

    world_state = await kit.store.load_world()
    assert world_state is not None and world_state.last_advanced_at == at_time("2026-09-01 09:00")


async def test_a_corrupt_world_does_not_crash_the_engine(redis: aioredis.Redis) -> None:
    kit = await make_engine(redis, None, policy=idle_forever(), start="2026-09-01 06:00")
    await kit.engine.run(max_steps=1)
    await redis.set(kit.keys.world, "{broken")

    await asyncio.wait_for(kit.engine.run(until=at_time("2026-09-01 07:00")), timeout=10)

    assert await redis.get(kit.keys.world) == "{broken"


async def test_two_engines_flushing_at_once_lose_no_episode(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    first = await make_engine(redis, sqlite_history)
    now = at_time("2026-09-01 06:00")

    def doc(n: int) -> str:
        return dumps_doc(
            outbox_entry(
                "episodes",
                {
                    "_id": f"bhv_{n}",
                    "character_id": "yuiju",
                    "type": "behavior",
                    "time": now,
                    "status": "completed",
                    "summary": f"第{n}件事",
                },
            )
        )

    await redis.rpush(first.keys.episode_outbox, doc(1))

    class Interleaving(FlakyHistory):
        async def put(self, collection: str, document: Mapping[str, Any]) -> None:
            if not self.puts:  # while this engine writes, the other flushes and a new episode lands
                self.puts.append("-")
                await first.engine.flush_outbox(force=True)
                await redis.rpush(first.keys.episode_outbox, doc(2))
            await self.inner.put(collection, document)

    second = await make_engine(redis, Interleaving(sqlite_history, down=False))  # type: ignore[arg-type]
    await second.engine.flush_outbox(force=True)
    await first.engine.flush_outbox(force=True)

    assert {d["_id"] for d in await sqlite_history.find("episodes")} == {"bhv_1", "bhv_2"}


# -- the town lease: one engine advances the shared world ------------------------------------------


async def test_only_the_town_lease_holder_advances_the_world(redis: aioredis.Redis) -> None:
    first = await make_engine(redis, None, policy=idle_forever(), start="2026-09-01 06:00")
    await first.engine.run(max_steps=1)

    # a second daemon whose clock runs far ahead (a --speed 6000 demo next to the real one)
    second = await make_engine(redis, None, policy=idle_forever(), start="2026-09-01 14:00")
    await second.engine.run(until=at_time("2026-09-01 22:00"))

    world_state = await first.store.load_world()
    assert world_state is not None
    assert world_state.time == world_state.last_advanced_at == at_time("2026-09-01 06:00")

    await first.engine.run(until=at_time("2026-09-01 07:00"))  # the holder goes on as before
    world_state = await first.store.load_world()
    assert world_state is not None and world_state.last_advanced_at == at_time("2026-09-01 07:00")

    await first.engine.release()  # the holder stops: the other engine takes the town over
    await second.engine.run(max_steps=1)
    world_state = await first.store.load_world()
    assert world_state is not None and world_state.last_advanced_at == at_time("2026-09-01 22:00")
    assert await redis.get(first.keys.town_lease) == second.engine.token


async def test_an_engine_that_lost_the_town_lease_does_not_write_the_world(
    redis: aioredis.Redis,
) -> None:
    kit = await make_engine(redis, None, policy=idle_forever(), start="2026-09-01 06:00")
    await kit.engine.run(max_steps=1)
    await redis.set(kit.keys.town_lease, "someone-else")  # taken over between two renewals

    await kit.clock.sleep_until(at_time("2026-09-01 09:00"))
    await kit.engine.run_once()

    world_state = await kit.store.load_world()
    assert world_state is not None and world_state.last_advanced_at == at_time("2026-09-01 06:00")


async def test_a_waiting_engine_polls_the_leases_in_wall_time_whatever_the_world_speed(
    redis: aioredis.Redis,
) -> None:
    from tests.conftest import TZ
    from yuiju.world.clock import RealClock

    first = await make_engine(redis, None, policy=idle_forever())
    await first.engine.run(max_steps=1)  # holds the town and her
    second = await make_engine(redis, None, policy=idle_forever())
    second.engine.clock = RealClock(TZ, speed=600)
    polls = Counter[str]()
    store = second.store
    for name in ("sync_leases", "heartbeat"):
        real = getattr(store, name, None)
        if real is None:
            continue

        async def counted(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            polls[_name] += 1
            return await _real(*args, **kwargs)

        setattr(store, name, counted)

    task = asyncio.create_task(second.engine.run())
    await asyncio.sleep(1.5)
    second.engine.stop()
    await asyncio.wait_for(task, 5)

    assert 1 <= polls["sync_leases"] <= 2 and polls["heartbeat"] <= 2, polls  # not ~75 a second
    assert second.stats.decisions == 0


# -- characters due together ---------------------------------------------------------------------


def count_round_trips(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every request redis-py sends (a command, or a whole pipeline) from the calling task is one
    round trip; other tasks' (a lease keeper renewing on wall time, on a loaded machine) are not."""
    from redis.asyncio.connection import AbstractConnection

    sent: Counter[str] = Counter()
    send = AbstractConnection.send_packed_command
    caller = asyncio.current_task()

    async def counted(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        if asyncio.current_task() is caller:
            sent["round trips"] += 1
        await send(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)
    return sent


async def test_characters_due_together_cost_round_trips_that_do_not_grow_with_their_number(
    redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a burst (a town waking, everyone's meal) must not wait for Redis once per character: their
    # state is read together and their writes sent together
    sent = count_round_trips(monkeypatch)
    trips = {}
    for n in (2, 12):
        kit = await make_engine(
            redis,
            None,
            policy=ScriptedPolicy(lambda _r: IDLE_30),
            prefix=f"burst{n}",
            characters={f"c{i}": make_character() for i in range(n)},
        )
        await kit.engine.run(max_steps=1)  # everyone starts idling until 06:30
        await kit.clock.sleep_until(at_time("2026-09-01 06:30"))

        async def no_flush(*, force: bool = False) -> int:  # due by wall time: not the steps' cost
            return 0

        monkeypatch.setattr(kit.engine, "flush_outbox", no_flush)
        before = sent["round trips"]
        await kit.engine.run_once()  # everyone completes and starts again
        trips[n] = sent["round trips"] - before
        assert (kit.stats.completions, kit.stats.decisions) == (n, 2 * n)
        for cid in kit.loops:
            her = await kit.character(cid)
            assert her is not None and her.running is not None
            assert her.running.started_at == at_time("2026-09-01 06:30")

    # not more for 12 than for 2 (the first may carry a one-off trip or two of the suite's shared
    # server under load: seen once, {2: 10, 12: 4})
    assert 0 < trips[12] <= trips[2], trips


async def test_a_write_sent_with_others_that_meets_another_writer_is_redone_once_on_fresh_values(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    import redis as sync_redis

    kits: list[Any] = []
    rival = sync_redis.Redis.from_url(redis_url_of(redis), decode_responses=True)

    def decide(request: Any) -> dict[str, Any]:
        # while c0 decides, another writer changes c1 (read already, written not yet)
        if request.ctx.character.id == "c0" and request.ctx.now == at_time("2026-09-01 06:30"):
            key = kits[0].keys.character("c1")
            her = json.loads(rival.get(key))
            her["mood"] = 99.0
            rival.set(key, json.dumps(her))
        return IDLE_30

    kit = await make_engine(
        redis,
        sqlite_history,
        policy=ScriptedPolicy(decide),
        prefix="clash",
        characters={"c0": make_character(id="c0"), "c1": make_character(id="c1")},
    )
    kits.append(kit)
    try:
        await kit.engine.run(max_steps=1)
        await kit.engine.run(until=at_time("2026-09-01 06:31"))
    finally:
        rival.close()

    c1 = await kit.character("c1")
    assert (
        c1 is not None
        and c1.running is not None
        and c1.running.started_at == at_time("2026-09-01 06:30")
    )
    assert c1.mood >= 90  # the other writer's change was kept, not overwritten
    assert kit.stats.completions == 2  # each counted once, when written
    episodes = await EpisodeRepo(sqlite_history).today("c1", at_time("2026-09-01 06:31"))
    assert [(e.time, e.status) for e in episodes] == [
        (at_time("2026-09-01 06:00"), "completed"),
        (at_time("2026-09-01 06:30"), "running"),
    ]


def redis_url_of(redis: aioredis.Redis) -> str:
    kwargs = redis.connection_pool.connection_kwargs
    return (
        f"unix://{kwargs['path']}"
        if "path" in kwargs
        else f"redis://{kwargs['host']}:{kwargs['port']}"
    )


async def test_a_policy_that_is_not_instant_is_asked_after_her_completion_is_written(
    redis: aioredis.Redis,
) -> None:
    # an LLM call takes seconds: what she finished is written (and shown) before it, as a lone step does
    import redis as sync_redis

    seen: list[Any] = []
    kits: list[Any] = []
    reader = sync_redis.Redis.from_url(redis_url_of(redis), decode_responses=True)

    class SlowPolicy(ScriptedPolicy):
        instant = False

    def decide(request: Any) -> dict[str, Any]:
        if kits:
            stored = json.loads(reader.get(kits[0].keys.character(request.ctx.character.id)))
            seen.append((request.ctx.character.id, stored["running"]))
        return IDLE_30

    kit = await make_engine(
        redis,
        None,
        policy=SlowPolicy(decide),
        prefix="slow",
        characters={"c0": make_character(id="c0"), "c1": make_character(id="c1")},
    )
    try:
        await kit.engine.run(max_steps=1)
        kits.append(kit)
        await kit.clock.sleep_until(at_time("2026-09-01 06:30"))
        await kit.engine.run_once()
    finally:
        reader.close()

    assert sorted(seen) == [("c0", None), ("c1", None)]


async def test_a_batch_cut_short_by_redis_leaves_nobody_waiting_on_a_write_that_never_landed(
    redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    from redis.exceptions import ConnectionError as RedisConnectionError

    from yuiju.world.store import StateStore

    kit = await make_engine(
        redis,
        None,
        policy=ScriptedPolicy(lambda _r: IDLE_30),
        prefix="blip",
        characters={"c0": make_character(id="c0"), "c1": make_character(id="c1")},
    )
    await kit.engine.run(max_steps=1)  # both idle until 06:30
    await kit.clock.sleep_until(at_time("2026-09-01 06:30"))
    send = StateStore.send_queued
    blips: list[int] = []

    async def blip_once(self: StateStore) -> None:
        if self._batch is not None and self._batch.queued and not blips:
            blips.append(1)
            raise RedisConnectionError("Redis blip (test)")
        await send(self)

    monkeypatch.setattr(StateStore, "send_queued", blip_once)
    with pytest.raises(RedisConnectionError):
        await kit.engine.run_once()  # the daemon logs it and runs again at once
    await kit.engine.run_once()

    for cid in ("c0", "c1"):
        her = await kit.character(cid)
        assert her is not None and her.running is not None
        assert her.running.started_at == at_time("2026-09-01 06:30"), (
            cid
        )  # not left in the 06:00 action


@pytest.mark.parametrize("changed", ["herself", "the other"])
async def test_a_policy_that_is_not_instant_is_asked_once_per_decision_when_another_writer_meddles(
    redis: aioredis.Redis, changed: str
) -> None:
    # an LLM call costs money: a write that did not land must not ask it again
    import redis as sync_redis

    asked: Counter[tuple[str, str]] = Counter()
    kits: list[Any] = []
    rival = sync_redis.Redis.from_url(redis_url_of(redis), decode_responses=True)

    class SlowPolicy(ScriptedPolicy):
        instant = False

    def decide(request: Any) -> dict[str, Any]:
        cid, now = request.ctx.character.id, request.ctx.now
        asked[(cid, now.strftime("%H:%M"))] += 1
        if (
            kits
            and now == at_time("2026-09-01 06:30")
            and sum(n for (_, t), n in asked.items() if t == "06:30") == 1
        ):
            key = kits[0].keys.character(
                cid if changed == "herself" else {"c0": "c1", "c1": "c0"}[cid]
            )
            her = json.loads(rival.get(key))
            her["mood"] = 99.0
            rival.set(key, json.dumps(her))
        return IDLE_30

    kit = await make_engine(
        redis,
        None,
        policy=SlowPolicy(decide),
        prefix=f"meddle-{changed[-1]}",
        characters={"c0": make_character(id="c0"), "c1": make_character(id="c1")},
    )
    try:
        await kit.engine.run(max_steps=1)
        kits.append(kit)
        await kit.engine.run(until=at_time("2026-09-01 06:31"))
    finally:
        rival.close()
    assert asked[("c0", "06:30")] == 1 and asked[("c1", "06:30")] == 1, dict(asked)


def crashing_for(victim: str) -> ScriptedPolicy:
    """Idles, but raises for ``victim`` at 06:30 (a bug in a policy or an action)."""

    def decide(request: Any) -> dict[str, Any]:
        if request.ctx.character.id == victim and request.ctx.now == at_time("2026-09-01 06:30"):
            raise RuntimeError("a bug (test)")
        return IDLE_30

    return ScriptedPolicy(decide)


@pytest.mark.parametrize("victim", ["c0", "c1"])
async def test_one_characters_bug_in_a_batch_does_not_drop_what_the_others_before_her_wrote(
    redis: aioredis.Redis, victim: str
) -> None:
    kit = await make_engine(
        redis,
        None,
        policy=crashing_for(victim),
        fallback=None,
        prefix=f"bug-{victim}",
        characters={"c0": make_character(id="c0"), "c1": make_character(id="c1")},
    )
    await kit.engine.run(max_steps=1)  # both idle until 06:30
    await kit.clock.sleep_until(at_time("2026-09-01 06:30"))
    order = step_order(list(kit.engine.leases.held()), at_time("2026-09-01 06:30"))
    with pytest.raises(RuntimeError, match="a bug"):  # simulate and tests: a bug stops the run
        await kit.engine.run_once()
    for cid in order[: order.index(victim)]:  # stepped before her
        her = await kit.character(cid)
        assert (
            her is not None
            and her.running is not None
            and her.running.started_at == at_time("2026-09-01 06:30")
        )


async def test_in_the_daemon_one_characters_bug_is_logged_and_the_others_go_on(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    kit = await make_engine(
        redis,
        None,
        policy=crashing_for("c0"),
        fallback=None,
        prefix="bug-daemon",
        characters={"c0": make_character(id="c0"), "c1": make_character(id="c1")},
    )
    await kit.engine.run(max_steps=1)
    await kit.clock.sleep_until(at_time("2026-09-01 06:30"))
    kit.engine.strict = False  # as `run` without a bound sets it
    with caplog.at_level(logging.ERROR, logger="yuiju.world.engine"):
        await kit.engine.run_once()
        await kit.engine.run_once()  # not again: she waits her retry

    c1 = await kit.character("c1")
    assert (
        c1 is not None
        and c1.running is not None
        and c1.running.started_at == at_time("2026-09-01 06:30")
    )
    assert kit.engine._due["c0"] == at_time("2026-09-01 06:31")
    assert caplog.text.count("c0: her step failed (RuntimeError: a bug (test))") == 1
    assert "Traceback" in caplog.text or any(r.exc_info for r in caplog.records)


async def test_a_start_that_finds_her_busy_on_fresh_values_counts_no_stale_start(
    redis: aioredis.Redis,
) -> None:
    # on the known value her decision is impossible; on the value read fresh, someone else already
    # started her: nothing was stale about her decision
    from datetime import timedelta

    from yuiju.world.behavior import StepInputs
    from yuiju.world.policy import Decision
    from yuiju.world.state import RunningAction
    from yuiju.world.steps import Turn

    kit = await make_engine(
        redis, None, prefix="stale-reason", characters={"c0": make_character(id="c0")}
    )
    await kit.engine.run(max_steps=1)
    loop, now = kit.loops["c0"], kit.clock.now()
    go = loop.catalogue.actions["go_to_school"]
    busy = make_character(
        id="c0",
        running=RunningAction(
            action_id="idle",
            name="发呆",
            started_at=now,
            ends_at=now + timedelta(minutes=30),
            episode_id="ep_x",
            place="home",
            reason="累了",
            decided_by="test",
        ),
    )
    await redis.set(kit.keys.character("c0"), busy.model_dump_json())
    kit.store._known[kit.keys.character("c0")] = make_character(
        id="c0", location="school"
    ).model_dump_json()
    before = loop.stats.stale_starts

    await loop._start(
        now, Decision(action=go, reason="上学"), Turn.of(StepInputs(), loop.env, "c0")
    )

    assert loop.stats.stale_starts == before


async def test_a_tick_whose_rejected_list_was_set_by_hand_writes_nothing_and_names_the_key(
    redis: aioredis.Redis,
) -> None:
    import redis.asyncio as aioredis_

    kit = await make_engine(
        redis, None, prefix="rejected-broken", characters={"c0": make_character(id="c0")}
    )
    await kit.engine.run(max_steps=1)
    await redis.set(kit.keys.rejected_commands, "not a list")
    await redis.rpush(kit.keys.commands, "not json")  # to be rejected
    events, world = await redis.xlen(kit.keys.events), await redis.get(kit.keys.world)

    for minute in ("07:00", "08:00"):  # every retry: nothing written, the key named
        with pytest.raises(
            aioredis_.ResponseError, match=f"WRONGTYPE {kit.keys.rejected_commands} holds a string"
        ):
            await kit.ticker.tick(at_time(f"2026-09-01 {minute}"))

    assert await redis.xlen(kit.keys.events) == events  # no event written twice (or at all)
    assert await redis.get(kit.keys.world) == world
    assert await redis.lrange(kit.keys.commands, 0, -1) == ["not json"]  # still there, not lost
