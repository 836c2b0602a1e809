"""Three real `yuiju world --worker` processes on a real 3-master Redis Cluster, two towns, one of
them killed with SIGKILL: its characters are taken over within the lease TTL + 1 s, and the record
has every episode exactly once (history and what is still queued, checked against the events)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from tests.conftest import TZ
from yuiju.config import load_config
from yuiju.memory.episodes import EpisodeRepo
from yuiju.storage.history import open_history
from yuiju.storage.keys import Keys
from yuiju.storage.testcluster import LocalCluster
from yuiju.world.clock import SimClock
from yuiju.world.runtime import build_runtime
from yuiju.world.store import StateStore, parse_outbox_entry

ROOT = Path(__file__).resolve().parents[1]
TTL_SECONDS = 2.0
SPEED = 900  # a world hour every 4 s: each of them lives a few actions while the test runs
TOWNS = {"yuiju": [f"yuiju@{i}" for i in range(1, 7)], "umi": [f"kaede@{i}" for i in range(1, 7)]}


def fleet_config(path: Path, cluster_url: str) -> Path:
    path.write_text(
        f"""
[app]
data_dir = "{(path.parent / "data").as_posix()}"
[redis]
url = "{cluster_url}"
[memory]
enabled = false
[world]
characters = ["yuiju@1..6"]
policy = "utility"
lease_ttl_seconds = {TTL_SECONDS}
[world.towns.umi]
characters = ["kaede@1..6"]
""",
        encoding="utf-8",
    )
    return path


async def seed_a_morning(config: Path) -> None:
    """World time ahead of the wall clock, on next Saturday's morning, so they are awake and out of
    school: the workers carry on from the saved world time (world time never goes backwards)."""
    today = datetime.now(TZ)
    saturday = today + timedelta(days=(5 - today.weekday()) % 7 or 7)
    morning = saturday.replace(hour=9, minute=0, second=0, microsecond=0)
    runtime = await build_runtime(load_config(config, environ={}), clock=SimClock(morning))
    try:
        await runtime.engine.run(max_steps=1)
    finally:
        await runtime.close()


@pytest.fixture
def workers() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    started: dict[str, subprocess.Popen[bytes]] = {}
    yield started
    for process in started.values():
        if process.poll() is None:
            process.kill()
            process.wait()


def start_worker(config: Path, name: str) -> subprocess.Popen[bytes]:
    log = (config.parent / f"{name}.log").open("wb")
    env = {k: v for k, v in os.environ.items() if not k.startswith("YUIJU_")}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "yuiju.cli",
            "--config",
            str(config),
            "world",
            "--worker",
            "--name",
            name,
            "--speed",
            str(SPEED),
        ],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
    )


async def registry(redis: Any) -> dict[str, dict[str, Any]]:
    """The live workers by name: their token and info."""
    live = await StateStore(redis, Keys("yuiju")).workers()
    return {
        info["name"]: {"token": token, **info}
        for token, (_, info) in live.items()
        if "name" in info
    }


async def lease_holders(redis: Any) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for prefix, characters in TOWNS.items():
        out.update(await StateStore(redis, Keys(prefix)).lease_holders(characters))
    return out


async def wait_for(check: Any, within: float, what: str) -> float:
    started = time.monotonic()
    while not await check():
        assert time.monotonic() - started < within, f"{what}: not within {within} s"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


async def test_a_killed_worker_is_taken_over_within_the_ttl_and_no_episode_is_lost_or_doubled(
    redis_cluster: LocalCluster,
    cluster_redis: aioredis.RedisCluster,
    tmp_path: Path,
    workers: dict[str, subprocess.Popen[bytes]],
) -> None:
    config = fleet_config(tmp_path / "yuiju.toml", redis_cluster.url)
    await seed_a_morning(config)
    for name in ("w1", "w2", "w3"):
        workers[name] = start_worker(config, name)

    async def balanced() -> bool:
        found = await registry(cluster_redis)
        held = Counter((await lease_holders(cluster_redis)).values())
        return len(found) == 3 and all(held[w["token"]] == 4 for w in found.values())

    await wait_for(balanced, 60, "three workers driving four characters each")
    await asyncio.sleep(2)  # they live a while

    victim = (await registry(cluster_redis))["w2"]
    hers = sorted(
        cid for cid, tok in (await lease_holders(cluster_redis)).items() if tok == victim["token"]
    )
    os.kill(workers["w2"].pid, signal.SIGKILL)
    killed = time.monotonic()
    # Where each town's event stream ends now, by the server's ids: the test's own clock may not be
    # the server's (under faketime every process's clock starts at the time given when it starts).
    killed_at = await stream_ends(cluster_redis)

    async def taken_over() -> bool:
        held = await lease_holders(cluster_redis)
        return all(held[cid] not in (None, victim["token"]) for cid in hers)

    took = await wait_for(taken_over, 10, "the victim's characters taken over")
    assert took <= TTL_SECONDS + 1.0, f"taken over {took:.2f} s after the kill"
    survivors = {w["token"] for name, w in (await registry(cluster_redis)).items() if name != "w2"}
    assert (
        set((await lease_holders(cluster_redis)).values()) == survivors
    )  # nobody drives twice, nobody idles

    async def driven_on() -> (
        bool
    ):  # an action of 180 world minutes is 12 s of wall time at this speed
        return set(hers) <= await acted_since(cluster_redis, killed_at)

    await wait_for(  # generous: on a loaded machine the survivors' steps come late, not never
        driven_on, 90, "the survivors starting or ending actions of the victim's characters"
    )
    await asyncio.sleep(
        max(0.0, 6 - (time.monotonic() - killed))
    )  # the survivors live on with them

    for name in ("w1", "w3"):
        workers[name].send_signal(signal.SIGTERM)
    for name in ("w1", "w3"):
        assert workers[name].wait(timeout=15) == 0, (config.parent / f"{name}.log").read_text()[
            -2000:
        ]

    await check_the_record(cluster_redis, config, hers, killed_at)


async def stream_ends(redis: Any) -> dict[str, str]:
    """The id of the last event of each town's stream ("0-0" when it has none)."""
    ends = {}
    for prefix in TOWNS:
        last = await redis.xrevrange(Keys(prefix).events, count=1)
        ends[prefix] = last[0][0] if last else "0-0"
    return ends


