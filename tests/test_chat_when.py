"""Times said in chat ("明天下午", "周五", "后天三点半") resolved against world time: a day, and
either an exact start or a part of the day she may choose a start in."""

from __future__ import annotations

import pytest

from tests.conftest import at_time
from yuiju.message.when import WhenError, resolve_when

THURSDAY_EVENING = at_time("2026-09-03 20:00")  # 2026-09-03 is a Thursday


@pytest.mark.parametrize(
    ("said", "start", "window"),
    [
        ("明天下午", "2026-09-04 15:00", ("2026-09-04 13:00", "2026-09-04 18:00")),
        ("后天上午", "2026-09-05 10:00", ("2026-09-05 08:00", "2026-09-05 12:00")),
        ("大后天晚上", "2026-09-06 19:00", ("2026-09-06 18:00", "2026-09-06 21:00")),
        ("明晚", "2026-09-04 19:00", ("2026-09-04 18:00", "2026-09-04 21:00")),
        ("周六下午", "2026-09-05 15:00", ("2026-09-05 13:00", "2026-09-05 18:00")),
        ("下周三早上", "2026-09-09 08:00", ("2026-09-09 07:00", "2026-09-09 09:30")),
    ],
)
def test_a_part_of_a_day_is_a_window_with_a_usual_time(
    said: str, start: str, window: tuple[str, str]
) -> None:
    when = resolve_when(said, THURSDAY_EVENING)
    assert when.start == at_time(start)
    assert (when.earliest, when.latest) == (at_time(window[0]), at_time(window[1]))
    assert not when.all_day


@pytest.mark.parametrize(
    ("said", "start"),
    [
        ("明天下午三点", "2026-09-04 15:00"),
        ("后天 15:30", "2026-09-05 15:30"),
        ("周日十点半", "2026-09-06 10:30"),
        ("星期六下午两点一刻", "2026-09-05 14:15"),
        ("9月12日上午十点", "2026-09-12 10:00"),
        ("明天4点", "2026-09-04 16:00"),  # nobody meets at four in the morning
        ("3天后的晚上七点", "2026-09-06 19:00"),
    ],
)
def test_a_clock_time_is_exact(said: str, start: str) -> None:
    when = resolve_when(said, THURSDAY_EVENING)
    assert when.start == at_time(start) and when.earliest is None and when.latest is None


@pytest.mark.parametrize(
    ("said", "day"),
    [
        ("周五", "2026-09-04"),
        ("这周五", "2026-09-04"),
        ("下周五", "2026-09-11"),
        ("12号", "2026-09-12"),
        ("9月1日", "2027-09-01"),  # already past this year
        ("下下周一", "2026-09-14"),
    ],
)
def test_a_day_alone_is_all_day(said: str, day: str) -> None:
    when = resolve_when(f"别忘了{said}考试", THURSDAY_EVENING)
    assert when.all_day and when.start == at_time(f"{day} 00:00")


def test_a_time_without_a_day_is_the_next_one() -> None:
    assert resolve_when("晚上八点半", at_time("2026-09-03 10:00")).start == at_time(
        "2026-09-03 20:30"
    )
    assert resolve_when("早上九点", THURSDAY_EVENING).start == at_time("2026-09-04 09:00")


def test_how_it_reads_names_the_day_and_the_weekday() -> None:
    assert resolve_when("明天下午", THURSDAY_EVENING).said == "9月4日（周五）下午"
    assert resolve_when("周六 15:00", THURSDAY_EVENING).said == "9月5日（周六）15:00"
    assert resolve_when("周五", THURSDAY_EVENING).said == "9月4日（周五）"


@pytest.mark.parametrize("said", ["有空的时候", "下周", "改天", "", "昨天下午"])
def test_what_names_no_time_ahead_says_how_to_write_it(said: str) -> None:
    with pytest.raises(WhenError, match="明天下午"):
        resolve_when(said, THURSDAY_EVENING)


@pytest.mark.parametrize(
    ("said", "start"),
    [
        ("周六凌晨三点", "2026-09-05 03:00"),
        ("周日凌晨5点", "2026-09-06 05:00"),
        ("明天半夜两点", "2026-09-04 02:00"),
        ("明天夜里两点", "2026-09-04 02:00"),
        ("明天夜里十一点", "2026-09-04 23:00"),
        ("明天深夜十一点半", "2026-09-04 23:30"),
        ("明天清晨五点", "2026-09-04 05:00"),
        ("明天半夜十二点", "2026-09-05 00:00"),  # the midnight that ends that day
        ("明天晚上十二点", "2026-09-05 00:00"),
        ("明天晚上两点", "2026-09-05 02:00"),  # that night, never 14:00
        ("明晚三点", "2026-09-05 03:00"),
    ],
)
def test_night_words_are_night_never_afternoon(said: str, start: str) -> None:
    assert resolve_when(said, THURSDAY_EVENING).start == at_time(start)


def test_a_night_time_reads_as_the_night_it_is() -> None:
    assert resolve_when("明天晚上两点", THURSDAY_EVENING).said == "9月5日（周六）凌晨02:00"
    assert resolve_when("明天夜里十一点", THURSDAY_EVENING).said == "9月4日（周五）夜里23:00"


@pytest.mark.parametrize(
    ("said", "window"),
    [
        ("周六凌晨", ("2026-09-05 00:00", "2026-09-05 06:00")),
        ("明天深夜", ("2026-09-04 22:00", "2026-09-04 23:59")),
        ("明天清晨", ("2026-09-04 05:00", "2026-09-04 07:00")),
    ],
)
def test_a_night_part_is_a_window_at_night(said: str, window: tuple[str, str]) -> None:
    when = resolve_when(said, THURSDAY_EVENING)
    assert (when.earliest, when.latest) == (at_time(window[0]), at_time(window[1]))


def test_next_month_with_a_day_is_that_day_of_next_month() -> None:
    assert resolve_when("下个月十号", THURSDAY_EVENING).start == at_time("2026-10-10 00:00")
    assert resolve_when("下月3号下午三点", THURSDAY_EVENING).start == at_time("2026-10-03 15:00")


@pytest.mark.parametrize(
    ("said", "start"),
    [
        ("昨天下午三点", "2026-09-02 15:00"),
        ("前天", "2026-09-01 00:00"),
        ("昨晚", "2026-09-02 19:00"),
        ("上周六下午", "2026-08-29 15:00"),
    ],
)
def test_a_past_time_resolves_when_the_past_is_asked_for(said: str, start: str) -> None:
    when = resolve_when(said, THURSDAY_EVENING, past_ok=True)
    assert when.start == at_time(start) and when.past
    with pytest.raises(WhenError, match="已经过去了"):
        resolve_when(said, THURSDAY_EVENING)
