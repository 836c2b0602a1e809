"""The town never waits for the model: N characters, an L-second model, a concurrency limit C.

    python bench/town_bench.py goal            # 20 characters, 2 s model, speed 10, 150 s
    python bench/town_bench.py goal-shortest   # the same, the model picking what ends soonest
    python bench/town_bench.py throughput      # 20 x 2 s x C in (4, 10, 20) at speed 3000
    python bench/town_bench.py throughput-long # 20 x 2 s x C = 20 at speed 10000 for 60 s
    python bench/town_bench.py hung            # an endpoint that accepts and never answers
    python bench/town_bench.py locked          # BEGIN EXCLUSIVE on history.sqlite3 for 30 s
    python bench/town_bench.py custom --characters 20 --latency 2 --concurrent 20 --speed 10 --seconds 150

Each run is the daemon's own engine (`build_runtime` with a `RealClock` at ``--speed``, the embedded
Redis and SQLite history in a temp dir), the LLM policy talking over real HTTP to a local
OpenAI-compatible stub (tests/openai_stub.py) that answers every decision after ``--latency``
seconds with an answer that follows the request's schema (``--short``: 发呆 10 minutes whenever it
is offered, so every character needs a decision again soon: the throughput case), behind
``[llm] max_concurrent = C``. World time starts at 09:00 next Saturday (every character awake and
free), characters are fresh copies of her card (``yuiju@1..N``).

Figures: decisions applied per second (by the model, and by the offline policy after a
deadline); step lag p50/p95 (how late steps ran after they were due, wall ms: `yuiju status`'s
``lag_ms``); overdue world minutes (from the end of each action to the start of her next one,
p50/p95/max: what she spends standing still); actions started; the world tick (sampled every
0.25 s: how far world time ran ahead of the last tick, in world minutes, at most); and where each
character's cycle goes (`PhaseProbe`: queued, request, answer to start, the action's own
length, end to the next ask; mean and p95 wall ms).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.openai_stub import (  # noqa: E402
    OPTIONS_LINE,
    OpenAIStub,
    StubAnswer,
    StubDelay,
    flat_prompt,
    read_the_moment,
    requested_schema,
    schema_following,
)
from yuiju.config import load_config  # noqa: E402
from yuiju.llm.testing import follow_schema  # noqa: E402
from yuiju.world.action import Action  # noqa: E402
from yuiju.world.clock import RealClock  # noqa: E402
from yuiju.world.loader import load_actions  # noqa: E402
from yuiju.world.runtime import Runtime, build_runtime  # noqa: E402
from yuiju.world.town import HAURA  # noqa: E402

TZ = ZoneInfo("Asia/Shanghai")
IDLE_10 = json.dumps(
    {"action": "发呆", "reason": "想放空一会儿", "durationMinute": 10}, ensure_ascii=False
)


def next_saturday(hour: int) -> datetime:
    today = datetime.now(TZ)
    return (today + timedelta(days=(5 - today.weekday()) % 7 or 7)).replace(
        hour=hour, minute=0, second=0, microsecond=0
    )


def model_handler(latency: float, *, short: bool, hung: bool, shortest: bool = False) -> Any:
    """The stub's answers: after ``latency`` s, one that follows the schema (or 发呆 10 min; or,
    ``shortest``, the offered action that ends soonest, at its shortest duration)."""
    follow = schema_following(7)
    pick = shortest_pick() if shortest else None

    def answer(body: dict[str, Any]) -> StubAnswer:
        if hung:
            return StubDelay(86_400.0, "{}")  # accepts, never answers (until the stub stops)
        if short and "发呆" in json.dumps(body.get("response_format") or {}, ensure_ascii=False):
            return StubDelay(latency, IDLE_10)
        picked = pick(body) if pick is not None else None
        return StubDelay(latency, picked if picked is not None else follow(body))

    return answer


PLACE_LINE = re.compile(r"^地点：(.+?)；", re.MULTILINE)


def shortest_pick() -> Any:
    """A model that always picks, among the options the moment lists, the action that lasts
    least (its shortest tier; durations set by the moment, as sleep or class, count as a day),
    reading the catalogue's durations as the system prompt states them, by the place she is at
    (a move offered as 去超市 lasts 5 minutes from the shop, 10 from home). A model's choice:
    the engine is the same. None where the request is not a decision (the schema-following
    answer then)."""
    actions = list(load_actions().actions.values())
    place_ids = {place.name: pid for pid, place in HAURA.places.items()}

    def minutes(action: Action) -> int:
        tiers: tuple[int, ...] = getattr(action.duration, "tiers", ())
        if tiers:
            return min(tiers)
        return action.duration if isinstance(action.duration, int) else 24 * 60

    def pick(body: dict[str, Any]) -> str | None:
        schema, prompt = requested_schema(body), flat_prompt(body)
        listed, place = OPTIONS_LINE.findall(prompt), PLACE_LINE.findall(prompt)
        if schema is None or not listed or not place:
            return None
        here = place_ids.get(place[-1].split("-")[-1])
        offered = {
            a.offered_as: a for a in actions if a.at in (None, here)
        }  # what each option names here
        options = [o for o in listed[-1].split("、") if o in offered]
        if not options:
            return None
        name = min(options, key=lambda o: (minutes(offered[o]), o))
        branches = []
        for branch in read_the_moment(schema, prompt).get("anyOf", []):
            props = branch.get("properties", {})
            action = props.get("action", {})
            if name not in (action.get("enum") or [action.get("const")]):
                continue
            branches.append({**branch, "properties": {**props, "action": {"const": name}}})
        if not branches:
            return None
        decision = follow_schema({**schema, "anyOf": branches}, random.Random(name), fill=0.0)
        if getattr(offered[name].duration, "tiers", ()):
            decision["durationMinute"] = minutes(offered[name])
        return json.dumps(decision, ensure_ascii=False)

    return pick


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))], 1)


async def sample_ticks(runtime: Runtime, clock: RealClock, out: list[float]) -> None:
    """World minutes between the clock and the last world tick, every 0.25 s."""
    while True:
        world = await runtime.store.load_world()
        if world is not None:
            out.append((clock.now() - world.last_advanced_at).total_seconds() / 60)
        await asyncio.sleep(0.25)


CUT_SHORT_SECONDS = 0.5
"""An ask this long before her action's planned end is no late wake-up: the action was cut short."""


