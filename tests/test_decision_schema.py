"""The decision schema a model can follow: a union over this moment's candidates whose params
offer only what is possible now (what she owns, what she can afford), still validated afterwards."""

from __future__ import annotations

import json
import random
from typing import Any

import jsonschema
import pytest

from tests.conftest import make_ctx
from tests.openai_stub import read_the_moment
from tests.test_params import PARAMETERISED, sampled_states
from yuiju.llm.testing import FunctionChatModel, follow_schema, schema_following
from yuiju.world.action import ActionContext
from yuiju.world.decision_schema import decision_schema, stable_decision_schema
from yuiju.world.errors import InvalidDecision
from yuiju.world.loader import load_actions
from yuiju.world.policies.llm import LLMPolicy
from yuiju.world.policy import DecisionRequest, RawDecision, validate_decision

ACTIONS = list(load_actions())


def candidates_at(ctx: ActionContext) -> list:
    return [a for a in ACTIONS if a.available(ctx)]


def moments() -> list[ActionContext]:
    """Every parameterised action's sampled states plus ordinary moments of a day."""
    out = [ctx for action_id in PARAMETERISED for ctx in sampled_states(action_id, 25)]
    for hour in ("06:40", "08:00", "12:10", "16:40", "19:00", "23:30"):
        out += [
            make_ctx(f"2026-09-0{day} {hour}", location=where)
            for day in (1, 5)
            for where in ("home", "school", "park", "station")
        ]
    return [ctx for ctx in out if candidates_at(ctx)]


async def test_a_schema_following_model_is_accepted_first_time_even_for_actions_with_params() -> (
    None
):
    model = FunctionChatModel(schema_following(seed=3))
    policy = LLMPolicy(model, max_attempts=3)
    requests = [DecisionRequest(ctx=ctx, candidates=candidates_at(ctx)) for ctx in moments()]
    for action_id in PARAMETERISED:  # and each parameterised action as the only choice
        action = next(a for a in ACTIONS if a.id == action_id)
        requests += [
            DecisionRequest(ctx=ctx, candidates=[action])
            for ctx in sampled_states(action_id, 25)
            if action.available(ctx)
        ]
    chosen: set[str] = set()
    for request in requests:
        decision = await policy.decide(request)
        chosen.add(decision.action.id)
        assert (decision.params is not None) == (decision.action.params is not None)

    assert len(model.calls) == len(requests)  # no second attempt anywhere
    assert policy.first_attempt_ok == policy.decisions == len(requests)
    assert set(PARAMETERISED) <= chosen


@pytest.mark.parametrize("action_id", PARAMETERISED)
def test_every_instance_of_an_actions_branch_validates_against_the_moment(action_id: str) -> None:
    action = next(a for a in ACTIONS if a.id == action_id)
    tried = 0
    for n, ctx in enumerate(sampled_states(action_id, 40)):
        if not action.available(ctx):
            continue
        candidates = candidates_at(ctx)
        schema = decision_schema(candidates, ctx)
        [branch] = [
            b
            for b in schema.schema["anyOf"]
            if b["properties"]["action"].get("const") == action.offered_as
        ]
        for k in range(10):
            answer = follow_schema(
                {**schema.schema, "anyOf": [branch]}, random.Random(f"{n}|{k}"), fill=0.5
            )
            decision = validate_decision(RawDecision.model_validate(answer), candidates, "t", ctx)
            assert decision.action is action
        tried += 1
    assert tried >= 5


def test_the_schema_offers_only_what_she_owns_or_can_afford() -> None:
    ctx = make_ctx("2026-09-05 15:00", location="shop", money=20)
    schema = decision_schema(candidates_at(ctx), ctx).schema
    [buy] = [b for b in schema["anyOf"] if b["properties"]["action"].get("const") == "在商店买零食"]
    params = buy["properties"]["params"]
    assert params["properties"]["item"]["enum"] == [
        "百奇",
        "弹珠汽水糖",
        "抹茶布丁",
        "波子汽水",
        "铜锣烧",
        "盐味仙贝",
        "草莓牛奶",
        "红豆面包",
        "乌龙茶",
    ]
    assert params["properties"]["quantity"]["maximum"] == 1  # 20 coins buy one of the dearest (15)

    ctx = make_ctx(
        "2026-09-05 18:00", location="home", satiety=40, inventory={"鸡蛋": 1, "百奇": 2, "白米": 1}
    )
    schema = decision_schema(candidates_at(ctx), ctx).schema
    [cook] = [b for b in schema["anyOf"] if b["properties"]["action"].get("const") == "在家做饭吃"]
    ingredients = cook["properties"]["params"]["properties"]["ingredients"]
    assert ingredients["items"]["enum"] == ["白米", "鸡蛋"] and ingredients["maxItems"] == 2
    assert ingredients["uniqueItems"] is True


