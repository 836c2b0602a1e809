"""``yuiju simulate``: the same engine under a `SimClock`, fast-forward, then a report.

The report is plain JSON: totals, invariant checks with their evidence, per-day stats, an action
histogram, LLM usage by purpose and the full timeline. Everything but the timing fields is a
function of the seed (and, for the llm policy, of the model's answers).

With ``record=PATH`` every exchange with the model goes to a cassette; ``replay=PATH`` answers
from it with no network, and the same seed then gives the same timeline byte for byte. A replay
that asks something the recording did not stops with `llm.CassetteMismatch`.
"""

from __future__ import annotations

import itertools
import logging
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import ValidationError

from yuiju.config import YuijuConfig
from yuiju.llm import ChatModel, CircuitBreaker, RecordingChatModel, ReplayChatModel
from yuiju.llm.usage import Usage
from yuiju.memory.episode_data import ConversationData
from yuiju.memory.episodes import MEETING_PREFIX, Episode
from yuiju.world.clock import SimClock, is_school_day
from yuiju.world.commands import enqueue_command
from yuiju.world.relations import Appointment
from yuiju.world.runtime import Runtime, build_runtime
from yuiju.world.state import CharacterState
from yuiju.world.stats import LoopStats

log = logging.getLogger(__name__)

DEFAULT_START = "2026-09-01T06:00"
"""A fixed default start (a school day), so the same seed gives the same report on any day."""


def _progress(done: float, total: float, decisions: int) -> None:
    width = 30
    filled = int(width * done / total) if total else width
    sys.stderr.write(
        f"\r[{'#' * filled}{'.' * (width - filled)}] day {done:.0f}/{total:.0f}  decisions {decisions}"
    )
    sys.stderr.flush()


def percentile(values: Collection[float], q: float) -> float:
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
    record: Path | None = None,
    replay: Path | None = None,
    commands: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """``commands``: world commands queued before the run (applied at its first tick), e.g. a
    piece of news told to one character (``tell_news``) to follow how it travels."""
    replayed: ReplayChatModel | None = None
    if replay is not None:
        replayed = ReplayChatModel(replay)
        chat_model, policy, cfg = replayed, "llm", replayed_config(cfg, replayed)
    elif record is not None:
        from yuiju.world.runtime import make_chat_model

        meta = {"days": days, "seed": seed, "start": start, "llm": recorded_llm_settings(cfg)}
        chat_model = RecordingChatModel(chat_model or make_chat_model(cfg), record, meta=meta)
    begin = datetime.fromisoformat(start).replace(tzinfo=ZoneInfo(cfg.app.timezone))
    end = begin + timedelta(days=days)
    with tempfile.TemporaryDirectory(prefix="yuiju-sim-") as tmp:
        clock = SimClock(begin)
        runtime = await build_runtime(
            simulation_config(cfg, seed=seed, data_dir=data_dir, tmp=Path(tmp)),
            clock=clock,
            policy=policy,
            chat_model=chat_model,
            keep_timeline=True,
            tick_minutes=tick_minutes,
            # the LLM prompt reads recent episodes from history: flush at once then
            flush_every=1 if policy == "llm" else 200,
        )
        await _queue_commands(runtime, commands)
        runtime.engine.on_step = _on_step(clock, runtime.stats, begin, days, replayed, progress)
        wall = time.perf_counter()
        try:
            await runtime.engine.run(until=end)
        finally:
            wall = time.perf_counter() - wall
            if progress:
                sys.stderr.write("\n")
            final = {cid: await runtime.store.load_character(cid) for cid in runtime.cards}
            episodes = await runtime.history.count("episodes")
            talks = await _meetings(runtime, begin, end)
            await runtime.close()
    report = build_report(
        days=days,
        seed=seed,
        policy=policy,
        begin=begin,
        wall=wall,
        stats=runtime.stats,
        llm=runtime.llm_policy,
        episodes=episodes,
        final={k: v.stats() if v else None for k, v in final.items()},
        actions=[a.id for a in runtime.catalogue],
    )
    _add_social(report, social_report(talks, final, days=days, end=end))
    report["llm"] = llm_report(runtime, days)
    if replayed is not None:
        report["llm"]["replayed"] = {"requests": replayed.replayed, "unused": replayed.unused}
    return report


