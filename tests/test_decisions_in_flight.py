"""Decisions in flight (world/decisions.py): the town never waits for the model.

A model that never answers, or answers slowly, costs the character who asked it at most her
decision's deadline (then the offline policy decides), and costs the world tick and the other
characters nothing; an answer that comes back after the world moved on is checked against the
state *then*; the worker's and the endpoint's concurrency limits hold."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import pytest
import redis.asyncio as aioredis

import yuiju.llm.openai_model
from tests.conftest import at_time, make_character, make_engine
from yuiju.llm import ChatMessage, FunctionChatModel, JsonSchema, LLMUnavailable
from yuiju.llm.admission import AdmissionGate
from yuiju.llm.openai_model import RATE_LIMIT_WAIT_SECONDS, OpenAIChatModel, retry_after_seconds
from yuiju.storage.history import HistoryStore
from yuiju.world.behavior import StepInputs
from yuiju.world.decisions import DecisionLimits, DecisionPool
from yuiju.world.policies.scripted import ScriptedPolicy
from yuiju.world.policy import Decision, DecisionRequest

IDLE_30 = {"action": "发呆", "reason": "想放空一会儿", "durationMinute": 30}


class FakeWall:
    """Wall time for deadlines, moved by the test (never the real clock)."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class ModelPolicy(ScriptedPolicy):
    """A policy that is not instant: each decision awaits ``answer`` (a model call)."""

    instant = False

    def __init__(self, answer: Any) -> None:
        super().__init__(lambda _r: IDLE_30)
        self.answer = answer
        self.asked: list[tuple[str, str]] = []
        self.in_flight = 0
        self.peak = 0

    async def decide(self, request: DecisionRequest) -> Decision:
        cid = request.ctx.character.id
        self.asked.append((cid, request.ctx.now.strftime("%H:%M")))
        self.requests.append(request)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            raw = await self.answer(request)
        finally:
            self.in_flight -= 1
        return await ScriptedPolicy([raw]).decide(request)


def hangs_for(victim: str) -> Any:
    """Never answers for ``victim``; answers the others at once."""

    async def answer(request: DecisionRequest) -> Any:
        if request.ctx.character.id == victim:
            await asyncio.Event().wait()  # an endpoint that accepts and never answers
        return IDLE_30

    return answer


def gaps_minutes(records: list[dict[str, Any]]) -> list[float]:
    """World minutes between the end of each of her actions and the start of the next."""
    return [
        (datetime.fromisoformat(b["start"]) - datetime.fromisoformat(a["end"])).total_seconds() / 60
        for a, b in itertools.pairwise(records)
    ]