def test_the_union_offers_exactly_the_candidates_and_asks_a_duration_only_where_one_is_chosen() -> (
    None
):
    ctx = make_ctx("2026-09-01 10:00")
    candidates = candidates_at(ctx)
    schema = decision_schema(candidates, ctx).schema
    named: dict[str, dict[str, Any]] = {}
    for branch in schema["anyOf"]:
        action = branch["properties"]["action"]
        for name in action.get("enum", [action.get("const")]):
            named[name] = branch
    assert sorted(named) == sorted(a.offered_as for a in candidates)
    assert "去日和食堂" in named and "从家去日和食堂" not in named  # a move by where it goes
    idle = named["发呆"]["properties"]["durationMinute"]
    assert {10, 30, 60} <= set(idle["enum"]) and named["发呆"] is named["玩手机"]
    assert named["在家休息"]["properties"]["durationMinute"] == {"type": "null"}


def test_the_prompt_form_offers_the_same_choices_as_the_provider_form() -> None:
    """The compact form shown in json_object prompts accepts every answer the provider's form
    accepts, and what it leaves to the prose rules (plan changes, nulls) never makes an answer
    that follows it rejected."""
    for n, ctx in enumerate(moments()[::7]):
        candidates = candidates_at(ctx)
        schema = decision_schema(candidates, ctx)
        assert schema.prompt is not None
        jsonschema.Draft202012Validator.check_schema(schema.schema)
        jsonschema.Draft202012Validator.check_schema(schema.prompt)
        provider, prompt = (
            jsonschema.Draft202012Validator(f) for f in (schema.schema, schema.prompt)
        )
        for k in range(5):
            rng = random.Random(f"{n}|{k}")
            assert prompt.is_valid(follow_schema(schema.schema, rng, fill=0.5))
            answer = follow_schema(schema.prompt, rng, fill=0.5)
            decision = validate_decision(RawDecision.model_validate(answer), candidates, "t", ctx)
            assert decision.action.offered_as == answer["action"]
        wrong = {"action": "游泳", "reason": "想游泳"}
        assert not provider.is_valid(wrong) and not prompt.is_valid(wrong)


def test_a_move_answered_by_where_it_goes_or_by_its_name_is_the_same_move() -> None:
    ctx = make_ctx("2026-09-05 10:00", location="diner")
    candidates = candidates_at(ctx)
    for said in ("去超市", "从日和食堂去超市", "go_from_diner_to_supermarket"):
        decision = validate_decision(
            RawDecision(action=said, reason="买点东西"), candidates, "t", ctx
        )
        assert decision.action.id == "go_from_diner_to_supermarket"
    with pytest.raises(InvalidDecision, match=r"只能从这些里选一个：.*去超市"):
        validate_decision(RawDecision(action="去游泳池", reason="想游泳"), candidates, "t", ctx)


# -- issue 20 item 7: a schema that stays the same for providers that cache it with the prompt ----


def test_the_stable_schema_is_the_same_bytes_at_every_moment_and_allows_every_moments_answer() -> (
    None
):
    stable = stable_decision_schema()
    assert stable.stable and stable_decision_schema() == stable
    jsonschema.Draft202012Validator.check_schema(stable.schema)
    validator = jsonschema.Draft202012Validator(stable.schema)
    for n, ctx in enumerate(moments()[::7]):
        moment = decision_schema(candidates_at(ctx), ctx)
        for k in range(3):
            answer = follow_schema(moment.schema, random.Random(f"{n}|{k}"), fill=0.5)
            assert validator.is_valid(answer), answer  # nothing possible is ever refused


async def test_with_the_stable_schema_a_model_that_reads_the_moment_is_accepted_first_time() -> (
    None
):
    model = FunctionChatModel(schema_following(seed=5, read=read_the_moment))
    policy = LLMPolicy(model, schema="stable", max_attempts=3)
    requests = [DecisionRequest(ctx=ctx, candidates=candidates_at(ctx)) for ctx in moments()]

    for request in requests:
        decision = await policy.decide(request)
        assert (decision.params is not None) == (decision.action.params is not None)

    assert len(model.calls) == len(requests)  # the options and params the prompt states suffice
    assert len({json.dumps(s.schema) for s in model.schemas if s is not None}) == 1