def replayed_config(cfg: YuijuConfig, replayed: ReplayChatModel) -> YuijuConfig:
    """The config with the ``[llm]`` settings the cassette was recorded with."""
    return cfg.model_copy(
        update={
            "llm": cfg.llm.model_validate(
                # a cassette from before [llm].decision_schema was recorded with the moment's
                {
                    **cfg.llm.model_dump(),
                    "decision_schema": "moment",
                    **replayed.meta.get("llm", {}),
                }
            )
        }
    )


def simulation_config(
    cfg: YuijuConfig, *, seed: int, data_dir: Path | None, tmp: Path
) -> YuijuConfig:
    """The config of the run: its seed, and stores under ``data_dir`` or fresh embedded ones
    under ``tmp``."""
    overrides: dict[str, Any] = {"world": {**cfg.world.model_dump(mode="json"), "seed": seed}}
    if data_dir is None:
        overrides |= {
            "app": {**cfg.app.model_dump(mode="json"), "data_dir": str(tmp)},
            "redis": {"url": None, "prefix": cfg.redis.prefix},
            "mongo": {"url": None, "database": cfg.mongo.database},
        }
    else:
        overrides["app"] = {**cfg.app.model_dump(mode="json"), "data_dir": str(data_dir)}
    return cfg.model_copy(
        update={k: type(getattr(cfg, k)).model_validate(v) for k, v in overrides.items()}
    )


async def _queue_commands(runtime: Runtime, commands: Sequence[dict[str, Any]]) -> None:
    if commands:  # they name characters: create them first, as their first step would
        for town in runtime.engine.towns:
            for loop in town.loops:
                await loop.ensure_character()
    for command in commands:
        await enqueue_command(runtime.redis.client, runtime.keys, command)


def _on_step(
    clock: SimClock,
    stats: LoopStats,
    begin: datetime,
    days: int,
    replayed: ReplayChatModel | None,
    progress: bool,
) -> Callable[[], None]:
    """After each engine pass: stop a replay that diverged, and show the progress."""
    last_shown = [0.0]

    def on_step() -> None:
        if replayed is not None and replayed.diverged is not None:
            raise replayed.diverged  # the policy's fallback would hide it: stop the run here
        if progress:
            done = (clock.now() - begin).total_seconds() / 86400
            if done - last_shown[0] >= 1 or done >= days:
                last_shown[0] = done
                _progress(min(done, days), days, stats.decisions)

    return on_step


async def _meetings(runtime: Runtime, begin: datetime, end: datetime) -> dict[str, list[Episode]]:
    """Each character's conversation episodes of meetings, from the history store."""
    return {
        cid: [
            e
            for e in await runtime.episodes.between(
                cid, begin, end + timedelta(days=1), type_="conversation"
            )
            if _is_meeting(e)
        ]
        for cid in runtime.cards
    }


def _is_meeting(e: Episode) -> bool:
    """A conversation episode of a meeting; one whose record does not fit (warned) counts by its
    id, so the report still counts it."""
    d = e.conversation()
    return d.meeting_id is not None if d is not None else e.id.startswith(MEETING_PREFIX)


def _meeting_records(
    talks: Mapping[str, Sequence[Episode]],
) -> tuple[dict[str, list[tuple[Episode, ConversationData, str]]], int]:
    """Each character's meetings as (episode, record, meeting id), and how many episodes were
    left out because their record does not fit (warned, `Episode.record`)."""
    out: dict[str, list[tuple[Episode, ConversationData, str]]] = {}
    unreadable = 0
    for cid, episodes in talks.items():
        out[cid] = []
        for e in episodes:
            d = e.conversation()
            if d is None or d.meeting_id is None:
                unreadable += 1
                continue
            out[cid].append((e, d, d.meeting_id))
    return out, unreadable


def _invitation(e: Episode, d: ConversationData) -> Appointment | None:
    """The invitation made at a meeting, if any; one that does not fit `Appointment` is left out
    of the report with a warning."""
    if not d.invitation:
        return None
    try:
        return Appointment.model_validate(d.invitation)
    except ValidationError as exc:
        log.warning(
            "episode %s: data.invitation does not fit Appointment (%s); left out of the report's "
            "invitations. Fix: correct or delete that field of the episode's document",
            e.id,
            exc.errors()[0]["loc"],
        )
        return None


def _add_social(report: dict[str, Any], social: dict[str, Any]) -> None:
    report["social"] = social
    report["invariant_violations"] += [
        f"{name}: {c['evidence']}" for name, c in social["checks"].items() if not c["ok"]
    ]
    for cid, n in social["meetings"].items():
        report["by_character"][cid]["meetings"] = n


