"""``yuiju simulate``: the same engine under a `SimClock`, fast-forward, then a report.

The report is plain JSON: totals, invariant checks with their evidence, per-day stats, an action
histogram and the full timeline. Everything but the timing fields is a function of the seed (and,
for the llm policy, of the model's answers).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from llm import ChatModel
from world.clock import SimClock, is_school_day
from world.runtime import build_runtime
from yuiju_config import YuijuConfig

DEFAULT_START = "2026-09-01T06:00"
"""A fixed default start (a school day), so the same seed gives the same report on any day."""


def _progress(done: float, total: float, decisions: int) -> None:
    width = 30
    filled = int(width * done / total) if total else width
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] day {done:.0f}/{total:.0f}  decisions {decisions}")
    sys.stderr.flush()


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


# Under the simulated clock the world is caught up (exactly: evolutions converge from elapsed time)
# at every decision and completion, so idle ticks in between only cost time; one per weather
# period keeps the event stream's weather changes on time.
async def simulate(
    cfg: YuijuConfig,
    *,
    days: int,
    seed: int,
    policy: str = "utility",
    start: str = DEFAULT_START,
    data_dir: Path | None = None,
    chat_model: ChatModel | None = None,
    progress: bool = True,
    tick_minutes: int = 360,
) -> dict[str, Any]:
    tz = ZoneInfo(cfg.app.timezone)
    begin = datetime.fromisoformat(start).replace(tzinfo=tz)
    end = begin + timedelta(days=days)
    with tempfile.TemporaryDirectory(prefix="yuiju-sim-") as tmp:
        overrides: dict[str, Any] = {"world": {**cfg.world.model_dump(mode="json"), "seed": seed}}
        if data_dir is None:
            overrides |= {"app": {**cfg.app.model_dump(mode="json"), "data_dir": tmp},
                          "redis": {"url": None, "prefix": cfg.redis.prefix}, "mongo": {"url": None, "database": cfg.mongo.database}}
        else:
            overrides["app"] = {**cfg.app.model_dump(mode="json"), "data_dir": str(data_dir)}
        sim_cfg = cfg.model_copy(update={k: type(getattr(cfg, k)).model_validate(v) for k, v in overrides.items()})
        clock = SimClock(begin)
        runtime = await build_runtime(sim_cfg, clock=clock, policy=policy, chat_model=chat_model,
                                      keep_timeline=True, tick_minutes=tick_minutes,
                                      # the LLM prompt reads recent episodes from history: flush at once then
                                      flush_every=1 if policy == "llm" else 200)
        stats = runtime.stats
        last_shown = [0.0]

        def on_step() -> None:
            if progress:
                done = (clock.now() - begin).total_seconds() / 86400
                if done - last_shown[0] >= 1 or done >= days:
                    last_shown[0] = done
                    _progress(min(done, days), days, stats.decisions)

        runtime.engine.on_step = on_step
        wall = time.perf_counter()
        try:
            await runtime.engine.run(until=end)
        finally:
            wall = time.perf_counter() - wall
            if progress:
                sys.stderr.write("\n")
            final = {cid: await runtime.store.load_character(cid) for cid in runtime.cards}
            episodes = await runtime.history.count("episodes")
            await runtime.close()
    return build_report(
        days=days, seed=seed, policy=policy, begin=begin, wall=wall, stats=stats, llm=runtime.llm_policy,
        episodes=episodes, final={k: v.stats() if v else None for k, v in final.items()},
    )


def build_report(*, days: int, seed: int, policy: str, begin: datetime, wall: float, stats: Any, llm: Any,
                 episodes: int, final: dict[str, Any]) -> dict[str, Any]:
    timeline = stats.timeline
    histogram = Counter(r["id"] for r in timeline)
    per_day: dict[str, dict[str, Any]] = defaultdict(lambda: {"actions": 0, "meals": 0, "school_minutes": 0})
    violations: list[str] = []
    meal_ids = {"eat_breakfast", "eat_lunch_at_home", "eat_dinner", "school_lunch"}
    tz = begin.tzinfo
    for r in timeline:
        start = datetime.fromisoformat(r["start"]).astimezone(tz)
        end = datetime.fromisoformat(r["end"]).astimezone(tz)
        day = per_day[start.date().isoformat()]
        day["actions"] += 1
        if r["id"] in meal_ids:
            day["meals"] += 1
        if r["id"] == "attend_class":
            day["school_minutes"] += int((end - start).total_seconds() // 60)
        if r["id"] == "sleep":
            day["slept_at"] = start.strftime("%H:%M")
        if r["id"] == "wake_up":
            day["woke_at"] = start.strftime("%H:%M")
        after = r["after"]
        for stat in ("stamina", "satiety", "mood"):
            if not 0 <= after[stat] <= 100:
                violations.append(f"{r['end']}: {stat}={after[stat]} out of [0, 100]")
        if after["money"] < 0:
            violations.append(f"{r['end']}: money={after['money']} negative")
        for stat in ("stamina", "satiety", "mood", "money"):
            day.setdefault(f"min_{stat}", after[stat])
            day[f"min_{stat}"] = min(day[f"min_{stat}"], after[stat])
            day[f"end_{stat}"] = after[stat]
        day["school_day"] = is_school_day(start.date())
    if stats.no_candidates:
        violations.append(f"{stats.no_candidates} decision(s) found no candidate action")
    if stats.not_candidate_executed:
        violations.append(f"{stats.not_candidate_executed} action(s) executed while their precondition was false")
    overhead = stats.decision_overhead_ms
    return {
        "days": days,
        "seed": seed,
        "policy": policy,
        "start": begin.isoformat(),
        "decisions": stats.decisions,
        "completions": stats.completions,
        "episodes": episodes,
        "wall_seconds": round(wall, 3),
        "decisions_per_second": round(stats.decisions / wall, 1) if wall else None,
        "engine_overhead_ms": {
            "p50": round(percentile(overhead, 50), 3),
            "p95": round(percentile(overhead, 95), 3),
            "mean": round(statistics.fmean(overhead), 3) if overhead else 0.0,
        },
        "llm_calls": llm.calls if llm else 0,
        "prompt_tokens": llm.prompt_tokens if llm else 0,
        "completion_tokens": llm.completion_tokens if llm else 0,
        "invalid_decisions": (llm.invalid if llm else 0) + stats.invalid_decisions,
        "fallbacks": stats.fallbacks,
        "invariant_violations": violations,
        "final_state": final,
        "action_histogram": dict(sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0]))),
        "per_day": dict(sorted(per_day.items())),
        "timeline": timeline,
    }


TIMING_FIELDS = ("wall_seconds", "decisions_per_second", "engine_overhead_ms")
