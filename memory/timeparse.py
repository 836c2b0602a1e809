"""Times named in text: "昨天", "上周", "上个月", "下周", "3月5日", "last week", "May 7", "in 2023".

Two readers share the rules:

- `time_range(text, now)`, for a question: the first expression (in the order of the rules) and
  the local-time range it means, plus the text without it (what is left to search by meaning).
  Ranges are half-open ``[start, end)`` in ``now``'s time zone; a date without a year is the
  latest such date not after ``now``. Weeks start on Monday; "last week" / "上周" reaches from
  Monday of the previous week to now, which covers both "the previous calendar week" and "the
  past seven days". "As of <month>" / "截至<月>" / "截止到<月>" means up to its end: ``start``
  is None.
- `referred_range(text, said)`, for a stored line: when what it tells of happened, resolved
  against when it was said ("上个月我去青岛冲浪了" said on 8 August refers to July; "I'm flying
  to Lisbon next week" to the week after it was said). The expression said first counts, a date
  without a year is the nearest such date, and a range of more than two months ("去年", "this
  year") refers to nothing in particular: the line is then taken to tell of when it was said.
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
    start: datetime | None
    """None: from the beginning ("as of March")."""
    end: datetime
    """Exclusive."""
    rest: str
    """The question without the time expression."""


@dataclass(frozen=True)
class Referred:
    """When what a line tells of happened (`referred_range`)."""

    start: datetime
    last: datetime
    """The last moment it refers to (inclusive: the end of its last day)."""


REFERRED_DAYS = 62
"""A line's time expression naming a longer range than this ("去年", "this year") is too vague to
say when what it tells of happened."""


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


def _rules(now: datetime, *, nearest: bool = False) -> list[tuple[str, object]]:
    """(pattern, range maker) in order; ``nearest``: a date without a year is the nearest one,
    not the latest one not after ``now``."""
    today = now.date()
    monday = today - timedelta(days=today.weekday())
    first = today.replace(day=1)
    last_month_first = (first - timedelta(days=1)).replace(day=1)
    next_month_first = (first + timedelta(days=31)).replace(day=1)

    def back(unit: str, n: int) -> tuple[datetime, datetime]:
        if unit in ("天", "day", "days"):
            return _days(today - timedelta(days=n), 1, now)
        if unit in ("周", "星期", "礼拜", "week", "weeks"):
            return _days(today - timedelta(days=7 * n + 3), 7, now)
        d = today - timedelta(days=30 * n)
        return _month(d.year, d.month, now)

    def ahead(unit: str, n: int) -> tuple[datetime, datetime]:
        if unit in ("天", "day", "days"):
            return _days(today + timedelta(days=n), 1, now)
        if unit in ("周", "星期", "礼拜", "week", "weeks"):
            return _days(today + timedelta(days=7 * n - 3), 7, now)
        d = today + timedelta(days=30 * n)
        return _month(d.year, d.month, now)

    def date_(
        month: int | str, day: int | str, year: str | None
    ) -> tuple[datetime, datetime] | None:
        return _date(month, day, year, now, nearest=nearest)

    def month_(month: int) -> tuple[datetime, datetime] | None:
        return _month_nearest(month, now) if nearest else _month_latest(month, now)

    return [
        (r"(\d{4})[-/年](\d{1,2})[-/月](\d{1,2})[日号]?", lambda m: date_(m[2], m[3], m[1])),
        (r"(?:(\d{4})年)?(\d{1,2})月(\d{1,2})[日号]", lambda m: date_(m[2], m[3], m[1])),
        (
            rf"\b{_MONTH}\.? (\d{{1,2}})(?:st|nd|rd|th)?(?:,? (\d{{4}}))?\b",
            lambda m: date_(MONTHS[m[1]], m[2], m[3]),
        ),
        (
            rf"\b(\d{{1,2}})(?:st|nd|rd|th)? (?:of )?{_MONTH}(?:,? (\d{{4}}))?\b",
            lambda m: date_(MONTHS[m[2]], m[1], m[3]),
        ),
        (r"(\d{4})年(\d{1,2})月(?:份)?", lambda m: _month(int(m[1]), int(m[2]), now)),
        (rf"\b(?:in )?{_MONTH} (\d{{4}})\b", lambda m: _month(int(m[2]), MONTHS[m[1]], now)),
        (rf"\bas of {_MONTH}\b", lambda m: month_(MONTHS[m[1]])),
        (r"大前天", lambda m: _days(today - timedelta(days=3), 1, now)),
        (r"前天|\bthe day before yesterday\b", lambda m: _days(today - timedelta(days=2), 1, now)),
        (
            r"昨天|昨晚|昨日|\byesterday\b|\blast night\b",
            lambda m: _days(today - timedelta(days=1), 1, now),
        ),
        (r"今天|今晚|今日|\btoday\b|\btonight\b", lambda m: _days(today, 1, now)),
        (r"大后天", lambda m: _days(today + timedelta(days=3), 1, now)),
        (
            r"后天|\bthe day after tomorrow\b",
            lambda m: _days(today + timedelta(days=2), 1, now),
        ),
        (r"明天|明晚|明早|\btomorrow\b", lambda m: _days(today + timedelta(days=1), 1, now)),
        (rf"{_NUM}\s*(?:个)?(天|周|星期|礼拜|月)(?:以)?前", lambda m: back(m[2], _num(m[1]))),
        (
            r"\b(\d+|a|one|two|three|four|five|six) (days?|weeks?|months?) ago\b",
            lambda m: back(m[2], _en_num(m[1])),
        ),
        (rf"{_NUM}\s*(?:个)?(天|周|星期|礼拜|月)(?:以)?后", lambda m: ahead(m[2], _num(m[1]))),
        (
            r"\bin (\d+|a|one|two|three|four|five|six) (days?|weeks?|months?)\b",
            lambda m: ahead(m[2], _en_num(m[1])),
        ),
        (
            r"下(?:个)?(?:周|星期|礼拜)|\bnext week\b",
            lambda m: _days(monday + timedelta(days=7), 7, now),
        ),
        (
            r"下(?:个)?月|\bnext month\b",
            lambda m: _month(next_month_first.year, next_month_first.month, now),
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
        (r"(\d{1,2})月(?:份)?", lambda m: month_(int(m[1]))),
        (rf"\bin {_MONTH}\b", lambda m: month_(MONTHS[m[1]])),
        (r"(\d{4})年|\bin (\d{4})\b", lambda m: _year_range(int(m[1] or m[2]), now)),
    ]


def _en_num(s: str) -> int:
    return {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}.get(s) or int(s)


def _date(
    month: int | str, day: int | str, year: str | None, now: datetime, *, nearest: bool = False
) -> tuple[datetime, datetime] | None:
    if nearest and year is None:
        d = _nearest(int(month), int(day), now)
    else:
        d = _latest(int(month), int(day), _year(year), now)
    return _days(d, 1, now) if d else None


def _nearest(month: int, day: int, now: datetime) -> date | None:
    """The date with this month and day nearest to ``now`` (last, this or next year)."""
    found = []
    for year in (now.year - 1, now.year, now.year + 1):
        try:
            found.append(date(year, month, day))
        except ValueError:
            continue
    return min(found, key=lambda d: abs(d - now.date())) if found else None


def _month_nearest(month: int, now: datetime) -> tuple[datetime, datetime] | None:
    """The month with this number whose first day is nearest to ``now``."""
    d = _nearest(month, 1, now) if 1 <= month <= 12 else None
    return _month(d.year, d.month, now) if d else None


def _month_latest(month: int, now: datetime) -> tuple[datetime, datetime] | None:
    if not 1 <= month <= 12:
        return None
    year = now.year if month <= now.month else now.year - 1
    return _month(year, month, now)


def _year_range(year: int, now: datetime) -> tuple[datetime, datetime] | None:
    if not 1970 <= year <= now.year:
        return None
    return _day_start(date(year, 1, 1), now), _day_start(date(year + 1, 1, 1), now)


_AS_OF = re.compile(r"(?:\bas of|截至|截止到?|直到)\s*$")
"""Said right before a time, it means up to the end of that time ("as of March", "截至3月")."""


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
        start: datetime | None
        start, end = found
        begin = m.start()
        if m[0].startswith("as of "):
            start = None
        elif up_to := _AS_OF.search(lowered[:begin]):
            start, begin = None, up_to.start()
        rest = re.sub(r"\s+", " ", text[:begin] + " " + text[m.end() :]).strip(" ,，、")
        return TimeRange(start=start, end=end, rest=rest or text)
    return None


def referred_range(text: str, said: datetime) -> Referred | None:
    """When what ``text``, said at ``said``, tells of happened: the range of the time expression
    said first, resolved against ``said``; None when it names none, or one too vague (longer than
    `REFERRED_DAYS`)."""
    lowered = text.lower()
    best: tuple[int, int, tuple[datetime, datetime]] | None = None
    for pattern, make in _rules(said, nearest=True):
        for m in re.finditer(pattern, lowered):
            if best is not None and m.start() >= best[0]:
                break
            found = make(m)  # type: ignore[operator]
            if found is not None:
                best = (m.start(), -len(m[0]), found)
                break
    if best is None:
        return None
    start, end = best[2]
    if end - start > timedelta(days=REFERRED_DAYS):
        return None
    return Referred(start=start, last=end - timedelta(microseconds=1))
