"""A life that never gets stuck: 60 simulated days for three seeds, and the colour of her days.

The only slow file of the suite (three 60-day simulations, computed once for the module).
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from datetime import date, datetime, timedelta
from typing import Any

import pytest
import redis.asyncio as aioredis

from tests.conftest import make_ctx, make_engine
from yuiju.config import load_config
from yuiju.storage.history import HistoryStore
from yuiju.world.action import NEGATIVE_EVENTS, POSITIVE_EVENTS, random_event
from yuiju.world.clock import is_school_day
from yuiju.world.loader import load_actions
from yuiju.world.policies.scripted import ScriptedPolicy
from yuiju.world.policy import DecisionRequest
from yuiju.world.simulate import simulate
from yuiju.world.state import Weather

SEEDS = (1, 2, 3)
DAYS = 60
CHECKS = {
    "asleep_by_0200",
    "up_by_0900",
    "two_meals_a_day",
    "school_every_school_day",
    "candidates_every_decision",
    "no_action_without_precondition",
    "distinct_actions_per_30_days",
}
CATALOGUE = load_actions()


@pytest.fixture(scope="module")
async def lives(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, Any]]:
    """The reports of 60 days with the utility policy for each seed (computed once)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path_factory.mktemp("life"))  # no stray yuiju.toml from the working dir
        cfg = load_config(environ={})
        return {s: await simulate(cfg, days=DAYS, seed=s, progress=False) for s in SEEDS}


def local(iso: str, tz: Any) -> datetime:
    return datetime.fromisoformat(iso).astimezone(tz)


@pytest.mark.parametrize("seed", SEEDS)
async def test_every_life_check_holds_with_its_evidence(
    lives: dict[int, dict[str, Any]], seed: int
) -> None:
    checks = lives[seed]["checks"]
    assert set(checks) >= CHECKS
    failed = {name: c["evidence"] for name, c in checks.items() if not c["ok"]}
    assert not failed, f"seed {seed}: " + "; ".join(f"{k}: {v}" for k, v in failed.items())
    assert all(c["evidence"] for c in checks.values())


@pytest.mark.parametrize("seed", SEEDS)
async def test_no_invariant_is_violated(lives: dict[int, dict[str, Any]], seed: int) -> None:
    report = lives[seed]
    assert report["invariant_violations"] == [], report["invariant_violations"][:10]
    assert report["fallbacks"] == 0 and report["decisions"] > 20 * DAYS


@pytest.mark.parametrize("seed", SEEDS)
async def test_at_least_25_distinct_actions_in_every_30_days(
    lives: dict[int, dict[str, Any]], seed: int
) -> None:
    report = lives[seed]
    tz = datetime.fromisoformat(report["start"]).tzinfo
    first = datetime.fromisoformat(report["start"]).date()
    by_day: dict[date, set[str]] = defaultdict(set)
    for r in report["timeline"]:
        by_day[local(r["start"], tz).date()].add(r["id"])
    for offset in range(DAYS - 29):
        window = [first + timedelta(days=offset + d) for d in range(30)]
        distinct = set().union(*(by_day[d] for d in window))
        assert len(distinct) >= 25, (seed, window[0], sorted(distinct))


@pytest.mark.parametrize("seed", SEEDS)
async def test_money_is_never_negative_and_stats_stay_within_bounds(
    lives: dict[int, dict[str, Any]], seed: int
) -> None:
    timeline = lives[seed]["timeline"]
    assert len(timeline) > 20 * DAYS
    for r in timeline:
        for snapshot in (r["before"], r["after"]):
            assert snapshot["money"] >= 0, r
            for stat in ("stamina", "satiety", "mood"):
                assert 0 <= snapshot[stat] <= 100, (stat, r)


@pytest.mark.parametrize("seed", SEEDS)
async def test_she_goes_to_school_on_school_days_eats_twice_and_sleeps_by_two_every_day(
    lives: dict[int, dict[str, Any]], seed: int
) -> None:
    """Recomputed from the timeline, independently of the report's own checks."""
    report = lives[seed]
    tz = datetime.fromisoformat(report["start"]).tzinfo
    first = datetime.fromisoformat(report["start"]).date()
    meals = {a.id for a in CATALOGUE if "meal" in a.tags}
    per_day: dict[date, list[str]] = defaultdict(list)
    for r in report["timeline"]:
        per_day[local(r["start"], tz).date()].append(r["id"])
    sleeps = [local(r["start"], tz) for r in report["timeline"] if r["id"] == "sleep"]
    for n in range(1, DAYS):
        day = first + timedelta(days=n)
        done = per_day[day]
        assert sum(a in meals for a in done) >= 2, (day, done)
        assert ("attend_class" in done) == is_school_day(day), (day, done)
        assert "wake_up" in done, (day, done)
        if (
            n < DAYS - 1
        ):  # the timeline holds completions: the last night's sleep ends after the run
            night = datetime.combine(day, datetime.min.time(), tzinfo=tz) + timedelta(hours=12)
            assert any(night <= t <= night + timedelta(hours=14) for t in sleeps), (
                f"no sleep by 02:00 after {day}"
            )


async def test_different_seeds_live_different_lives(lives: dict[int, dict[str, Any]]) -> None:
    histograms = [lives[s]["action_histogram"] for s in SEEDS]
    assert histograms[0] != histograms[1] != histograms[2]


# -- colour: random events and morning mood ----------------------------------------------------

EVENT = re.compile(r"^(?P<text>.+)（心情(?P<delta>[+-]\d+)）$")


