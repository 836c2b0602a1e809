"""The behavior loop with a scripted policy and a simulated clock, on real Redis and SQLite."""

from __future__ import annotations

import json

import pytest
import redis.asyncio as aioredis

from tests.conftest import at_time, make_character, make_engine, redis_calls
from yuiju.memory.episodes import EpisodeRepo
from yuiju.storage.history import HistoryStore
from yuiju.world.behavior import StepInputs
from yuiju.world.errors import InvalidDecision
from yuiju.world.policies.scripted import ScriptedPolicy
from yuiju.world.policy import DecisionRequest

IDLE_30 = {"action": "发呆", "reason": "想放空一会儿", "durationMinute": 30}


def always(answer: dict | str) -> ScriptedPolicy:
    return ScriptedPolicy(lambda _request: answer)


async def event_types(redis: aioredis.Redis, key: str) -> list[str]:
    return [fields["type"] for _, fields in await redis.xrange(key)]


async def test_one_decision_starts_an_action_and_flushes_its_running_episode(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(redis, sqlite_history, policy=always(IDLE_30), start="2026-09-01 06:00")

    await kit.engine.run(max_steps=1)

    her = await kit.character()
    assert her is not None and her.running is not None
    running = her.running
    assert (running.action_id, running.started_at, running.ends_at) == (
        "idle",
        at_time("2026-09-01 06:00"),
        at_time("2026-09-01 06:30"),
    )
    assert (running.decided_by, running.reason, running.place) == (
        "scripted",
        "想放空一会儿",
        "home",
    )
    assert her.done_today == ["idle"] and her.day == at_time("2026-09-01 06:00").date()

    episode = await EpisodeRepo(sqlite_history).get(running.episode_id)
    assert episode is not None
    assert (episode.status, episode.time, episode.end_time) == (
        "running",
        at_time("2026-09-01 06:00"),
        at_time("2026-09-01 06:30"),
    )
    assert episode.data["action"] == "idle" and episode.data["planned_minutes"] == 30
    assert await kit.store.outbox_size() == 0
    assert "action_started" in await event_types(redis, kit.keys.events)
    assert kit.stats.decisions == 1 and kit.stats.completions == 0


async def test_at_ends_at_the_action_completes_into_the_same_episode(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(redis, sqlite_history, policy=always(IDLE_30), start="2026-09-01 06:00")
    await kit.engine.run(max_steps=1)
    started = await kit.character()
    assert started is not None and started.running is not None
    eid = started.running.episode_id

    await kit.engine.run(until=at_time("2026-09-01 06:30"))

    her = await kit.character()
    assert her is not None and her.last_action == "idle"
    next_one = her.running  # the step that completes may decide the next action at once
    assert next_one is None or (
        next_one.episode_id != eid and next_one.started_at == at_time("2026-09-01 06:30")
    )
    episodes = EpisodeRepo(sqlite_history)
    episode = await episodes.get(eid)
    assert episode is not None and episode.status == "completed"
    assert episode.end_time == at_time("2026-09-01 06:30")
    assert episode.data["duration_minutes"] == 30
    assert episode.data["stats_before"] == started.running.stats_before
    assert episode.data["stats_after"] == (next_one.stats_before if next_one else her.stats())
    assert episode.summary.startswith("悠酱在家发呆，用了30分钟")  # her name, not her id
    assert await sqlite_history.count("episodes") == 1 + (
        next_one is not None
    )  # replaced, not added
    assert kit.stats.completions == 1
    assert "action_completed" in await event_types(redis, kit.keys.events)


async def test_a_record_names_her_and_the_place_once(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    breakfast = {"action": "在家吃早饭", "reason": "饿了", "durationMinute": 20}
    kit = await make_engine(
        redis,
        sqlite_history,
        policy=always(breakfast),
        start="2026-09-01 06:00",
        characters={"kaede": make_character(id="kaede", satiety=30)},
    )
    await kit.engine.run(max_steps=1)
    started = await kit.character("kaede")
    assert started is not None and started.running is not None
    eid = started.running.episode_id
    running = await EpisodeRepo(sqlite_history).get(eid)
    assert running is not None and running.summary == "枫开始在家吃早饭"

    await kit.engine.run(until=at_time("2026-09-01 06:20"))

    done = await EpisodeRepo(sqlite_history).get(eid)
    assert done is not None and done.summary.startswith("枫在家吃早饭，用了20分钟")


async def test_a_step_that_completes_and_starts_reads_her_state_once(redis: aioredis.Redis) -> None:
    # Every Redis round trip of a decision is engine overhead, and on a busy machine each one can
    # wait for a core: the completion and the start commit on the values the step's load read.
    kit = await make_engine(redis, None, policy=always(IDLE_30), start="2026-09-01 06:00")
    await kit.engine.run(max_steps=1)
    before = await redis_calls(redis)

    await kit.loop.step(at_time("2026-09-01 06:30"), StepInputs(lease_token=kit.engine.token))

    ran = await redis_calls(redis) - before
    assert kit.stats.completions == 1 and kit.stats.decisions == 2
    # one MGET (the world and her), then one script to complete and one to start, each checking
    # the world, her and her lease inside the script (the GETs there), with no read in between
    assert (ran["mget"], ran["evalsha"], ran["get"]) == (1, 2, 2 * 3)


async def test_idle_completion_reports_and_rewards_the_minutes_she_idled(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(redis, sqlite_history, policy=always(IDLE_30), start="2026-09-01 06:00")
    await kit.engine.run(max_steps=1)
    started = await kit.character()
    assert started is not None and started.running is not None

    await kit.engine.run(until=at_time("2026-09-01 06:30"))

    episode = await EpisodeRepo(sqlite_history).get(started.running.episode_id)
    assert episode is not None and episode.data["result"] == "发了30分钟呆"


async def test_completion_effects_apply_once_when_stepped_late(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(redis, sqlite_history, policy=always(IDLE_30), start="2026-09-01 06:00")
    await kit.engine.run(max_steps=1)

    late = at_time("2026-09-01 09:00")
    await kit.loop.step(late)  # completes (and may decide the next action)
    await kit.loop.step(late)  # at most decides: never a second completion

    assert kit.stats.completions == 1
    her = await kit.character()
    assert her is not None and her.running is not None
    assert her.running.started_at == late
    await kit.engine.flush_outbox(force=True)
    first = (await EpisodeRepo(sqlite_history).between("yuiju", at_time("2026-09-01 06:00"), late))[
        0
    ]
    assert first.end_time == at_time("2026-09-01 06:30")  # finished on time, not when noticed


@pytest.mark.parametrize(
    "answer",
    [
        "睡觉",  # a real action, but not possible at 10:00 with plenty of stamina
        "游泳",  # no such action
        {"action": "发呆", "reason": "想放空", "durationMinute": 5000},  # out of range
        {"action": "发呆", "reason": ""},  # empty reason
    ],
    ids=["not-a-candidate", "unknown", "bad-duration", "no-reason"],
)
async def test_an_invalid_scripted_choice_falls_back_to_utility_and_never_runs(
    redis: aioredis.Redis, sqlite_history: HistoryStore, answer: dict | str
) -> None:
    script = always(answer)
    kit = await make_engine(redis, sqlite_history, policy=script, start="2026-09-01 10:00")

    await kit.engine.run(max_steps=1)

    assert kit.stats.fallbacks == 1
    her = await kit.character()
    assert her is not None and her.running is not None
    assert her.running.decided_by == "fallback:utility"
    assert her.running.action_id != "sleep" and not her.asleep
    [request] = script.requests
    assert her.running.action_id in {a.id for a in request.candidates}
    assert kit.stats.non_candidate_refused == 0


class RoguePolicy:
    """A policy that skips validation and returns an action that was not offered."""

    name = "rogue"
    instant = False
    wants_recent = True

    async def decide(self, request):
        from yuiju.world.loader import load_actions
        from yuiju.world.policy import Decision

        sleep = load_actions().actions["sleep"]
        assert sleep not in request.candidates
        return Decision(action=sleep, reason="偏要睡", decided_by=self.name)


async def test_a_policy_that_returns_a_non_candidate_is_refused_and_counted(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(
        redis, sqlite_history, policy=RoguePolicy(), fallback=None, start="2026-09-01 10:00"
    )

    await kit.engine.run(max_steps=1)

    her = await kit.character()
    assert her is not None and her.running is None and not her.asleep
    assert kit.stats.non_candidate_refused == 1


async def test_without_a_fallback_an_invalid_choice_is_an_error(redis: aioredis.Redis) -> None:
    kit = await make_engine(
        redis, None, policy=always("睡觉"), fallback=None, start="2026-09-01 10:00"
    )
    await kit.ticker.tick(at_time("2026-09-01 10:00"))

    with pytest.raises(InvalidDecision, match="不在可选行为里"):
        await kit.loop.step(at_time("2026-09-01 10:00"))
    her = await kit.character()
    assert her is not None and her.running is None


async def test_a_crashing_policy_falls_back_too(redis: aioredis.Redis) -> None:
    def explode(_request: DecisionRequest) -> dict:
        raise ZeroDivisionError("policy bug")

    kit = await make_engine(redis, None, policy=ScriptedPolicy(explode), start="2026-09-01 10:00")
    await kit.engine.run(max_steps=1)

    her = await kit.character()
    assert her is not None and her.running is not None
    assert her.running.decided_by == "fallback:utility" and kit.stats.fallbacks == 1


async def test_the_decision_request_shows_the_present_moment(redis: aioredis.Redis) -> None:
    script = always(IDLE_30)
    kit = await make_engine(
        redis,
        None,
        policy=script,
        start="2026-09-01 06:00",
        characters={"yuiju": make_character(stamina=42)},
    )

    await kit.engine.run(until=at_time("2026-09-01 06:45"))

    first, *rest = script.requests
    assert first.ctx.now == at_time("2026-09-01 06:00")
    assert first.ctx.world.calendar is not None and first.ctx.world.calendar.weekday == "星期二"
    assert first.ctx.character.stamina == 42
    assert [r.ctx.now for r in rest] == [at_time("2026-09-01 06:30")]
    assert rest[0].ctx.world.time == at_time("2026-09-01 06:30")  # the world caught up first
    assert all({a.id for a in r.candidates} >= {"idle", "eat_breakfast"} for r in script.requests)


async def test_a_day_with_the_utility_policy_keeps_her_alive(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(redis, sqlite_history, start="2026-09-01 06:00", seed=3)

    await kit.engine.run(until=at_time("2026-09-02 06:00"))

    done = [r["id"] for r in kit.stats.timeline]
    assert {"eat_breakfast", "go_to_school", "attend_class"} <= set(done)
    left_school = [
        r for r in kit.stats.timeline if r["place"] == "school" and r["id"].startswith("go_")
    ]
    assert left_school, "she left school after class"
    assert kit.stats.fallbacks == 0 and kit.stats.no_candidates == 0
    her = await kit.character()
    assert her is not None and her.asleep  # 06:00 next morning: still sleeping
    assert her.running is not None and her.running.action_id == "sleep"
    assert await kit.store.outbox_size() == 0
    assert await sqlite_history.count("episodes") == len(done) + 1  # plus the running sleep
    assert all(json.dumps(r, default=str) for r in kit.stats.timeline)
    assert kit.clock.now() == at_time("2026-09-02 06:00")
    assert min(r["after"]["satiety"] for r in kit.stats.timeline) > 0
    assert her.running.ends_at == at_time("2026-09-02 06:40")  # the school-day alarm


def test_a_long_running_loop_keeps_a_bounded_number_of_overhead_samples() -> None:
    # one list shared by every character of a daemon grew by ~30 floats per character per day, forever
    from yuiju.world.behavior import OVERHEAD_SAMPLES, LoopStats

    stats = LoopStats()
    for i in range(OVERHEAD_SAMPLES + 5):
        stats.decision_overhead_ms.append(float(i))
    assert len(stats.decision_overhead_ms) == OVERHEAD_SAMPLES
    assert stats.decision_overhead_ms[-1] == OVERHEAD_SAMPLES + 4  # the newest are kept


def test_a_batch_send_is_shared_equally_by_the_decisions_it_carried() -> None:
    from yuiju.world.behavior import LoopStats

    stats = LoopStats()
    for ms in (1.0, 2.0, 3.0, 4.0):
        stats.add_overhead(ms)
    stats.spread_overhead(3.0, 3)  # the last three decisions' writes were sent together in 3 ms

    assert list(stats.decision_overhead_ms) == [1.0, 3.0, 4.0, 5.0] and stats.measured == 4
