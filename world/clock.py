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
    speed: float
    """World seconds per wall second while the engine waits: what a wait in wall time (a lease,
    a retry) comes to in world time. A simulated clock says 1 (its waits take no wall time)."""

    def now(self) -> datetime:
        """The current world time, tz-aware, in the town's zone."""
        ...

    def lead(self) -> timedelta | None:
        """How far world time is ahead of the wall clock (zero or negative: not ahead); None
        when world time does not follow the wall clock at all (a simulated clock)."""
        ...

    def continue_from(self, saved: datetime | None, *, resync: bool | None = None) -> str | None:
        """Carry on from the saved world time, so that world time never goes backwards (a start,
        a takeover from another engine); returns what the user must be told, or None."""
        ...

    async def sleep_until(self, when: datetime) -> None:
        """Return once world time has reached ``when`` (immediately if it already has)."""
        ...


class RealClock:
    """World time in ``tz`` that runs with the wall clock, optionally ``speed`` times faster.

    A new clock reads the wall clock (a sped-up one starts there and runs faster). World time
    is shared and saved, though, and must never go backwards, so a daemon anchors its clock at
    the saved world time before it runs (`continue_from`):

    - saved time behind the wall clock (the daemon was stopped): world time jumps to the wall
      clock, as after any downtime (the world tick converges in one step);
    - saved time ahead of it (a ``--speed`` run left the world ahead): world time carries on
      from the saved time at this clock's speed, ahead of the wall clock; at speed 1 it stays
      that far ahead until ``resync``, which holds world time still until the wall clock catches
      up and then follows it.
    """

    def __init__(self, tz: ZoneInfo, *, speed: float = 1.0) -> None:
        if speed <= 0:
            raise ValueError(f"speed must be > 0, got {speed!r}")
        self.tz = tz
        self.speed = speed
        self._origin_world: datetime | None = None if speed == 1.0 else datetime.now(tz)
        """World time at ``_origin_mono``; None: world time is the wall clock (never before ``_floor``)."""
        self._origin_mono = time.monotonic()
        self._floor: datetime | None = None
        """While resyncing: world time holds here until the wall clock reaches it."""
        self._resync = False
        """`continue_from` resyncs (the start chose ``--resync``)."""

    def now(self) -> datetime:
        if self._origin_world is None:
            wall = datetime.now(self.tz)
            return self._floor if self._floor is not None and wall < self._floor else wall
        elapsed = (time.monotonic() - self._origin_mono) * self.speed
        return self._origin_world + timedelta(seconds=elapsed)

    @property
    def holding_until(self) -> datetime | None:
        """While resyncing: the world time held until the wall clock reaches it; else None."""
        if self._floor is not None and datetime.now(self.tz) < self._floor:
            return self._floor
        return None

    def shown(self, saved: datetime | None) -> datetime:
        """The world time a display shows (the terminal panel, the observer page): this clock's,
        but never past the saved world time while world time is ahead of the wall clock. A
        restart continues from the saved time (`continue_from`), so a later moment shown before
        a stop would step back at the next start; the saved time is at most a world tick behind.
        With world time at the wall clock, a restart continues from the wall clock: the clock
        itself is shown."""
        wall = datetime.now(self.tz)
        return min(self.now(), max(wall, saved or wall))

    def lead(self) -> timedelta:
        """How far world time is ahead of the wall clock (zero or negative: not ahead)."""
        return self.now() - datetime.now(self.tz)

    async def sleep_until(self, when: datetime) -> None:
        while (now := self.now()) < when:
            if self._origin_world is None:  # the wall clock (or a hold that it must catch up with)
                delay = (when - datetime.now(self.tz)).total_seconds()
            else:
                delay = (when - now).total_seconds() / self.speed
            await asyncio.sleep(max(delay, 0.001))

    def continue_from(self, saved: datetime | None, *, resync: bool | None = None) -> str | None:
        """Anchor at the saved world time so that world time never goes backwards.

        Returns what the user must be told (world time ahead of the wall clock), or None. With
        ``resync`` (speed 1 only) world time holds at ``saved`` until the wall clock reaches it;
        None: as the last call chose (a takeover carries on the way the start did).
        """
        if resync is None:
            resync = self._resync
        self._resync = resync
        if resync and self.speed != 1.0:
            raise ValueError(
                f"resync returns the world to real time; it cannot run at speed {self.speed:g}"
            )
        wall = datetime.now(self.tz)
        self._floor = None
        if saved is None or saved <= wall:
            self._origin_world = None if self.speed == 1.0 else wall
            self._origin_mono = time.monotonic()
            return None
        lead = saved - wall
        at = f"world time {saved.astimezone(self.tz):%Y-%m-%d %H:%M} is {duration_text(lead)} ahead of the wall clock"
        if resync:
            self._origin_world, self._floor = None, saved
            return (
                f"{at}: resync holds the world still (she starts and finishes nothing) until the wall "
                f"clock reaches it at {saved.astimezone(self.tz):%H:%M}, then it runs with real time"
            )
        self._origin_world, self._origin_mono = saved, time.monotonic()
        if self.speed != 1.0:
            return f"{at} (an earlier sped-up run); it carries on from there at {self.speed:g}x"
        return (
            f"{at} (a sped-up run left it there); it carries on from there at real speed, staying "
            f"{duration_text(lead)} ahead. To go back to real time, start once with `yuiju run --resync` "
            "(the world then holds still until the wall clock catches up)"
        )


def duration_text(span: timedelta) -> str:
    """``2 h 05 min`` / ``12 min`` / ``3 d 4 h``: a lead or a wait, as a user reads it."""
    minutes = max(0, round(span.total_seconds() / 60))
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h" if not mins else f"{hours} h {mins:02d} min"
    return f"{mins} min"


class SimClock:
    """A simulated clock: sleeping jumps time forward instantly."""

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ValueError(f"SimClock needs an aware start time, got {start!r}")
        assert isinstance(start.tzinfo, ZoneInfo), "use a ZoneInfo time zone"
        self.tz = start.tzinfo
        self.speed = 1.0
        self._now = start

    def now(self) -> datetime:
        return self._now

    def lead(self) -> None:
        """None: simulated time is not tied to the wall clock (callers stamp in world time)."""
        return None

    def continue_from(self, saved: datetime | None, *, resync: bool | None = None) -> None:
        """Nothing to anchor: simulated time is what its caller set (a test puts an engine behind
        the saved time on purpose)."""
        return None

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
    elapsed = next_at(moment, hhmm).astimezone(UTC) - moment.astimezone(
        UTC
    )  # real minutes across DST
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