class PhaseProbe:
    """Where each character's cycle goes, in wall seconds: from her step asking (the pool's
    ``start``) to a place under the worker's limit (``queued``), from there to the answer being
    ready less the model's own ``latency`` (``request``: the prompt, the HTTP round trip, the
    endpoint's limit, parsing), from the answer to her step applying it (``answer_to_start``),
    the action's own length (``action``), and from its end to the step that asks again
    (``end_to_ask``). A bench-only probe: it wraps the pool's ``start`` and ``on_ready`` and each
    loop's ``step`` of this one engine, after it is built."""

    def __init__(self, runtime: Runtime, clock: RealClock, latency: float) -> None:
        self.clock, self.latency = clock, latency
        self.phases: dict[str, list[float]] = defaultdict(list)
        self.cut_short = 0
        """Asks well before her action's end as it was started: a meeting took her out of it."""
        self._asked: dict[str, float] = {}
        self._admitted: dict[str, float] = {}
        self._ready: dict[str, float] = {}
        self._ends: dict[str, float] = {}
        """Her action's end (wall) as the step that started it set it, until she asks again."""
        pool = runtime.engine.decisions
        if pool is None:
            return
        self.pool = pool
        start, ready = pool.start, pool.on_ready

        def timed_start(cid: str, now: datetime, speed: float, work: Any) -> Any:
            asked = self._asked[cid] = time.monotonic()
            if cid in self._ends:
                after_end = asked - self._ends.pop(cid)
                if after_end > -CUT_SHORT_SECONDS:
                    self.phases["end_to_ask"].append(after_end)
                else:  # a meeting took her out of it (or something ended it early)
                    self.cut_short += 1

            async def admitted() -> Any:
                self._admitted[cid] = time.monotonic()
                self.phases["queued"].append(self._admitted[cid] - asked)
                return await work()

            return start(cid, now, speed, admitted)

        def timed_ready(cid: str) -> None:
            self._ready[cid] = time.monotonic()
            if cid in self._admitted:
                self.phases["request"].append(
                    self._ready[cid] - self._admitted.pop(cid) - self.latency
                )
            ready(cid)

        pool.start, pool.on_ready = timed_start, timed_ready  # type: ignore[method-assign]
        for cid, loop in runtime.engine.loops.items():
            loop.step = self._timed_step(cid, loop.step)  # type: ignore[method-assign]

    def _timed_step(self, cid: str, step: Any) -> Any:
        async def timed(now: datetime, inputs: Any) -> Any:
            result = await step(now, inputs)
            wall, world = time.monotonic(), self.clock.now()
            ready = self._ready.pop(cid, None)
            if ready is not None and self.pool.get(cid) is None:  # it applied her answer
                self.phases["answer_to_start"].append(wall - ready)
                end = wall + (result.due - world).total_seconds() / self.clock.speed
                self.phases["action"].append(end - wall)
                self._ends[cid] = end
            return result

        return timed

    def summary(self) -> dict[str, dict[str, float | int | None]]:
        out: dict[str, dict[str, float | int | None]] = {"cut_short": {"n": self.cut_short}}
        for name in ("queued", "request", "answer_to_start", "action", "end_to_ask"):
            values = [v * 1000 for v in self.phases.get(name, [])]
            out[name] = {
                "n": len(values),
                "mean_ms": round(sum(values) / len(values), 1) if values else None,
                "p95_ms": pct(values, 95),
            }
        return out


