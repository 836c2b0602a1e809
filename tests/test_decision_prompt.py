"""The decision prompt is laid out for prompt caches: a byte-stable system message first (who she
is, the town, the whole catalogue, the rules), then the moment from what changes least to what
changes at every decision; in json_object mode the schema's stable part joins the system message
and the moment's part, compact, comes last."""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path

import pytest

from tests.conftest import make_ctx
from tests.openai_stub import OpenAIStub, flat_prompt, prefix_share, schema_following
from yuiju.characters import load_card
from yuiju.config import load_config
from yuiju.llm import FunctionChatModel, estimate_prompt_tokens
from yuiju.llm.openai_model import with_schema_instruction
from yuiju.world.decision_schema import decision_schema
from yuiju.world.loader import load_actions
from yuiju.world.policies.llm import LLMPolicy
from yuiju.world.policy import DecisionRequest
from yuiju.world.simulate import simulate

ACTIONS = list(load_actions())
CARD = load_card("yuiju")


def request(now: str, **character: object) -> DecisionRequest:
    ctx = make_ctx(now, **character)
    return DecisionRequest(
        ctx=ctx,
        candidates=[a for a in ACTIONS if a.available(ctx)],
        card=CARD,
        today=["06:40 起床", "07:00 在家吃早饭"],
        recent=["09:00 在家看书", "09:30 发呆（有点困）"],
    )


def test_the_system_prompt_is_the_same_bytes_at_every_moment_and_holds_the_catalogue() -> None:
    policy = LLMPolicy(FunctionChatModel(lambda *_: ""), actions=ACTIONS)
    moments = [
        request("2026-09-01 07:00"),
        request("2026-09-05 15:00", location="shop", money=20),
        request("2026-09-06 22:30", location="park", inventory={"野莓": 2}),
    ]
    systems = {policy.messages(r)[0]["content"] for r in moments}

    [system] = systems
    assert CARD.persona.strip() in system
    for action in ACTIONS:
        if action.moves_to is None and action.joint is None:
            assert f"- {action.name}：{action.description}\n" in system, action.id
        elif action.joint is not None:  # she lives alone here: nobody to do them with
            assert f"- {action.name}：" not in system, action.id
    assert "计划" in system and "2026-09" not in system  # nothing of a moment


def test_the_moment_goes_from_what_changes_least_to_what_changes_every_time() -> None:
    policy = LLMPolicy(FunctionChatModel(lambda *_: ""), actions=ACTIONS)
    moment = policy.messages(request("2026-09-01 10:00"))[1]["content"]

    order = [
        "长期计划",
        "9月1日 星期二",
        "今天：06:40 起床；07:00 在家吃早饭",
        "刚才：09:00 在家看书；09:30 发呆（有点困）",
        "地点：家；金币300",
        "现在 10:00，体力",
        "可选行为：",
    ]
    positions = [moment.index(marker) for marker in order]
    assert positions == sorted(positions), moment


@pytest.mark.parametrize(
    ("mode", "schema", "schema_in_prompt"),
    [
        # what `decision_schema = "auto"` chooses, as each provider sees the prompt (json_object
        # with the moment's schema, shown last, keeps about 0.8: bench/README.md)
        ("json_schema", "moment", False),  # a grammar engine: the schema is not in its prompt
        ("json_schema", "stable", True),  # OpenAI: the schema is the prefix of the prompt
        ("json_object", "stable", True),
    ],
)
async def test_consecutive_decision_prompts_share_most_of_their_prefix(
    mode: str,
    schema: str,
    schema_in_prompt: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    openai_stub: OpenAIStub,
) -> None:
    """As the provider sees the prompt: with the schema counted where it puts it in (before:
    the moment's schema at the head of every OpenAI prompt left ~23 % of it to the cache)."""
    monkeypatch.chdir(tmp_path)
    openai_stub.handler = schema_following(seed=8)
    cfg = load_config(
        environ={},
        overrides={
            "llm": {
                "base_url": openai_stub.base_url,
                "model": "fake",
                "output_mode": mode,
                "decision_schema": schema,
            }
        },
    )

    await simulate(cfg, days=1, seed=8, policy="llm", progress=False)

    def seen(body: dict) -> str:
        fmt = body.get("response_format") or {}
        head = json.dumps(fmt["json_schema"]["schema"]) if fmt.get("type") == "json_schema" else ""
        return (head if schema_in_prompt else "") + flat_prompt(body)

    prompts = [seen(body) for body in openai_stub.requests]
    shares = [prefix_share(a, b) for a, b in itertools.pairwise(prompts)]
    assert len(prompts) > 20
    assert statistics.median(shares) >= 0.8, sorted(shares)[:: max(1, len(shares) // 10)]
    if mode == "json_object":
        first_system = openai_stub.requests[0]["messages"][0]["content"]
        for body in openai_stub.requests:
            system, moment = (m["content"] for m in body["messages"])
            shown = system if schema == "stable" else moment
            tail = shown[shown.index("只输出符合下面 JSON Schema") :]
            assert len(tail) < 2500 and "\n  " not in tail  # compact, and last
            assert system.endswith(first_system[-200:])


def test_a_price_list_is_in_the_moment_only_while_its_action_is_offered() -> None:
    policy = LLMPolicy(FunctionChatModel(lambda *_: ""), actions=ACTIONS)
    system, at_diner = (
        m["content"]
        for m in policy.messages(request("2026-09-01 12:00", location="diner", money=30))
    )
    _, at_home = (m["content"] for m in policy.messages(request("2026-09-01 12:00")))

    assert (
        "在日和食堂吃饭：18~35金币" in system and "乌冬面" not in system
    )  # the range, once, in the stable part
    assert (
        "在日和食堂吃饭的价格：乌冬面18、玉子烧定食22、咖喱饭26、亲子丼28\n" in at_diner
    )  # what 30 coins buy
    assert "价格：" not in at_home


def test_moves_are_offered_by_where_they_go() -> None:
    policy = LLMPolicy(FunctionChatModel(lambda *_: ""), actions=ACTIONS)
    moment = policy.messages(request("2026-09-05 10:00", location="diner"))[1]["content"]

    options = moment[moment.index("可选行为：") :]
    assert "回家" in options and "去超市" in options and "从日和食堂去超市" not in options


@pytest.mark.parametrize("mode", ["json_schema", "json_object"])
def test_a_decision_prompt_stays_within_its_token_budget(mode: str) -> None:
    """Every decision pays for the whole prompt (cached or not), and a day has 30–80 of them: a
    guard against the prompt creeping back up (bench/llm_bench.py measures whole days)."""
    policy = LLMPolicy(
        FunctionChatModel(lambda *_: ""), actions=ACTIONS, schema_in_prompt=mode == "json_object"
    )
    busiest = [
        request(
            "2026-09-05 18:30",
            location="home",
            satiety=40,
            money=120,
            inventory={"鸡蛋": 1, "白米": 1, "豆腐": 1, "百奇": 2, "野莓": 3},
        ),
        request("2026-09-01 12:10", location="school"),
        request("2026-09-05 14:00", location="cafe", money=500),
    ]
    for r in busiest:
        messages = policy.messages(r)
        if mode == "json_object":
            messages = with_schema_instruction(messages, decision_schema(r.candidates, r.ctx))
        assert estimate_prompt_tokens(messages) <= (1200 if mode == "json_object" else 1000), (
            messages[-1]["content"]
        )