REPLAYED_LLM_SETTINGS = (
    "output_mode",
    "decision_schema",
    "temperature",
    "max_attempts",
    "breaker_failures",
    "breaker_cooldown_seconds",
    "breaker_max_cooldown_seconds",
    "daily_token_budget",
)
"""``[llm]`` settings that shape the requests or the decisions; a cassette keeps them (with every
``max_tokens_*``) and a replay uses them, whatever the config says now."""


def recorded_llm_settings(cfg: YuijuConfig) -> dict[str, Any]:
    # The output mode as used: "auto" depends on base_url, which a replay need not have.
    llm = {
        **cfg.llm.model_dump(mode="json"),
        "output_mode": cfg.llm.resolved_output_mode,
        "decision_schema": cfg.llm.resolved_decision_schema,
    }
    return {
        k: v for k, v in llm.items() if k in REPLAYED_LLM_SETTINGS or k.startswith("max_tokens_")
    }


def llm_report(runtime: Any, days: int) -> dict[str, Any]:
    """LLM usage of the run: by purpose, per simulated day, calls per decision, first-attempt
    acceptance of decisions, and what the circuit breaker did."""
    by_purpose: dict[str, Usage] = runtime.usage.by_purpose
    policy = runtime.llm_policy
    decisions = runtime.stats.decisions
    decide = by_purpose.get("decide", Usage())
    breaker = runtime.llm_model.inner if runtime.llm_model is not None else None
    return {
        "by_purpose": {p: vars(u) for p, u in sorted(by_purpose.items())},
        "per_simulated_day": {
            p: {k: round(v / days, 1) for k, v in vars(u).items()}
            for p, u in sorted(by_purpose.items())
        },
        "calls_per_decision": round(decide.calls / decisions, 3) if decisions else 0.0,
        "first_attempt_acceptance": round(policy.first_attempt_ok / policy.decisions, 4)
        if policy is not None and policy.decisions
        else None,
        "breaker": {"opened": breaker.opened, "rejected": breaker.rejected}
        if isinstance(breaker, CircuitBreaker)
        else None,
    }


def build_report(
    *,
    days: int,
    seed: int,
    policy: str,
    begin: datetime,
    wall: float,
    stats: Any,
    llm: Any,
    episodes: int,
    final: dict[str, Any],
    actions: Collection[str] = (),
) -> dict[str, Any]:
    """The report; ``per_day``/``checks`` describe the first character, ``by_character`` each one.
    ``offered`` lists every decision's candidates, ``never_offered`` which of ``actions`` (the
    ids of the run's catalogue) no decision offered."""
    characters = list(final)
    by_character = {
        cid: _life_of(
            [r for r in stats.timeline if r.get("character", cid) == cid], begin, days, stats
        )
        for cid in characters
    }
    first = by_character[characters[0]] if characters else _life_of([], begin, days, stats)
    violations = [
        f"{cid}: {v}" if len(characters) > 1 else v
        for cid, life in by_character.items()
        for v in life["violations"]
    ]
    overhead = stats.decision_overhead_ms
    offered_histogram = Counter(a for d in stats.offered for a in d["candidates"])
    return {
        "days": days,
        "seed": seed,
        "policy": policy,
        "start": begin.isoformat(),
        "characters": characters,
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
        # decisions, not attempts: one the model got wrong three times is one invalid decision
        "invalid_decisions": (llm.invalid if llm else 0) + stats.invalid_decisions,
        "invalid_answers": llm.invalid_answers if llm else 0,
        "fallbacks": stats.fallbacks,
        "invariant_violations": violations,
        "checks": first["checks"],
        "final_state": final,
        "action_histogram": first["histogram"],
        "per_day": first["per_day"],
        "by_character": {
            cid: {"checks": life["checks"], "action_histogram": life["histogram"]}
            for cid, life in by_character.items()
        },
        "timeline": stats.timeline,
        "offered": stats.offered,
        "offered_histogram": dict(
            sorted(offered_histogram.items(), key=lambda kv: (-kv[1], kv[0]))
        ),
        "never_offered": sorted(set(actions) - set(offered_histogram)),
    }


