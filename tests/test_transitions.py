"""The rules as pure transitions (world/transitions.py): plain values in, a `Commit` out, no Redis."""

from __future__ import annotations

from datetime import datetime

from tests.conftest import NAMES, at_time, cards_of, make_character, make_ctx, make_world
from yuiju.world.conversation import TemplateTalker
from yuiju.world.loader import load_actions
from yuiju.world.policy import Decision, RawDecision, revalidate, validate_decision
from yuiju.world.randomness import Randomness
from yuiju.world.relations import Appointment, Party, SocialState, appointment_id
from yuiju.world.social import Neighbours, company_of
from yuiju.world.state import CharacterState
from yuiju.world.store import Commit, Snapshot
from yuiju.world.town import HAURA
from yuiju.world.transitions import Env, MeetingWords, complete, meet, plan_talk, start

CATALOGUE = load_actions("actions")


def env_of(*cids: str) -> Env:
    neighbours = Neighbours(
        characters=cids,
        names={cid: NAMES[cid] for cid in cids},
        cards=cards_of(list(cids)),
        talker=TemplateTalker(),
        model_talks_per_day=0,
    )
    return Env(
        town=HAURA, catalogue=CATALOGUE, randomness=Randomness.seeded(7), neighbours=neighbours
    )


def test_a_solo_start_then_its_completion_write_one_episode_each_without_any_store() -> None:
    now = at_time("2026-09-05 10:00")
    world = make_world(now)
    snap = Snapshot(world=world, characters={"yuiju": make_character()})
    view = make_ctx(now, world=world)
    idle = validate_decision(
        RawDecision(action="发呆", reason="想放空", durationMinute=30),
        [CATALOGUE.actions["idle"]],
        "scripted",
        view,
    )

    commit, (ends, why_not, _) = start(snap, idle, env_of("yuiju"), who="yuiju", now=now)

    her = commit.characters["yuiju"]
    assert why_not is None and ends == at_time("2026-09-05 10:30")
    assert her.running is not None and her.running.started_at == now
    (entry,) = commit.outbox
    assert entry["doc"]["status"] == "running" and entry["doc"]["data"]["action"] == "idle"
    assert [e.type for e in commit.events] == ["action_started"]

    done = complete(world, her, ends, with_effects=True, env=env_of("yuiju"))
    assert her.running is None and her.last_action == "idle"
    assert done.episode["doc"]["status"] == "completed"
    assert done.episode["doc"]["data"]["duration_minutes"] == 30
    assert done.record["end"] == ends.isoformat()


def test_a_start_whose_precondition_no_longer_holds_writes_nothing_and_says_why() -> None:
    asked = at_time("2026-09-05 10:20")
    later = at_time("2026-09-05 10:40")  # breakfast ends at 10:30
    view = make_ctx(asked, satiety=40)
    breakfast = validate_decision(
        RawDecision(action="在家吃早饭", reason="饿了"),
        [CATALOGUE.actions["eat_breakfast"]],
        "scripted",
        view,
    )
    world = make_world(later)
    snap = Snapshot(world=world, characters={"yuiju": make_character(satiety=40)})

    commit, (ends, why_not, _) = start(snap, breakfast, env_of("yuiju"), who="yuiju", now=later)

    assert commit.is_empty and ends is None and why_not
    later_view = make_ctx(later, world=world, satiety=40)
    _, stale = revalidate(breakfast, later_view, [CATALOGUE.actions["idle"]])
    assert stale  # the same decision, checked against the later moment, says why not


def test_a_meeting_is_one_commit_on_both_with_an_episode_and_a_conversation_each() -> None:
    now = at_time("2026-09-05 10:00")
    world = make_world(now)
    me = make_character(location="park")
    her = make_character(id="kaede", location="park")
    env = env_of("yuiju", "kaede")
    view = make_ctx(now, world=world, location="park")
    view.company = company_of(
        me,
        [her],
        now=now,
        town=HAURA,
        action_of=CATALOGUE.actions.get,
        names=env.neighbours.names if env.neighbours else {},
    )
    chat = next(a for a in CATALOGUE if a.joint is not None and a.id == "chat")
    decision = validate_decision(
        RawDecision(action=chat.name, reason="想聊聊", params={"partner": "枫"}), [chat], "x", view
    )
    plan, request, _ = plan_talk(now, decision, view, env)
    talk = MeetingWords(plan, TemplateTalker().write(request), plan.proposal)
    snap = Snapshot(world=world, characters={"yuiju": me, "kaede": her})

    commit, (ends, why_not, _) = meet(
        snap, decision, env, who="yuiju", now=now, talk=talk, mid="m1"
    )

    assert why_not is None and ends is not None
    assert set(commit.characters) == {"yuiju", "kaede"}
    for cid in ("yuiju", "kaede"):
        running = commit.characters[cid].running
        assert running is not None and running.meeting_id == "m1" and running.ends_at == ends
    kinds = [(e["doc"]["character_id"], e["doc"]["type"]) for e in commit.outbox]
    assert ("yuiju", "behavior") in kinds and ("kaede", "behavior") in kinds
    assert ("yuiju", "conversation") in kinds and ("kaede", "conversation") in kinds


# -- appointments (issue 31) ---------------------------------------------------------------------

YUIJU, KAEDE, CHIKA = (Party(id=c, name=NAMES[c]) for c in ("yuiju", "kaede", "chika"))


