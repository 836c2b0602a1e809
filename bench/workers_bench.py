"""Workers sharing the characters in real time: one worker on the embedded Redis, three on a local
3-master Redis Cluster, side by side; then kill -9 on the cluster and the takeover time.

    python bench/workers_bench.py [--characters 200 1000] [--seconds 360] [--kills 3] [--ttl 30] [--lockstep]
    python bench/workers_bench.py --only cluster --in-all --characters 1000 --latency 2 --concurrent 8 \
        --seconds 360 --kills 0     # 1,000 characters in all (334/333/333) with a 2 s model

For each N (characters per worker; with ``--in-all``, in all, split over the workers), real
`yuiju world --worker` processes with the offline policy, or with ``--latency L``, a model:

- embedded: one worker, one town of N copies of her card (``yuiju@1..N``), on the embedded Redis
  (unix socket) with the SQLite history under a temp dir;
- cluster: three workers, three towns of N copies each whose keys live on the three different
  masters of a local cluster (`storage.testcluster`, loopback TCP), one SQLite history.

The towns are first lived in this process under a simulated clock from 07:00 to 09:00 next
Saturday, so at 09:00 everyone is awake, free and in the middle of something (world time ahead of
the wall clock: the workers carry on from it at speed 1, whenever the benchmark runs).

Copies of one card live in lockstep: the same state makes the same choices, so a whole town's
copies (and the three towns) would decide in the same second, every time. Unless ``--lockstep``,
the bench then staggers them, as characters of different cards would be: in each town, in its own
shuffled order, the copies' current actions are made to end evenly spread over the ``--seconds``
of the window (from 15 s after 09:00 world time, written through `StateStore.transact`), so every
character decides at least once in the window: N / ``--seconds`` decisions a second per worker,
2.8/s for 1,000 in 360 s, about 8 times the steady rate of a town of 1,000 (a character decides
about 30 times a day). ``--lockstep`` keeps the copies as the simulation left them: the first
seeded actions end at 09:05 world time, so a window shorter than about 300 s sees no decision at
all (the table says so), and then each town's N copies decide within a second or two, on all
three workers at once (the worst case: 3 workers and 3 Redis servers busy at once on the
machine's cores).

Then the workers start (start-up: s from launch until every character is driven and the shares
are even) and run ``--seconds``. Per worker: characters, decisions, engine overhead per decision
p50/p95 (the engine's own time, without the policy's), lag p50/p95/max (how late steps ran after
they were due; first steps excluded), CPU % of one core over the steady window, RSS. Then, on the
cluster, ``--kills`` times: kill -9 a worker, the time until every one of its characters is driven
by another (target: lease TTL + 1 s), a replacement worker, and the time until the shares are
even again.

With ``--latency L --concurrent C`` the workers decide with the LLM policy: one local
OpenAI-compatible stub in this process (tests/openai_stub.py, the handler of bench/town_bench.py)
answers every decision after L seconds with an answer that follows the request's schema, and every
worker's ``[llm]`` points at it with ``max_concurrent = C`` (default deadlines: 30 s, 15 world
minutes; characters' model talks off, as in town_bench). The simulated seeding still runs the
offline policy. Per worker, decisions by the model, overdue (the deadline passed: the offline
policy decided), offline at once (during an outage), stale; in all, overdue world minutes (from
the end of each action in the window to the start of her next one, from the history store).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from yuiju.config import load_config  # noqa: E402
from yuiju.storage.keys import Keys  # noqa: E402
from yuiju.storage.testcluster import LocalCluster, start_cluster  # noqa: E402
from yuiju.world.clock import SimClock  # noqa: E402
from yuiju.world.runtime import build_runtime  # noqa: E402
from yuiju.world.store import Commit, Snapshot, StateStore  # noqa: E402

TZ = ZoneInfo("Asia/Shanghai")


@dataclass
class Setup:
    label: str
    directory: Path
    workers: int
    towns: dict[str, list[str]]
    redis_url: str | None
    ttl: float
    llm: tuple[str, int] | None = None
    """The model's base URL and ``[llm] max_concurrent``; None: the offline policy."""
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    launched: dict[str, float] = field(default_factory=dict)

    @property
    def config(self) -> Path:
        return self.directory / "yuiju.toml"

    def write_config(self) -> None:
        prefixes = list(self.towns)
        lines = [
            "[app]",
            f'data_dir = "{(self.directory / "data").as_posix()}"',
            'log_level = "WARNING"',
            "[redis]",
            f'prefix = "{prefixes[0]}"',
            *([f'url = "{self.redis_url}"'] if self.redis_url else []),
            "[memory]",
            "enabled = false",
            "[world]",
            f"characters = {json.dumps(self.towns[prefixes[0]])}",
            f'policy = "{"utility" if self.llm is None else "llm"}"',
            f"lease_ttl_seconds = {self.ttl}",
        ]
        if self.llm is not None:
            base_url, concurrent = self.llm
            lines += [
                "[llm]",
                f'base_url = "{base_url}"',
                'model = "stub"',
                'output_mode = "json_schema"',
                f"max_concurrent = {concurrent}",
                "[social]",
                "model_talks_per_day = 0",
            ]
        for prefix in prefixes[1:]:
            lines += [f"[world.towns.{prefix}]", f"characters = {json.dumps(self.towns[prefix])}"]
        self.config.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def launch(self, name: str) -> None:
        log = (self.directory / f"{name}.log").open("ab")
        env = {k: v for k, v in os.environ.items() if not k.startswith("YUIJU_")}
        self.processes[name] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "yuiju.cli",
                "--config",
                str(self.config),
                "world",
                "--worker",
                "--name",
                name,
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        self.launched[name] = time.monotonic()

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def next_saturday(hour: int) -> datetime:
    today = datetime.now(TZ)
    return (today + timedelta(days=(5 - today.weekday()) % 7 or 7)).replace(
        hour=hour, minute=0, second=0, microsecond=0
    )


