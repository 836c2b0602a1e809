"""Built-in evolutions: calendar, weather, opening hours, daily resources, needs."""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest

from tests.conftest import at_time, make_character
from yuiju.memory.event_data import PlaceChange
from yuiju.world.clock import season_of, weather_period_start
from yuiju.world.evolutions import (
    ASLEEP_RATES,
    AWAKE_RATES,
    TickContext,
    advance_calendar,
    drift_needs,
    refresh_daily_resources,
    update_opening_hours,
    update_weather,
)
from yuiju.world.randomness import Randomness
from yuiju.world.state import CharacterState, Weather, WorldState
from yuiju.world.town import HAURA


def tick(
    world: WorldState,
    to: datetime,
    *,
    seed: int = 0,
    characters: dict[str, CharacterState] | None = None,
    evolutions: tuple[Any, ...] = (),
) -> TickContext:
    """Run ``evolutions`` from the world's last advance to ``to``, like the ticker does."""
    ctx = TickContext(
        from_time=world.last_advanced_at,
        to_time=to,
        world=world,
        characters=characters or {},
        town=HAURA,
        randomness=Randomness.seeded(seed),
    )
    for evolution in evolutions:
        evolution(ctx)
    world.last_advanced_at = to
    return ctx


def fresh_world(now: datetime) -> WorldState:
    return WorldState(time=now, last_advanced_at=now)


def weather_series(start: datetime, periods: int, seed: int) -> list[Weather]:
    world = fresh_world(start)
    out = []
    for n in range(periods):
        tick(world, start + timedelta(hours=6 * n), seed=seed, evolutions=(update_weather,))
        assert world.weather is not None
        out.append(world.weather)
    return out


# -- calendar ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "weekday", "period", "school_day", "holiday", "season"),
    [
        ("2026-09-01 07:00", "星期二", "清晨", True, None, "秋"),
        ("2026-09-05 12:00", "星期六", "中午", False, None, "秋"),
        ("2026-10-01 20:00", "星期四", "晚上", False, "国庆假期", "秋"),
        ("2026-12-24 23:30", "星期四", "深夜", True, None, "冬"),
        ("2026-05-01 15:00", "星期五", "下午", False, "劳动节假期", "春"),
    ],
)
def test_calendar_sets_weekday_period_and_school_day(
    now: str, weekday: str, period: str, school_day: bool, holiday: str | None, season: str
) -> None:
    world = fresh_world(at_time(now))

    tick(world, at_time(now), evolutions=(advance_calendar,))

    calendar = world.calendar
    assert calendar is not None
    assert (
        calendar.weekday,
        calendar.period,
        calendar.school_day,
        calendar.holiday,
        calendar.season,
    ) == (
        weekday,
        period,
        school_day,
        holiday,
        season,
    )
    assert calendar.date == at_time(now).date()
    assert world.time == at_time(now)


def test_calendar_emits_new_day_only_when_the_date_changes() -> None:
    world = fresh_world(at_time("2026-09-01 22:00"))
    first = tick(world, at_time("2026-09-01 22:00"), evolutions=(advance_calendar,))
    same_day = tick(world, at_time("2026-09-01 23:59"), evolutions=(advance_calendar,))
    next_day = tick(world, at_time("2026-09-02 00:00"), evolutions=(advance_calendar,))

    assert [e.type for e in first.events] == []  # no previous calendar: not a "new" day
    assert [e.type for e in same_day.events] == []
    assert [(e.type, e.data.dump()) for e in next_day.events] == [
        ("new_day", {"date": "2026-09-02", "weekday": "星期三"})
    ]


# -- weather ----------------------------------------------------------------------------------


def test_same_seed_and_time_give_the_same_weather() -> None:
    start = at_time("2026-04-01 00:00")
    assert weather_series(start, 40, seed=3) == weather_series(start, 40, seed=3)