async def acted_since(redis: Any, since: dict[str, str]) -> set[str]:
    """The characters with an action started or completed after each town's event ``since``."""
    out: set[str] = set()
    for prefix in TOWNS:
        for _, fields in await redis.xrange(Keys(prefix).events, min=f"({since[prefix]}"):
            if fields["type"].startswith("action_"):
                out.add(fields["character_id"])
    return out


async def check_the_record(
    redis: Any, config: Path, hers: list[str], killed_at: dict[str, str]
) -> None:
    """Every episode started once (one ``action_started`` event each) is in history or still
    queued; none completed twice; per character they follow each other without overlapping; the
    killed worker's characters started new ones after the kill."""
    history = await open_history(None, "yuiju", config.parent / "data")
    await EpisodeRepo(history).ensure()
    try:
        stored = {d["_id"]: d for d in await history.find("episodes", eq={"type": "behavior"})}
    finally:
        await history.close()
    episodes = dict(stored)
    started: Counter[str] = Counter()
    completed: Counter[str] = Counter()
    for prefix in TOWNS:
        keys = Keys(prefix)
        for raw in await redis.lrange(
            keys.episode_outbox, 0, -1
        ):  # queued, not yet written: not lost
            entry = parse_outbox_entry(raw)
            assert entry.problem is None, entry.problem
            if entry.doc.get("type") == "behavior":
                episodes[entry.doc["_id"]] = entry.doc
        for _, fields in await redis.xrange(keys.events):
            data = json.loads(fields["data"])
            if fields["type"] == "action_started":
                started[data["episode_id"]] += 1
            elif fields["type"] == "action_completed":
                completed[data["episode_id"]] += 1

    assert started and all(n == 1 for n in started.values()), [
        e for e, n in started.items() if n > 1
    ]
    assert all(n == 1 for n in completed.values()), [e for e, n in completed.items() if n > 1]
    assert set(started) == set(episodes), "episodes with no start event, or starts with no episode"
    assert set(completed) == {e for e, d in episodes.items() if d["status"] == "completed"}
    assert len(stored) >= len(episodes) - 12  # the outbox holds at most the tail

    by_character: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for doc in episodes.values():
        by_character[doc["character_id"]].append(doc)
    for prefix, characters in TOWNS.items():
        store = StateStore(redis, Keys(prefix))
        for cid in characters:
            timeline = sorted(by_character[cid], key=lambda d: d["time"])
            assert len(timeline) >= 2, cid
            for before, after in itertools.pairwise(timeline):
                assert before["status"] == "completed", (cid, before["_id"])
                assert before["end_time"] <= after["time"], (
                    cid,
                    before["_id"],
                    after["_id"],
                )  # one at a time
            state = await store.load_character(cid)
            assert state is not None
            last = timeline[-1]
            assert (state.running.episode_id if state.running else None) == (
                last["_id"] if last["status"] == "running" else None
            ), cid
    assert set(hers) <= await acted_since(redis, killed_at), (
        "the killed worker's characters went on"
    )