async def seed_a_running_town(setup: Setup) -> None:
    """The towns as a fleet leaves them after running since 07:00 next Saturday: at 09:00 every
    character is in the middle of something that ends some time in the next hour or two (a
    simulated run, in this process)."""
    # the offline policy, and leases that outlive the seeding's slow steps: with the workers'
    # 30 s TTL, seeding 1,000 copies at load 2-4 lost the leases of two towns (the lease keeper
    # shares the event loop with the simulated steps) and stopped driving them
    cfg = load_config(
        setup.config,
        environ={},
        overrides={"world": {"policy": "utility", "lease_ttl_seconds": 3600}},
    )
    runtime = await build_runtime(cfg, clock=SimClock(next_saturday(7)), tick_minutes=60)
    try:
        await runtime.engine.run(until=next_saturday(9))
    finally:
        await runtime.close()


STAGGER_FROM = timedelta(seconds=15)
"""The first staggered action ends this long after 09:00 world time (the workers' start-up)."""


async def stagger(
    stores: list[StateStore], towns: dict[str, list[str]], seconds: float
) -> dict[str, datetime]:
    """Each town's copies, in the town's own shuffled order, end their current action evenly
    spread over ``seconds`` from `STAGGER_FROM` after 09:00 world time (see the module docstring).
    Returns when each one's action now ends."""
    first = next_saturday(9) + STAGGER_FROM
    out: dict[str, datetime] = {}
    for store in stores:
        order = random.Random(store.keys.prefix).sample(
            towns[store.keys.prefix], len(towns[store.keys.prefix])
        )
        ends = {
            cid: first + timedelta(seconds=seconds * i / len(order)) for i, cid in enumerate(order)
        }

        def spread(snap: Snapshot, ends: dict[str, datetime] = ends) -> tuple[Commit, None]:
            changed = {}
            for cid, character in snap.characters.items():
                if character is not None and character.running is not None:
                    character.running.ends_at = max(ends[cid], character.running.started_at)
                    changed[cid] = character
                    out[cid] = character.running.ends_at
            return Commit(characters=changed), None

        await store.transact(spread, characters=order)
    return out


