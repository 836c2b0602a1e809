"""World time: the injected clocks and pure time maths.

The engine never calls ``datetime.now()``: it asks a `Clock`. `RealClock` is the wall clock in
the town's time zone (optionally sped up for demos); `SimClock` jumps straight to the next due
moment, so ``yuiju simulate`` is a discrete-event run of the same engine code.

Everything else here is pure: explicit datetimes in, answers out (arq's ``next_cron`` habit).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, date, datetime, timedelta
from datetime import time as dtime
from typing import Protocol
from zoneinfo import ZoneInfo


class Clock(Protocol):
    tz: ZoneInfo

    def now(self) -> datetime:
        """The current world time, tz-aware, in the town's zone."""
        ...

    async def sleep_until(self, when: datetime) -> None:
        """Return once world time has reached ``when`` (immediately if it already has)."""
        ...


class RealClock:
    """World time = wall time in ``tz``, optionally running ``speed`` times faster.

    With a speed-up, world time starts at the wall time of construction and runs faster
    from there, so a demo shows a day in minutes.
    """

    def __init__(self, tz: ZoneInfo, *, speed: float = 1.0) -> None:
        if speed <= 0:
            raise ValueError(f"speed must be > 0, got {speed!r}")
        self.tz = tz
        self.speed = speed
        self._origin_world = datetime.now(tz)
        self._origin_mono = time.monotonic()

    def now(self) -> datetime:
        if self.speed == 1.0:
            return datetime.now(self.tz)
        elapsed = (time.monotonic() - self._origin_mono) * self.speed
        return self._origin_world + timedelta(seconds=elapsed)

    async def sleep_until(self, when: datetime) -> None:
        delay = (when - self.now()).total_seconds() / self.speed
        if delay > 0:
            await asyncio.sleep(delay)


class SimClock:
    """A simulated clock: sleeping jumps time forward instantly."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError(f"SimClock needs an aware start time, got {start!r}")
        assert isinstance(start.tzinfo, ZoneInfo), "use a ZoneInfo time zone"
        self.tz = start.tzinfo
        self._now = start

    def now(self) -> datetime:
        return self._now

    async def sleep_until(self, when: datetime) -> None:
        if when > self._now:
            self._now = when.astimezone(self.tz)


# -- pure time maths --------------------------------------------------------------------------


def parse_hhmm(text: str) -> dtime:
    """``"07:30"`` → ``time(7, 30)``; a clear error for anything else."""
    try:
        hours, minutes = text.split(":")
        return dtime(int(hours), int(minutes))
    except ValueError as exc:
        raise ValueError(f"expected a time like '07:30', got {text!r}") from exc


def minute_of_day(moment: datetime) -> int:
    return moment.hour * 60 + moment.minute


def in_window(moment: datetime, start: str, end: str) -> bool:
    """Whether ``moment``'s local time is in [start, end); windows may wrap midnight."""
    m = minute_of_day(moment)
    s, e = parse_hhmm(start), parse_hhmm(end)
    lo, hi = s.hour * 60 + s.minute, e.hour * 60 + e.minute
    return lo <= m < hi if lo <= hi else (m >= lo or m < hi)


def next_at(moment: datetime, hhmm: str) -> datetime:
    """The first local ``hhmm`` strictly after ``moment``, DST-safe through the zone."""
    t = parse_hhmm(hhmm)
    tz = moment.tzinfo
    candidate = datetime.combine(moment.date(), t, tzinfo=tz)
    if candidate <= moment:
        candidate = datetime.combine(moment.date() + timedelta(days=1), t, tzinfo=tz)
    return candidate


def minutes_until(moment: datetime, hhmm: str) -> int:
    """Whole minutes from ``moment`` to the next local ``hhmm`` (at least 1)."""
    elapsed = next_at(moment, hhmm).astimezone(UTC) - moment.astimezone(UTC)  # real minutes across DST
    return max(1, int(elapsed.total_seconds() // 60))


def period_of_day(moment: datetime) -> str:
    """The Chinese name of the part of the day, as the model and users read it."""
    h = moment.hour
    if 5 <= h < 8:
        return "清晨"
    if 8 <= h < 11:
        return "上午"
    if 11 <= h < 13:
        return "中午"
    if 13 <= h < 17:
        return "下午"
    if 17 <= h < 19:
        return "傍晚"
    if 19 <= h < 23:
        return "晚上"
    return "深夜"


WEEKDAYS_ZH = ("星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日")

# School holidays of 星见丘高校, by (month, day) ranges inclusive. A rough Chinese school
# calendar: New Year, winter break, Qingming, Labour Day, summer break, National Day.
SCHOOL_HOLIDAYS: tuple[tuple[tuple[int, int], tuple[int, int], str], ...] = (
    ((1, 1), (1, 1), "元旦"),
    ((1, 20), (2, 20), "寒假"),
    ((4, 4), (4, 6), "清明假期"),
    ((5, 1), (5, 5), "劳动节假期"),
    ((7, 10), (8, 31), "暑假"),
    ((10, 1), (10, 7), "国庆假期"),
)


def holiday_name(day: date) -> str | None:
    key = (day.month, day.day)
    for start, end, name in SCHOOL_HOLIDAYS:
        if start <= key <= end:
            return name
    return None


def is_weekend(day: date) -> bool:
    return day.weekday() >= 5


def is_school_day(day: date) -> bool:
    """A weekday that is not a school holiday."""
    return not is_weekend(day) and holiday_name(day) is None


def season_of(day: date) -> str:
    return {12: "冬", 1: "冬", 2: "冬", 3: "春", 4: "春", 5: "春", 6: "夏", 7: "夏", 8: "夏"}.get(
        day.month, "秋"
    )


def weather_period_start(moment: datetime, hours: int = 6) -> datetime:
    """Start of the local 6-hour weather period (00/06/12/18) containing ``moment``."""
    return moment.replace(hour=moment.hour - moment.hour % hours, minute=0, second=0, microsecond=0)
