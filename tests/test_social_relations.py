"""The social model, pure: closeness that moves and decays, news with its source, invitations
reviewed against her calendar."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.conftest import at_time
from yuiju.world.relations import (
    MAX_PER_INVITER,
    Appointment,
    NewsItem,
    Party,
    Relation,
    appointment_id,
    band,
    heard,
    keep_news,
    news_id,
    news_to_tell,
    note_presence,
    review_invitation,
    settle_over,
)
from yuiju.world.town import HAURA

YUIJU = Party(id="yuiju", name="悠酱")
KAEDE = Party(id="kaede", name="枫")
XIAOLIN = Party(kind="person", id="qq:123", name="小林")


def test_closeness_moves_with_what_happens_and_decays_back_to_where_it_rests() -> None:
    now = at_time("2026-09-01 12:00")
    relation = Relation(party=KAEDE, closeness=40, rest=40)
    after = relation.moved(now, 10, met=True)
    assert after.closeness_at(now) == 50 and after.meetings == 1 and after.last_met == now
    two_weeks = after.closeness_at(now + timedelta(days=14))
    assert two_weeks == pytest.approx(45)  # half the distance to 40 in one half-life
    assert after.closeness_at(now + timedelta(days=200)) == pytest.approx(40, abs=0.01)
    assert relation.moved(now, 500).closeness == 100 and relation.moved(now, -500).closeness == 0


def test_bands_name_closeness_in_chinese() -> None:
    assert [band(v) for v in (5, 30, 50, 70, 95)] == [
        "不太熟",
        "认识",
        "朋友",
        "好朋友",
        "最好的朋友",
    ]


def test_party_keys_separate_characters_from_people() -> None:
    assert KAEDE.key == "character:kaede" and XIAOLIN.key == "person:qq:123"


def news(text: str = "小林下周要搬家", **kw: object) -> NewsItem:
    fields: dict[str, object] = {
        "id": news_id(XIAOLIN, text),
        "text": text,
        "about": XIAOLIN,
        "origin": XIAOLIN,
        "source": XIAOLIN,
        "learned_at": at_time("2026-09-01 20:00"),
        **kw,
    }
    return NewsItem.model_validate(fields)


def test_news_passes_on_with_who_told_whom_and_when() -> None:
    now = at_time("2026-09-02 12:00")
    item = news()
    told = news_to_tell([item], [], KAEDE.key, now)
    assert told == [item]
    copy = heard(item, YUIJU, now, "cnv_1")
    assert (copy.origin, copy.source, copy.learned_at, copy.episode_id, copy.hops) == (
        XIAOLIN,
        YUIJU,
        now,
        "cnv_1",
        1,
    )
    assert copy.told_by_line() == "听悠酱说" and item.told_by_line() == "小林说"


def test_news_is_not_told_twice_nor_to_whom_it_is_about_nor_back_to_its_teller() -> None:
    now = at_time("2026-09-02 12:00")
    item = news()
    assert news_to_tell([item], [item], KAEDE.key, now) == []
    assert news_to_tell([item], [], XIAOLIN.key, now) == []
    passed = heard(item, KAEDE, now, None)
    assert news_to_tell([passed], [], KAEDE.key, now) == []


def test_old_news_is_no_longer_passed_on_and_her_news_is_bounded() -> None:
    item = news()
    assert news_to_tell([item], [], KAEDE.key, at_time("2026-09-20 12:00")) == []
    many = [news(f"消息{i}", about=None) for i in range(30)]
    kept = keep_news([], *many)
    assert len(kept) == 20 and kept[-1].text == "消息29"
    assert keep_news(kept, kept[-1]) == kept  # what she knows stays as she first heard it


def invitation(start: str, place: str = "park", by: Party = KAEDE, **kw: object) -> Appointment:
    moment = at_time(start)
    return Appointment(
        id=appointment_id(by, "yuiju", moment, place),
        other=by,
        asked_by=by,
        place=place,
        start=moment,
        created_at=at_time("2026-09-03 12:00"),
        **kw,  # type: ignore[arg-type]
    )


NOW = at_time("2026-09-03 12:00")  # a Thursday


@pytest.mark.parametrize(
    ("start", "place", "why"),
    [
        ("2026-09-05 15:00", "park", None),  # Saturday afternoon in the park
        ("2026-09-04 10:00", "park", "那时候要上课"),
        ("2026-09-05 23:00", "park", "那时候在睡觉"),
        ("2026-09-05 07:00", "park", "那个时间不方便出门"),
        ("2026-09-05 03:00", "park", "那时候在睡觉"),
        ("2026-09-04 03:00", "park", "那时候在睡觉"),  # a school day, but class is not at night
        ("2026-09-05 03:00", "cafe", "那时候在睡觉"),
        ("2026-09-03 11:00", "park", "那个时间已经过去了"),
        ("2026-09-05 09:00", "cafe", "薄暮咖啡那时候不开门"),
        ("2026-09-05 15:00", "home", "家不方便见面"),
        ("2026-09-03 12:10", "park", "时间太赶了"),
        ("2026-09-20 15:00", "park", "太久以后"),
        ("2026-09-05 15:00", "moon", "没有「moon」"),
    ],
)
def test_an_invitation_is_reviewed_against_her_calendar_and_the_town(
    start: str, place: str, why: str | None
) -> None:
    found = review_invitation(invitation(start, place), [], now=NOW, town=HAURA)
    assert (found is None) if why is None else (found is not None and why in found)


def test_she_declines_what_clashes_with_her_plans_or_comes_from_a_stranger() -> None:
    planned = [
        invitation("2026-09-05 15:30", by=YUIJU.model_copy(update={"id": "chika", "name": "千夏"}))
    ]
    clash = review_invitation(invitation("2026-09-05 15:00"), planned, now=NOW, town=HAURA)
    assert clash is not None and "千夏" in clash
    stranger = review_invitation(
        invitation("2026-09-05 15:00"), [], now=NOW, town=HAURA, closeness=5
    )
    assert stranger is not None and "不太熟" in stranger


def test_one_person_cannot_fill_her_week_unless_lenient() -> None:
    mine = [
        invitation(f"2026-09-0{5 + i} 15:00", by=XIAOLIN, source="chat")
        for i in range(MAX_PER_INVITER)
    ]
    more = invitation("2026-09-08 18:00", by=XIAOLIN, source="chat")
    found = review_invitation(more, mine, now=NOW, town=HAURA)
    assert found is not None and "小林" in found
    assert review_invitation(more, mine, now=NOW, town=HAURA, lenient=True) is None


def test_an_appointment_whose_time_passed_is_missed_with_where_she_was() -> None:
    planned = invitation("2026-09-05 15:00")
    after, missed = settle_over([planned], at_time("2026-09-05 16:01"), "家")
    assert [a.status for a in after] == ["missed"] and missed[0].note == "那时她在家"
    still, none = settle_over([planned], at_time("2026-09-05 15:59"), "家")
    assert still == [planned] and none == []


def test_meeting_the_other_at_the_place_in_time_keeps_it() -> None:
    planned = invitation("2026-09-05 15:00")
    assert planned.keeps(at_time("2026-09-05 14:35"), "park", KAEDE.key)
    assert not planned.keeps(at_time("2026-09-05 14:20"), "park", KAEDE.key)
    assert not planned.keeps(at_time("2026-09-05 15:10"), "coast", KAEDE.key)
    assert planned.line(HAURA, at_time("2026-09-04 20:00")) == "明天 15:00 和枫在南风公园（枫约的）"


def test_copies_of_a_card_are_told_apart_by_name() -> None:
    from yuiju.world.social import unique_names

    names = unique_names({"yuiju": "悠酱", "kaede@1": "枫", "kaede@2": "枫"})
    assert names == {"yuiju": "悠酱", "kaede@1": "枫@1", "kaede@2": "枫@2"}


# -- keeping appointments (issue 31) --------------------------------------------------------------


def _with_appointment(now: str, location: str, **kw: object) -> object:
    from tests.conftest import make_ctx
    from yuiju.world.relations import SocialState

    apt = invitation("2026-09-05 15:00", place="cafe", by=YUIJU)  # 悠酱 and she meet at 15:00
    return make_ctx(
        now,
        id="kaede",
        location=location,
        social=SocialState(appointments=[apt]),
        **kw,  # type: ignore[arg-type]
    )


def test_nothing_she_starts_at_the_place_runs_into_her_appointment() -> None:
    """Seed 4's 枫: invited 悠酱 to the café at 15:00, then started three hours of work there at
    13:10, so neither could meet the other. Work now ends at the start, and she decides again
    within the window."""
    from yuiju.world.loader import load_actions

    actions = load_actions().actions
    work = actions["work_at_cafe"]
    early = _with_appointment("2026-09-05 13:10", "cafe", duration_minute=180)
    assert work.available(early) and work.minutes(early) == 110  # 13:10 → 15:00
    late = _with_appointment("2026-09-05 14:10", "cafe", duration_minute=60)
    assert not work.available(late)
    assert work.why_not(late) == "快到约好的时间了（15:00 和悠酱在薄暮咖啡）"
    # once the window is open, a pastime there is waiting for her (who breaks it off)
    waiting = _with_appointment("2026-09-05 14:40", "cafe", duration_minute=30)
    assert actions["drink_coffee"].available(waiting)
    assert not actions["read_at_home"].available(_with_appointment("2026-09-05 14:40", "home"))


def test_elsewhere_she_is_free_in_time_to_set_off_and_may_always_go() -> None:
    from yuiju.world.loader import load_actions

    actions = load_actions().actions
    home = _with_appointment("2026-09-05 14:00", "home")
    assert not actions["read_at_home"].available(home)  # free by 14:15 to set off
    assert actions["go_to_cafe"].available(home)
    earlier = _with_appointment("2026-09-05 13:00", "home", duration_minute=60)
    assert actions["read_at_home"].minutes(earlier) == 60  # ends 14:00, before 14:15


def _there(a: Appointment, place: str, since: str, until: str, moving_to: str | None = None):
    (noted,) = note_presence(
        [a],
        place=place,
        since=at_time(since),
        until=at_time(until),
        town=HAURA,
        moving_to=moving_to,
    )
    return noted


def test_the_record_says_where_she_was_at_the_appointments_time_not_at_check_time() -> None:
    planned = invitation("2026-09-05 15:00", place="cafe")
    mine = _there(planned, "pond", "2026-09-05 14:10", "2026-09-05 15:40")
    mine = _there(mine, "park", "2026-09-05 15:45", "2026-09-05 17:00", moving_to=None)
    _, (missed,) = settle_over([mine], at_time("2026-09-05 17:00"), "南风公园")
    assert missed.status == "missed" and missed.note == "那时她在水音池"
    on_the_way = _there(planned, "home", "2026-09-05 14:55", "2026-09-05 15:05", "cafe")
    _, (late,) = settle_over([on_the_way], at_time("2026-09-05 16:30"), "薄暮咖啡")
    assert late.note == "那时她在去薄暮咖啡的路上"


def test_both_at_the_place_in_the_window_keeps_it_though_they_did_not_meet() -> None:
    """Seed 4: 枫 at the café working 13:10–16:10, 悠酱 sitting there 14:25–16:10."""
    planned = invitation("2026-09-05 15:00", place="cafe")
    kaede = _there(planned, "cafe", "2026-09-05 13:10", "2026-09-05 16:10")
    yuiju = _there(planned, "cafe", "2026-09-05 14:25", "2026-09-05 16:10")
    assert (kaede.there_from, kaede.there_until) == (
        at_time("2026-09-05 14:30"),
        at_time("2026-09-05 16:00"),
    )
    _, (kept,) = settle_over([kaede], at_time("2026-09-05 16:10"), "薄暮咖啡", {KAEDE.key: [yuiju]})
    assert kept.status == "kept"
    # one of them there, the other elsewhere (or not known): missed
    away = _there(planned, "park", "2026-09-05 14:00", "2026-09-05 16:10")
    _, (missed,) = settle_over(
        [kaede], at_time("2026-09-05 16:10"), "薄暮咖啡", {KAEDE.key: [away]}
    )
    assert missed.status == "missed"
    _, (unknown,) = settle_over([kaede], at_time("2026-09-05 16:10"), "薄暮咖啡")
    assert unknown.status == "missed"
    # there one after the other, never at the same time: missed
    early = _there(planned, "cafe", "2026-09-05 14:20", "2026-09-05 14:50")
    late = _there(planned, "cafe", "2026-09-05 15:10", "2026-09-05 16:00")
    _, (apart,) = settle_over([early], at_time("2026-09-05 16:10"), "薄暮咖啡", {KAEDE.key: [late]})
    assert apart.status == "missed"
