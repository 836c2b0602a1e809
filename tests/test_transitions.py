"""The rules as pure transitions (world/transitions.py): plain values in, a `Commit` out, no Redis."""

from __future__ import annotations

from tests.conftest import NAMES, at_time, cards_of, make_character, make_ctx, make_world
from yuiju.world.conversation import TemplateTalker
from yuiju.world.loader import load_actions
from yuiju.world.policy import RawDecision, revalidate, validate_decision
from yuiju.world.randomness import Randomness
from yuiju.world.social import Neighbours
from yuiju.world.store import Snapshot
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
    from yuiju.world.social import company_of

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
