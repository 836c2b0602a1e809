"""Characters who meet: who is here, joint actions, one write on both, both sides recorded."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from tests.conftest import at_time, make_character, make_engine
from yuiju.memory.episodes import EpisodeRepo
from yuiju.storage.history import HistoryStore
from yuiju.world.engine import step_order
from yuiju.world.policies.llm import render_moment_prompt
from yuiju.world.policies.scripted import ScriptedPolicy
from yuiju.world.policy import Decision, DecisionRequest, RawDecision, validate_decision
from yuiju.world.store import Commit, Snapshot

SATURDAY = "2026-09-05 10:00"
WALK = {"action": "在公园散步", "reason": "想走走", "durationMinute": 120}
CHAT_WITH_KAEDE = {"action": "聊天", "reason": "想和枫聊聊", "params": {"partner": "枫"}}


def by_character(**answers: dict[str, Any] | str) -> ScriptedPolicy:
    """Each character's answer; one without an answer idles."""
    idle = {"action": "发呆", "reason": "放空", "durationMinute": 30}
    return ScriptedPolicy(lambda r: answers.get(r.ctx.character.id, idle))


async def step_in_order(kit: Any, when: str, *order: str) -> None:
    """Tick the world to ``when``, then step these characters one after another (the engine's
    order within a batch is not fixed)."""
    now = at_time(when)
    await kit.ticker.tick(now)
    for cid in order:
        await kit.loops[cid].step(now)


def in_the_park(*ids: str, **where: str) -> dict[str, Any]:
    """Characters awake in the park (or where ``where`` says), in stepping order."""
    return {cid: make_character(id=cid, location=where.get(cid, "park")) for cid in ids}


async def test_those_at_the_same_place_see_each_other_in_their_decision_context(
    redis: aioredis.Redis,
) -> None:
    policy = by_character(kaede=WALK)
    kit = await make_engine(
        redis, None, policy=policy, start=SATURDAY, characters=in_the_park("kaede", "yuiju")
    )

    await step_in_order(kit, SATURDAY, "kaede", "yuiju")

    yuiju = next(r for r in policy.requests if r.ctx.character.id == "yuiju")
    (kaede,) = yuiju.ctx.company
    assert (kaede.id, kaede.name, kaede.doing, kaede.free) == ("kaede", "枫", "在公园散步", True)
    assert {a.id for a in yuiju.candidates} >= {"chat", "greet", "walk_together"}
    prompt = render_moment_prompt(yuiju)
    assert "在场：枫（不太熟，在公园散步）" in prompt


async def test_nobody_is_company_at_home_each_has_her_own(redis: aioredis.Redis) -> None:
    policy = by_character()
    kit = await make_engine(
        redis,
        None,
        policy=policy,
        start=SATURDAY,
        characters=in_the_park("kaede", "yuiju", kaede="home", yuiju="home"),
    )

    await kit.engine.run(max_steps=1)

    for request in policy.requests:
        assert request.ctx.company == ()
        assert not any(a.joint for a in request.candidates)
        assert "在场" not in render_moment_prompt(request)


