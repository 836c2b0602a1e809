"""Choices inside one decision: parameter models validated against the moment, and their effects."""

from __future__ import annotations

import json
import random
from datetime import timedelta
from typing import Any

import pytest

from tests.conftest import make_ctx
from yuiju.llm.testing import FunctionChatModel
from yuiju.world.action import Action, ActionContext
from yuiju.world.errors import InvalidDecision
from yuiju.world.items import ALL
from yuiju.world.loader import load_actions
from yuiju.world.policies.llm import LLMPolicy
from yuiju.world.policy import DecisionRequest, RawDecision, validate_decision
from yuiju.world.state import RunningAction

CATALOGUE = load_actions()
ACTIONS = list(CATALOGUE)
PARAMETERISED = sorted(a.id for a in ACTIONS if a.params is not None and a.joint is None)
"""Parameterised actions done alone (joint ones need company: tests/test_social_actions.py)."""

# Where and when each parameterised action is offered (a Saturday, so no school in the way).
SETTING: dict[str, dict[str, Any]] = {
    "buy_snack": {"now": "2026-09-05 15:00", "location": "shop"},
    "buy_ingredients": {"now": "2026-09-05 15:00", "location": "supermarket"},
    "sell_items": {"now": "2026-09-05 15:00", "location": "supermarket"},
    "eat_at_diner": {"now": "2026-09-05 12:00", "location": "diner"},
    "drink_coffee": {"now": "2026-09-05 15:00", "location": "cafe"},
    "cook_and_eat": {"now": "2026-09-05 18:00", "location": "home"},
    "eat_item": {"now": "2026-09-05 15:00", "location": "home"},
    "pray_at_shrine": {"now": "2026-09-05 15:00", "location": "shrine"},
}


def test_the_parameterised_actions_are_the_ones_tested_here() -> None:
    assert set(PARAMETERISED) == set(SETTING)


def ctx_for(action_id: str, **character: Any) -> ActionContext:
    setting = SETTING[action_id]
    return make_ctx(
        setting["now"],
        location=setting["location"],
        **{"stamina": 60, "satiety": 40, "mood": 50, **character},
    )


def decide(ctx: ActionContext, action_id: str, params: dict[str, Any] | None):
    candidates = [a for a in ACTIONS if a.available(ctx)]
    assert action_id in {a.id for a in candidates}, CATALOGUE.actions[action_id].why_not(ctx)
    raw = RawDecision(action=CATALOGUE.actions[action_id].name, reason="想这样做", params=params)
    return validate_decision(raw, candidates, "t", ctx)


def start_and_complete(ctx: ActionContext, decision) -> tuple[str, str]:
    """Run the executor at the start and the completion at the end, as the loop does."""
    action: Action = decision.action
    ctx.params = decision.params
    started = (action.run(ctx) if action.run else None) or ""
    minutes = action.minutes(ctx)
    ctx.running = RunningAction(
        action_id=action.id,
        name=action.name,
        started_at=ctx.now,
        ends_at=ctx.now + timedelta(minutes=minutes),
        episode_id="bhv_t",
        place=ctx.character.location,
        reason="想这样做",
        decided_by="t",
        params=decision.params.model_dump() if decision.params else None,
    )
    ctx.now = ctx.running.ends_at
    ctx.params = None  # completions read the running record, as after a restart
    done = (action.complete(ctx) if action.complete else None) or ""
    return started, done


# -- valid choices change what they say ------------------------------------------------------

VALID = [
    # action, her state, params, expected money, inventory, (stat, delta) pairs
    ("buy_snack", {"money": 100}, {"item": "百奇", "quantity": 2}, 76, {"百奇": 2}, {}),
    (
        "buy_ingredients",
        {"money": 100},
        {"items": ["鸡蛋", "豆腐", "白米"]},
        80,
        {"鸡蛋": 1, "豆腐": 1, "白米": 1},
        {},
    ),
    (
        "sell_items",
        {"money": 10, "inventory": {"海玻璃": 2, "野莓": 1}},
        {"items": ["海玻璃"]},
        190,
        {"野莓": 1},
        {},
    ),
    (
        "sell_items",
        {"money": 10, "inventory": {"海玻璃": 2}},
        {"items": ["海玻璃", "海玻璃"]},
        190,
        {},
        {},
    ),
    ("eat_at_diner", {"money": 100}, {"item": "咖喱饭"}, 74, {}, {"satiety": 45, "stamina": 8}),
    ("drink_coffee", {"money": 100}, {"item": "美式"}, 64, {}, {"satiety": 8, "stamina": 5}),
    (
        "cook_and_eat",
        {"inventory": {"鸡蛋": 1, "白米": 2}},
        {"ingredients": ["鸡蛋", "白米"], "dish": "蛋炒饭"},
        300,
        {"白米": 1},
        {"satiety": round((8 + 14) * 1.2) + 15, "stamina": round((3 + 4) * 1.1)},
    ),
    (
        "eat_item",
        {"inventory": {"百奇": 1, "白米": 1}},
        {"item": "百奇"},
        300,
        {"白米": 1},
        {"satiety": 4, "stamina": 2},
    ),
    ("pray_at_shrine", {"money": 100}, {"offer": True, "wish": "希望考试顺利"}, 95, {}, {}),
    ("pray_at_shrine", {"money": 100}, {"offer": False}, 100, {}, {}),
]


