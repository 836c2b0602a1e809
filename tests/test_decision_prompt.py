"""The decision prompt is laid out for prompt caches: a byte-stable system message first (who she
is, the town, the whole catalogue, the rules), then the moment from what changes least to what
changes at every decision; in json_object mode the schema's stable part joins the system message
and the moment's part, compact, comes last."""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path

import pytest

from characters import load_card
from llm import FunctionChatModel
from tests.conftest import make_ctx
from tests.openai_stub import OpenAIStub, flat_prompt, prefix_share, schema_following
from world.loader import load_actions
from world.policies.llm import LLMPolicy
from world.policy import DecisionRequest
from world.simulate import simulate
from yuiju_config import load_config

ACTIONS = list(load_actions())
CARD = load_card("yuiju")


def request(now: str, **character: object) -> DecisionRequest:
    ctx = make_ctx(now, **character)
    return DecisionRequest(ctx=ctx, candidates=[a for a in ACTIONS if a.available(ctx)], card=CARD,
                           recent=["09:00 起床", "09:10 在家吃早饭（肚子饿了）"])


def test_the_system_prompt_is_the_same_bytes_at_every_moment_and_holds_the_catalogue() -> None:
    policy = LLMPolicy(FunctionChatModel(lambda *_: ""), actions=ACTIONS)
    moments = [request("2026-09-01 07:00"), request("2026-09-05 15:00", location="shop", money=20),
               request("2026-09-06 22:30", location="park", inventory={"野莓": 2})]
    systems = {policy.messages(r)[0]["content"] for r in moments}

    [system] = systems
    assert CARD.persona.strip() in system
    for action in ACTIONS:
        if action.moves_to is None:
            assert f"- {action.name}：{action.description}\n" in system, action.id
    assert "计划" in system and "2026-09" not in system  # nothing of a moment


def test_the_moment_goes_from_what_changes_least_to_what_changes_every_time() -> None:
    policy = LLMPolicy(FunctionChatModel(lambda *_: ""), actions=ACTIONS)
    moment = policy.messages(request("2026-09-01 10:00"))[1]["content"]

    order = ["长期计划", "2026-09-01 星期二", "地点：", "可选行为：", "金币：", "今天做过：", "时间：10:00"]
    positions = [moment.index(marker) for marker in order]
    assert positions == sorted(positions), moment


@pytest.mark.parametrize("mode", ["json_schema", "json_object"])
async def test_consecutive_decision_prompts_share_most_of_their_prefix(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_stub: OpenAIStub
) -> None:
    monkeypatch.chdir(tmp_path)
    openai_stub.handler = schema_following(seed=8)
    cfg = load_config(environ={}, overrides={"llm": {"base_url": openai_stub.base_url, "model": "fake",
                                                     "output_mode": mode}})

    await simulate(cfg, days=1, seed=8, policy="llm", progress=False)

    prompts = [flat_prompt(body) for body in openai_stub.requests]
    shares = [prefix_share(a, b) for a, b in itertools.pairwise(prompts)]
    assert len(prompts) > 20
    assert statistics.median(shares) >= 0.8, sorted(shares)[:: max(1, len(shares) // 10)]
    if mode == "json_object":
        for body in openai_stub.requests:
            system, moment = (m["content"] for m in body["messages"])
            tail = moment[moment.index("只输出符合下面 JSON Schema"):]
            assert len(tail) < 1500 and "\n  " not in tail  # compact, and last
            assert system.endswith(openai_stub.requests[0]["messages"][0]["content"][-200:])