def test_a_different_seed_gives_different_weather_over_a_month() -> None:
    start = at_time("2026-04-01 00:00")
    one = [(w.type, w.temperature) for w in weather_series(start, 4 * 30, seed=1)]
    two = [(w.type, w.temperature) for w in weather_series(start, 4 * 30, seed=2)]
    assert one != two


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_no_snow_outside_winter_and_no_thunderstorm_in_winter_over_a_year(seed: int) -> None:
    series = weather_series(at_time("2026-01-01 00:00"), 4 * 365, seed=seed)

    by_season = {
        s: Counter(w.type for w in series if season_of(w.period_start.date()) == s)
        for s in ("春", "夏", "秋", "冬")
    }
    assert by_season["冬"]["雷雨"] == 0
    assert all(by_season[s]["雪"] == 0 for s in ("春", "夏", "秋"))
    assert by_season["冬"]["雪"] > 0 and by_season["夏"]["雷雨"] > 0  # both do happen
    assert all(w.temperature in ("严寒", "寒冷") for w in series if w.type == "雪")


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_weather_tends_to_persist_more_than_independent_draws_would(seed: int) -> None:
    series = [w.type for w in weather_series(at_time("2026-01-01 00:00"), 4 * 365, seed=seed)]
    pairs = list(pairwise(series))
    same = sum(a == b for a, b in pairs) / len(pairs)
    counts = Counter(series)
    base_rate = sum((n / len(series)) ** 2 for n in counts.values())  # if draws were independent

    assert same > base_rate + 0.1


def test_weather_periods_are_chained_and_aligned_to_six_hours() -> None:
    series = weather_series(at_time("2026-06-01 00:00"), 12, seed=0)
    assert [w.period_start for w in series] == [
        at_time("2026-06-01 00:00") + timedelta(hours=6 * n) for n in range(12)
    ]


def test_weather_changes_only_when_a_new_period_starts() -> None:
    world = fresh_world(at_time("2026-06-01 06:00"))
    tick(world, at_time("2026-06-01 06:00"), evolutions=(update_weather,))
    first = world.weather

    later = tick(world, at_time("2026-06-01 11:59"), evolutions=(update_weather,))

    assert world.weather == first
    assert later.events == []


def test_weather_catches_up_after_three_days_of_downtime_in_one_tick() -> None:
    world = fresh_world(at_time("2026-11-01 08:00"))
    tick(world, at_time("2026-11-01 08:00"), seed=5, evolutions=(update_weather,))

    back = at_time("2026-11-04 15:20")
    ctx = tick(world, back, seed=5, evolutions=(update_weather,))

    assert world.weather is not None
    assert world.weather.period_start == weather_period_start(back) == at_time("2026-11-04 12:00")
    assert len([e for e in ctx.events if e.type == "weather_changed"]) <= 1


# -- opening hours ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("place", "timeline"),
    [
        ("cafe", [("09:59", False), ("10:00", True), ("19:59", True), ("20:00", False)]),
        ("school", [("06:59", False), ("07:00", True), ("17:59", True), ("18:00", False)]),
        ("shop", [("08:59", False), ("09:00", True), ("20:59", True), ("21:00", False)]),
        ("home", [("00:00", True), ("12:00", True), ("23:59", True)]),
        ("park", [("03:00", True), ("23:00", True)]),
    ],
)
def test_places_open_and_close_at_their_boundary_minutes(
    place: str, timeline: list[tuple[str, bool]]
) -> None:
    world = fresh_world(at_time("2026-09-01 00:00"))
    for clock, is_open in timeline:
        tick(world, at_time(f"2026-09-01 {clock}"), evolutions=(update_opening_hours,))
        assert world.places[place].open is is_open, f"{place} at {clock}"


def test_changed_at_moves_only_when_the_cafe_flips() -> None:
    world = fresh_world(at_time("2026-09-01 09:58"))
    seen = []
    for clock in ("09:58", "09:59", "10:00", "10:01", "19:59", "20:00", "20:01"):
        ctx = tick(world, at_time(f"2026-09-01 {clock}"), evolutions=(update_opening_hours,))
        cafe = world.places["cafe"]
        flips = [
            e.type for e in ctx.events if isinstance(e.data, PlaceChange) and e.data.place == "cafe"
        ]
        seen.append((clock, cafe.open, cafe.changed_at, flips))

    t = at_time
    assert seen == [
        ("09:58", False, t("2026-09-01 09:58"), ["place_closed"]),
        ("09:59", False, t("2026-09-01 09:58"), []),
        ("10:00", True, t("2026-09-01 10:00"), ["place_opened"]),
        ("10:01", True, t("2026-09-01 10:00"), []),
        ("19:59", True, t("2026-09-01 10:00"), []),
        ("20:00", False, t("2026-09-01 20:00"), ["place_closed"]),
        ("20:01", False, t("2026-09-01 20:00"), []),
    ]


# -- daily resources --------------------------------------------------------------------------