def test_random_events_change_mood_within_bounds_and_are_noted() -> None:
    seen = set()
    for seed in range(500):
        ctx = make_ctx(seed=seed, mood=50)
        note = random_event(ctx, chance=1.0)
        assert note is not None and ctx.notes == [note]
        match = EVENT.match(note)
        assert match, note
        delta = int(match["delta"])
        assert -6 <= delta <= 4 and delta != 0
        assert match["text"] in (POSITIVE_EVENTS if delta > 0 else NEGATIVE_EVENTS)
        assert ctx.character.mood == 50 + delta
        seen.add(delta)
    assert min(seen) == -6 and max(seen) == 4  # both ends are reached


def test_random_events_happen_about_as_often_as_asked_and_are_seeded() -> None:
    hits = sum(random_event(make_ctx(seed=seed), chance=0.2) is not None for seed in range(2000))
    assert 300 <= hits <= 500
    assert random_event(make_ctx(seed=11), chance=1.0) == random_event(
        make_ctx(seed=11), chance=1.0
    )
    quiet = make_ctx(seed=3, mood=50)
    assert (
        random_event(quiet, chance=0.0) is None and quiet.notes == [] and quiet.character.mood == 50
    )


@pytest.mark.parametrize("mood", [0, 2, 98, 100])
def test_a_random_event_never_pushes_mood_out_of_bounds(mood: float) -> None:
    for seed in range(200):
        ctx = make_ctx(seed=seed, mood=mood)
        random_event(ctx, chance=1.0)
        assert 0 <= ctx.character.mood <= 100


async def test_random_events_appear_in_completed_episodes_notes(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    def walker(request: DecisionRequest) -> str:
        """Walk in the park whenever she can (walks roll a random event 20% of the time)."""
        names = [a.name for a in request.candidates]
        for wanted in ("在公园散步", "从家去南风公园", "起床", "从南风公园回家", "睡觉"):
            if wanted in names:
                return wanted
        return names[0]

    kit = await make_engine(
        redis, sqlite_history, policy=ScriptedPolicy(walker), start="2026-09-05 06:00", seed=5
    )
    await kit.engine.run(until=datetime.fromisoformat("2026-09-07T06:00:00+08:00"))
    await kit.engine.flush_outbox(force=True)

    completed = await sqlite_history.find(
        "episodes", eq={"type": "behavior", "status": "completed"}
    )
    noted = [e for e in completed if e["data"]["notes"]]
    events = [(e, n) for e in noted for n in e["data"]["notes"] if EVENT.match(n)]
    assert events, f"no random event in {len(completed)} completed episodes"
    assert len(events) < len(completed) / 3  # some completions, not most
    for episode, note in events:
        delta = int(EVENT.match(note)["delta"])  # type: ignore[index]
        assert -6 <= delta <= 4
        assert 0 <= episode["data"]["stats_after"]["mood"] <= 100


def wake_mood(
    weather: str | None, temperature: str = "舒适", when: str = "2026-09-01 06:40", mood: float = 55
) -> tuple[float, str]:
    ctx = make_ctx(when, asleep=True, mood=mood)
    if weather is None:
        ctx.world.weather = None
    else:
        ctx.world.weather = Weather(
            type=weather,
            temperature=temperature,  # type: ignore[arg-type]
            period_start=ctx.now.replace(hour=6, minute=0),
        )
    wake = CATALOGUE.actions["wake_up"]
    assert wake.available(ctx)
    summary = wake.run(ctx)  # type: ignore[misc]
    assert ctx.character.asleep is False
    return ctx.character.mood, summary or ""


# A school-day (Tuesday) morning at a comfortable temperature, waking from a neutral mood of 55.
MORNINGS = [
    ("晴", 64),
    ("雪", 62),
    ("多云", 61),
    ("小雨", 59),
    ("雾", 58),
    ("阴", 57),
    ("雨", 55),
    ("雷雨", 51),
]


@pytest.mark.parametrize(("weather", "mood"), MORNINGS)
def test_morning_mood_depends_on_the_weather(weather: str, mood: float) -> None:
    got, summary = wake_mood(weather)
    assert got == pytest.approx(mood)
    assert f"外面{weather}" in summary


def test_a_sunny_morning_beats_a_stormy_one_and_the_weekend_and_temperature_count_too() -> None:
    moods = [wake_mood(w)[0] for w, _ in MORNINGS]
    assert moods == sorted(moods, reverse=True)
    assert wake_mood("晴", when="2026-09-05 07:30")[0] > wake_mood("晴")[0]  # Saturday
    assert wake_mood("晴", "严寒")[0] < wake_mood("晴", "舒适")[0]
    assert wake_mood("晴", "炎热")[0] < wake_mood("晴", "舒适")[0]
    assert wake_mood(None)[0] == pytest.approx(55)  # no weather yet: a neutral school-day morning
    assert wake_mood(None, when="2026-09-05 07:30")[0] == pytest.approx(58)
    for start in (0, 100):
        for weather, _ in MORNINGS:
            assert 0 <= wake_mood(weather, "严寒", mood=start)[0] <= 100


def test_yesterdays_mood_carries_over_a_little() -> None:
    low, high = wake_mood("多云", mood=10)[0], wake_mood("多云", mood=95)[0]
    assert low < wake_mood("多云")[0] < high
    assert high - low == pytest.approx((95 - 10) * 0.3)


def test_a_seeded_rng_for_random_events_is_the_contexts() -> None:
    ctx = make_ctx(seed=42)
    ctx.rng = random.Random(42)
    first = random_event(ctx, chance=1.0)
    ctx2 = make_ctx(seed=0)
    ctx2.rng = random.Random(42)
    assert random_event(ctx2, chance=1.0) == first
