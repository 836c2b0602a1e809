"""The shipped action catalogue and character cards: every example is a test."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from tests.conftest import at_time, make_ctx
from yuiju.characters import CARDS_DIR, CardError, load_card
from yuiju.world.action import Action, ActionContext
from yuiju.world.loader import load_actions
from yuiju.world.state import CharacterState, RunningAction
from yuiju.world.town import HAURA

CATALOGUE = load_actions()
ACTIONS = list(CATALOGUE)
CHINESE = re.compile(r"[\u4e00-\u9fff]")


def test_every_built_in_module_loads() -> None:
    assert CATALOGUE.broken == {}
    assert len(CATALOGUE) >= 10


def test_action_ids_and_names_are_unique() -> None:
    assert len({a.id for a in ACTIONS}) == len(ACTIONS)
    assert len({a.name for a in ACTIONS}) == len(ACTIONS)


@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: a.id)
def test_every_action_is_described_in_chinese_at_a_real_place(action: Action) -> None:
    assert CHINESE.search(action.name), action.name
    assert action.description.strip() and CHINESE.search(action.description)
    assert action.at is None or action.at in HAURA.places
    assert action.moves_to is None or action.moves_to in HAURA.places


@pytest.mark.parametrize("action", [a for a in ACTIONS if a.asks_duration], ids=lambda a: a.id)
def test_an_action_that_asks_a_duration_names_its_choices_in_its_description(
    action: Action,
) -> None:
    tiers = "/".join(str(t) for t in action.duration.tiers)  # type: ignore[union-attr]
    assert f"[{tiers}分钟]" in action.description


@pytest.mark.parametrize("place", sorted(HAURA.places))
def test_idle_is_available_awake_anywhere(place: str) -> None:
    for clock in ("00:30", "09:00", "15:00", "23:30"):
        ctx = make_ctx(f"2026-09-05 {clock}", location=place)
        assert CATALOGUE.actions["idle"].available(ctx), (place, clock)


def available_at(ctx: ActionContext) -> set[str]:
    return {a.id for a in ACTIONS if a.available(ctx)}


def test_closed_school_offers_no_school_actions_but_she_can_leave() -> None:
    ctx = make_ctx("2026-09-01 19:00", location="school", stamina=90, satiety=30)
    assert ctx.world.places["school"].open is False

    school_actions = [a for a in ACTIONS if a.at == "school" and a.moves_to is None]
    assert school_actions
    assert not {a.id for a in school_actions} & available_at(ctx)
    for action in school_actions:
        assert "不开门" in (action.why_not(ctx) or ""), action.id
    assert "go_home_from_school" in available_at(ctx)  # leaving a closed place is always possible


def test_closed_cafe_offers_no_cafe_actions() -> None:
    latte = Action(id="drink_latte", name="喝拿铁", description="在咖啡店喝一杯拿铁。", at="cafe")

    closed = make_ctx("2026-09-05 09:59", location="cafe")
    opened = make_ctx("2026-09-05 10:00", location="cafe")

    assert not latte.available(closed)
    assert latte.why_not(closed) == "薄暮咖啡现在不开门（营业时间 10:00–20:00）"
    assert latte.available(opened) and latte.why_not(opened) is None


@pytest.mark.parametrize("clock", ["02:00", "06:50", "07:30", "13:00"])
def test_asleep_only_wake_up_and_sleep_more_are_candidates(clock: str) -> None:
    ctx = make_ctx(f"2026-09-01 {clock}", asleep=True, stamina=60)
    assert available_at(ctx) == {"wake_up", "sleep_more"}
    assert all(a.while_asleep for a in ACTIONS if a.id in available_at(ctx))
    assert CATALOGUE.actions["idle"].why_not(ctx) == "她在睡觉"


def test_awake_never_offers_the_asleep_actions() -> None:
    ctx = make_ctx("2026-09-01 07:00", asleep=False)
    assert not available_at(ctx) & {"wake_up", "sleep_more"}


@pytest.mark.parametrize(
    ("now", "character", "expected", "absent"),
    [
        (
            "2026-09-01 07:00",
            {},
            {"eat_breakfast", "go_to_school", "go_to_park", "idle"},
            {"sleep"},
        ),
        ("2026-09-05 07:00", {}, {"eat_breakfast", "go_to_park"}, {"go_to_school"}),  # Saturday
        ("2026-09-01 09:00", {"location": "school"}, {"attend_class"}, {"school_lunch"}),
        (
            "2026-09-01 12:10",
            {"location": "school", "satiety": 40},
            {"school_lunch", "library_study"},
            {"attend_class"},
        ),
        ("2026-09-01 22:00", {}, {"sleep"}, {"go_to_park", "eat_breakfast"}),
        ("2026-09-01 14:00", {"stamina": 5}, {"sleep", "rest_at_home"}, {"do_homework"}),
        (
            "2026-09-01 10:00",
            {"location": "park"},
            {"walk_in_park", "go_home_from_park"},
            {"go_to_school"},
        ),
    ],
)
def test_candidates_follow_place_time_and_needs(
    now: str, character: dict, expected: set[str], absent: set[str]
) -> None:
    found = available_at(make_ctx(now, **character))
    assert expected <= found
    assert not absent & found


# Run every action wherever and whenever it is offered, through start and completion.
MOMENTS = [
    f"2026-09-{d:02d} {h:02d}:{m:02d}" for d in (1, 5) for h in range(0, 24, 1) for m in (0, 55)
]


@pytest.mark.parametrize("place", ["home", "school", "park"])
@pytest.mark.parametrize(
    "needs",
    [
        {"stamina": 5, "satiety": 5, "mood": 5},
        {"stamina": 95, "satiety": 95, "mood": 95, "money": 0},
    ],
)
@pytest.mark.parametrize("asleep", [False, True])
def test_every_offered_action_runs_and_completes_within_bounds(
    place: str, needs: dict, asleep: bool
) -> None:
    ran = 0
    for now in MOMENTS:
        probe = make_ctx(now, location=place, asleep=asleep, **needs)
        for action in ACTIONS:
            if not action.available(probe):
                continue
            ctx = make_ctx(now, location=place, asleep=asleep, duration_minute=30, **needs)
            before = ctx.character.model_copy()
            summary = action.run(ctx) if action.run else None
            minutes = action.minutes(ctx)
            assert 1 <= minutes <= 24 * 60, (action.id, now, minutes)
            ctx.running = RunningAction(
                action_id=action.id,
                name=action.name,
                started_at=ctx.now,
                ends_at=ctx.now + timedelta(minutes=minutes),
                episode_id="bhv_test",
                place=place,
                reason="测试",
                decided_by="test",
            )
            ctx.now = ctx.running.ends_at
            done = action.complete(ctx) if action.complete else None
            for text in (summary, done):
                assert text is None or (isinstance(text, str) and text), action.id
            CharacterState.model_validate(ctx.character.model_dump())  # still within bounds
            assert ctx.character.money <= before.money
            ran += 1
    if not asleep or place == "home":
        assert ran > 0


def test_sleep_lasts_until_the_alarm_of_the_next_day() -> None:
    sleep = CATALOGUE.actions["sleep"]
    school_night = make_ctx("2026-09-01 22:30")  # Wednesday is a school day: 06:40
    friday_night = make_ctx("2026-09-04 22:30")  # Saturday: 07:30

    assert school_night.now + timedelta(minutes=sleep.minutes(school_night)) == at_time(
        "2026-09-02 06:40"
    )
    assert friday_night.now + timedelta(minutes=sleep.minutes(friday_night)) == at_time(
        "2026-09-05 07:30"
    )


def test_choose_minutes_snaps_the_asked_duration_up_to_a_tier() -> None:
    walk = CATALOGUE.actions["walk_in_park"]
    assert walk.asks_duration
    for asked, minutes in [(None, 30), (0, 30), (5, 10), (10, 10), (45, 60), (500, 120)]:
        assert walk.minutes(make_ctx(location="park", duration_minute=asked)) == minutes


@pytest.mark.parametrize("card_dir", sorted(p.parent.name for p in CARDS_DIR.glob("*/card.toml")))
def test_every_character_card_validates(card_dir: str) -> None:
    card = load_card(card_dir)
    assert card.id == card_dir
    assert CHINESE.search(card.name) and card.persona.strip()
    assert card.start.location in HAURA.places


def test_a_missing_card_names_the_fix(tmp_path) -> None:
    with pytest.raises(CardError, match=r"\[world\]\.characters"):
        load_card("nobody", folder=tmp_path)


def test_a_precondition_says_part_by_part_what_holds_and_what_does_not() -> None:
    """For `yuiju actions why`: every part of an ``&`` in its own words, holding or not."""
    from yuiju.world.action import at, at_least, between, condition, has_item

    @condition("没有伞")
    def has_umbrella(ctx: ActionContext) -> bool:
        return "伞" in ctx.character.inventory

    when = (
        between("06:00", "21:00")
        & at_least("stamina", 8)
        & (has_item("野莓") | has_item("鱼"))
        & ~at("park")
        & has_umbrella
    )
    ctx = make_ctx("2026-09-01 10:00", stamina=5, inventory={"鱼": 1})

    assert when.verdicts(ctx) == [
        (True, "现在在 06:00–21:00 之间"),
        (False, "体力不足 8（现在 5）"),
        (True, "有鱼"),
        (True, "她在家，不在南风公园"),
        (False, "没有伞"),
    ]
    assert when.why_not(ctx) == "体力不足 8（现在 5）；没有伞"  # unchanged for the observer
    with_umbrella = make_ctx("2026-09-01 10:00", inventory={"伞": 1})
    assert when.verdicts(with_umbrella)[-1] == (True, "成立（不成立时会说：没有伞）")
    assert (~at("home")).explain(with_umbrella) == "她在家"
