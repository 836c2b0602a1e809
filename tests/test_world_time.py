"""World time never goes backwards or stalls silently: restarts after a sped-up run, resync, and
her own episodes."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.conftest import TZ, at_time, make_character, make_engine
from tests.test_engine import idle_forever
from yuiju.config import YuijuConfig, load_config
from yuiju.memory.episodes import EpisodeRepo
from yuiju.world.clock import RealClock, SimClock
from yuiju.world.runtime import build_runtime


def config(redis_url: str, data_dir: Path, **environ: str) -> YuijuConfig:
    return load_config(
        environ={
            "YUIJU_REDIS__URL": redis_url,
            "YUIJU_APP__DATA_DIR": str(data_dir),
            "YUIJU_WORLD__POLICY": "utility",
            "YUIJU_MEMORY__ENABLED": "false",
            **environ,
        }
    )


async def a_demo_left_the_world_ahead(cfg: YuijuConfig, ahead: timedelta) -> datetime:
    """What `yuiju run --speed 60` for a while leaves behind: world and her action ahead of the wall
    clock. Returns the saved world time."""
    saved = (datetime.now(TZ) + ahead).replace(microsecond=0)
    demo = await build_runtime(cfg, clock=SimClock(saved))
    try:
        await demo.engine.run(max_steps=1)
    finally:
        await demo.close()
    return saved


async def test_a_normal_start_after_a_demo_continues_from_the_saved_world_time_and_says_so(
    redis: aioredis.Redis, redis_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = config(redis_url, tmp_path)
    saved = await a_demo_left_the_world_ahead(cfg, timedelta(hours=2))

    clock = RealClock(TZ)
    runtime = await build_runtime(cfg, clock=clock)
    try:
        with caplog.at_level(logging.WARNING):
            await runtime.continue_world_clock()
        assert clock.now() >= saved  # not back at the wall clock, 2 h earlier
        assert "--resync" in caplog.text and "ahead" in caplog.text
        task = asyncio.create_task(runtime.engine.run())
        await asyncio.sleep(0.5)
        runtime.engine.stop()
        await asyncio.wait_for(task, 5)
        world = await runtime.store.load_world()
        assert world is not None and world.last_advanced_at >= saved
    finally:
        await runtime.close()


async def test_a_sped_up_restart_carries_on_from_the_saved_world_time(
    redis: aioredis.Redis, redis_url: str, tmp_path: Path
) -> None:
    cfg = config(redis_url, tmp_path)
    saved = await a_demo_left_the_world_ahead(cfg, timedelta(hours=2))
    first = await first_episode_time(cfg)

    clock = RealClock(TZ, speed=12_000)  # her first action (at most 2 h) ends within a second
    runtime = await build_runtime(cfg, clock=clock)
    try:
        await runtime.continue_world_clock()
        task = asyncio.create_task(runtime.engine.run())
        for _ in range(60):
            if runtime.stats.completions:
                break
            await asyncio.sleep(0.1)
        runtime.engine.stop()
        await asyncio.wait_for(task, 5)
        assert runtime.stats.completions >= 1  # she did not freeze until the wall clock caught up
        episodes = await EpisodeRepo(runtime.history).recent("yuiju", clock.now(), limit=50)
        assert episodes and min(e.time for e in episodes) == first == saved
    finally:
        await runtime.close()


async def first_episode_time(cfg: YuijuConfig) -> datetime:
    """The start of her first episode, from the history the demo wrote."""
    from yuiju.storage.history import open_history

    history = await open_history(None, cfg.mongo.database, cfg.data_path())
    try:
        repo = EpisodeRepo(history)
        await repo.ensure()
        found = await repo.recent("yuiju", datetime.now(TZ) + timedelta(days=1), limit=5)
        return min(e.time for e in found)
    finally:
        await history.close()


async def test_after_a_pause_she_never_acts_earlier_than_her_last_action(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    from yuiju.world.commands import enqueue_command

    kit = await make_engine(
        redis,
        None,
        policy=idle_forever(),
        start="2026-09-01 14:00",
        characters={"yuiju": make_character()},
    )
    await kit.engine.run(max_steps=1)  # she idles from 14:00 to 14:30
    await enqueue_command(redis, kit.keys, {"type": "pause"})
    await kit.engine.run(
        until=at_time("2026-09-01 14:45")
    )  # her idle ends; paused, she starts nothing
    await kit.engine.release()
    her = await kit.character()
    assert her is not None and her.running is None and her.last_action == "idle"

    # resumed under an engine whose clock is behind her (it restarted at an earlier time)
    await enqueue_command(redis, kit.keys, {"type": "resume"})
    behind = await make_engine(redis, None, policy=idle_forever(), start="2026-09-01 12:00")
    with caplog.at_level(logging.ERROR, logger="yuiju.world.behavior"):
        await behind.engine.run(until=at_time("2026-09-01 14:29"))

    assert behind.stats.decisions == 0  # nothing earlier than 14:30, when her last action ended
    await behind.engine.run(until=at_time("2026-09-01 14:50"))
    her = await behind.character()
    assert (
        her is not None
        and her.running is not None
        and her.running.started_at >= at_time("2026-09-01 14:30")
    )
    logged = [r for r in caplog.records if "behind her last action" in r.getMessage()]
    assert len(logged) == 1, [r.getMessage() for r in logged]  # said once, not on every retry


async def test_yuiju_status_says_how_far_world_time_is_ahead(
    redis: aioredis.Redis, redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from yuiju import cli as yuiju_cli

    cfg = config(redis_url, tmp_path)
    await a_demo_left_the_world_ahead(cfg, timedelta(hours=2))

    assert await yuiju_cli._status(cfg, as_json=False) == 0
    out = capsys.readouterr().out
    assert "世界时间比现实快 2 h" in out and "--resync" in out


async def test_yuiju_status_json_says_how_far_world_time_is_ahead(
    redis: aioredis.Redis, redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from yuiju import cli as yuiju_cli

    cfg = config(redis_url, tmp_path)
    await a_demo_left_the_world_ahead(cfg, timedelta(hours=2))

    assert await yuiju_cli._status(cfg, as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    lead = report["world_time_lead"]
    assert 2 * 3600 - 60 <= lead["seconds"] <= 2 * 3600
    assert lead["text"].startswith("2 h") or lead["text"] == "1 h 59 min"
    assert report["towns"][cfg.redis.prefix]["world_time_lead"] == lead


async def test_yuiju_status_json_says_a_world_on_real_time_has_no_lead(
    redis: aioredis.Redis, redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from yuiju import cli as yuiju_cli

    cfg = config(redis_url, tmp_path)
    await a_demo_left_the_world_ahead(cfg, -timedelta(minutes=5))  # stopped five minutes ago

    assert await yuiju_cli._status(cfg, as_json=True) == 0
    assert json.loads(capsys.readouterr().out)["world_time_lead"] == {"seconds": 0, "text": "0 min"}


def panel_minute(text: str) -> datetime:
    """The world time the terminal panel's first line shows (to the minute)."""
    shown = re.search(r"羽浦町  (\d{4}-\d\d-\d\d \d\d:\d\d)", text)
    assert shown, text
    return datetime.fromisoformat(shown.group(1)).replace(tzinfo=TZ)


