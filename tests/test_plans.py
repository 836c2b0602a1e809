"""Her plans: Yuiju's rules for plan changes, and plan changes carried by decisions in the engine."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis

from tests.conftest import at_time, make_character, make_ctx, make_engine
from yuiju.storage.history import HistoryStore
from yuiju.world.plans import (
    MAX_SHORT_TERM,
    PlanError,
    PlanItem,
    PlanState,
    apply_plan_changes,
    plan_id,
)
from yuiju.world.policies.llm import render_moment_prompt
from yuiju.world.policies.scripted import ScriptedPolicy
from yuiju.world.policy import DecisionRequest

NOW = at_time("2026-09-01 10:00")


def item(title: str, scope: str = "shortTerm") -> PlanItem:
    return PlanItem(
        id=plan_id(scope, title), title=title, scope=scope, created_at=NOW, updated_at=NOW
    )  # type: ignore[arg-type]


def plans(
    long_term: str | None = "攒钱买一台相机", short_term: tuple[str, ...] = ("买鸡蛋", "写作业")
) -> PlanState:
    return PlanState(
        long_term=item(long_term, "longTerm") if long_term else None,
        short_term=[item(t) for t in short_term],
    )


def change(
    scope: str, kind: str, current: str | None = None, nxt: str | None = None
) -> dict[str, Any]:
    return {
        "scope": scope,
        "changeType": kind,
        "currentPlan": current,
        "nextPlan": nxt,
        "reason": "想清楚了",
    }


def titles(state: PlanState) -> tuple[str | None, list[str]]:
    return (state.long_term.title if state.long_term else None, [p.title for p in state.short_term])


# -- the rules ------------------------------------------------------------------------------

OK = [
    (
        "create long-term when none",
        plans(None),
        [change("longTerm", "created", nxt="学会做菜")],
        ("学会做菜", ["买鸡蛋", "写作业"]),
    ),
    (
        "create short-term appends",
        plans(),
        [change("shortTerm", "created", nxt="去公园散步")],
        ("攒钱买一台相机", ["买鸡蛋", "写作业", "去公园散步"]),
    ),
    (
        "update short-term in place",
        plans(),
        [change("shortTerm", "updated", "买鸡蛋", "买豆腐")],
        ("攒钱买一台相机", ["买豆腐", "写作业"]),
    ),
    (
        "update long-term",
        plans(),
        [change("longTerm", "updated", "攒钱买一台相机", "攒钱去旅行")],
        ("攒钱去旅行", ["买鸡蛋", "写作业"]),
    ),
    (
        "complete short-term",
        plans(),
        [change("shortTerm", "completed", "买鸡蛋")],
        ("攒钱买一台相机", ["写作业"]),
    ),
    (
        "abandon long-term",
        plans(),
        [change("longTerm", "abandoned", "攒钱买一台相机")],
        (None, ["买鸡蛋", "写作业"]),
    ),
    (
        "complete then create a new long-term",
        plans(),
        [
            change("longTerm", "completed", "攒钱买一台相机"),
            change("longTerm", "created", nxt="学游泳"),
        ],
        ("学游泳", ["买鸡蛋", "写作业"]),
    ),
    (
        "whitespace around titles is ignored",
        plans(),
        [change("shortTerm", "completed", "  写作业 ")],
        ("攒钱买一台相机", ["买鸡蛋"]),
    ),
]


@pytest.mark.parametrize(
    ("start", "batch", "expected"), [c[1:] for c in OK], ids=[c[0] for c in OK]
)
def test_a_valid_batch_applies_every_change(start: PlanState, batch: list, expected: tuple) -> None:
    before = start.model_copy(deep=True)

    after, changes = apply_plan_changes(start, batch, NOW)

    assert titles(after) == expected
    assert len(changes) == len(batch)
    assert start == before  # applied on a copy
    for plan in [after.long_term, *after.short_term]:
        if plan is not None:
            assert plan.id == plan_id(plan.scope, plan.title)


REJECTED = [
    (
        "create long-term when one exists",
        plans(),
        [change("longTerm", "created", nxt="学会做菜")],
        "已经有长期计划「攒钱买一台相机」",
    ),
    (
        "create with currentPlan",
        plans(),
        [change("shortTerm", "created", "买鸡蛋", "去公园")],
        "created 只填 nextPlan",
    ),
    ("create without nextPlan", plans(), [change("shortTerm", "created")], "created 只填 nextPlan"),
    (
        "create a duplicate short-term title",
        plans(),
        [change("shortTerm", "created", nxt="买鸡蛋")],
        "短期计划「买鸡蛋」已经存在",
    ),
    (
        "update without nextPlan",
        plans(),
        [change("shortTerm", "updated", "买鸡蛋")],
        "updated 要同时填 currentPlan 和不同的 nextPlan",
    ),
    (
        "update without currentPlan",
        plans(),
        [change("shortTerm", "updated", nxt="买豆腐")],
        "updated 要同时填",
    ),
    (
        "update to the same title",
        plans(),
        [change("shortTerm", "updated", "买鸡蛋", "买鸡蛋")],
        "不同的 nextPlan",
    ),
    (
        "update a plan that does not match exactly",
        plans(),
        [change("shortTerm", "updated", "买鸡", "买豆腐")],
        "没有短期计划「买鸡」（现有：买鸡蛋、写作业）",
    ),
    (
        "update long-term that does not match",
        plans(),
        [change("longTerm", "updated", "买相机", "去旅行")],
        "没有长期计划「买相机」（现在是：攒钱买一台相机）",
    ),
    (
        "update onto an existing short-term title",
        plans(),
        [change("shortTerm", "updated", "买鸡蛋", "写作业")],
        "已经存在",
    ),
    (
        "complete with nextPlan",
        plans(),
        [change("shortTerm", "completed", "买鸡蛋", "买豆腐")],
        "completed 只填 currentPlan",
    ),
    (
        "complete without currentPlan",
        plans(),
        [change("shortTerm", "completed")],
        "completed 只填 currentPlan",
    ),
    (
        "abandon with nextPlan",
        plans(),
        [change("longTerm", "abandoned", "攒钱买一台相机", "别的")],
        "abandoned 只填 currentPlan",
    ),
    (
        "complete a plan that does not exist",
        plans(),
        [change("shortTerm", "completed", "去海边")],
        "没有短期计划「去海边」",
    ),
    (
        "abandon a long-term plan when there is none",
        plans(None),
        [change("longTerm", "abandoned", "学游泳")],
        "没有长期计划「学游泳」（现在是：无）",
    ),
    (
        "more short-term plans than allowed",
        plans(short_term=tuple(f"计划{n}" for n in range(MAX_SHORT_TERM))),
        [change("shortTerm", "created", nxt="再来一个")],
        f"短期计划最多 {MAX_SHORT_TERM} 条",
    ),
    (
        "an unknown change type",
        plans(),
        [change("shortTerm", "postponed", "买鸡蛋")],
        "planChanges 格式不对",
    ),
    (
        "an unknown key",
        plans(),
        [{**change("shortTerm", "completed", "买鸡蛋"), "priority": 1}],
        "planChanges 格式不对",
    ),
    (
        "one bad change in a batch",
        plans(),
        [
            change("shortTerm", "completed", "买鸡蛋"),
            change("shortTerm", "created", nxt="去公园"),
            change("longTerm", "created", nxt="学会做菜"),
        ],
        "第3条计划变更（longTerm/created）",
    ),
]


@pytest.mark.parametrize(
    ("start", "batch", "says"), [c[1:] for c in REJECTED], ids=[c[0] for c in REJECTED]
)
def test_an_invalid_batch_is_rejected_with_its_reason_and_applies_nothing(
    start: PlanState, batch: list, says: str
) -> None:
    before = start.model_copy(deep=True)

    with pytest.raises(PlanError) as raised:
        apply_plan_changes(start, batch, NOW)

    assert says in str(raised.value), str(raised.value)
    assert start == before


def test_the_plan_lines_list_long_term_then_ordered_short_term() -> None:
    assert plans().lines() == ["长期计划：攒钱买一台相机", "短期计划1：买鸡蛋", "短期计划2：写作业"]
    assert PlanState().lines() == ["长期计划：无", "短期计划：无"]


# -- through the engine ----------------------------------------------------------------------

IDLE = {"action": "发呆", "reason": "先放空一下", "durationMinute": 10}
GOOD = [
    change("longTerm", "created", nxt="攒钱买一台相机"),
    change("shortTerm", "created", nxt="去超市买鸡蛋"),
]


async def test_valid_plan_changes_are_saved_with_the_action_start_and_logged_as_plan_episodes(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(
        redis,
        sqlite_history,
        policy=ScriptedPolicy([{**IDLE, "planChanges": GOOD}]),
        start="2026-09-01 06:00",
    )

    await kit.engine.run(max_steps=1)

    raw = await redis.get(
        kit.keys.character("yuiju")
    )  # one value: the action and the plans together
    her = type(make_character()).model_validate_json(raw)
    assert her.running is not None and her.running.action_id == "idle"
    assert titles(her.plans) == ("攒钱买一台相机", ["去超市买鸡蛋"])
    assert her.plan_feedback is None

    await kit.engine.flush_outbox(force=True)
    found = await sqlite_history.find("episodes", eq={"character_id": "yuiju", "type": "plan"})
    assert len(found) == 2
    assert {d["data"]["change"]["nextPlan"] for d in found} == {"攒钱买一台相机", "去超市买鸡蛋"}
    assert all(d["data"]["behavior_episode"] == her.running.episode_id for d in found)
    assert {d["summary"] for d in found} == {
        "悠酱定下了长期计划「攒钱买一台相机」",
        "悠酱定下了短期计划「去超市买鸡蛋」",
    }
    behavior = await sqlite_history.find("episodes", eq={"type": "behavior"})
    assert len(behavior) == 1 and behavior[0]["data"]["plan_changes"] == GOOD


async def test_an_invalid_batch_changes_no_plan_but_the_action_runs_and_she_hears_why_next_time(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    bad = [
        change("shortTerm", "created", nxt="去公园"),
        change("shortTerm", "completed", "不存在的计划"),
    ]
    script = ScriptedPolicy([{**IDLE, "planChanges": bad}, IDLE])
    kit = await make_engine(redis, sqlite_history, policy=script, start="2026-09-01 06:00")

    await kit.engine.run(max_steps=1)

    her = await kit.character()
    assert her is not None and her.running is not None and her.running.action_id == "idle"
    assert titles(her.plans) == (None, [])
    assert her.plan_feedback is not None
    assert (
        "上次的计划变更没有生效" in her.plan_feedback
        and "没有短期计划「不存在的计划」" in her.plan_feedback
    )

    await kit.engine.run(until=at_time("2026-09-01 06:10"))  # idle ends, the next decision is made

    assert len(script.requests) == 2 and kit.stats.fallbacks == 0
    second = script.requests[1]
    assert second.ctx.character.plan_feedback == her.plan_feedback
    assert her.plan_feedback in render_moment_prompt(second)
    after = await kit.character()
    assert after is not None and after.running is not None
    assert after.plan_feedback is None  # shown once, cleared by the next decision
    assert titles(after.plans) == (None, [])
    await kit.engine.flush_outbox(force=True)
    assert await sqlite_history.count("episodes", eq={"type": "plan"}) == 0


def test_plans_appear_in_the_decision_prompt() -> None:
    ctx = make_ctx("2026-09-01 10:00", plans=plans())
    prompt = render_moment_prompt(DecisionRequest(ctx=ctx, candidates=[]))
    for line in ("长期计划：攒钱买一台相机", "短期计划1：买鸡蛋", "短期计划2：写作业"):
        assert line in prompt
    assert "短期计划：无" in render_moment_prompt(DecisionRequest(ctx=make_ctx(), candidates=[]))