def test_daily_resources_refresh_once_per_day() -> None:
    world = fresh_world(at_time("2026-09-01 06:00"))
    tick(world, at_time("2026-09-01 06:00"), evolutions=(refresh_daily_resources,))
    park = world.places["park"]
    assert park.refreshed_on == date(2026, 9, 1)

    park.resources = {}  # she picked everything
    tick(world, at_time("2026-09-01 18:00"), evolutions=(refresh_daily_resources,))
    assert world.places["park"].resources == {}

    for day in range(2, 20):  # some morning brings fruit again
        tick(world, at_time(f"2026-09-{day:02d} 06:00"), evolutions=(refresh_daily_resources,))
        assert world.places["park"].refreshed_on == date(2026, 9, day)
    assert "home" not in world.places  # only places with resources are touched


@pytest.mark.parametrize("seed", [0, 42])
def test_daily_resources_are_deterministic_and_within_bounds(seed: int) -> None:
    def month(seed: int) -> list[dict[str, dict[str, int]]]:
        world = fresh_world(at_time("2026-09-01 00:00"))
        out = []
        for day in range(1, 31):
            tick(
                world,
                at_time(f"2026-09-{day:02d} 05:00"),
                seed=seed,
                evolutions=(refresh_daily_resources,),
            )
            out.append({p: dict(s.resources) for p, s in world.places.items()})
        return out

    first = month(seed)
    assert first == month(seed)
    for day in first:
        for place_id, resources in day.items():
            place = HAURA.places[place_id]
            low, high = place.daily_resource_total
            assert low <= sum(resources.values()) <= high
            assert set(resources) <= set(place.resources)
    assert first != month(seed + 1)


# -- needs ------------------------------------------------------------------------------------


@pytest.mark.parametrize("asleep", [False, True])
def test_needs_drift_at_the_awake_or_asleep_rate(asleep: bool) -> None:
    her = make_character(stamina=50, satiety=50, mood=60, asleep=asleep)
    world = fresh_world(at_time("2026-09-01 08:00"))

    tick(world, at_time("2026-09-01 10:00"), characters={"yuiju": her}, evolutions=(drift_needs,))

    rates = ASLEEP_RATES if asleep else AWAKE_RATES
    assert her.stamina == pytest.approx(50 + 2 * rates["stamina"])
    assert her.satiety == pytest.approx(50 + 2 * rates["satiety"])
    assert her.mood == 60  # at baseline


@pytest.mark.parametrize(
    ("start", "asleep", "hours", "expected"),
    [
        ({"stamina": 2, "satiety": 3}, False, 10, {"stamina": 0, "satiety": 0}),
        ({"stamina": 95, "satiety": 1}, True, 10, {"stamina": 100, "satiety": 0}),
    ],
)
def test_needs_are_clamped_to_0_and_100(
    start: dict[str, float], asleep: bool, hours: int, expected: dict[str, float]
) -> None:
    her = make_character(asleep=asleep, **start)
    world = fresh_world(at_time("2026-09-01 08:00"))

    tick(
        world,
        at_time("2026-09-01 08:00") + timedelta(hours=hours),
        characters={"yuiju": her},
        evolutions=(drift_needs,),
    )

    assert {"stamina": her.stamina, "satiety": her.satiety} == expected


def drift(steps: int, step: timedelta, **character: Any) -> CharacterState:
    her = make_character(**character)
    world = fresh_world(at_time("2026-09-01 08:00"))
    for n in range(1, steps + 1):
        tick(
            world,
            at_time("2026-09-01 08:00") + n * step,
            characters={"yuiju": her},
            evolutions=(drift_needs,),
        )
    return her


@pytest.mark.parametrize("asleep", [False, True])
def test_one_ten_hour_step_equals_ten_one_hour_steps(asleep: bool) -> None:
    start = {"stamina": 40, "satiety": 80, "mood": 60, "asleep": asleep}
    one = drift(1, timedelta(hours=10), **start)
    ten = drift(10, timedelta(hours=1), **start)
    assert one.stats() == ten.stats()


def test_no_time_no_drift() -> None:
    her = drift(1, timedelta(0), stamina=40, satiety=80, mood=30)
    assert (her.stamina, her.satiety, her.mood) == (40, 80, 30)


def test_mood_relaxes_the_same_in_one_step_or_many() -> None:
    one = drift(1, timedelta(hours=10), mood=40)
    ten = drift(10, timedelta(hours=1), mood=40)
    assert one.mood == pytest.approx(ten.mood, abs=0.05)


def test_one_minute_ticks_drift_like_one_ten_hour_tick() -> None:
    start = {"stamina": 80, "satiety": 70, "mood": 55}
    minutes = drift(600, timedelta(minutes=1), **start)
    hours = drift(1, timedelta(hours=10), **start)
    assert minutes.satiety == pytest.approx(hours.satiety, abs=0.1)
    assert minutes.mood == pytest.approx(hours.mood, abs=0.1)
