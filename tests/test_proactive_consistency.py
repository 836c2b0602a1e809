"""Proactive posts consistent with the event they share (issue 30, an outside rerun): four posts
an inventing model wrote reached the group although their event and her record of that hour say
otherwise. Each is reproduced here as the rerun had it, and the true post after it goes out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tests.conftest import at_time, make_character
from tests.test_chat_closed_world import WeatherWorld, yesterday
from tests.test_chat_grounding import done, post_writer, share
from tests.test_message_service import LEXICON
from tests.test_proactive import G, make_service
from yuiju.memory.episodes import EpisodeRepo
from yuiju.message.people_grounding import PeopleCheck
from yuiju.world.clock import SimClock

TRUE_POST = "刚在家吃完早饭～"
NEIGHBOURS = {"kaede": ("枫",), "chika": ("千夏",)}
"""The other characters of her town, as the chat side reads them from their cards."""


async def post(
    redis: Any,
    history: Any,
    written: str,
    *,
    action: str = "eat_breakfast",
    ends: str = "08:29",
    before: list[Any] | None = None,
    weather: tuple[str, str] = ("雨", "严寒"),
    true_post: str = TRUE_POST,
    her: Any = None,
    said: Sequence[tuple[str, str]] = (),
) -> tuple[list[Any], Any]:
    """She shares ``action`` ending at ``ends`` (her record of the day: ``before``); the model
    writes ``written`` first, then ``true_post``. Returns what was sent and the model."""
    clock = SimClock(at_time("2026-09-01 06:00"))
    episodes = EpisodeRepo(history)
    await episodes.ensure()
    for e in before or []:
        await episodes.put(e)
    model = post_writer(written, true_post)
    people = PeopleCheck(episodes, "yuiju", NEIGHBOURS)
    service, sender, _ = await make_service(
        redis, history, clock=clock, model=model, lexicon=LEXICON, people=people
    )
    service.states = WeatherWorld(her or make_character(), weather)  # type: ignore[assignment]
    for person, text in said:  # the group's conversation, a while before the event ends
        service.group_context.messages.setdefault(G, []).append(  # type: ignore[attr-defined]
            {
                "sender_id": person,
                "sender_name": "小林",
                "text": text,
                "time": at_time("2026-09-01 07:30"),
                "from_bot": False,
            }
        )
    await share(service, clock, action, ends)
    return sender.sent, model


AT_HOME_ALL_DAY = [
    done("wake_up", "07:00", 10),
    done("eat_breakfast", "07:10", 20),
    done("read_at_home", "08:00", 60),
]


EARLY_READING = [
    done("wake_up", "07:00", 10),
    done("read_at_home", "07:20", 30, "看了会儿小说，心情+6"),
]


@pytest.mark.parametrize(
    "written",
    [
        "和千夏一起去海边看日落啦！",  # with someone: still her doing, somewhere else
        "刚买了一本新小说，晚上要熬夜看了📚",  # she read a novel this morning, bought none
    ],
)
async def test_a_breakfast_post_about_somewhere_else_or_a_purchase_is_not_sent(
    redis: Any, sqlite_history: Any, written: str
) -> None:
    sent, model = await post(redis, sqlite_history, written, before=EARLY_READING)
    assert sent == [(G, TRUE_POST)], model.calls[-1][-1]


@pytest.mark.parametrize(
    "written",
    [
        "和千夏一起吃了早饭～",  # breakfast is true, 千夏 was not there
        "千夏说她今天要去神社，好羡慕",  # 千夏 said nothing to her
    ],
)
async def test_what_a_post_says_of_someone_she_knows_is_checked_as_in_chat(
    redis: Any, sqlite_history: Any, written: str
) -> None:
    sent, model = await post(redis, sqlite_history, written, before=EARLY_READING)
    assert sent == [(G, TRUE_POST)], model.calls[-1][-1]
    assert "千夏" in model.calls[1][-1]["content"], model.calls[1][-1]


async def test_a_post_about_someone_she_does_not_know_is_not_sent(
    redis: Any, sqlite_history: Any
) -> None:
    sent, model = await post(
        redis,
        sqlite_history,
        "阿凯说他下周要转学，有点舍不得",
        action="read_at_home",
        ends="09:00",
        before=AT_HOME_ALL_DAY,
        true_post="在家看了一会儿书～",
    )
    assert sent == [(G, "在家看了一会儿书～")], model.calls[-1][-1]
    assert "阿凯" in model.calls[1][-1]["content"], model.calls[1][-1]


async def test_a_post_about_yesterday_s_shopping_as_today_s_is_not_sent(
    redis: Any, sqlite_history: Any
) -> None:
    shopping = yesterday(done("buy_ingredients", "16:00", 30))
    sent, model = await post(
        redis,
        sqlite_history,
        "买好菜回家啦，今天有点冷",
        action="read_at_home",
        ends="09:00",
        before=[shopping, *AT_HOME_ALL_DAY],
        true_post="在家看了一会儿书，今天有点冷",
    )
    assert sent == [(G, "在家看了一会儿书，今天有点冷")], model.calls[-1][-1]


async def test_a_post_true_to_its_event_and_her_day_goes_out_first_time(
    redis: Any, sqlite_history: Any
) -> None:
    sent, model = await post(
        redis,
        sqlite_history,
        "在家看了一会儿书，今天有点冷",
        action="read_at_home",
        ends="09:00",
        before=AT_HOME_ALL_DAY,
    )
    assert sent == [(G, "在家看了一会儿书，今天有点冷")] and len(model.calls) == 1


XIAOLIN = make_character(
    social={
        "relations": {"person:qq:5": {"party": {"kind": "person", "id": "qq:5", "name": "小林"}}}
    }
)
"""Her state when she knows 小林 from chat."""


@pytest.mark.parametrize("in_the_group", [True, False])
async def test_what_someone_she_knows_just_said_in_the_group_may_be_posted(
    redis: Any, sqlite_history: Any, in_the_group: bool
) -> None:
    written = "小林说他下周要去海边，好羡慕"
    sent, model = await post(
        redis,
        sqlite_history,
        written,
        before=EARLY_READING,
        her=XIAOLIN,
        said=[("qq:5", "我下周要去海边玩！")] if in_the_group else [],
    )
    if in_the_group:
        assert sent == [(G, written)] and len(model.calls) == 1, model.calls[-1][-1]
    else:  # he never said it
        assert sent == [(G, TRUE_POST)], model.calls[-1][-1]


@pytest.mark.parametrize(
    ("written", "sent"),
    [
        ("刚出门就下起了雨", False),  # she has not left home today
        ("买好菜回家啦", False),
        ("吃完早饭，准备出门啦", True),  # about to: no claim that she did
        ("吃饱了，快出门了", True),
        ("今天一直没出门，外面好冷", True),
    ],
)
async def test_leaving_and_coming_home_are_checked_against_her_ways_that_day(
    redis: Any, sqlite_history: Any, written: str, sent: bool
) -> None:
    out, model = await post(redis, sqlite_history, written, before=EARLY_READING)
    assert out == [(G, written if sent else TRUE_POST)], model.calls[-1][-1]


BREAKFAST_MORNING = [
    done("wake_up", "07:40", 10, "起床了，外面雨"),
    done("eat_breakfast", "07:50", 20, "吃了米饭和味噌汤"),
]
"""The probe's record (issue 30), after the quiet hours: up at 07:40, breakfast at home
07:50–08:10 (米饭和味噌汤)."""


@pytest.mark.parametrize(
    "written",
    [
        "早上收到了朋友寄来的明信片",  # nothing received in her record
        "妈妈做的早饭真好吃",  # she has no family; someone else cooked for her
        "早饭是自己做的煎蛋",  # her breakfast was 米饭和味噌汤
        "今天早上起晚了",  # she got up at seven
    ],
)
async def test_a_breakfast_post_her_morning_does_not_back_is_not_sent(
    redis: Any, sqlite_history: Any, written: str
) -> None:
    sent, model = await post(redis, sqlite_history, written, ends="08:10", before=BREAKFAST_MORNING)
    assert sent == [(G, TRUE_POST)], model.calls[-1][-1]


@pytest.mark.parametrize(
    "written",
    [
        "早饭吃的米饭和味噌汤",
        "早饭是米饭和味噌汤",
        "早上七点多起的床",
        "今天起得挺早",
        "吃完早饭了，好饱",
    ],
)
async def test_a_breakfast_post_true_to_her_morning_goes_out_unchanged(
    redis: Any, sqlite_history: Any, written: str
) -> None:
    sent, model = await post(redis, sqlite_history, written, ends="08:10", before=BREAKFAST_MORNING)
    assert sent == [(G, written)] and len(model.calls) == 1, model.calls[-1][-1]


async def test_a_post_about_a_message_someone_she_knows_sent_goes_out(
    redis: Any, sqlite_history: Any
) -> None:
    written = "早上收到了小林的消息，说下周要去海边"
    sent, model = await post(
        redis,
        sqlite_history,
        written,
        ends="08:10",
        before=BREAKFAST_MORNING,
        her=XIAOLIN,
        said=[("qq:5", "我下周要去海边玩！")],
    )
    assert sent == [(G, written)] and len(model.calls) == 1, model.calls[-1][-1]


@pytest.mark.parametrize(
    ("answer", "strangers"),
    [
        ("妈妈做的早饭真好吃", ["妈妈"]),
        ("今天和姐姐一起去了超市", ["姐姐"]),
        ("我没有家人，一个人住", []),
        ("你妈妈做的菜一定很好吃", []),
        ("便利店的店员姐姐人很好", []),
        ("如果有个姐姐就好了", []),
    ],
)
def test_family_she_does_not_have_is_someone_she_does_not_know(
    answer: str, strangers: list[str]
) -> None:
    from yuiju.message.people_grounding import known_people
    from yuiju.message.people_grounding import strangers as unknown

    people = known_people(NEIGHBOURS, make_character())
    assert [name for name, _ in unknown(answer, people)] == strangers


def test_waking_late_is_checked_only_against_a_wake_up_at_a_normal_time() -> None:
    from tests.test_message_service import LEXICON
    from yuiju.message.grounding import claims, problems

    now = at_time("2026-09-01 09:00")
    said = claims("今天早上起晚了", LEXICON)
    assert problems(said, BREAKFAST_MORNING, now)  # up at 07:40
    assert not problems(said, [done("eat_breakfast", "07:50", 20)], now)  # no wake-up: unknown
    assert not problems(said, [done("wake_up", "08:40", 10)], now)
    assert not problems(said, [done("sleep_more", "07:30", 10), *BREAKFAST_MORNING], now)
    assert all(c.term.kind != "late" for c in claims("和千夏一起晚上去散步了", LEXICON))