def copy_of(
    mine: Party, theirs: Party, start: str, place: str, there: tuple[str, str] | None = None
) -> Appointment:
    """``mine``'s copy of her appointment with ``theirs`` (both copies have one id), and when she
    was at its place in its window."""
    moment = at_time(start)
    asked, invited = sorted((mine, theirs), key=lambda p: p.id)
    return Appointment(
        id=appointment_id(asked, invited.id, moment, place),
        other=theirs,
        asked_by=asked,
        place=place,
        start=moment,
        created_at=at_time("2026-09-03 12:00"),
        there_from=at_time(there[0]) if there else None,
        there_until=at_time(there[1]) if there else None,
    )


def idle_for(now: datetime, minutes: int, **character: object) -> Decision:
    return validate_decision(
        RawDecision(action="发呆", reason="等人", durationMinute=minutes),
        [CATALOGUE.actions["idle"]],
        "scripted",
        make_ctx(now, **character),
    )


def test_a_start_at_an_appointments_place_notes_when_she_was_there_and_names_her() -> None:
    now = at_time("2026-09-05 14:40")  # the café at 15:00 with 枫: its window opened at 14:30
    planned = copy_of(YUIJU, KAEDE, "2026-09-05 15:00", "cafe")
    me = make_character(location="cafe", social=SocialState(appointments=[planned]))
    snap = Snapshot(world=make_world(now), characters={"yuiju": me})
    decision = idle_for(now, 30, location="cafe")

    commit, (ends, why_not, _) = start(snap, decision, env_of("yuiju"), who="yuiju", now=now)

    assert why_not is None and ends == at_time("2026-09-05 15:10")
    (noted,) = commit.characters["yuiju"].social.appointments
    assert (noted.there_from, noted.there_until) == (now, ends)
    assert commit.outbox[0]["doc"]["summary"] == "悠酱在薄暮咖啡开始发呆"


def test_settling_reads_the_other_sides_copy_it_is_handed_and_keeps_what_both_were_at() -> None:
    """Seed 4: 枫 worked at the café 13:10–16:10 and 悠酱 sat there 14:25–16:10; they never met,
    but both were there at once in the window: kept on her side, read from 枫's copy."""
    now = at_time("2026-09-05 16:10")
    mine = copy_of(
        YUIJU, KAEDE, "2026-09-05 15:00", "cafe", ("2026-09-05 14:30", "2026-09-05 16:00")
    )
    hers = copy_of(
        KAEDE, YUIJU, "2026-09-05 15:00", "cafe", ("2026-09-05 14:30", "2026-09-05 16:00")
    )
    assert mine.id == hers.id

    def settled(others: dict[str, list[Appointment]] | None) -> tuple[str, str]:
        me = make_character(location="cafe", social=SocialState(appointments=[mine]))
        snap = Snapshot(world=make_world(now), characters={"yuiju": me})
        commit, _ = start(
            snap,
            idle_for(now, 10, location="cafe"),
            env_of("yuiju", "kaede"),
            who="yuiju",
            now=now,
            others=others,
        )
        (plan,) = [e["doc"] for e in commit.outbox if e["doc"]["type"] == "plan"]
        return plan["data"]["status"], plan["summary"]

    status, summary = settled({KAEDE.key: [hers]})
    assert status == "kept" and summary.startswith("悠酱赴约：")
    status, summary = settled(None)  # her copy alone cannot say the other was there
    assert status == "missed" and summary.startswith("悠酱没能赴约：")


def test_a_meeting_settles_each_side_with_the_others_copy_and_notes_where_they_are() -> None:
    now = at_time("2026-09-05 16:10")  # both in the park after both sat in the café
    there = ("2026-09-05 14:30", "2026-09-05 16:00")
    later = copy_of(YUIJU, CHIKA, "2026-09-05 16:30", "park")  # 千夏, at the park at 16:30
    me = make_character(
        location="park",
        social=SocialState(
            appointments=[copy_of(YUIJU, KAEDE, "2026-09-05 15:00", "cafe", there), later]
        ),
    )
    her = make_character(
        id="kaede",
        location="park",
        social=SocialState(appointments=[copy_of(KAEDE, YUIJU, "2026-09-05 15:00", "cafe", there)]),
    )
    commit, ends = _chat(me, her, now)

    assert ends is not None
    statuses = {
        (e["doc"]["character_id"], e["doc"]["data"]["status"])
        for e in commit.outbox
        if e["doc"]["type"] == "plan"
    }
    assert statuses == {("yuiju", "kept"), ("kaede", "kept")}
    mine = {a.other.id: a for a in commit.characters["yuiju"].social.appointments}
    assert (mine["chika"].there_from, mine["chika"].there_until) == (now, ends)


def _chat(me: CharacterState, her: CharacterState, now: datetime) -> tuple[Commit, datetime | None]:
    world = make_world(now)
    env = env_of("yuiju", "kaede", "chika")
    view = make_ctx(now, world=world, location=me.location, social=me.social)
    view.company = company_of(
        me,
        [her],
        now=now,
        town=HAURA,
        action_of=CATALOGUE.actions.get,
        names=env.neighbours.names if env.neighbours else {},
    )
    chat = CATALOGUE.actions["chat"]
    decision = validate_decision(
        RawDecision(action=chat.name, reason="想聊聊", params={"partner": "枫"}), [chat], "x", view
    )
    plan, request, _ = plan_talk(now, decision, view, env)
    talk = MeetingWords(plan, TemplateTalker().write(request), plan.proposal)
    snap = Snapshot(world=world, characters={"yuiju": me, "kaede": her})
    commit, (ends, why_not, _) = meet(
        snap, decision, env, who="yuiju", now=now, talk=talk, mid="m1"
    )
    assert why_not is None
    return commit, ends
