"""Time ranges named in a question: "昨天", "上周", "上个月", "3月5日", "last week", "May 7", "in 2023".

`time_range(text, now)` finds the first such expression and returns the local-time range it
means, plus the text without it (what is left to search by meaning). Ranges are half-open
``[start, end)`` in ``now``'s time zone; a date without a year is the latest such date not after
``now``. Weeks start on Monday; "last week" / "上周" reaches from Monday of the previous week to
now, which covers both "the previous calendar week" and "the past seven days".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

MONTHS = {
    name: i + 1
    for i, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        )
    )
    for name in names
}
_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)"
_CN_NUM = {
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
    "十": 10,
}
_NUM = r"(\d+|[一二两三四五六七八九十])"


@dataclass(frozen=True)
class TimeRange:
    start: datetime
    end: datetime
    """Exclusive."""
    rest: str
    """The question without the time expression."""


def _num(s: str) -> int:
    return int(s) if s.isdigit() else _CN_NUM[s]


def _day_start(d: date, now: datetime) -> datetime:
    return datetime.combine(d, time(), tzinfo=now.tzinfo)


def _days(d: date, n: int, now: datetime) -> tuple[datetime, datetime]:
    return _day_start(d, now), _day_start(d + timedelta(days=n), now)


def _month(year: int, month: int, now: datetime) -> tuple[datetime, datetime]:
    nxt = date(year + (month == 12), month % 12 + 1, 1)
    return _day_start(date(year, month, 1), now), _day_start(nxt, now)


def _latest(month: int, day: int, year: int | None, now: datetime) -> date | None:
    """The date with this month and day: in ``year``, or the latest one not after ``now``."""
    try:
        if year is not None:
            return date(year, month, day)
        found = date(now.year, month, day)
        return found if found <= now.date() else date(now.year - 1, month, day)
    except ValueError:
        return None


def _year(y: str | None) -> int | None:
    return int(y) if y else None


def _rules(now: datetime) -> list[tuple[str, object]]:
    today = now.date()
    monday = today - timedelta(days=today.weekday())
    first = today.replace(day=1)
    last_month_first = (first - timedelta(days=1)).replace(day=1)

    def back(unit: str, n: int) -> tuple[datetime, datetime]:
        if unit in ("天", "day", "days"):
            return _days(today - timedelta(days=n), 1, now)
        if unit in ("周", "星期", "礼拜", "week", "weeks"):
            return _days(today - timedelta(days=7 * n + 3), 7, now)
        d = today - timedelta(days=30 * n)
        return _month(d.year, d.month, now)

    return [
        (r"(\d{4})[-/年](\d{1,2})[-/月](\d{1,2})[日号]?", lambda m: _date(m[2], m[3], m[1], now)),
        (r"(?:(\d{4})年)?(\d{1,2})月(\d{1,2})[日号]", lambda m: _date(m[2], m[3], m[1], now)),
        (
            rf"\b{_MONTH}\.? (\d{{1,2}})(?:st|nd|rd|th)?(?:,? (\d{{4}}))?\b",
            lambda m: _date(MONTHS[m[1]], m[2], m[3], now),
        ),
        (
            rf"\b(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?{_MONTH}(?:,? (\d{{4}}))?\b",
            lambda m: _date(MONTHS[m[2]], m[1], m[3], now),
        ),
        (r"(\d{4})年(\d{1,2})月(?:份)?", lambda m: _month(int(m[1]), int(m[2]), now)),
        (rf"\b(?:in )?{_MONTH} (\d{{4}})\b", lambda m: _month(int(m[2]), MONTHS[m[1]], now)),
        (r"大前天", lambda m: _days(today - timedelta(days=3), 1, now)),
        (r"前天|\bthe day before yesterday\b", lambda m: _days(today - timedelta(days=2), 1, now)),
        (
            r"昨天|昨晚|昨日|\byesterday\b|\blast night\b",
            lambda m: _days(today - timedelta(days=1), 1, now),
        ),
        (r"今天|今晚|今日|\btoday\b|\btonight\b", lambda m: _days(today, 1, now)),
        (rf"{_NUM}\s*(?:个)?(天|周|星期|礼拜|月)(?:以)?前", lambda m: back(m[2], _num(m[1]))),
        (
            r"\b(\d+|a|one|two|three|four|five|six) (days?|weeks?|months?) ago\b",
            lambda m: back(m[2], _en_num(m[1])),
        ),
        (
            r"上(?:个)?(?:周|星期|礼拜)|\blast week\b|\bpast week\b",
            lambda m: (_day_start(monday - timedelta(days=7), now), now + timedelta(seconds=1)),
        ),
        (
            r"这(?:个)?(?:周|星期|礼拜)|本周|\bthis week\b",
            lambda m: (_day_start(monday, now), now + timedelta(seconds=1)),
        ),
        (
            r"上(?:个)?月|\blast month\b",
            lambda m: _month(last_month_first.year, last_month_first.month, now),
        ),
        (r"这个月|本月|\bthis month\b", lambda m: _month(today.year, today.month, now)),
        (
            r"去年|\blast year\b",
            lambda m: (
                _day_start(date(today.year - 1, 1, 1), now),
                _day_start(date(today.year, 1, 1), now),
            ),
        ),
        (
            r"今年|\bthis year\b",
            lambda m: (_day_start(date(today.year, 1, 1), now), now + timedelta(seconds=1)),
        ),
        (r"(\d{1,2})月(?:份)?", lambda m: _month_latest(int(m[1]), now)),
        (rf"\bin {_MONTH}\b", lambda m: _month_latest(MONTHS[m[1]], now)),
        (r"(\d{4})年|\bin (\d{4})\b", lambda m: _year_range(int(m[1] or m[2]), now)),
    ]


def _en_num(s: str) -> int:
    return {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}.get(s) or int(s)


def _date(
    month: int | str, day: int | str, year: str | None, now: datetime
) -> tuple[datetime, datetime] | None:
    d = _latest(int(month), int(day), _year(year), now)
    return _days(d, 1, now) if d else None


def _month_latest(month: int, now: datetime) -> tuple[datetime, datetime] | None:
    if not 1 <= month <= 12:
        return None
    year = now.year if month <= now.month else now.year - 1
    return _month(year, month, now)


def _year_range(year: int, now: datetime) -> tuple[datetime, datetime] | None:
    if not 1970 <= year <= now.year:
        return None
    return _day_start(date(year, 1, 1), now), _day_start(date(year + 1, 1, 1), now)


def time_range(text: str, now: datetime) -> TimeRange | None:
    """The time range the first time expression in ``text`` names, or None."""
    lowered = text.lower()
    for pattern, make in _rules(now):
        m = re.search(pattern, lowered)
        if not m:
            continue
        found = make(m)  # type: ignore[operator]
        if found is None:
            continue
        start, end = found
        rest = (text[: m.start()] + " " + text[m.end() :]).strip()
        return TimeRange(start=start, end=end, rest=re.sub(r"\s+", " ", rest) or text)
    return None