@contextlib.contextmanager
def history_locked(path: Path, after: float, seconds: float) -> Any:
    """Another program holds BEGIN EXCLUSIVE on ``path`` from ``after`` s for ``seconds``."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            f"time.sleep({after})\n"
            f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
            "c.execute('BEGIN EXCLUSIVE')\n"
            f"time.sleep({seconds})\n"
            "c.execute('COMMIT')\n",
        ]
    )
    try:
        yield
    finally:
        holder.kill()
        holder.wait()


async def town_run(
    *,
    characters: int,
    latency: float,
    concurrent: int,
    speed: float,
    seconds: float,
    short: bool = False,
    shortest: bool = False,
    hung: bool = False,
    lock: tuple[float, float] | None = None,
    policy: str = "llm",
    deadline_minutes: float = 15.0,
    tick_minutes: int | None = None,
) -> dict[str, Any]:
    data_dir = Path(tempfile.mkdtemp(prefix="town-bench-"))
    stub = OpenAIStub(handler=model_handler(latency, short=short, hung=hung, shortest=shortest))
    stub.start()
    ids = ["yuiju"] if characters == 1 else [f"yuiju@1..{characters}"]
    cfg = load_config(
        environ={},
        overrides={
            "app": {"data_dir": str(data_dir), "log_level": "WARNING"},
            "world": {"characters": ids, "speed": speed, "policy": policy},
            "llm": {
                "base_url": stub.base_url,
                "model": "stub",
                "output_mode": "json_schema",
                "max_concurrent": concurrent,
                "decide_deadline_minutes": deadline_minutes,
            },
            "social": {"model_talks_per_day": 0},
        },
    )
    clock = RealClock(TZ, speed=speed)
    start = next_saturday(9)
    clock.continue_from(start)
    runtime = await build_runtime(cfg, clock=clock, keep_timeline=True, tick_minutes=tick_minutes)
    engine = runtime.engine
    probe = PhaseProbe(runtime, clock, latency)
    ticks: list[float] = []
    sampler = asyncio.create_task(sample_ticks(runtime, clock, ticks))
    began = time.monotonic()
    try:
        with (
            history_locked(data_dir / "history.sqlite3", *lock)
            if lock is not None
            else contextlib.nullcontext()
        ):
            running = asyncio.create_task(engine.run())
            await asyncio.sleep(seconds)
            engine.stop()
            await running
        wall = time.monotonic() - began
        sampler.cancel()
        return {**await figures(runtime, ticks, wall, start), "phases": probe.summary()}
    finally:
        sampler.cancel()
        await runtime.close()
        stub.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


async def figures(
    runtime: Runtime, ticks: list[float], wall: float, start: datetime
) -> dict[str, Any]:
    engine, stats = runtime.engine, runtime.stats
    acts: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    for r in stats.timeline:
        acts[r["character"]].append(
            (datetime.fromisoformat(r["start"]), datetime.fromisoformat(r["end"]))
        )
    running = 0
    for cid in engine.loops:
        her = await runtime.store.load_character(cid)
        if her is not None and her.running is not None:
            running += 1
            acts[cid].append((her.running.started_at, her.running.ends_at))
    gaps = []
    first = []
    for spans in acts.values():
        spans.sort()
        first.append((spans[0][0] - start).total_seconds() / 60)
        gaps += [(b[0] - a[1]).total_seconds() / 60 for a, b in itertools.pairwise(spans)]
    pool = engine.decisions
    lag = list(engine.figures.lag_ms)
    return {
        "wall_s": round(wall, 1),
        "decisions": stats.decisions,
        "decisions_per_s": round(stats.decisions / wall, 2),
        "by_model": pool.figures.answered if pool else None,
        "overdue_to_offline": pool.figures.overdue if pool else None,
        "offline_at_once": pool.figures.offline_at_once if pool else None,
        "queued_past_deadline": pool.figures.queued_past_deadline if pool else None,
        "stale": pool.figures.stale if pool else None,
        "lag_ms_p50": pct(lag, 50),
        "lag_ms_p95": pct(lag, 95),
        "overdue_min_p50": pct(gaps, 50),
        "overdue_min_p95": pct(gaps, 95),
        "overdue_min_max": round(max(gaps), 1) if gaps else None,
        "first_start_min_max": round(max(first), 1) if first else None,
        "actions_started": len(stats.timeline) + running,
        "tick_behind_min_max": round(max(ticks), 1) if ticks else None,
        "outbox_failures": engine.outbox_failures,
    }


PRESETS: dict[str, list[dict[str, Any]]] = {
    "goal": [{"characters": 20, "latency": 2.0, "concurrent": 20, "speed": 10, "seconds": 150}],
    "goal-shortest": [
        {
            "characters": 20,
            "latency": 2.0,
            "concurrent": 20,
            "speed": 10,
            "seconds": 150,
            "shortest": True,
        }
    ],
    "throughput": [
        {
            "characters": 20,
            "latency": 2.0,
            "concurrent": c,
            "speed": 3000,
            "seconds": 30,
            "short": True,
            "deadline_minutes": 600,
            "tick_minutes": 10,
        }
        for c in (4, 10, 20)
    ],
    "throughput-long": [
        {
            "characters": 20,
            "latency": 2.0,
            "concurrent": 20,
            "speed": 10000,
            "seconds": 60,
            "short": True,
            "deadline_minutes": 1440,
            "tick_minutes": 60,
        }
    ],
    "hung": [
        {
            "characters": 3,
            "latency": 2.0,
            "concurrent": 8,
            "speed": 600,
            "seconds": 90,
            "hung": True,
        }
    ],
    "locked": [
        {
            "characters": 1,
            "latency": 0,
            "concurrent": 8,
            "speed": 600,
            "seconds": 45,
            "lock": (5.0, 30.0),
            "policy": "utility",
        }
    ],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", choices=[*PRESETS, "all", "custom"])
    parser.add_argument("--characters", type=int, default=20)
    parser.add_argument("--latency", type=float, default=2.0)
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--speed", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=150.0)
    parser.add_argument("--short", action="store_true")
    parser.add_argument("--shortest", action="store_true")
    parser.add_argument("--hung", action="store_true")
    parser.add_argument("--deadline-minutes", type=float, default=15.0)
    parser.add_argument("--tick-minutes", type=int, default=None)
    args = parser.parse_args()
    if args.run == "custom":
        runs = [
            {
                "characters": args.characters,
                "latency": args.latency,
                "concurrent": args.concurrent,
                "speed": args.speed,
                "seconds": args.seconds,
                "short": args.short,
                "shortest": args.shortest,
                "hung": args.hung,
                "deadline_minutes": args.deadline_minutes,
                "tick_minutes": args.tick_minutes,
            }
        ]
    elif args.run == "all":
        runs = [r for preset in PRESETS.values() for r in preset]
    else:
        runs = PRESETS[args.run]
    for spec in runs:
        result = asyncio.run(town_run(**spec))
        n, lat, c = spec["characters"], spec["latency"], spec["concurrent"]
        if lat:
            result["bound_per_s"] = round(min(n / lat, c / lat), 2)
        print(json.dumps({**dict(spec.items()), **result}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