@pytest.mark.parametrize(
    ("action_id", "state", "params", "money", "inventory", "deltas"),
    VALID,
    ids=[f"{v[0]}-{n}" for n, v in enumerate(VALID)],
)
def test_a_valid_choice_validates_and_changes_money_inventory_and_stats(
    action_id: str, state: dict, params: dict, money: int, inventory: dict, deltas: dict
) -> None:
    ctx = ctx_for(action_id, **state)
    before = ctx.character.model_copy(deep=True)

    decision = decide(ctx, action_id, params)
    started, done = start_and_complete(ctx, decision)

    her = ctx.character
    assert decision.params is not None and decision.action.id == action_id
    assert her.money == money
    assert her.inventory == inventory
    for stat, delta in deltas.items():
        assert getattr(her, stat) == pytest.approx(getattr(before, stat) + delta), stat
    assert started or done


def test_praying_with_an_offering_lifts_her_mood_more() -> None:
    moods = {}
    for offer in (True, False):
        ctx = ctx_for("pray_at_shrine", money=100, mood=50)
        start_and_complete(ctx, decide(ctx, "pray_at_shrine", {"offer": offer}))
        moods[offer] = ctx.character.mood
    assert moods[True] > moods[False] > 50


# -- invalid choices go back with the reason -------------------------------------------------

INVALID = [
    ("buy_snack", {"money": 100}, {"item": "薯片"}, "小町商店没有「薯片」"),
    ("buy_snack", {"money": 10}, {"item": "抹茶布丁"}, "要 15 金币，她只有 10"),
    ("buy_snack", {"money": 100}, {"item": "百奇", "quantity": 9}, "quantity"),
    ("buy_ingredients", {"money": 100}, {"items": ["牛排"]}, "超市没有 牛排"),
    ("buy_ingredients", {"money": 100}, {"items": ["鸡蛋", "鸡蛋"]}, "每种食材只写一次"),
    ("buy_ingredients", {"money": 10}, {"items": ["鸡腿肉"]}, "一共 18 金币，她只有 10"),
    ("buy_ingredients", {"money": 100}, {"items": []}, "items"),
    (
        "sell_items",
        {"inventory": {"海玻璃": 1}},
        {"items": ["月汐珍珠"]},
        "不能卖 月汐珍珠；能卖的只有：海玻璃",
    ),
    ("sell_items", {"inventory": {"海玻璃": 1, "百奇": 1}}, {"items": ["百奇"]}, "不能卖 百奇"),
    ("eat_at_diner", {"money": 100}, {"item": "拉面"}, "菜单上没有「拉面」"),
    ("eat_at_diner", {"money": 20}, {"item": "咖喱饭"}, "咖喱饭要 26 金币，她只有 20"),
    ("drink_coffee", {"money": 100}, {"item": "抹茶拿铁"}, "菜单上没有「抹茶拿铁」"),
    ("drink_coffee", {"money": 40}, {"item": "维也纳咖啡"}, "维也纳咖啡要 55 金币，她只有 40"),
    (
        "cook_and_eat",
        {"inventory": {"鸡蛋": 1}},
        {"ingredients": ["鲑鱼切身"]},
        "背包里没有 鲑鱼切身；现有食材：鸡蛋",
    ),
    (
        "cook_and_eat",
        {"inventory": {"鸡蛋": 2}},
        {"ingredients": ["鸡蛋", "鸡蛋"]},
        "每种食材只写一次",
    ),
    ("cook_and_eat", {"inventory": {"鸡蛋": 1}}, {}, "ingredients"),
    (
        "eat_item",
        {"inventory": {"百奇": 1}},
        {"item": "抹茶布丁"},
        "背包里没有可以直接吃的「抹茶布丁」；现有：百奇",
    ),
    (
        "eat_item",
        {"inventory": {"百奇": 1, "白米": 1}},
        {"item": "白米"},
        "背包里没有可以直接吃的「白米」",
    ),
    ("pray_at_shrine", {"money": 3}, {"offer": True}, "金币不足 5"),
    ("pray_at_shrine", {"money": 100}, {"offer": True, "wish": "愿" * 41}, "wish"),
]


