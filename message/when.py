"""Times said in chat, ahead of now: "明天下午", "周五", "后天三点半", "下周六上午十点", "9月12日".

`resolve_when(text, now)` reads a day (今天/明天/后天/大后天, 周五/这周五/下周五/下下周一,
9月12日, 12号, 下个月十号, 3天后) and a time (a part of the day, 下午; or a clock time, 三点半,
15:30) against ``now`` (world time), and returns a `When`: a clock time is exact; a part of the day
is a window with a usual start (下午: 15:00, any time 13:00–18:00), so the world can pick a start in
it that her calendar allows (after class on a school day); a day alone is all day. The night is
the night: 凌晨三点 is 03:00, 半夜两点 02:00, 夜里十一点 23:00 (a clock time said alone, 约三点,
is the afternoon: nobody meets at three in the morning). What names no time ahead raises
`WhenError` with how to write one, which goes back to the model; with ``past_ok`` a time in the
past (昨天下午) is read too, so an invitation to it can be refused and recorded as such.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

WEEKDAYS = "一二三四五六日"


class WhenError(ValueError):
    """No time ahead could be read; the message (Chinese) says how to write one."""


@dataclass(frozen=True)
class When:
    start: datetime
    """The start meant (a clock time), or the usual one for a part of the day; all day: 00:00."""
    earliest: datetime | None = None
    """A part of the day: the window a start may be chosen in, [earliest, latest]."""
    latest: datetime | None = None
    all_day: bool = False
    """Only a day was said (a reminder for that day; an invitation at a usual time)."""
    said: str = ""
    """How it reads: 9月4日（周五）下午."""
    past: bool = False
    """It is over already (read with ``past_ok``)."""


PARTS: dict[str, tuple[str, str, str]] = {
    "凌晨": ("03:00", "00:00", "06:00"),
    "清晨": ("06:00", "05:00", "07:00"),
    "早上": ("08:00", "07:00", "09:30"),
    "上午": ("10:00", "08:00", "12:00"),
    "中午": ("12:00", "11:00", "13:30"),
    "下午": ("15:00", "13:00", "18:00"),
    "傍晚": ("17:30", "16:30", "19:00"),
    "晚上": ("19:00", "18:00", "21:00"),
    "夜里": ("22:00", "21:00", "23:59"),
    "深夜": ("23:00", "22:00", "23:59"),
}
"""A part of the day: its usual start and the window [from, to] a start may be chosen in."""
_PART_WORDS = {
    "凌晨": "凌晨",
    "半夜": "深夜",
    "深夜": "深夜",
    "午夜": "深夜",
    "清晨": "清晨",
    "早上": "早上",
    "早晨": "早上",
    "一早": "早上",
    "今早": "早上",
    "明早": "早上",
    "上午": "上午",
    "中午": "中午",
    "下午": "下午",
    "傍晚": "傍晚",
    "黄昏": "傍晚",
    "晚上": "晚上",
    "今晚": "晚上",
    "明晚": "晚上",
    "昨晚": "晚上",
    "夜里": "夜里",
    "夜间": "夜里",
}
NIGHT = frozenset({"凌晨", "夜里", "深夜"})
"""Parts of the night: a clock time in them is read as night (two o'clock: 02:00, eleven: 23:00,
twelve: the midnight that ends the day)."""
EVENING = frozenset({"下午", "傍晚", "晚上"})
_CN = "零一二两三四五六七八九十"
_N = rf"(\d{{1,2}}|[{_CN}]{{1,3}})"
_RELATIVE = (("大后天", 3), ("后天", 2), ("明天", 1), ("明早", 1), ("明晚", 1), ("明儿", 1))
_BACK = (("大前天", -3), ("前天", -2), ("昨天", -1), ("昨晚", -1), ("昨儿", -1))
_TODAY = ("今天", "今早", "今晚", "今儿", "今日")
_PAST = re.compile(r"昨天|前天|昨晚|昨儿|上周|上个?星期|上个?礼拜|上次|刚才|上个?月")
_WEEKDAY = re.compile(r"(下下|下个?|这个?|本|上个?)?(?:周|星期|礼拜)([一二三四五六日天1-7])")
_MONTH_DAY = re.compile(rf"{_N}月{_N}[日号]?")
_NEXT_MONTH_DAY = re.compile(rf"(下|上|这|本)个?月{_N}[日号]")
_DAY_OF_MONTH = re.compile(rf"(?<![月\d{_CN}]){_N}[日号]")
_DAYS_LATER = re.compile(rf"{_N}天(?:以)?后")
_CLOCK = re.compile(r"(\d{1,2})\s*[:：]\s*(\d{2})")
_SPOKEN = re.compile(rf"{_N}\s*点\s*(半|一刻|三刻|\d{{1,2}}分?|[{_CN}]{{1,3}}分)?")
HOW = (
    "写成「明天下午」「周五 15:00」「后天上午十点」「9月12日」这样：哪天，最好再加上几点或上午/下午"
)


def number(text: str) -> int:
    """``"12"``, ``"十二"``, ``"两"`` → 12, 12, 2."""
    if text.isdigit():
        return int(text)
    digits = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"两": 2}
    if "十" in text:
        tens, _, ones = text.partition("十")
        return (digits.get(tens, 1) if tens else 1) * 10 + (digits.get(ones, 0) if ones else 0)
    return digits.get(text, 0)


def _day(text: str, now: datetime) -> date | None:
    today = now.date()
    for word, ahead in (*_RELATIVE, *_BACK):
        if word in text:
            return today + timedelta(days=ahead)
    if any(word in text for word in _TODAY):
        return today
    if m := _DAYS_LATER.search(text):
        return today + timedelta(days=number(m.group(1)))
    if m := _WEEKDAY.search(text):
        prefix, name = m.group(1) or "", m.group(2)
        weekday = (
            6 if name in "日天7" else (int(name) - 1 if name.isdigit() else WEEKDAYS.index(name))
        )
        monday = today - timedelta(days=today.weekday())
        if prefix.startswith("下下"):
            return monday + timedelta(days=14 + weekday)
        if prefix.startswith("下"):
            return monday + timedelta(days=7 + weekday)
        if prefix.startswith("上"):
            return monday + timedelta(days=weekday - 7)
        this_week = monday + timedelta(days=weekday)
        if prefix:  # 这周五 / 本周五
            return this_week
        return this_week if this_week >= today else this_week + timedelta(days=7)
    if m := _NEXT_MONTH_DAY.search(text):
        shift = {"下": 1, "上": -1}.get(m.group(1), 0)
        month, year = today.month + shift, today.year
        year, month = (
            (year + 1, 1) if month == 13 else (year - 1, 12) if month == 0 else (year, month)
        )
        day = number(m.group(2))
        try:
            return date(year, month, day)
        except ValueError:
            raise WhenError(f"{month}月没有{day}日；{HOW}") from None
    if m := _MONTH_DAY.search(text):
        month, day = number(m.group(1)), number(m.group(2))
        for year in (today.year, today.year + 1):
            try:
                found = date(year, month, day)
            except ValueError:
                raise WhenError(f"没有{month}月{day}日这一天；{HOW}") from None
            if found >= today:
                return found
    if m := _DAY_OF_MONTH.search(text):
        day, month, year = number(m.group(1)), today.month, today.year
        for _ in range(2):
            try:
                if (in_month := date(year, month, day)) >= today:
                    return in_month
            except ValueError:
                pass  # no such day this month (31号 in September): the next month
            month, year = (1, year + 1) if month == 12 else (month + 1, year)
    return None


def _part(text: str) -> str | None:
    found = [(text.find(w), part) for w, part in _PART_WORDS.items() if w in text]
    return min(found)[1] if found else None


def _clock(text: str, part: str | None) -> tuple[time, int] | None:
    """The clock time said, and the days it is after the day said (1: 半夜十二点, the midnight
    that ends the day)."""
    if m := _CLOCK.search(text):
        hour, minute = int(m.group(1)), int(m.group(2))
    elif m := _SPOKEN.search(text):
        hour = number(m.group(1))
        tail = m.group(2) or ""
        quarter = {"半": 30, "一刻": 15, "三刻": 45}.get(tail)
        minute = quarter if quarter is not None else number(tail.rstrip("分")) if tail else 0
    else:
        return None
    later = 0
    if hour == 12 and (part in NIGHT or part == "晚上"):
        hour, later = 0, 1  # 半夜十二点, 晚上12点: the midnight that ends the day
    elif part == "晚上" and 1 <= hour <= 5:
        later = 1  # 晚上两点: that night, after midnight
    elif part in NIGHT:
        hour += 12 if 7 <= hour < 12 else 0  # 夜里十一点: 23:00; 凌晨三点, 半夜两点: as said
    elif part in EVENING and hour < 12:
        hour += 12
    elif (part == "中午" and hour < 6) or (part is None and 1 <= hour <= 7):
        hour += 12  # without a part: 约三点, nobody meets at three in the morning
    if not (0 <= hour < 24 and 0 <= minute < 60):
        raise WhenError(f"「{m.group(0)}」不是一个时间；{HOW}")
    return time(hour, minute), later


def _at(day: date, hhmm: str | time, now: datetime) -> datetime:
    t = hhmm if isinstance(hhmm, time) else time.fromisoformat(hhmm)
    return datetime.combine(day, t, tzinfo=now.tzinfo)


def day_text(day: date) -> str:
    return f"{day.month}月{day.day}日（周{WEEKDAYS[day.weekday()]}）"


def resolve_when(text: str, now: datetime, *, past_ok: bool = False) -> When:
    """The time ahead ``text`` names, seen from ``now``; `WhenError` when it names none. With
    ``past_ok`` a time already over is returned too (`When.past`), when it can be read."""
    text = text.strip()
    said_past = _PAST.search(text)
    if said_past and not past_ok:
        raise WhenError(f"「{text}」已经过去了；{HOW}")
    day = _day(text, now)
    part = _part(text)
    clock = _clock(text, part)
    if said_past and day is None:
        raise WhenError(f"「{text}」已经过去了；{HOW}")  # 上次, 刚才: no time to read
    if day is None and part is None and clock is None:
        raise WhenError(f"没看出「{text}」是什么时候；{HOW}")
    if day is None:  # a time alone: the next one
        day = now.date()
        probe = _at(day, clock[0] if clock else PARTS[part or "上午"][2], now)
        if probe <= now:
            day += timedelta(days=1)
    if clock is not None:
        start = _at(day + timedelta(days=clock[1]), clock[0], now)
        night = "凌晨" if start.hour < 6 else "夜里" if part in NIGHT else ""
        said = f"{day_text(start.date())}{night}{start:%H:%M}"
        if start <= now and not past_ok:
            raise WhenError(f"{said} 已经过去了；{HOW}")
        return When(start=start, said=said, past=start <= now)
    if part is not None:
        usual, first, last = PARTS[part]
        over = _at(day, last, now) <= now
        if over and not past_ok:
            raise WhenError(f"{day_text(day)}{part}已经过去了；{HOW}")
        return When(
            start=_at(day, usual, now),
            earliest=_at(day, first, now),
            latest=_at(day, last, now),
            said=f"{day_text(day)}{part}",
            past=over,
        )
    if day < now.date() and not past_ok:
        raise WhenError(f"{day_text(day)}已经过去了；{HOW}")
    return When(
        start=_at(day, "00:00", now), all_day=True, said=day_text(day), past=day < now.date()
    )