def by_character(timeline: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in timeline:
        out[record["character"]].append(record)
    return out


async def test_a_model_that_never_answers_one_of_them_costs_the_others_nothing(
    redis: aioredis.Redis,
) -> None:
    kit = await make_engine(
        redis,
        None,
        policy=ModelPolicy(hangs_for("c0")),
        prefix="hung1",
        tick_minutes=1,
        characters={"c0": make_character(id="c0"), "c1": make_character(id="c1")},
        decisions=DecisionLimits(deadline_minutes=15, deadline_seconds=1e9),
        wall=FakeWall(),
    )
    await kit.engine.run(until=at_time("2026-09-01 09:00"))

    world = await kit.store.load_world()
    assert world is not None and world.last_advanced_at == at_time("2026-09-01 09:00")
    by = by_character(kit.stats.timeline)
    # she who asked the hung model lives on the offline policy, never more than a deadline late
    assert by["c0"][0]["start"] == at_time("2026-09-01 06:15").isoformat()
    assert all(r["decided_by"] == "fallback:utility" for r in by["c0"])
    assert max(gaps_minutes(by["c0"])) <= 15
    # the other is answered and goes on without waiting for her
    # (a simulated clock jumps to the next tick while an answer is on its way: a minute or so)
    assert datetime.fromisoformat(by["c1"][0]["start"]) <= at_time("2026-09-01 06:02")
    # (while her probe is out, the endpoint counts as away: the other is decided offline at once)
    assert by["c1"][0]["decided_by"] == "scripted"
    assert max(gaps_minutes(by["c1"])) <= 2
    assert len(by["c1"]) >= 5


async def test_a_worker_publishes_how_many_decisions_the_model_and_the_offline_policy_took(
    redis: aioredis.Redis,
) -> None:
    kit = await make_engine(
        redis,
        None,
        policy=ModelPolicy(hangs_for("c0")),
        prefix="hung3",
        tick_minutes=1,
        characters={"c0": make_character(id="c0"), "c1": make_character(id="c1")},
        decisions=DecisionLimits(deadline_minutes=15, deadline_seconds=1e9),
        wall=FakeWall(),
    )
    await kit.engine.run(until=at_time("2026-09-01 08:00"))

    published = kit.engine._figures()  # what `yuiju status` shows of this worker
    pool = kit.engine.decisions
    assert pool is not None
    assert published["decisions_by_model"] == pool.figures.answered > 0
    assert published["decisions_overdue"] == pool.figures.overdue > 0
    assert published["decisions_offline_at_once"] == pool.figures.offline_at_once > 0
    assert published["decisions"] == (
        pool.figures.answered + pool.figures.overdue + pool.figures.offline_at_once
    )


async def test_a_hung_endpoint_is_logged_once_and_only_its_probe_waits(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    async def never(_request: DecisionRequest) -> Any:
        await asyncio.Event().wait()

    cids = ["c0", "c1", "c2"]
    kit = await make_engine(
        redis,
        None,
        policy=ModelPolicy(never),
        prefix="hung2",
        tick_minutes=1,
        characters={cid: make_character(id=cid) for cid in cids},
        decisions=DecisionLimits(deadline_minutes=15, deadline_seconds=1e9),
        wall=FakeWall(),
    )
    caplog.set_level(logging.WARNING, logger="yuiju.world.decisions")
    await kit.engine.run(until=at_time("2026-09-01 10:00"))

    world = await kit.store.load_world()
    assert world is not None and world.last_advanced_at == at_time("2026-09-01 10:00")
    by = by_character(kit.stats.timeline)
    for cid in cids:
        assert len(by[cid]) >= 2, cid
        assert max(gaps_minutes(by[cid])) <= 15, cid
    overdue = [r for r in caplog.records if "no answer by its deadline" in r.getMessage()]
    assert len(overdue) == 1  # once per outage, not once per decision
    pool = kit.engine.decisions
    assert pool is not None and pool.figures.offline_at_once > 0  # decided without waiting


async def test_the_wall_deadline_hands_the_decision_to_the_offline_policy(
    redis: aioredis.Redis,
) -> None:
    wall = FakeWall()
    policy = ModelPolicy(hangs_for("yuiju"))
    kit = await make_engine(
        redis,
        None,
        policy=policy,
        prefix="wall",
        decisions=DecisionLimits(deadline_minutes=600, deadline_seconds=20),
        wall=wall,
    )
    pool = kit.engine.decisions
    assert pool is not None
    now = at_time("2026-09-01 06:00")
    await kit.ticker.tick(now)
    due = (await kit.loop.step(now, StepInputs(decisions=pool, speed=6.0))).due
    assert due == at_time("2026-09-01 06:02")  # 20 wall seconds at 6x: two world minutes
    assert (await kit.character()).running is None  # type: ignore[union-attr]

    wall.t += 21  # the wall deadline passed before the world one
    later = at_time("2026-09-01 06:01")
    ends = (await kit.loop.step(later, StepInputs(decisions=pool, speed=6.0))).due
    her = await kit.character()
    assert her is not None and her.running is not None
    assert her.running.decided_by == "fallback:utility"
    assert her.running.started_at == later and ends == her.running.ends_at
    assert pool.in_flight == 0 and pool.figures.overdue == 1


async def test_a_slow_answer_is_stamped_when_it_is_applied_and_a_stale_one_is_decided_again(
    redis: aioredis.Redis,
) -> None:
    release = asyncio.Event()
    answers = [{"action": "在家吃早饭", "reason": "饿了"}, IDLE_30, IDLE_30]

    async def slow(_request: DecisionRequest) -> Any:
        await release.wait()
        return answers.pop(0)

    policy = ModelPolicy(slow)
    kit = await make_engine(
        redis,
        None,
        policy=policy,
        prefix="stale",
        characters={"yuiju": make_character(satiety=40)},
        decisions=DecisionLimits(deadline_minutes=60, deadline_seconds=1e9),
        wall=FakeWall(),
    )
    pool = kit.engine.decisions
    assert pool is not None
    asked = at_time("2026-09-01 10:20")  # breakfast until 10:30
    await kit.ticker.tick(asked)
    await kit.loop.step(asked, StepInputs(decisions=pool))
    flight = pool.get("yuiju")
    assert flight is not None
    release.set()
    await flight.task

    later = at_time("2026-09-01 10:40")  # the answer comes back too late for breakfast
    await kit.ticker.tick(later)
    await kit.loop.step(later, StepInputs(decisions=pool))
    her = await kit.character()
    assert her is not None and her.running is None  # never executed
    assert kit.stats.stale_starts == 1 and pool.figures.stale == 1
    again = pool.get("yuiju")
    assert again is not None and again is not flight  # decided again
    await again.task

    applied = at_time("2026-09-01 10:43")
    await kit.loop.step(applied, StepInputs(decisions=pool))
    her = await kit.character()
    assert her is not None and her.running is not None
    assert her.running.action_id == "idle"
    assert her.running.started_at == applied  # the time the step happened, not the question's
    assert policy.asked == [("yuiju", "10:20"), ("yuiju", "10:40")]
    told = policy.requests[-1].ctx.character.last_event or ""
    assert "在家吃早饭" in told  # asked again with the reason her first answer no longer held


async def test_no_more_decisions_are_in_flight_than_the_worker_allows(
    redis: aioredis.Redis,
) -> None:
    gate = asyncio.Event()

    async def held(_request: DecisionRequest) -> Any:
        await gate.wait()
        return IDLE_30

    policy = ModelPolicy(held)
    cids = [f"c{n}" for n in range(5)]
    kit = await make_engine(
        redis,
        None,
        policy=policy,
        prefix="limit",
        characters={cid: make_character(id=cid) for cid in cids},
        decisions=DecisionLimits(max_in_flight=2, deadline_minutes=600, deadline_seconds=1e9),
        wall=FakeWall(),
    )
    pool = kit.engine.decisions
    assert pool is not None
    now = at_time("2026-09-01 06:00")
    await kit.ticker.tick(now)
    for loop in kit.loops.values():  # every character starts her decision; two are sent
        await loop.step(now, StepInputs(decisions=pool))
    for _ in range(20):
        await asyncio.sleep(0)
    assert pool.in_flight == 5 and policy.in_flight == 2
    gate.set()
    flights = [f for c in cids if (f := pool.get(c)) is not None]
    await asyncio.gather(*(f.task for f in flights))
    assert policy.peak == 2
    for loop in kit.loops.values():  # the answers come back as inputs of her next step
        await loop.step(now, StepInputs(decisions=pool))
    for cid in cids:
        her = await kit.character(cid)
        assert her is not None and her.running is not None, cid
    pool.drop_all()


async def test_the_endpoint_gate_bounds_requests_and_waits_out_a_rate_limit() -> None:
    busy = 0
    peak = 0
    limited: list[int] = []

    async def answer(_messages: list[ChatMessage], _schema: JsonSchema | None) -> str:
        nonlocal busy, peak
        busy += 1
        peak = max(peak, busy)
        try:
            await asyncio.sleep(0)
            if not limited:
                limited.append(1)
                raise LLMUnavailable("HTTP 429 (test)", retry_after=0.01)
            return "ok"
        finally:
            busy -= 1

    gate = AdmissionGate(FunctionChatModel(answer), max_concurrent=2)
    results = await asyncio.gather(
        *(gate.complete([{"role": "user", "content": str(n)}]) for n in range(6))
    )
    assert [r.text for r in results] == ["ok"] * 6  # the rate-limited one was sent again
    assert peak == 2 and gate.rate_limited == 1


def test_a_pool_refuses_a_limit_below_one() -> None:
    with pytest.raises(ValueError, match="max_in_flight"):
        DecisionPool[Sequence[str]](DecisionLimits(max_in_flight=0))


class BlockingHistory:
    """A history store whose writes wait until released (a locked file, a store away)."""

    def __init__(self, inner: HistoryStore) -> None:
        self.inner = inner
        self.released = asyncio.Event()
        self.blocked = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def put_many(self, collection: str, docs: Sequence[Mapping[str, Any]]) -> None:
        self.blocked += 1
        await self.released.wait()
        await self.inner.put_many(collection, docs)


async def test_a_history_store_whose_writes_block_freezes_neither_time_nor_her_steps(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    blocking = BlockingHistory(sqlite_history)
    kit = await make_engine(
        redis,
        blocking,  # type: ignore[arg-type]
        prefix="blocked",
        tick_minutes=1,
        characters={"c0": make_character(id="c0"), "c1": make_character(id="c1")},
    )
    end = at_time("2026-09-01 12:00")
    running = asyncio.create_task(kit.engine.run(until=end))
    try:
        for _ in range(2000):  # the run reaches its end while the first write still waits
            world = await kit.store.load_world()
            if world is not None and world.last_advanced_at == end:
                break
            await asyncio.sleep(0.01)
        assert world is not None and world.last_advanced_at == end
        assert blocking.blocked == 1 and not running.done()  # the final flush waits its turn
        by = by_character(kit.stats.timeline)
        for cid in ("c0", "c1"):
            assert len(by[cid]) >= 3 and max(gaps_minutes(by[cid])) <= 1, cid
        assert await kit.store.outbox_size() > 0  # queued meanwhile, as always
    finally:
        blocking.released.set()
        await asyncio.wait_for(running, 30)
    assert await kit.store.outbox_size() == 0
    assert await sqlite_history.count("episodes") > 6


async def test_a_429_over_http_is_waited_out_not_failed(openai_stub: Any) -> None:
    from tests.openai_stub import StubError

    openai_stub.reply(StubError(429), "好")
    inner = OpenAIChatModel(base_url=openai_stub.base_url, api_key=None, model="stub")
    gate = AdmissionGate(inner, max_concurrent=1)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(yuiju.llm.openai_model, "RATE_LIMIT_WAIT_SECONDS", 0.01)
            result = await gate.complete([{"role": "user", "content": "在吗"}])
    finally:
        await gate.aclose()
    assert result.text == "好" and gate.rate_limited == 1 and len(openai_stub.requests) == 2


def test_retry_after_reads_seconds_and_dates() -> None:
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds("0.5") == 0.5
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    assert retry_after_seconds(None) == retry_after_seconds("soon") == RATE_LIMIT_WAIT_SECONDS


async def test_a_decision_that_waited_for_a_place_past_its_deadline_is_no_outage() -> None:
    wall = FakeWall()
    pool = DecisionPool[str](
        DecisionLimits(max_in_flight=1, deadline_minutes=600, deadline_seconds=10), wall=wall
    )
    now = at_time("2026-09-01 06:00")
    held = asyncio.Event()

    async def ask() -> str:
        await held.wait()
        return "answer"

    first = pool.start("c0", now, 1.0, ask)
    second = pool.start("c1", now, 1.0, ask)
    for _ in range(5):
        await asyncio.sleep(0)
    assert first.admitted and not second.admitted
    wall.t += 11
    pool.give_up("c1")  # waited for the worker's place all along: the model is not away
    assert not pool.in_outage and pool.figures.queued_past_deadline == 1
    pool.give_up("c0")  # sent and unanswered: it is
    assert pool.in_outage and pool.figures.overdue == 2
    await asyncio.gather(first.task, second.task, return_exceptions=True)