async def holders(stores: list[StateStore], towns: dict[str, list[str]]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for store in stores:
        out.update(await store.lease_holders(towns[store.keys.prefix]))
    return out


async def run_setup(setup: Setup, *, seconds: float, kills: int, lockstep: bool) -> dict[str, Any]:
    from yuiju.storage.redis import open_redis

    setup.write_config()
    seeded = time.monotonic()
    await seed_a_running_town(setup)
    print(
        f"{setup.label}: seeded in {time.monotonic() - seeded:.0f} s", file=sys.stderr, flush=True
    )
    handle = await open_redis(setup.redis_url, setup.directory / "data")
    stores = [StateStore(handle.client, Keys(prefix)) for prefix in setup.towns]
    registry = stores[0]
    ends: dict[str, datetime] = {}
    if not lockstep:
        ends = await stagger(stores, setup.towns, seconds)
    total = sum(len(c) for c in setup.towns.values())
    result: dict[str, Any] = {
        "setup": setup.label,
        "workers": setup.workers,
        "characters": total,
        "copies": "lockstep" if lockstep else f"staggered over {seconds:.0f} s",
        "load_before": [round(x, 2) for x in os.getloadavg()],
    }
    try:
        launched = time.monotonic()
        for i in range(1, setup.workers + 1):
            setup.launch(f"w{i}")
        await even_shares(setup, stores, registry)
        result["startup_seconds"] = round(time.monotonic() - launched, 1)
        procs = {name: psutil.Process(p.pid) for name, p in setup.processes.items()}
        cpu0 = {name: sum(p.cpu_times()[:2]) for name, p in procs.items()}
        wall0 = time.monotonic()
        await asyncio.sleep(seconds)
        wall = time.monotonic() - wall0
        cpu = {
            name: (sum(p.cpu_times()[:2]) - cpu0[name]) / wall * 100 for name, p in procs.items()
        }
        await asyncio.sleep(11)  # the published figures are recomputed every 10 s
        workers = await registry.workers()
        rows = []
        for _token, (_left, info) in sorted(
            workers.items(), key=lambda kv: kv[1][1].get("name", "")
        ):
            name = info.get("name", "?")
            rows.append(
                {
                    "worker": name,
                    "characters": info.get("characters"),
                    "decisions": info.get("decisions"),
                    "overhead_ms": info.get("overhead_ms"),
                    "lag_ms": info.get("lag_ms"),
                    **{k: v for k, v in info.items() if k.startswith("decisions_")},
                    "cpu_percent": round(cpu.get(name, float("nan")), 1),
                    "rss_mib": round(procs[name].memory_info().rss / 2**20)
                    if name in procs
                    else None,
                }
            )
        result["per_worker"] = rows
        result["overdue_world_min"] = await overdue_minutes(setup, ends)
        result["load_after"] = [round(x, 2) for x in os.getloadavg()]
        for row in rows:  # the worker's own warnings: its event loop blocked for a second or more
            log = setup.directory / f"{row['worker']}.log"
            text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
            row["loop_stalls"] = text.count("event loop stalled")
        if kills and setup.workers > 1:
            result["takeovers"] = await kill_and_take_over(setup, stores, registry, kills)
    finally:
        await handle.aclose()  # first: the last worker to stop then stops an embedded server
        setup.stop()
    return result


async def overdue_minutes(setup: Setup, ends: dict[str, datetime]) -> dict[str, Any]:
    """World minutes from the end of each action in the window to the start of her next one:
    from the staggered end (or, in lockstep, the end of the action running at 09:00) to her
    first new behavior episode, then between her episodes (the history store, after the run)."""
    from yuiju.memory.episodes import EPISODES
    from yuiju.storage.history import open_history

    nine = next_saturday(9)
    history = await open_history(None, "yuiju", setup.directory / "data")
    try:
        await history.ensure(EPISODES)
        docs = await history.find(
            EPISODES.name,
            eq={"type": "behavior"},
            ranges={"time": (nine + timedelta(milliseconds=1), nine + timedelta(days=1))},
        )
    finally:
        await history.close()
    spans: dict[str, list[tuple[datetime, datetime | None]]] = {}
    for doc in sorted(docs, key=lambda d: d["time"]):
        spans.setdefault(doc["character_id"], []).append((doc["time"], doc.get("end_time")))
    gaps = []
    for cid, mine in spans.items():
        if cid in ends:
            gaps.append((mine[0][0] - ends[cid]).total_seconds() / 60)
        gaps += [
            (b[0] - a[1]).total_seconds() / 60
            for a, b in itertools.pairwise(mine)
            if a[1] is not None
        ]
    gaps.sort()
    if not gaps:
        return {"n": 0}
    return {
        "n": len(gaps),
        "p50": round(gaps[len(gaps) // 2], 2),
        "p95": round(gaps[min(len(gaps) - 1, round(0.95 * (len(gaps) - 1)))], 2),
        "max": round(gaps[-1], 2),
        "started_in_window": sum(len(m) for m in spans.values()),
    }


async def kill_and_take_over(
    setup: Setup, stores: list[StateStore], registry: StateStore, kills: int
) -> list[dict[str, Any]]:
    out = []
    for k in range(kills):
        live = {
            info["name"]: token
            for token, (_, info) in (await registry.workers()).items()
            if "name" in info
        }
        name = sorted(live)[k % len(live)]
        token = live[name]
        theirs = [cid for cid, tok in (await holders(stores, setup.towns)).items() if tok == token]
        os.kill(setup.processes[name].pid, signal.SIGKILL)
        setup.processes[name].wait()
        killed = time.monotonic()
        while True:
            held = await holders(stores, setup.towns)
            if all(held[cid] not in (None, token) for cid in theirs):
                break
            await asyncio.sleep(0.05)
        took = time.monotonic() - killed
        setup.launch(name)  # a replacement under the same name
        await even_shares(setup, stores, registry)
        rebalanced = time.monotonic() - killed - took
        out.append(
            {
                "killed": name,
                "characters": len(theirs),
                "takeover_seconds": round(took, 2),
                "replacement_even_after_seconds": round(rebalanced, 1),
            }
        )
        print(json.dumps(out[-1]), flush=True)
    return out


async def even_shares(setup: Setup, stores: list[StateStore], registry: StateStore) -> None:
    """Wait until every worker runs, every character is driven and each worker drives its share."""
    total = sum(len(c) for c in setup.towns.values())
    share = -(-total // setup.workers)
    least = total - share * (setup.workers - 1)  # 1,000 over 3: 334, 334, 332
    while True:
        if any(p.poll() is not None for p in setup.processes.values()):
            raise RuntimeError(f"a worker exited; see the logs in {setup.directory}")
        found = await registry.workers()
        counts = Counter((await holders(stores, setup.towns)).values())
        if (
            len(found) == setup.workers
            and None not in counts
            and all(least <= counts[t] <= share for t in found)
        ):
            return
        await asyncio.sleep(0.2)


def spread_prefixes(cluster: LocalCluster, n: int) -> list[str]:
    """Town prefixes whose keys land on ``n`` different masters."""
    chosen: dict[int, str] = {}
    for i in range(1, 1000):
        prefix = f"town{i}"
        chosen.setdefault(cluster.node_of(Keys(prefix).world), prefix)
        if len(chosen) == n:
            break
    return list(chosen.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--characters", type=int, nargs="+", default=[200, 1000], help="per worker")
    parser.add_argument("--seconds", type=float, default=360.0, help="steady window per run")
    parser.add_argument(
        "--kills", type=int, default=3, help="kill -9 rounds on the cluster (after the last size)"
    )
    parser.add_argument("--ttl", type=float, default=30.0, help="[world] lease_ttl_seconds")
    parser.add_argument("--only", choices=["embedded", "cluster"])
    parser.add_argument(
        "--lockstep",
        action="store_true",
        help="leave the copies of her card in lockstep (no stagger): bursts of whole towns",
    )
    parser.add_argument(
        "--in-all",
        action="store_true",
        help="--characters counts characters in all, split over the workers (1000: 334/333/333)",
    )
    parser.add_argument(
        "--latency", type=float, default=None, help="decide with a model answering after L s"
    )
    parser.add_argument(
        "--concurrent", type=int, default=64, help="[llm] max_concurrent per worker"
    )
    args = parser.parse_args()

    with model_stub(args.latency) as base_url:
        llm = None if base_url is None else (base_url, args.concurrent)
        results = run_all(args, llm)
    print_table(results)
    return 0


@contextlib.contextmanager
def model_stub(latency: float | None) -> Any:
    """The local OpenAI-compatible stub every worker asks (its URL), or None: no model."""
    if latency is None:
        yield None
        return
    sys.path.insert(0, str(ROOT / "bench"))
    from town_bench import model_handler

    from tests.openai_stub import OpenAIStub

    stub = OpenAIStub(handler=model_handler(latency, short=False, hung=False))
    stub.start()
    try:
        yield stub.base_url
    finally:
        stub.stop()


def split(n: int, parts: int) -> list[int]:
    """``n`` over ``parts`` as evenly as can be, the larger first: 1000 over 3 is 334/333/333."""
    return [n // parts + (1 if k < n % parts else 0) for k in range(parts)]


def run_all(args: argparse.Namespace, llm: tuple[str, int] | None) -> list[dict[str, Any]]:
    results = []
    for i, n in enumerate(args.characters):
        last = i == len(args.characters) - 1
        if args.only in (None, "embedded"):
            with tempfile.TemporaryDirectory(prefix="yuiju-workers-bench-") as tmp:
                setup = Setup(
                    f"embedded, 1 worker × {n}",
                    Path(tmp),
                    1,
                    {"yuiju": [f"yuiju@{j}" for j in range(1, n + 1)]},
                    None,
                    args.ttl,
                    llm,
                )
                results.append(
                    asyncio.run(
                        run_setup(setup, seconds=args.seconds, kills=0, lockstep=args.lockstep)
                    )
                )
                print(json.dumps(results[-1], ensure_ascii=False), flush=True)
        if args.only in (None, "cluster"):
            with (
                tempfile.TemporaryDirectory(prefix="yuiju-workers-bench-") as tmp,
                start_cluster(3) as cluster,
            ):
                sizes = split(n, 3) if args.in_all else [n] * 3
                towns = {
                    p: [f"yuiju@{sum(sizes[:k]) + j}" for j in range(1, sizes[k] + 1)]
                    for k, p in enumerate(spread_prefixes(cluster, 3))
                }
                label = f"{n} in all" if args.in_all else f"× {n}"
                model = "" if llm is None else f", {args.latency:g} s model, C = {args.concurrent}"
                setup = Setup(
                    f"cluster, 3 workers {label}{model}",
                    Path(tmp),
                    3,
                    towns,
                    cluster.url,
                    args.ttl,
                    llm,
                )
                results.append(
                    asyncio.run(
                        run_setup(
                            setup,
                            seconds=args.seconds,
                            kills=args.kills if last else 0,
                            lockstep=args.lockstep,
                        )
                    )
                )
                print(json.dumps(results[-1], ensure_ascii=False), flush=True)
    return results


def print_table(results: list[dict[str, Any]]) -> None:
    print(
        "\n| setup | worker | characters | start-up (s) | decisions | overhead p50 / p95 (ms) | lag p50 / p95 / max (ms) | CPU % | RSS (MiB) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        for w in r.get("per_worker", []):
            o, lag = w["overhead_ms"] or {}, w["lag_ms"] or {}
            print(
                f"| {r['setup']} | {w['worker']} | {w['characters']} | {r['startup_seconds']} | {w['decisions']} | "
                f"{o.get('p50')} / {o.get('p95')} | {lag.get('p50')} / {lag.get('p95')} / {lag.get('max')} | "
                f"{w['cpu_percent']} | {w['rss_mib']} |"
            )
    if any(not w["decisions"] for r in results for w in r.get("per_worker", [])):
        print(
            "no decisions in the window: with --lockstep the seeded actions first end at 09:05 world time; "
            "use --seconds 360"
        )
    for r in results:
        if any("decisions_by_model" in w for w in r.get("per_worker", [])):
            print(
                f"\n{r['setup']}: decisions by the model / overdue (offline) / offline at once / stale"
            )
            for w in r["per_worker"]:
                print(
                    f"  {w['worker']}: {w.get('decisions_by_model')} / {w.get('decisions_overdue')} / "
                    f"{w.get('decisions_offline_at_once')} / {w.get('decisions_stale')}"
                )
        print(f"{r['setup']}: overdue world minutes {r.get('overdue_world_min')}")
    for r in results:
        for t in r.get("takeovers", []):
            print(
                f"kill -9 {t['killed']} ({t['characters']} characters): taken over in {t['takeover_seconds']} s; "
                f"shares even again {t['replacement_even_after_seconds']} s later"
            )
        print(
            f"{r['setup']} (copies {r['copies']}): load average {r['load_before']} before, {r.get('load_after')} after"
        )


if __name__ == "__main__":
    # SIGTERM as Ctrl-C: the workers, the cluster and the temp dirs are cleaned up either way
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