async def test_the_panel_and_page_never_show_a_minute_the_next_start_steps_back_from(
    redis: aioredis.Redis, redis_url: str, tmp_path: Path
) -> None:
    """World time ahead of the wall clock, saved at 08:40:41 by the last tick; the panel is
    redrawn at 08:41:20 and she is stopped before the next tick: the next start continues from
    08:40:41, so neither the panel nor the observer page may have shown 08:41."""
    from yuiju import cli as yuiju_cli
    from yuiju.web import observer_for_runtime

    cfg = config(redis_url, tmp_path)
    saved = (datetime.now(TZ) + timedelta(hours=2)).replace(second=41, microsecond=0)
    demo = await build_runtime(cfg, clock=SimClock(saved))
    try:
        await demo.engine.run(max_steps=1)
    finally:
        await demo.close()
    running = RealClock(TZ)
    running.continue_from(saved + timedelta(seconds=39))  # her clock ran on past the last save
    runtime = await build_runtime(cfg, clock=RealClock(TZ))
    try:
        assert await runtime.store.saved_world_time(list(runtime.cards)) == saved
        before_stop = yuiju_cli.panel_text(runtime.store, list(runtime.cards), running)
        seen_last = panel_minute(await before_stop)
        page = await observer_for_runtime(runtime, running).snapshot("yuiju")
        seen_last = max(seen_last, page["now"].replace(second=0, microsecond=0))

        await runtime.continue_world_clock()  # the next start
        after_start = await yuiju_cli.panel_text(
            runtime.store, list(runtime.cards), runtime.engine.clock
        )
    finally:
        await runtime.close()
    assert panel_minute(after_start) >= seen_last, (seen_last, after_start.splitlines()[0])


