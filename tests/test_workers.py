"""Workers share the characters: several towns and copies in one config, fair shares between
engines, rebalancing between steps, takeover after a worker dies, one script per town for the
leases, and `yuiju status` naming who drives whom. (Real worker processes and kill -9 on a real
cluster: tests/test_worker_fleet.py.)"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

import yuiju.world.leases
from tests.conftest import TZ, EngineKit, at_time, make_character, make_engine
from tests.test_engine import IDLE_30
from yuiju.characters import load_card
from yuiju.config import ConfigError, compact_character_ids, load_config
from yuiju.world.clock import RealClock, SimClock
from yuiju.world.policies.scripted import ScriptedPolicy
from yuiju.world.policy import Decision, DecisionRequest
from yuiju.world.runtime import build_runtime

# -- the config: copies of a card, several towns ---------------------------------------------------


def test_copies_of_a_card_are_listed_one_by_one_or_as_a_range(clean_config_env: Path) -> None:
    cfg = load_config(overrides={"world": {"characters": ["kaede", "yuiju@1..3", "yuiju@9"]}})
    assert cfg.world.characters == ["kaede", "yuiju@1", "yuiju@2", "yuiju@3", "yuiju@9"]
    assert compact_character_ids(cfg.world.characters) == "kaede, yuiju@1..3, yuiju@9"


def test_a_copy_is_her_card_under_its_own_id() -> None:
    copy, card = load_card("yuiju@17"), load_card("yuiju")
    assert copy.id == "yuiju@17" and card.id == "yuiju"
    assert copy.name == card.name and copy.persona == card.persona and copy.start == card.start


@pytest.mark.parametrize(
    ("characters", "says"),
    [
        (
            ["yuiju@3..1"],
            "'yuiju@3..1' is not a range of 1 to 100,000 copies; write e.g. 'yuiju@1..200'",
        ),
        (["Yuiju"], "'Yuiju' is not a character id"),
        (["yuiju@1..3", "yuiju@2"], "yuiju@2 listed twice"),
    ],
)
def test_a_bad_character_entry_is_named_with_the_fix(
    clean_config_env: Path, characters: list[str], says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(overrides={"world": {"characters": characters}})
    assert says in str(caught.value) and "world.characters" in str(caught.value)


def test_several_towns_are_declared_by_prefix_next_to_the_default_one(
    clean_config_env: Path,
) -> None:
    (clean_config_env / "yuiju.toml").write_text(
        '[world]\ncharacters = ["yuiju"]\nseed = 3\n\n'
        '[world.towns.umi]\ncharacters = ["kaede", "yuiju@1..2"]\n\n'
        '[world.towns.yama]\ncharacters = ["yuiju@3"]\nseed = 7\n',
        encoding="utf-8",
    )
    cfg = load_config()
    towns = cfg.towns()
    assert list(towns) == ["yuiju", "umi", "yama"]  # the default town ([redis].prefix) first
    assert towns["umi"].characters == ["kaede", "yuiju@1", "yuiju@2"]
    assert [t.seed for t in towns.values()] == [3, 3, 7]


@pytest.mark.parametrize(
    ("world", "says"),
    [
        (
            {"towns": {"umi": {"characters": ["yuiju"]}}},
            "character 'yuiju' lives in the default town and [world.towns.umi]; a character lives in one town",
        ),
        (
            {"towns": {"yuiju": {"characters": ["kaede"]}}},
            "[world.towns.yuiju] is the default town",
        ),
        ({"towns": {"u{mi}": {"characters": ["kaede"]}}}, "'u{mi}' cannot be a key prefix"),
    ],
)
def test_a_town_that_would_share_keys_or_characters_is_refused(
    clean_config_env: Path, world: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError, match="invalid configuration") as caught:
        load_config(overrides={"world": world})
    assert says in str(caught.value)


# -- engines as workers -------------------------------------------------------------------------


def population(n: int) -> dict[str, Any]:
    return {f"yuiju@{i}": make_character(id=f"yuiju@{i}") for i in range(1, n + 1)}


async def worker(
    redis: aioredis.Redis, n: int, *, ttl_ms: int = 3_000, policy: Any = None
) -> EngineKit:
    """An engine on the wall clock over the same ``n`` characters as every other `worker`."""
    kit = await make_engine(
        redis,
        None,
        characters=population(n),
        lease_ttl_ms=ttl_ms,
        policy=policy or ScriptedPolicy(lambda _r: IDLE_30),
    )
    kit.engine.clock = RealClock(TZ)
    return kit


async def holders(kit: EngineKit) -> dict[str, str | None]:
    return await kit.store.lease_holders(list(kit.loops))


async def until(check: Callable[[], Awaitable[bool]], within: float) -> float:
    """Wait until ``check()`` holds; the seconds it took (fails the test after ``within`` s)."""
    started = time.monotonic()
    while not await check():
        assert time.monotonic() - started < within, f"not within {within} s"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


async def holds(kit: EngineKit, n: int) -> bool:
    found = await holders(kit)
    return (
        sum(tok == kit.engine.token for tok in found.values()) == n == kit.engine.leases.held_count
    )


async def stop(kit: EngineKit, task: asyncio.Task[None], *, release: bool = True) -> None:
    kit.engine.stop()
    await asyncio.wait_for(task, 5)
    if release:
        await kit.engine.release()


@pytest.fixture(autouse=True)
async def no_engine_outlives_its_test() -> AsyncIterator[None]:
    """The tests share one event loop: an engine a failed test left running would write on."""
    yield
    running = [
        t
        for t in asyncio.all_tasks()
        if t is not asyncio.current_task() and "Engine.run" in repr(t.get_coro())
    ]
    for task in running:
        task.cancel()
    await asyncio.gather(*running, return_exceptions=True)


async def test_a_lease_check_is_one_script_per_town_whatever_the_number_of_characters(
    redis: aioredis.Redis,
) -> None:
    kit = await worker(redis, 200)
    calls: list[str] = []
    real = redis.execute_command

    async def counted(*args: Any, **options: Any) -> Any:
        calls.append(str(args[0]))
        return await real(*args, **options)

    await kit.engine.leases.refresh()  # loads the scripts into the server
    await kit.engine.leases.release_all()
    redis.execute_command = counted  # type: ignore[method-assign]
    await kit.engine.leases.refresh()  # takes all 200
    taking = list(calls)
    calls.clear()
    await kit.engine.leases.refresh()  # renews what is due, checks the rest
    # the heartbeat and one script for the town (and, when what it drives changed, its new info)
    assert len(taking) == 3 and len(calls) == 2, (taking, calls)
    assert await holds(kit, 200)
    assert await redis.zcard(kit.keys.workers) == 1


async def test_workers_share_the_characters_evenly_and_rebalance_when_one_joins_or_leaves(
    redis: aioredis.Redis,
) -> None:
    first = await worker(redis, 7)
    first_run = asyncio.create_task(first.engine.run())
    await until(lambda: holds(first, 7), 5)  # alone: all of them

    second = await worker(redis, 7)
    second_run = asyncio.create_task(second.engine.run())
    # the first gives three up between two steps at its next check (every ttl/3), the second takes them
    await until(lambda: holds(first, 4), 5)
    await until(lambda: holds(second, 3), 5)
    assert set((await holders(first)).values()) == {first.engine.token, second.engine.token}
    assert first.stats.decisions == 7  # each started once, by the first
    assert second.stats.decisions == second.stats.completions == 0  # what she started goes on

    await stop(second, second_run)  # a clean stop: released, so the first takes them back at once
    took = await until(lambda: holds(first, 7), 5)
    assert took < 1.5
    await stop(first, first_run)


async def test_a_dead_workers_characters_are_taken_over_within_the_lease_ttl(
    redis: aioredis.Redis,
) -> None:
    ttl_ms = 3_000
    first, second = await worker(redis, 6, ttl_ms=ttl_ms), await worker(redis, 6, ttl_ms=ttl_ms)
    first_run = asyncio.create_task(first.engine.run())
    await until(lambda: holds(first, 6), 5)
    second_run = asyncio.create_task(second.engine.run())
    await until(lambda: holds(second, 3), 5)
    hers = {cid for cid, tok in (await holders(first)).items() if tok == first.engine.token}

    checks = 0
    real_refresh = second.engine.leases.refresh

    async def counted() -> Any:
        nonlocal checks
        checks += 1
        return await real_refresh()

    second.engine.leases.refresh = counted  # type: ignore[method-assign]
    await stop(first, first_run, release=False)  # dies: no release, no goodbye (kill -9 for Redis)
    took = await until(lambda: holds(second, 6), ttl_ms / 1000 + 2)

    assert took <= ttl_ms / 1000 + 1.0, f"took over after {took:.2f} s"
    assert (
        checks <= ttl_ms / 1000 / second.engine.leases.poll_seconds + 3
    )  # woke at the expiry, no busy polling
    her_states = [await second.character(cid) for cid in hers]
    assert all(
        s is not None and s.running is not None for s in her_states
    )  # what she started goes on
    assert second.stats.decisions == 0
    await stop(second, second_run)


class GatedPolicy:
    """Idles, but the first decision waits until the test opens the gate (a slow model call)."""

    name = "gated"
    instant = False
    wants_recent = True

    def __init__(self) -> None:
        self.inner = ScriptedPolicy(lambda _r: IDLE_30)
        self.gate = asyncio.Event()
        self.waiting = asyncio.Event()

    async def decide(self, request: DecisionRequest) -> Decision:
        if not self.gate.is_set():
            self.waiting.set()
            await self.gate.wait()
        return await self.inner.decide(request)


async def test_a_worker_that_joins_never_takes_a_character_in_the_middle_of_a_step(
    redis: aioredis.Redis,
) -> None:
    gated = GatedPolicy()
    first = await worker(redis, 2, policy=gated)
    first_run = asyncio.create_task(first.engine.run())
    await asyncio.wait_for(gated.waiting.wait(), 5)  # her step is in flight: the model is thinking

    second = await worker(redis, 2)
    second_run = asyncio.create_task(second.engine.run())

    async def first_over_its_share() -> bool:  # after a check or two it sees the newcomer
        return first.engine.leases.over_share

    await until(first_over_its_share, 15)
    await asyncio.sleep(0.5)  # and keeps checking meanwhile
    assert set((await holders(first)).values()) == {first.engine.token}  # nothing taken mid-step

    gated.gate.set()  # the step ends; before the next one the first gives up the one it has not stepped
    await until(lambda: holds(second, 1), 5)
    assert await holds(first, 1)

    async def second_started_hers() -> bool:
        return second.stats.decisions > 0

    await until(second_started_hers, 10)
    assert first.stats.decisions == second.stats.decisions == 1  # each started one, once
    assert first.stats.stale_starts == second.stats.stale_starts == 0
    for cid in first.loops:
        her = await first.character(cid)
        assert her is not None and her.running is not None
    await stop(second, second_run)
    await stop(first, first_run)


async def test_the_lease_ttl_and_the_poll_follow_the_config(redis_url: str, tmp_path: Path) -> None:
    cfg = load_config(
        environ={
            "YUIJU_REDIS__URL": redis_url,
            "YUIJU_APP__DATA_DIR": str(tmp_path),
            "YUIJU_WORLD__LEASE_TTL_SECONDS": "1.5",
            "YUIJU_MEMORY__ENABLED": "false",
        }
    )
    runtime = await build_runtime(
        cfg, clock=SimClock(at_time("2026-09-01 06:00")), policy="utility"
    )
    try:
        assert runtime.engine.lease_ttl_ms == 1_500
        assert runtime.engine.leases.poll_seconds == 0.5  # renewed every third of the ttl
        assert (
            yuiju.world.leases.POLL_SECONDS == 2.0
        )  # and never waits longer than that to look again
    finally:
        await runtime.close()


# -- several towns in one engine --------------------------------------------------------------------


async def test_one_engine_drives_several_towns_each_with_its_own_world_keys_and_outbox(
    redis: aioredis.Redis, redis_url: str, tmp_path: Path
) -> None:
    cfg = load_config(
        overrides={
            "redis": {"url": redis_url},
            "app": {"data_dir": str(tmp_path)},
            "memory": {"enabled": False},
            "world": {
                "characters": ["yuiju"],
                "policy": "utility",
                "towns": {"umi": {"characters": ["kaede@1..120"]}},
            },
        },
        environ={},
    )
    clock = SimClock(at_time("2026-09-01 06:00"))
    runtime = await build_runtime(cfg, clock=clock)
    try:
        await runtime.engine.run(until=at_time("2026-09-01 09:00"))
        umi = runtime.stores["umi"]
        for store in runtime.stores.values():
            world_state = await store.load_world()
            assert world_state is not None and world_state.last_advanced_at == at_time(
                "2026-09-01 09:00"
            )
            assert await store.town_lease_holder() == runtime.engine.token
            assert await store.outbox_size() == 0
        assert (
            await runtime.store.load_character("kaede@1") is None
        )  # not in the default town's keys
        kaede = await umi.load_character("kaede@7")
        assert kaede is not None and kaede.id == "kaede@7" and kaede.last_acted_at is not None
        assert await runtime.episodes.recent("kaede@7", clock.now(), limit=5)
        assert await runtime.episodes.recent("yuiju", clock.now(), limit=5)
        assert runtime.store.stream_maxlen == 20_000  # one character: the floor
        assert umi.stream_maxlen == 24_000  # 120 characters: 3 days of everyone's events
        assert runtime.town_characters == ["yuiju"]
    finally:
        await runtime.close()
    assert await redis.zcard(runtime.keys.workers) == 0  # left the registry at close


# -- yuiju status -----------------------------------------------------------------------------------


async def test_status_says_which_worker_drives_which_character_and_advances_the_town(
    redis: aioredis.Redis, redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from yuiju import cli as yuiju_cli

    cfg = load_config(
        environ={
            "YUIJU_REDIS__URL": redis_url,
            "YUIJU_APP__DATA_DIR": str(tmp_path),
            "YUIJU_WORLD__CHARACTERS": '["yuiju@1..4"]',
            "YUIJU_MEMORY__ENABLED": "false",
        }
    )
    first, second = await worker(redis, 4), await worker(redis, 4)
    first.engine.name, second.engine.name = "north", "south"
    first_run = asyncio.create_task(first.engine.run())
    await until(lambda: holds(first, 4), 5)
    second_run = asyncio.create_task(second.engine.run())
    await until(lambda: holds(second, 2), 5)
    await until(lambda: holds(first, 2), 5)
    first.engine._published = (-1e9, {})  # figures as of now, not 10 s ago
    await first.engine.leases.refresh()

    assert await yuiju_cli._status(cfg, as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    drivers = report["towns"]["yuiju"]["driven_by"]
    assert sorted(drivers.values()) == ["north", "north", "south", "south"]
    assert report["towns"]["yuiju"]["ticked_by"] == "north"
    workers = {w["name"]: w for w in report["workers"]}
    assert set(workers) == {"north", "south"}
    assert workers["north"]["characters"] == 2 and workers["north"]["towns"] == ["yuiju"]
    assert workers["north"]["decisions"] == 4 and workers["north"]["overhead_ms"]["p95"] > 0
    assert (
        compact_character_ids([c for c, w in drivers.items() if w == "south"])
        == workers["south"]["driving"]
    )

    assert await yuiju_cli._status(cfg, as_json=False) == 0
    text = capsys.readouterr().out
    assert "[由 north 驱动]" in text and "[由 south 驱动]" in text
    assert "世界由 north 推进" in text and "工作进程 workers：2 个在运行" in text

    await stop(second, second_run)
    await stop(first, first_run, release=False)  # died: its characters show as driven until the ttl
    assert await yuiju_cli._status(cfg, as_json=False) == 0
    assert "[由 north 驱动]" in capsys.readouterr().out


async def test_a_step_within_a_world_minute_of_the_last_tick_does_not_tick_the_whole_town_again(
    redis: aioredis.Redis,
) -> None:
    """A town's tick rewrites every character: redone before each of a big town's steps, it would
    cost the town's size per decision. Decisions see the world as of its last tick instead, at
    most a world minute old."""
    kit = await make_engine(
        redis,
        None,
        characters=population(30),
        policy=ScriptedPolicy(lambda _r: IDLE_30),
        tick_minutes=5,
        start="2026-09-05 10:00",
    )
    await kit.engine.run(max_steps=1)  # the tick at 10:00, then each starts idling until 10:30
    ticks = kit.ticker.ticks
    for moment in ("2026-09-05 10:00:20", "2026-09-05 10:00:50"):
        await kit.clock.sleep_until(at_time(moment))
        await kit.engine.run_once()
    assert kit.ticker.ticks == ticks

    await kit.clock.sleep_until(
        at_time("2026-09-05 10:01:10")
    )  # a minute on: the next step catches up
    await kit.engine.run_once()
    world_state = await kit.store.load_world()
    assert kit.ticker.ticks == ticks + 1
    assert world_state is not None and world_state.last_advanced_at == at_time(
        "2026-09-05 10:01:10"
    )
