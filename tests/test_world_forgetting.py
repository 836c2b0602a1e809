"""The forget_person world command: a person (or a group) out of every character's state."""

from __future__ import annotations

import json

from tests.conftest import at_time, make_character, make_world
from yuiju.world.commands import (
    ForgetPerson,
    Invite,
    Remind,
    TellNews,
    apply_command,
    parse_command,
)
from yuiju.world.forgetting import kept_about
from yuiju.world.relations import NewsItem, Party, news_id

NOW = at_time("2026-09-01 09:00")
MING = Party(kind="person", id="qq:777", name="小明")
HONG = Party(kind="person", id="qq:888", name="小红")
KAEDE = Party(kind="character", id="kaede", name="枫")


def lived() -> tuple[object, dict]:
    """Yuiju and Kaede after a day of chat with 小明 and 小红 (and news passed on)."""
    world = make_world(NOW)
    characters = {"yuiju": make_character(), "kaede": make_character(id="kaede")}
    for by in (MING, HONG):
        for command in (
            TellNews(character_id="yuiju", by=by, text=f"{by.name}下周要搬家"),
            Invite(
                character_id="yuiju",
                by=by,
                place="park",
                start=at_time("2026-09-05 10:00" if by is MING else "2026-09-05 15:00"),
                lenient=True,
            ),
            Remind(character_id="yuiju", by=by, text="别忘了带伞", at=at_time("2026-09-02 08:00")),
        ):
            apply_command(command, world, characters, now=NOW)
        apply_command(
            parse_command({"type": "chat_with", "character_id": "yuiju", "by": by.model_dump()}),
            world,
            characters,
            now=NOW,
        )
    # Kaede heard 小明's news from Yuiju, and news about him from someone else
    kaede = characters["kaede"].social
    kaede.news = [
        NewsItem(
            id=news_id(MING, "小明下周要搬家"),
            text="小明下周要搬家",
            origin=MING,
            source=Party(kind="character", id="yuiju", name="悠酱"),
            learned_at=NOW,
            hops=1,
        ),
        NewsItem(
            id=news_id(KAEDE, "听说小明考了满分"),
            text="听说小明考了满分",
            origin=KAEDE,
            source=KAEDE,
            learned_at=NOW,
        ),
        NewsItem(
            id=news_id(HONG, "小红养了猫"),
            text="小红养了猫",
            origin=HONG,
            source=HONG,
            learned_at=NOW,
        ),
    ]
    return world, characters


def test_forgetting_a_person_clears_every_character_and_keeps_the_other() -> None:
    world, characters = lived()
    yuiju = characters["yuiju"].social
    assert kept_about(yuiju, "user", {"qq:777"}, ["小明"])["appointments"]

    result = apply_command(
        ForgetPerson(
            id="qq:777",
            ids=["qq:777", "777"],
            names=["小明"],
            requested_by="admin:cli",
            request_id="r1",
        ),
        world,
        characters,
        now=NOW,
    )

    counts = json.loads(result)
    assert counts["forgot"] == "r1"
    assert counts["state"] == {"relations": 1, "news": 3, "appointments": 1, "notes": 1}
    for character in characters.values():
        left = kept_about(character.social, "user", {"qq:777", "777"}, ["小明"])
        assert not any(left.values()), left
        dumped = character.model_dump_json()
        assert "小明" not in dumped and "qq:777" not in dumped
    assert "person:qq:888" in yuiju.relations
    assert [a.other.id for a in yuiju.appointments] == ["qq:888"]
    assert [n.by.id for n in yuiju.notes] == ["qq:888"]
    assert [n.text for n in characters["kaede"].social.news] == ["小红养了猫"]


def test_forgetting_a_group_drops_what_was_arranged_there() -> None:
    world, characters = lived()
    apply_command(
        Remind(
            character_id="yuiju",
            by=HONG,
            text="周五带书",
            at=at_time("2026-09-04 08:00"),
            via="group:qq:5000",
        ),
        world,
        characters,
        now=NOW,
    )
    notes = len(characters["yuiju"].social.notes)
    apply_command(
        ForgetPerson(
            subject="group", id="qq:5000", ids=["qq:5000"], requested_by="qq:1", request_id="g"
        ),
        world,
        characters,
        now=NOW,
    )
    assert len(characters["yuiju"].social.notes) == notes - 1
    assert all(n.via != "group:qq:5000" for n in characters["yuiju"].social.notes)


def test_her_plans_and_notes_naming_him_go_too() -> None:
    from yuiju.world.plans import PlanItem, PlanState

    world, characters = lived()
    yuiju = characters["yuiju"]

    def plan(title: str, scope: str) -> PlanItem:
        return PlanItem(id=title, title=title, scope=scope, created_at=NOW, updated_at=NOW)  # type: ignore[arg-type]

    yuiju.plans = PlanState(
        long_term=plan("和小明一起学冲浪", "longTerm"),
        short_term=[plan("周末和小明去海边", "shortTerm"), plan("复习数学", "shortTerm")],
    )
    yuiju.last_event = "小明送了我一盒饼干"
    result = apply_command(
        ForgetPerson(id="qq:777", ids=["qq:777"], names=["小明"], requested_by="a", request_id="r"),
        world,
        characters,
        now=NOW,
    )
    assert json.loads(result)["state"]["plans"] == 2
    assert yuiju.plans.long_term is None and [p.title for p in yuiju.plans.short_term] == [
        "复习数学"
    ]
    assert yuiju.last_event is None and "小明" not in yuiju.model_dump_json()