def test_resync_with_a_speed_up_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from yuiju import cli as yuiju_cli

    config_file = tmp_path / "yuiju.toml"
    config_file.write_text(
        f'[app]\ndata_dir = "{(tmp_path / "data").as_posix()}"\n', encoding="utf-8"
    )
    assert yuiju_cli.main(["--config", str(config_file), "run", "--resync", "--speed", "60"]) == 2
    assert "--resync" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()  # refused before any store was opened


# -- a takeover between daemons at different speeds ------------------------------------------------


async def until(condition: Callable[[], Awaitable[bool] | bool], seconds: float = 10) -> None:
    for _ in range(int(seconds / 0.02)):
        result = condition()
        if await result if isinstance(result, Awaitable) else result:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"not within {seconds} s")


async def test_a_faster_daemon_that_takes_over_continues_from_the_saved_world_time(
    redis: aioredis.Redis, redis_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # found from outside: B waiting at --speed 6000 took over from A at speed 1, and the world
    # jumped days at once (its clock had run on its own at 6000x all the time it waited)
    cfg = config(redis_url, tmp_path, YUIJU_WORLD__LEASE_TTL_SECONDS="1.5")
    a = await build_runtime(cfg, clock=RealClock(TZ))
    b = await build_runtime(cfg, clock=RealClock(TZ, speed=6000))
    tasks = []
    try:
        await a.continue_world_clock()
        tasks.append(asyncio.create_task(a.engine.run()))
        await until(lambda: a.engine.holds_town)
        await b.continue_world_clock()
        tasks.append(asyncio.create_task(b.engine.run()))
        await asyncio.sleep(3)  # B waits; its clock alone would be 5 h ahead by now

        with caplog.at_level(logging.INFO, logger="yuiju.world.engine"):
            a.engine.stop()
            await asyncio.wait_for(tasks[0], 5)
            await a.engine.release()
            released = time.monotonic()
            saved = await a.store.saved_world_time(["yuiju"])
            assert saved is not None
            await until(lambda: b.engine.holds_town)

            async def b_ticked() -> bool:
                world = await b.store.load_world()
                return world is not None and world.last_advanced_at > saved

            await until(b_ticked)
            world = await b.store.load_world()
            since = time.monotonic() - released

        assert world is not None
        # from the saved time (at most a tick behind the wall clock) at 6000x since the takeover
        assert world.last_advanced_at - saved <= timedelta(seconds=since * 6000 + 120), (
            world.last_advanced_at,
            saved,
        )
        said = [r.getMessage() for r in caplog.records if "continues from" in r.getMessage()]
        assert len(said) == 1 and "6000x" in said[0], said
    finally:
        for runtime in (a, b):
            runtime.engine.stop()
        await asyncio.gather(*tasks, return_exceptions=True)
        await a.close()
        await b.close()


async def test_a_real_speed_daemon_that_takes_over_from_a_sped_up_one_does_not_stall(
    redis: aioredis.Redis, redis_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # the reverse: A at a demo speed left her actions ahead of B's clock, and B stalled for the
    # difference with an ERROR (world time behind her last action)
    cfg = config(redis_url, tmp_path, YUIJU_WORLD__LEASE_TTL_SECONDS="1.5")
    a = await build_runtime(cfg, clock=RealClock(TZ, speed=6000))
    b_clock = RealClock(TZ)
    b = await build_runtime(cfg, clock=b_clock)
    tasks = []
    try:
        await a.continue_world_clock()
        tasks.append(asyncio.create_task(a.engine.run()))
        await until(lambda: a.engine.holds_town)
        await b.continue_world_clock()
        tasks.append(asyncio.create_task(b.engine.run()))
        await until(lambda: a.stats.completions >= 2)  # her actions are ahead of B's clock now

        with caplog.at_level(logging.INFO):
            a.engine.stop()
            await asyncio.wait_for(tasks[0], 5)
            await a.engine.release()
            saved = await a.store.saved_world_time(["yuiju"])
            assert saved is not None and saved > datetime.now(TZ) + timedelta(minutes=10)
            await until(lambda: b.engine.holds_town)
            await until(lambda: b.engine.leases.holds("yuiju"))
            await asyncio.sleep(0.5)  # her first step under B

        assert b_clock.now() >= saved
        assert "behind her last action" not in caplog.text
        said = [r.getMessage() for r in caplog.records if "continues from" in r.getMessage()]
        assert len(said) == 1 and "ahead of the wall clock" in said[0], said
    finally:
        for runtime in (a, b):
            runtime.engine.stop()
        await asyncio.gather(*tasks, return_exceptions=True)
        await a.close()
        await b.close()