def _life_of(
    timeline: list[dict[str, Any]], begin: datetime, days: int, stats: Any
) -> dict[str, Any]:
    """Per-day stats, checks and histogram of one character's timeline."""
    histogram = Counter(r["id"] for r in timeline)
    per_day: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"actions": 0, "meals": 0, "school_minutes": 0}
    )
    violations: list[str] = []
    from yuiju.world.loader import load_actions

    meal_ids = {a.id for a in load_actions() if "meal" in a.tags}
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
    checks = life_checks(timeline, per_day, begin, days, stats)
    violations += [f"{name}: {c['evidence']}" for name, c in checks.items() if not c["ok"]]
    return {
        "per_day": dict(sorted(per_day.items())),
        "checks": checks,
        "violations": violations,
        "histogram": dict(sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def life_checks(
    timeline: list[dict[str, Any]],
    per_day: dict[str, dict[str, Any]],
    begin: datetime,
    days: int,
    stats: Any,
) -> dict[str, dict[str, Any]]:
    """The checks of a life that never gets stuck, each with its evidence."""
    tz = begin.tzinfo
    first, last = begin.date(), (begin + timedelta(days=days)).date()
    full_days = [
        first + timedelta(days=i) for i in range(1, days)
    ]  # the first day starts mid-morning

    def local(iso: str) -> datetime:
        return datetime.fromisoformat(iso).astimezone(tz)

    sleeps = [local(r["start"]) for r in timeline if r["id"] == "sleep"]
    wakes = [local(r["start"]) for r in timeline if r["id"] == "wake_up"]
    late_nights = []
    for day in full_days[:-1]:
        night_start = datetime.combine(day, datetime.min.time(), tzinfo=tz) + timedelta(hours=12)
        deadline = night_start + timedelta(hours=14)  # 02:00 the next morning
        if not any(night_start <= t <= deadline for t in sleeps):
            late_nights.append(day.isoformat())
    late_mornings = []
    for day in full_days:
        if not any(t.date() == day and (t.hour, t.minute) <= (9, 0) for t in wakes):
            late_mornings.append(day.isoformat())
    few_meals = [d for d in full_days if per_day.get(d.isoformat(), {}).get("meals", 0) < 2]
    missed_school = [
        d
        for d in full_days
        if is_school_day(d) and per_day.get(d.isoformat(), {}).get("school_minutes", 0) < 240
    ]
    windows = []
    for start in range(0, max(1, days - 29)):
        lo = datetime.combine(first + timedelta(days=start), datetime.min.time(), tzinfo=tz)
        hi = lo + timedelta(days=30)
        distinct = {r["id"] for r in timeline if lo <= local(r["start"]) < hi}
        windows.append(len(distinct))
    min_distinct = min(windows) if windows else 0
    span = f"{first} – {last}"

    def check(ok: bool, evidence: str) -> dict[str, Any]:
        return {"ok": ok, "evidence": evidence}

    return {
        "asleep_by_0200": check(
            not late_nights,
            f"nights without sleep by 02:00: {late_nights or 'none'} ({len(sleeps)} sleeps, {span})",
        ),
        "up_by_0900": check(
            not late_mornings,
            f"mornings without waking by 09:00: {late_mornings or 'none'} (latest wake {max((t.strftime('%H:%M') for t in wakes), default='-')})",
        ),
        "two_meals_a_day": check(
            not few_meals,
            f"days with fewer than 2 meals: {[d.isoformat() for d in few_meals] or 'none'}",
        ),
        "school_every_school_day": check(
            not missed_school,
            f"school days with under 4 h of class: {[d.isoformat() for d in missed_school] or 'none'}",
        ),
        "candidates_every_decision": check(
            stats.no_candidates == 0,
            f"{stats.decisions} decisions, {stats.no_candidates} without a candidate",
        ),
        "no_action_without_precondition": check(
            stats.non_candidate_refused == 0,
            f"every executor ran only after its precondition was re-checked on the fresh state in the same "
            f"transaction: {stats.stale_starts} start(s) refused because the state had changed; "
            f"{stats.non_candidate_refused} decision(s) for an action that was not offered (refused, must be 0)",
        ),
        "distinct_actions_per_30_days": check(
            min_distinct >= 25 or days < 30,
            f"fewest distinct actions in any 30-day window: {min_distinct}",
        ),
    }


TIMING_FIELDS = ("wall_seconds", "decisions_per_second", "engine_overhead_ms")


def social_checks(talks: Mapping[str, Sequence[Episode]]) -> dict[str, dict[str, Any]]:
    """The social invariants, from the conversation episodes the history store holds: nobody
    is in two conversations at once, and every meeting is recorded on both sides."""
    overlaps = []
    meetings, unreadable = _meeting_records(talks)
    for cid, found in meetings.items():
        spans = sorted((e.time, e.end_time or e.time, mid) for e, _, mid in found)
        for (_, end, a), (start, _, b) in itertools.pairwise(spans):
            if start < end:
                overlaps.append(
                    f"{cid}: {a} until {end.isoformat()} and {b} from {start.isoformat()}"
                )
    sides: dict[str, set[str]] = defaultdict(set)
    participants: dict[str, set[str]] = {}
    for cid, found in meetings.items():
        for _, d, mid in found:
            sides[mid].add(cid)
            participants[mid] = set(d.participants or ())
    one_sided = sorted(
        f"{m} ({'、'.join(sorted(sides[m]))} of {'、'.join(sorted(p))})"
        for m, p in participants.items()
        if sides[m] != p
    )
    total = sum(len(e) for e in talks.values())
    return {
        "no_overlapping_conversations": {
            "ok": not overlaps,
            "evidence": f"{total} conversation episodes"
            + (f" ({unreadable} unreadable, left out: see the log)" if unreadable else "")
            + f"; overlapping: {overlaps or 'none'}",
        },
        "both_sides_recorded": {
            "ok": not one_sided,
            "evidence": f"{len(participants)} meetings, each must have a conversation episode on "
            f"every participant's side; recorded on one side only: {one_sided or 'none'}",
        },
    }


def social_report(
    talks: Mapping[str, Sequence[Episode]],
    final: Mapping[str, CharacterState | None],
    *,
    days: int,
    end: datetime,
) -> dict[str, Any]:
    """Meetings per character, the social checks, invitations made and kept, how far each piece
    of news travelled (who had it from whom, when), closeness at the end, who wrote the words."""
    meetings = {cid: len(talks.get(cid, ())) for cid in final}
    invitations: dict[str, tuple[datetime, bool]] = {}
    kept: set[str] = set()
    sources: Counter[str] = Counter()
    model_talks: Counter[tuple[str, str]] = Counter()
    for found in _meeting_records(talks)[0].values():
        for e, d, _ in found:
            if d.initiator == e.character_id:
                sources[str(d.source)] += 1
                if d.source == "model":
                    model_talks[
                        (e.character_id, e.time.astimezone(end.tzinfo).date().isoformat())
                    ] += 1
            if d.initiator == e.character_id and (proposal := _invitation(e, d)) is not None:
                invitations[proposal.id] = (proposal.start, d.declined is None)
            if d.kept_appointment:
                kept.add(d.kept_appointment)
    accepted = {k for k, (_, ok) in invitations.items() if ok}
    due = {k for k in accepted if invitations[k][0] + timedelta(hours=1) <= end}
    news: dict[str, dict[str, Any]] = {}
    for cid, state in final.items():
        for item in state.social.news if state else ():
            entry = news.setdefault(
                item.id, {"id": item.id, "text": item.text, "origin": item.origin.name, "path": []}
            )
            entry["path"].append(
                {
                    "to": cid,
                    "from": item.source.name,
                    "at": item.learned_at.isoformat(),
                    "hops": item.hops,
                }
            )
    for entry in news.values():
        entry["path"].sort(key=lambda p: (p["at"], p["hops"]))
        entry["reached"] = [p["to"] for p in entry["path"]]
    return {
        "meetings": meetings,
        "meetings_per_day": {cid: round(n / days, 2) for cid, n in meetings.items()},
        "checks": social_checks(talks),
        "invitations": {
            "made": len(invitations),
            "accepted": len(accepted),
            "due": len(due),
            "kept": len(due & kept),
            "kept_share": round(len(due & kept) / len(due), 3) if due else None,
        },
        "news": sorted(news.values(), key=lambda n: n["path"][0]["at"]),
        "relations": {
            cid: {
                r.party.id: round(r.closeness_at(end), 1) for r in state.social.relations.values()
            }
            for cid, state in final.items()
            if state is not None
        },
        "conversations_by_source": dict(sorted(sources.items())),
        # bounded by [social] model_talks_per_day: the most one character started in one day
        "model_talks_most_in_a_day": max(model_talks.values(), default=0),
    }
