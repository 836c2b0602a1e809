"""Her day as the decision prompt tells it: the day's landmarks once each, the last steps as they
happened with moves in a row as one route, and only the last one's reason."""

from __future__ import annotations

from datetime import datetime, timedelta

from tests.conftest import at_time
from yuiju.memory.episodes import Episode
from yuiju.world.day_record import REASON_CHARS, day_record
from yuiju.world.loader import load_actions
from yuiju.world.town import HAURA

CATALOGUE = load_actions()


def episode(start: str, action_id: str, minutes: int, reason: str = "随便") -> Episode:
    time = at_time(start)
    return Episode(
        id=f"{start}|{action_id}",
        character_id="yuiju",
        type="behavior",
        time=time,
        end_time=time + timedelta(minutes=minutes),
        status="completed",
        summary="…",
        data={
            "action": action_id,
            "name": CATALOGUE.actions[action_id].name,
            "place": CATALOGUE.actions[action_id].at or "home",
            "reason": reason,
            "decided_by": "utility",
        },
    )


def record(now: str, *episodes: Episode):  # type: ignore[no-untyped-def]
    return day_record(list(episodes), at_time(now), action_of=CATALOGUE.actions.get, town=HAURA)


def test_the_days_landmarks_come_once_each_with_a_span_when_long_and_without_leisure() -> None:
    day = record(
        "2026-09-01 17:20",
        episode("2026-09-01 06:40", "wake_up", 10),
        episode("2026-09-01 06:50", "eat_breakfast", 20),
        episode("2026-09-01 07:10", "go_to_school", 20),
        episode("2026-09-01 07:30", "class_break", 10),  # a rest in the classroom: not a landmark
        episode("2026-09-01 07:40", "attend_class", 260),
        episode("2026-09-01 12:00", "school_lunch", 30),
        episode("2026-09-01 12:30", "use_phone", 30),  # leisure: not a landmark
        episode("2026-09-01 13:00", "attend_class", 210),
        episode("2026-09-01 16:30", "go_home_from_school", 20),
        episode("2026-09-01 16:50", "read_at_home", 30, "想看完那本小说"),
    )

    assert day.today == (
        "06:40 起床",
        "06:50 在家吃早饭",
        "07:40–12:00 在学校上课",
        "12:00 在学校食堂吃午饭",
        "13:00–16:30 在学校上课",
    )
    assert day.recent == ("16:30 放学回家", "16:50 在家看书（想看完那本小说）")


def test_moves_in_a_row_are_one_route_and_the_same_landmark_again_is_one_stretch() -> None:
    day = record(
        "2026-09-05 13:30",
        episode("2026-09-05 09:00", "go_to_supermarket", 10),
        episode("2026-09-05 09:10", "buy_ingredients", 15),
        episode("2026-09-05 09:25", "buy_ingredients", 15),
        episode("2026-09-05 09:40", "idle", 10),
        episode("2026-09-05 09:50", "go_from_supermarket_to_station", 5),
        episode("2026-09-05 09:55", "go_from_station_to_coast", 15, "想去海边吹吹风"),
    )

    assert day.today == ("09:10 在超市买食材",)  # two buys in a row: one stretch, under an hour
    assert day.recent == ("09:40 发呆", "09:50 路线：超市→羽浦町站→月汐海岸（想去海边吹吹风）")


def test_yesterdays_steps_are_marked_and_only_todays_landmarks_count() -> None:
    day = record(
        "2026-09-02 06:50",
        episode("2026-09-01 19:00", "eat_at_diner", 30),
        episode("2026-09-01 22:00", "sleep", 520),
        episode("2026-09-02 06:40", "wake_up", 10, "闹钟响了" * 20),
    )

    assert day.today == ()
    assert day.recent[0] == "昨天22:00 睡觉"
    assert day.recent[1].startswith("06:40 起床（闹钟响了") and day.recent[1].endswith("…）")
    assert len(day.recent[1]) <= len("06:40 起床（）…") + REASON_CHARS


def test_an_action_no_longer_loaded_is_told_by_its_recorded_name() -> None:
    gone = episode("2026-09-01 09:00", "idle", 10, "发会儿呆")
    gone.data.update(action="old_action", name="以前的行为")

    day = record("2026-09-01 09:10", gone)

    assert day.recent == ("09:00 以前的行为（发会儿呆）",)


def test_no_episodes_is_an_empty_record() -> None:
    day = day_record(
        [],
        datetime.fromisoformat("2026-09-01T08:00+08:00"),
        action_of=CATALOGUE.actions.get,
        town=HAURA,
    )
    assert day.today == () and day.recent == ()