async def test_a_meeting_is_one_write_on_both_and_recorded_on_both_sides(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(
        redis,
        sqlite_history,
        policy=by_character(kaede=WALK, yuiju=CHAT_WITH_KAEDE),
        start=SATURDAY,
        characters=in_the_park("kaede", "yuiju"),
    )

    await step_in_order(kit, SATURDAY, "kaede", "yuiju")
    await kit.engine.flush_outbox(force=True)

    yuiju, kaede = await kit.character("yuiju"), await kit.character("kaede")
    assert yuiju is not None and kaede is not None
    assert yuiju.running is not None and kaede.running is not None
    assert (yuiju.running.name, kaede.running.name) == ("和枫聊天", "和悠酱聊天")
    assert yuiju.running.meeting_id == kaede.running.meeting_id is not None
    assert (yuiju.running.partners, kaede.running.partners) == (["kaede"], ["yuiju"])
    assert yuiju.running.ends_at == kaede.running.ends_at == at_time("2026-09-05 10:20")
    assert kaede.running.reason == "悠酱找我聊天" and kaede.running.decided_by == "with:yuiju"
    # her walk ended when the chat began, and its episode says why
    episodes = EpisodeRepo(sqlite_history)
    kaede_day = await episodes.between("kaede", at_time(SATURDAY), at_time("2026-09-05 11:00"))
    walk = next(e for e in kaede_day if e.data.get("action") == "walk_in_park")
    assert walk.status == "completed" and walk.end_time == at_time(SATURDAY)
    assert "悠酱找我聊天，就先停下了" in "".join(walk.data["notes"])
    # a conversation episode on each side, with whom and what was said
    for me, other in (("yuiju", "kaede"), ("kaede", "yuiju")):
        (talk,) = await episodes.between(
            me, at_time(SATURDAY), at_time("2026-09-05 11:00"), type_="conversation"
        )
        assert talk.data["meeting_id"] == yuiju.running.meeting_id
        assert talk.data["with"][0]["id"] == other
        assert set(talk.data["participants"]) == {"yuiju", "kaede"}
        assert len(talk.data["lines"]) >= 2 and talk.data["source"] == "template"
        assert talk.summary.startswith("悠酱和枫在南风公园聊天")
    # closeness moved on both sides, and each has met the other today
    assert yuiju.social.relations["character:kaede"].closeness > 10
    assert kaede.social.relations["character:yuiju"].meetings == 1
    assert "character:kaede" in yuiju.social.met_today
    events = [f for _, f in await redis.xrange(kit.keys.events)]
    talks = [f["character_id"] for f in events if f["type"] == "conversation"]
    assert sorted(talks) == ["kaede", "yuiju"]


async def test_someone_in_class_cannot_be_joined(redis: aioredis.Redis) -> None:
    policy = by_character(kaede="在学校上课")
    kit = await make_engine(
        redis,
        None,
        policy=policy,
        start="2026-09-01 08:00",
        characters=in_the_park("kaede", "yuiju", kaede="school", yuiju="school"),
    )

    await step_in_order(kit, "2026-09-01 08:00", "kaede", "yuiju")

    yuiju = next(r for r in policy.requests if r.ctx.character.id == "yuiju")
    (kaede,) = yuiju.ctx.company
    assert not kaede.free and kaede.busy == "正在学校上课"
    assert not any(a.joint for a in yuiju.candidates)


async def test_nobody_is_in_two_conversations_at_once(redis: aioredis.Redis) -> None:
    policy = by_character(kaede=WALK, yuiju=CHAT_WITH_KAEDE)
    kit = await make_engine(
        redis,
        None,
        policy=policy,
        start=SATURDAY,
        characters=in_the_park("kaede", "yuiju", "chika"),
    )

    await step_in_order(kit, SATURDAY, "kaede", "yuiju", "chika")

    chika = next(r for r in policy.requests if r.ctx.character.id == "chika")
    assert {c.id: c.free for c in chika.ctx.company} == {"kaede": False, "yuiju": False}
    assert all(c.busy and "聊天" in c.busy for c in chika.ctx.company)
    assert not any(a.joint for a in chika.candidates)


class MovesHerAway:
    """Decides yuiju's chat with kaede, but kaede walks off to the pond before it starts."""

    name = "scripted"
    instant = True

    def __init__(self, kit: Any) -> None:
        self.kit = kit

    async def decide(self, request: DecisionRequest) -> Decision:
        if request.ctx.character.id == "yuiju":

            def away(snap: Snapshot) -> tuple[Commit, None]:
                kaede = snap.characters["kaede"]
                assert kaede is not None
                kaede.location = "pond"
                kaede.running = None
                return Commit(characters={"kaede": kaede}), None

            await self.kit.store.transact(away, characters=["kaede"])
            raw = CHAT_WITH_KAEDE
        else:
            raw = WALK
        return validate_decision(
            RawDecision.model_validate(raw), request.candidates, self.name, request.ctx
        )


async def test_a_meeting_whose_partner_left_meanwhile_happens_for_neither(
    redis: aioredis.Redis,
) -> None:
    kit = await make_engine(redis, None, start=SATURDAY, characters=in_the_park("kaede", "yuiju"))
    policy = MovesHerAway(kit)
    for loop in kit.loops.values():
        loop.policy = policy

    await step_in_order(kit, SATURDAY, "kaede", "yuiju")  # kaede starts her walk; yuiju decides

    yuiju, kaede = await kit.character("yuiju"), await kit.character("kaede")
    assert yuiju is not None and kaede is not None
    assert yuiju.running is None and kaede.running is None and kaede.location == "pond"
    assert kit.stats.stale_starts == 1
    assert "character:kaede" not in yuiju.social.relations


async def test_a_partner_taken_out_of_a_pastime_goes_on_when_the_meeting_ends(
    redis: aioredis.Redis,
) -> None:
    kit = await make_engine(
        redis,
        None,
        policy=by_character(kaede=WALK, yuiju=CHAT_WITH_KAEDE),
        start=SATURDAY,
        characters=in_the_park("kaede", "yuiju"),
    )

    await step_in_order(kit, SATURDAY, "kaede", "yuiju")
    await kit.engine.run(until=at_time("2026-09-05 10:21"))

    kaede = [r for r in kit.stats.timeline if r["character"] == "kaede"]
    assert [r["id"] for r in kaede[:2]] == ["walk_in_park", "chat"]
    assert kaede[1]["end"] == at_time("2026-09-05 10:20").isoformat()
    her = await kit.character("kaede")
    assert her is not None and her.running is not None
    assert her.running.started_at == at_time("2026-09-05 10:20")  # not at 12:00, her walk's end


def test_a_partner_driven_by_another_worker_is_joined_only_between_two_of_her_steps() -> None:
    from tests.conftest import make_ctx
    from yuiju.world.loader import load_actions
    from yuiju.world.social import company_of
    from yuiju.world.state import RunningAction

    ctx = make_ctx("2026-09-05 10:00", location="park")
    walking = make_character(id="kaede", location="park")
    walking.running = RunningAction(
        action_id="walk_in_park",
        name="在公园散步",
        started_at=at_time("2026-09-05 09:30"),
        ends_at=at_time("2026-09-05 11:30"),
        episode_id="bhv_k",
        place="park",
        reason="想走走",
        decided_by="utility",
    )
    catalogue = load_actions()

    def seen(**kw: Any) -> Any:
        (kaede,) = company_of(
            ctx.character,
            [walking],
            now=ctx.now,
            town=ctx.town,
            action_of=catalogue.actions.get,
            names={"kaede": "枫"},
            **kw,
        )
        return kaede

    assert seen().free  # driven here: her walk can end for a chat
    elsewhere = seen(may_interrupt=lambda _cid: False)
    assert not elsewhere.free and elsewhere.busy == "正在公园散步"
    walking.running = walking.running.model_copy(update={"ends_at": at_time("2026-09-05 10:00")})
    assert seen(may_interrupt=lambda _cid: False).free  # due now: between two of her steps


async def test_a_meeting_step_tells_its_engine_whom_it_took_along_and_until_when(
    redis: aioredis.Redis,
) -> None:
    kit = await make_engine(
        redis,
        None,
        policy=by_character(kaede=WALK, yuiju=CHAT_WITH_KAEDE),
        start=SATURDAY,
        characters=in_the_park("kaede", "yuiju"),
    )
    now = at_time(SATURDAY)
    await kit.ticker.tick(now)

    walked = await kit.loops["kaede"].step(now)
    met = await kit.loops["yuiju"].step(now)

    assert walked.engaged == {}
    assert met.engaged == {"kaede": met.due} and met.due == at_time("2026-09-05 10:20")


async def test_a_step_told_its_partner_is_driven_elsewhere_leaves_her_pastime_alone(
    redis: aioredis.Redis,
) -> None:
    from yuiju.world.behavior import StepInputs

    policy = by_character(kaede=WALK)
    kit = await make_engine(
        redis, None, policy=policy, start=SATURDAY, characters=in_the_park("kaede", "yuiju")
    )
    now = at_time(SATURDAY)
    await kit.ticker.tick(now)
    await kit.loops["kaede"].step(now)

    here_only = StepInputs(drives=lambda cid: cid == "yuiju")
    await kit.loops["yuiju"].step(now, here_only)

    yuiju = policy.requests[-1]
    (kaede,) = yuiju.ctx.company
    assert kaede.doing == "在公园散步" and not kaede.free


async def test_a_partner_met_in_a_batched_pass_is_due_when_the_meeting_ends(
    redis: aioredis.Redis,
) -> None:
    # the engine steps kaede first, then yuiju takes her along, in one batch: her wake-up at the
    # meeting's end is known once that batch's writes landed, not only at yuiju's next step
    kit = await make_engine(
        redis,
        None,
        policy=by_character(kaede=WALK, yuiju=CHAT_WITH_KAEDE),
        start=SATURDAY,
        characters=in_the_park("kaede", "yuiju"),
    )
    now = at_time(SATURDAY)
    await kit.ticker.tick(now)
    await kit.loops["kaede"].step(now)  # her walk, until 12:00
    assert step_order(["yuiju", "kaede"], now) == ["kaede", "yuiju"]

    await kit.engine.run(max_steps=1)

    meeting_ends = at_time("2026-09-05 10:20")
    assert kit.engine._due == {"kaede": meeting_ends, "yuiju": meeting_ends}
