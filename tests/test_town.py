"""羽浦町: its places, the movements generated from its links, opening hours, and the catalogue."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from tests.conftest import make_ctx
from yuiju import cli as yuiju_cli
from yuiju.world.action import Action
from yuiju.world.loader import load_actions
from yuiju.world.policies.utility import UtilityPolicy
from yuiju.world.policy import DecisionRequest
from yuiju.world.randomness import Randomness
from yuiju.world.state import RunningAction
from yuiju.world.town import HAURA, Link

CATALOGUE = load_actions()
ACTIONS = list(CATALOGUE)
MOVES = [a for a in ACTIONS if a.moves_to is not None]


def offered(ctx) -> set[str]:
    return {a.id for a in ACTIONS if a.available(ctx)}


def movement(src: str, dst: str) -> Action:
    [found] = [a for a in MOVES if (a.at, a.moves_to) == (src, dst)]
    return found


# -- places ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("place_id", "name", "area"),
    [
        ("home", "家", "家"),
        ("school", "星见丘高校", "星见丘高校"),
        ("shop", "小町商店", "商业区"),
        ("supermarket", "超市", "商业区"),
        ("diner", "日和食堂", "商业区"),
        ("cafe", "薄暮咖啡", "商业区"),
        ("station", "羽浦町站", "商业区"),
        ("park", "南风公园", "公园周边"),
        ("pond", "水音池", "公园周边"),
        ("shrine", "结灯神社", "公园周边"),
        ("coast", "月汐海岸", "海岸"),
    ],
)
def test_every_place_of_the_town_exists_with_its_chinese_name(
    place_id: str, name: str, area: str
) -> None:
    place = HAURA.places[place_id]
    assert (place.name, place.area) == (name, area)
    assert HAURA.place_name(place_id) == name
    assert HAURA.neighbours(place_id), f"{place_id} is cut off from the town"


def test_the_town_has_exactly_its_eleven_places() -> None:
    assert HAURA.name == "羽浦町" and len(HAURA.places) == 11


# -- movements ------------------------------------------------------------------------------


def test_every_link_yields_two_movements_with_unique_ids_and_names() -> None:
    assert len(MOVES) == 2 * len(HAURA.links)
    assert len({a.id for a in MOVES}) == len(MOVES)
    assert len({a.name for a in MOVES}) == len(MOVES)
    pairs = {(a.at, a.moves_to) for a in MOVES}
    for link in HAURA.links:
        assert {(link.a, link.b), (link.b, link.a)} <= pairs, link
    assert all("move" in a.tags for a in MOVES)


@pytest.mark.parametrize(
    ("link", "src", "dst"),
    [(k, s, d) for k in HAURA.links for s, d in ((k.a, k.b), (k.b, k.a))],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_movement_costs_what_its_link_says_and_arrives_on_completion(
    link: Link, src: str, dst: str
) -> None:
    move = movement(src, dst)
    ctx = make_ctx(
        "2026-09-01 10:00", location=src, stamina=50, satiety=50, money=100
    )  # a school day
    assert move.available(ctx), move.why_not(ctx)

    move.run(ctx)  # type: ignore[misc]

    assert move.minutes(ctx) == link.minutes
    assert (ctx.character.stamina, ctx.character.satiety) == (50 - link.stamina, 50 - link.satiety)
    assert ctx.character.money == 100 - link.fare
    assert move.moves_to == dst and ctx.character.location == src  # she arrives when it completes


def test_the_train_charges_its_fare_and_needs_the_money() -> None:
    train = HAURA.link("station", "coast")
    assert train is not None and train.fare > 0
    for src, dst in (("station", "coast"), ("coast", "station")):
        move = movement(src, dst)
        assert f"[金币-{train.fare}]" in move.description and "电车" in move.description
        broke = make_ctx("2026-09-05 10:00", location=src, money=train.fare - 1)
        assert not move.available(broke)
        assert "金币不足" in (move.why_not(broke) or "")
        assert move.available(make_ctx("2026-09-05 10:00", location=src, money=train.fare))
    assert all(
        HAURA.link(a.at, a.moves_to).fare == 0
        for a in MOVES  # type: ignore[arg-type, union-attr]
        if {a.at, a.moves_to} != {"station", "coast"}
    )


# -- opening hours --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("place_id", "closed_at", "open_at", "way_out"),
    [
        ("cafe", "2026-09-05 21:00", "2026-09-05 15:00", "go_home_from_cafe"),
        ("school", "2026-09-01 19:00", "2026-09-01 13:00", "go_home_from_school"),
        ("shop", "2026-09-05 08:00", "2026-09-05 15:00", "go_home_from_shop"),
    ],
)
def test_a_closed_place_offers_none_of_its_actions_but_she_can_leave(
    place_id: str, closed_at: str, open_at: str, way_out: str
) -> None:
    needs = {"location": place_id, "stamina": 90, "satiety": 30, "mood": 40, "money": 300}
    own = [a for a in ACTIONS if a.at == place_id and a.moves_to is None]
    assert own

    closed = make_ctx(closed_at, **needs)
    assert closed.world.places[place_id].open is False
    assert not {a.id for a in own} & offered(closed)
    for action in own:
        assert "不开门" in (action.why_not(closed) or ""), action.id
    assert way_out in offered(closed)

    opened = make_ctx(open_at, **needs)
    assert {a.id for a in own} & offered(opened), (
        "the same needs at an open hour offer something here"
    )


def test_she_cannot_set_out_for_the_park_at_night_from_home() -> None:
    night = make_ctx("2026-09-05 23:00")
    go = CATALOGUE.actions["go_to_park"]
    assert not go.available(night)
    assert "21:30" in (go.why_not(night) or "")
    assert go.available(make_ctx("2026-09-05 20:00"))


@pytest.mark.parametrize("clock", ["21:45", "23:30", "02:00", "04:30"])
def test_she_can_always_walk_home_from_the_pond_at_night(clock: str) -> None:
    exhausted = {"stamina": 0, "satiety": 0, "mood": 0, "money": 0}
    at_pond = make_ctx(f"2026-09-05 {clock}", location="pond", **exhausted)
    assert "go_from_pond_to_park" in offered(at_pond)
    at_park = make_ctx(f"2026-09-05 {clock}", location="park", **exhausted)
    assert "go_home_from_park" in offered(at_park)


async def test_the_offline_policy_walks_her_home_from_the_pond_at_night() -> None:
    policy = UtilityPolicy(all_actions=ACTIONS)
    ctx = make_ctx("2026-09-05 23:30", location="pond", stamina=40, satiety=50)
    route = []
    for _ in range(4):
        decision = await policy.decide(
            DecisionRequest(
                ctx=ctx,
                candidates=[a for a in ACTIONS if a.available(ctx)],
                randomness=Randomness.seeded(3),
            )
        )
        route.append(decision.action.id)
        if decision.action.moves_to is None:
            break
        ctx.now += timedelta(minutes=decision.action.minutes(ctx))
        ctx.character.location = decision.action.moves_to
        ctx.character.last_action = decision.action.id
    assert route[:2] == ["go_from_pond_to_park", "go_home_from_park"], route


# -- the catalogue --------------------------------------------------------------------------


def test_the_catalogue_has_at_least_sixty_actions_each_with_tags() -> None:
    assert len(CATALOGUE) >= 60
    assert CATALOGUE.broken == {}
    untagged = [a.id for a in ACTIONS if not a.tags]
    assert untagged == []


def test_actions_list_json_shows_id_name_place_and_tags_of_every_action(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no stray yuiju.toml from the working directory

    assert yuiju_cli.main(["actions", "list", "--json"]) == 0

    rows = json.loads(capsys.readouterr().out)
    by_id = {r["id"]: r for r in rows}
    assert set(by_id) == set(CATALOGUE.actions)
    for action in ACTIONS:
        row = by_id[action.id]
        assert (row["name"], row["place"], row["tags"]) == (
            action.name,
            action.at,
            sorted(action.tags),
        )
        assert row["tags"], action.id


KINDS = {
    "move": {"go_to_park", "go_home_from_school", "go_from_station_to_coast"},
    "meal at home": {"eat_breakfast"},
    "meal at the diner": {"eat_at_diner"},
    "buying at the shop": {"buy_snack"},
    "buying at the supermarket": {"buy_ingredients"},
    "selling": {"sell_items"},
    "cooking": {"cook_and_eat"},
    "café coffee": {"drink_coffee"},
    "café work": {"work_at_cafe"},
    "studying": {"attend_class", "do_homework", "library_study"},
    "park walk": {"walk_in_park"},
    "coast walk": {"walk_on_coast"},
    "fishing": {"fish_at_pond"},
    "praying": {"pray_at_shrine"},
    "phone use and charging": {"use_phone", "charge_phone"},
    "idle": {"idle"},
    "sleep": {"sleep"},
    "wake up": {"wake_up"},
    "sleep a little more": {"sleep_more"},
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_of_action_yuiju_has_is_present(kind: str) -> None:
    missing = KINDS[kind] - set(CATALOGUE.actions)
    assert not missing, f"{kind}: {missing}"


@pytest.mark.parametrize(
    ("action_id", "place_id", "kind"),
    [("walk_in_park", "park", "food"), ("walk_on_coast", "coast", "valuable")],
)
def test_walks_collect_what_lies_at_the_place(action_id: str, place_id: str, kind: str) -> None:
    from yuiju.world.items import ALL

    action = CATALOGUE.actions[action_id]
    resource = HAURA.places[place_id].resources[0]
    assert kind in ALL[resource].kinds
    ctx = make_ctx("2026-09-05 10:00", location=place_id, stamina=80, duration_minute=30)
    ctx.world.places[place_id].resources = {resource: 2}
    assert action.available(ctx)
    ctx.running = RunningAction(
        action_id=action.id,
        name=action.name,
        started_at=ctx.now,
        ends_at=ctx.now + timedelta(minutes=30),
        episode_id="bhv_t",
        place=place_id,
        reason="散步",
        decided_by="test",
    )

    summary = action.complete(ctx)  # type: ignore[misc]

    assert ctx.character.inventory.get(resource) == 2 and resource in (summary or "")
    assert ctx.world.places[place_id].resources == {}  # collected: gone for today


def test_place_words_come_from_the_town_and_the_actions_done_at_each_place() -> None:
    words = HAURA.place_words((a.at, a.name) for a in CATALOGUE)
    assert words["图书馆"] == "school"  # 在图书馆自习, at school
    assert words["教室"] == "school"
    assert words["南风公园"] == words["公园"] == "park"
    assert words["海边"] == "coast" and words["咖啡店"] == "cafe"
    assert words["食堂"] == "diner"  # the town calls 日和食堂 so; the school's canteen is 学校食堂
    assert "游乐园" not in words
    assert list(words) == sorted(words, key=len, reverse=True)  # the longest word wins


def test_what_she_does_at_a_place_says_the_place_once() -> None:
    assert HAURA.at_place("park", "散步") == "在南风公园散步"
    assert HAURA.at_place("home", "在家吃早饭") == "在家吃早饭"  # never 在家在家吃早饭
    assert HAURA.at_place("school", "一起在食堂吃午饭") == "一起在食堂吃午饭"
    assert HAURA.at_place("home", "开始玩手机") == "在家开始玩手机"