@pytest.mark.parametrize(
    ("action_id", "state", "params", "says"),
    INVALID,
    ids=[f"{v[0]}-{n}" for n, v in enumerate(INVALID)],
)
def test_an_invalid_choice_raises_invalid_decision_naming_the_problem(
    action_id: str, state: dict, params: dict, says: str
) -> None:
    ctx = ctx_for(action_id, **state)
    before = ctx.character.model_copy(deep=True)

    with pytest.raises(InvalidDecision) as raised:
        decide(ctx, action_id, params)

    message = str(raised.value)
    assert f"「{CATALOGUE.actions[action_id].name}」的 params 不正确" in message
    assert says in message, message
    assert ctx.character == before  # validation never touches her state


def test_params_for_an_action_without_a_model_are_refused() -> None:
    ctx = make_ctx("2026-09-05 15:00")
    with pytest.raises(InvalidDecision, match="不需要 params"):
        decide(ctx, "idle", {"item": "百奇"})


# -- the offline policy's choices are always valid -------------------------------------------


def sampled_states(action_id: str, n: int = 60) -> list[ActionContext]:
    rng = random.Random(f"params|{action_id}")
    names = sorted(ALL)
    out = []
    for seed in range(n):
        inventory = {name: rng.randint(1, 3) for name in rng.sample(names, rng.randint(0, 5))}
        ctx = ctx_for(
            action_id,
            money=rng.choice([0, 5, 6, 8, 12, 20, 30, 40, 60, 120, 500]),
            satiety=rng.choice([10, 40, 80]),
            inventory=inventory,
        )
        ctx.rng = random.Random(seed)
        out.append(ctx)
    return out


@pytest.mark.parametrize("action_id", PARAMETERISED)
def test_the_offline_policys_params_are_always_valid(action_id: str) -> None:
    action = CATALOGUE.actions[action_id]
    assert action.offline_params is not None
    tried = 0
    for ctx in sampled_states(action_id):
        if not action.available(ctx):
            continue
        params = action.offline_params(ctx)
        decision = decide(ctx, action_id, params)  # raises InvalidDecision if they were not
        start_and_complete(ctx, decision)
        assert ctx.character.money >= 0
        tried += 1
    assert tried >= 5, f"only {tried} sampled states offered {action_id}"


# -- the LLM picks in the same decision and hears about a mistake ------------------------------


async def test_an_llm_that_picks_an_item_she_lacks_hears_why_and_then_succeeds() -> None:
    ctx = ctx_for("eat_item", inventory={"百奇": 1}, satiety=40)
    candidates = [a for a in ACTIONS if a.available(ctx)]
    answers = iter(
        [
            {"action": "吃背包里的东西", "reason": "有点饿", "params": {"item": "抹茶布丁"}},
            {"action": "吃背包里的东西", "reason": "有点饿", "params": {"item": "百奇"}},
        ]
    )
    model = FunctionChatModel(
        lambda _messages, _schema: json.dumps(next(answers), ensure_ascii=False)
    )
    policy = LLMPolicy(model)

    decision = await policy.decide(DecisionRequest(ctx=ctx, candidates=candidates))

    assert decision.action.id == "eat_item" and decision.params.item == "百奇"  # type: ignore[union-attr]
    assert len(model.calls) == 2 and policy.calls == 2 and policy.invalid == 1
    feedback = model.calls[1][-1]["content"]
    assert "背包里没有可以直接吃的「抹茶布丁」" in feedback and "百奇" in feedback
    assert model.calls[1][: len(model.calls[0])] == model.calls[0]


def test_the_decision_prompt_describes_the_action_once_and_her_bag_in_the_moment() -> None:
    ctx = ctx_for("eat_item", inventory={"百奇": 1}, satiety=40)
    candidates = [a for a in ACTIONS if a.available(ctx)]
    system, moment = (
        m["content"]
        for m in LLMPolicy(FunctionChatModel(lambda *_: "")).messages(
            DecisionRequest(ctx=ctx, candidates=candidates)
        )
    )

    eat = CATALOGUE.actions["eat_item"]
    assert (
        f"- {eat.name}：{eat.description}\n" in system
    )  # its params: in the schema, with the choices
    assert "背包：百奇×1" in moment and eat.name in moment and eat.description not in moment
