"""World time: windows, next occurrences across midnight and DST, the school calendar, clocks."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tests.conftest import TZ, at_time
from yuiju.world.clock import (
    RealClock,
    SimClock,
    holiday_name,
    in_window,
    is_school_day,
    minutes_until,
    next_at,
    weather_period_start,
)

BERLIN = ZoneInfo("Europe/Berlin")


@pytest.mark.parametrize(
    ("clock", "start", "end", "inside"),
    [
        ("09:59", "10:00", "20:00", False),
        ("10:00", "10:00", "20:00", True),
        ("19:59", "10:00", "20:00", True),
        ("20:00", "10:00", "20:00", False),
        # windows that wrap past midnight
        ("21:59", "22:00", "06:00", False),
        ("22:00", "22:00", "06:00", True),
        ("23:59", "22:00", "06:00", True),
        ("00:00", "22:00", "06:00", True),
        ("05:59", "22:00", "06:00", True),
        ("06:00", "22:00", "06:00", False),
        ("12:00", "22:00", "06:00", False),
    ],
)
def test_in_window_is_half_open_and_wraps_past_midnight(
    clock: str, start: str, end: str, inside: bool
) -> None:
    assert in_window(at_time(f"2026-09-01 {clock}"), start, end) is inside


@pytest.mark.parametrize(
    ("now", "hhmm", "expected", "minutes"),
    [
        ("2026-09-01 06:00", "07:00", "2026-09-01 07:00", 60),
        ("2026-09-01 07:00", "07:00", "2026-09-02 07:00", 24 * 60),  # strictly after
        ("2026-09-01 23:30", "06:40", "2026-09-02 06:40", 430),
        ("2026-12-31 23:59", "00:00", "2027-01-01 00:00", 1),
    ],
)
def test_next_at_and_minutes_until_cross_midnight(
    now: str, hhmm: str, expected: str, minutes: int
) -> None:
    assert next_at(at_time(now), hhmm) == at_time(expected)
    assert minutes_until(at_time(now), hhmm) == minutes


def test_minutes_until_is_at_least_one() -> None:
    assert minutes_until(at_time("2026-09-01 06:59:30"), "07:00") == 1


def test_next_at_lands_on_local_time_after_the_spring_dst_change() -> None:
    before = datetime(2026, 3, 29, 1, 30, tzinfo=BERLIN)  # CET; clocks jump 02:00 → 03:00

    found = next_at(before, "03:00")

    assert (found.hour, found.minute) == (3, 0)
    assert found.utcoffset() == timedelta(hours=2)  # CEST
    assert found.astimezone(UTC) == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("now", "hhmm"),
    [
        (datetime(2026, 3, 29, 1, 30, tzinfo=BERLIN), "03:00"),  # spring forward: 30 real minutes
        (datetime(2026, 3, 28, 23, 0, tzinfo=BERLIN), "07:00"),  # a night with a short hour: 420
        (datetime(2026, 10, 25, 1, 30, tzinfo=BERLIN), "03:00"),  # fall back: 150
    ],
)
def test_minutes_until_counts_real_minutes_across_dst(now: datetime, hhmm: str) -> None:
    target = next_at(now, hhmm)
    real = (target.astimezone(UTC) - now.astimezone(UTC)).total_seconds() // 60

    assert minutes_until(now, hhmm) == real


@pytest.mark.parametrize(
    ("day", "school", "holiday"),
    [
        (date(2026, 9, 1), True, None),  # Tuesday
        (date(2026, 9, 4), True, None),  # Friday
        (date(2026, 9, 5), False, None),  # Saturday
        (date(2026, 9, 6), False, None),  # Sunday
        (date(2026, 10, 1), False, "国庆假期"),  # Thursday, national day
        (date(2026, 7, 10), False, "暑假"),  # Friday, first day of summer break
        (date(2026, 1, 1), False, "元旦"),
        (date(2026, 10, 8), True, None),  # Thursday after the national holiday
    ],
)
def test_is_school_day_on_weekends_holidays_and_normal_days(
    day: date, school: bool, holiday: str | None
) -> None:
    assert is_school_day(day) is school
    assert holiday_name(day) == holiday


@pytest.mark.parametrize(
    ("now", "start"),
    [
        ("2026-09-01 00:00", "2026-09-01 00:00"),
        ("2026-09-01 05:59:59", "2026-09-01 00:00"),
        ("2026-09-01 06:00", "2026-09-01 06:00"),
        ("2026-09-01 13:45", "2026-09-01 12:00"),
        ("2026-09-01 23:59", "2026-09-01 18:00"),
    ],
)
def test_weather_period_start_is_the_six_hour_boundary(now: str, start: str) -> None:
    assert weather_period_start(at_time(now)) == at_time(start)


async def test_sim_clock_jumps_forward_and_never_goes_back() -> None:
    clock = SimClock(at_time("2026-09-01 06:00"))

    await clock.sleep_until(at_time("2026-09-01 09:30"))
    assert clock.now() == at_time("2026-09-01 09:30")

    await clock.sleep_until(at_time("2026-09-01 08:00"))  # the past: no effect
    assert clock.now() == at_time("2026-09-01 09:30")


async def test_sim_clock_keeps_its_zone_when_woken_in_another() -> None:
    clock = SimClock(at_time("2026-09-01 06:00"))

    await clock.sleep_until(datetime(2026, 9, 1, 0, 0, tzinfo=UTC))  # 08:00 in Shanghai

    assert clock.now() == at_time("2026-09-01 08:00")
    assert clock.now().tzinfo is TZ


def test_sim_clock_needs_an_aware_start() -> None:
    with pytest.raises(ValueError, match="aware"):
        SimClock(datetime(2026, 9, 1, 6, 0))  # noqa: DTZ001 - the point of the test


async def test_real_clock_speed_up_runs_world_time_faster() -> None:
    clock = RealClock(TZ, speed=600)
    before = clock.now()

    await clock.sleep_until(before + timedelta(minutes=1))  # 0.1 s of wall time

    elapsed = clock.now() - before
    assert timedelta(minutes=1) <= elapsed < timedelta(minutes=5)
    assert clock.now().tzinfo is TZ


async def test_real_clock_at_normal_speed_is_wall_time() -> None:
    clock = RealClock(TZ)
    assert abs(clock.now() - datetime.now(TZ)) < timedelta(seconds=1)
    await asyncio.wait_for(
        clock.sleep_until(clock.now() - timedelta(hours=1)), 0.5
    )  # past: at once


@pytest.mark.parametrize("speed", [0, -1])
def test_real_clock_refuses_a_non_positive_speed(speed: float) -> None:
    with pytest.raises(ValueError, match="speed"):
        RealClock(TZ, speed=speed)


# -- a sped-up clock and the saved world time ---------------------------------------------------------


def test_a_sped_up_clock_continues_from_a_saved_world_time_ahead_of_the_wall_clock() -> None:
    wall = datetime.now(TZ)
    clock = RealClock(TZ, speed=60)
    note = clock.continue_from(wall + timedelta(hours=2))
    assert clock.now() >= wall + timedelta(hours=2)
    assert clock.now() < wall + timedelta(hours=2, minutes=5)
    assert note is not None and "ahead" in note


def test_a_normal_speed_start_after_a_demo_keeps_running_from_the_saved_time_and_says_so() -> None:
    wall = datetime.now(TZ)
    clock = RealClock(TZ)
    note = clock.continue_from(wall + timedelta(hours=2))
    assert clock.now() >= wall + timedelta(hours=2)  # never back to the wall clock by itself
    assert note is not None and "--resync" in note and "2 h" in note
    assert timedelta(hours=1, minutes=59) < clock.lead() <= timedelta(hours=2)


async def test_resync_holds_world_time_until_the_wall_clock_catches_up() -> None:
    wall = datetime.now(TZ)
    clock = RealClock(TZ)
    note = clock.continue_from(wall + timedelta(hours=2), resync=True)
    held = clock.now()
    await asyncio.sleep(0.05)
    assert clock.now() == held >= wall + timedelta(hours=2)  # never backwards, never past it
    assert note is not None and "holds" in note
    with pytest.raises(TimeoutError):  # she waits for the wall clock: no due moment comes early
        await asyncio.wait_for(clock.sleep_until(held + timedelta(seconds=1)), 0.1)


def test_a_clock_behind_the_wall_clock_jumps_forward_to_it() -> None:
    for speed, resync in ((1.0, False), (1.0, True), (60.0, False)):
        clock = RealClock(TZ, speed=speed)
        assert clock.continue_from(datetime.now(TZ) - timedelta(days=3), resync=resync) is None
        assert abs(clock.now() - datetime.now(TZ)) < timedelta(seconds=5)


def test_resync_with_a_speed_up_is_refused() -> None:
    with pytest.raises(ValueError, match="resync"):
        RealClock(TZ, speed=60).continue_from(datetime.now(TZ) + timedelta(hours=1), resync=True)
