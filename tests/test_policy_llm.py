"""The LLM policy against the real local OpenAI-compatible HTTP stub."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.conftest import make_ctx, make_engine
from tests.openai_stub import OpenAIStub, StubAnswer, StubDelay, StubError
from yuiju.characters import load_card
from yuiju.config import load_config
from yuiju.llm import MeteredModel, OpenAIChatModel, UsageTotals, estimate_prompt_tokens
from yuiju.world.loader import load_actions
from yuiju.world.policies.llm import LLMPolicy
from yuiju.world.policy import DecisionRequest, PolicyFailed
from yuiju.world.simulate import simulate

CATALOGUE = load_actions()


def answer(action: str = "发呆", reason: str = "有点累，先放空一下", **extra: object) -> str:
    return json.dumps({"action": action, "reason": reason, **extra}, ensure_ascii=False)


def request_at(now: str = "2026-09-01 10:00", **character: object) -> DecisionRequest:
    ctx = make_ctx(now, **character)
    return DecisionRequest(
        ctx=ctx,
        candidates=[a for a in CATALOGUE if a.available(ctx)],
        recent=["09:30 发呆（想放空）"],
        card=load_card("yuiju"),
    )


ModelFactory = Callable[..., OpenAIChatModel]


@pytest.fixture
async def make_model(openai_stub: OpenAIStub) -> AsyncIterator[ModelFactory]:
    made: list[OpenAIChatModel] = []

    def make(**kw: object) -> OpenAIChatModel:
        model = OpenAIChatModel(
            base_url=openai_stub.base_url, api_key=None, **{"model": "stub-chat", **kw}
        )  # type: ignore[arg-type]
        made.append(model)
        return model

    yield make
    for model in made:
        await model.aclose()


def union_names(schema: dict) -> list[str]:
    """The action names a decision schema's union offers, in order."""
    names: list[str] = []
    for branch in schema["anyOf"]:
        action = branch["properties"]["action"]
        names += action.get("enum", [action.get("const")])
    return names


async def test_json_schema_mode_constrains_action_to_the_candidates(
    openai_stub: OpenAIStub, make_model: ModelFactory
) -> None:
    openai_stub.reply(answer(durationMinute=30))
    request = request_at()
    policy = LLMPolicy(make_model(output_mode="json_schema"), temperature=0.3)

    decision = await policy.decide(request)

    assert (decision.action.id, decision.duration_minute, decision.decided_by) == (
        "idle",
        30,
        "llm",
    )
    [sent] = openai_stub.requests
    fmt = sent["response_format"]
    assert fmt["type"] == "json_schema"
    assert sorted(union_names(fmt["json_schema"]["schema"])) == sorted(
        a.offered_as for a in request.candidates
    )
    assert sent["temperature"] == 0.3
    system, moment = (m["content"] for m in sent["messages"])
    assert all(f"- {a.name}：" in system for a in request.candidates if a.moves_to is None)
    assert "可选行为：" + "、".join(a.offered_as for a in request.candidates) in moment
    assert "星期二" in moment and "09:30 发呆（想放空）" in moment and "你是悠酱，" in system


async def test_json_object_mode_asks_for_an_object_and_puts_the_schema_at_the_end_of_the_prompt(
    openai_stub: OpenAIStub, make_model: ModelFactory
) -> None:
    openai_stub.reply(f"好的：\n```json\n{answer()}\n```")
    request = request_at()
    policy = LLMPolicy(make_model(output_mode="json_object"), schema_in_prompt=True)

    decision = await policy.decide(request)

    assert decision.action.id == "idle"
    [sent] = openai_stub.requests
    assert sent["response_format"] == {"type": "json_object"}
    system, moment = (m["content"] for m in sent["messages"])
    assert system == policy.messages(request)[0]["content"]  # the stable prompt, untouched
    tail = moment[moment.index("只输出符合下面 JSON Schema") :]
    assert "$ref" not in tail and "$defs" not in tail  # one self-contained schema
    assert all(json.dumps(a.offered_as, ensure_ascii=False) in tail for a in request.candidates)
    assert "可选行为：" not in moment  # the schema lists them: not twice


async def test_an_unknown_action_is_fed_back_and_the_second_answer_is_used(
    openai_stub: OpenAIStub, make_model: ModelFactory
) -> None:
    openai_stub.reply(answer("游泳"), answer("在家看书", durationMinute=60))
    policy = LLMPolicy(make_model())

    decision = await policy.decide(request_at())

    assert decision.action.id == "read_at_home" and decision.duration_minute == 60
    first, second = openai_stub.requests
    assert second["messages"][: len(first["messages"])] == first["messages"]
    assert second["messages"][-2] == {"role": "assistant", "content": answer("游泳")}
    feedback = second["messages"][-1]["content"]
    assert "「游泳」不在可选行为里" in feedback and "在家看书" in feedback
    assert (policy.calls, policy.invalid) == (2, 1)


async def test_a_parameter_or_duration_mistake_is_fed_back_too(
    openai_stub: OpenAIStub, make_model: ModelFactory
) -> None:
    openai_stub.reply(answer(durationMinute=9999), answer(durationMinute=10))
    policy = LLMPolicy(make_model())

    decision = await policy.decide(request_at())

    assert decision.duration_minute == 10
    assert (
        "durationMinute 必须在 1 到 1440 之间" in openai_stub.requests[1]["messages"][-1]["content"]
    )


async def test_garbage_three_times_raises_policy_failed(
    openai_stub: OpenAIStub, make_model: ModelFactory
) -> None:
    openai_stub.reply("我不想选", "{oops", answer("游泳"))
    policy = LLMPolicy(make_model(), max_attempts=3)

    with pytest.raises(PolicyFailed, match="3 attempt"):
        await policy.decide(request_at())

    assert len(openai_stub.requests) == 3
    # one decision the model got wrong, in three rejected answers (before: "3 invalid decisions")
    assert (policy.calls, policy.invalid, policy.invalid_answers) == (3, 1, 3)


@pytest.mark.parametrize(
    ("answers", "timeout_seconds"),
    [
        (["我不想选", "{oops", answer("游泳")], 10.0),
        ([StubError(500)] * 3, 10.0),
        ([StubError(429)] * 3, 10.0),
        ([StubDelay(2.0, answer())] * 2, 0.2),
    ],
    ids=["garbage", "http-500", "http-429", "timeout"],
)
async def test_when_the_llm_fails_the_behavior_loop_falls_back_to_utility(
    redis: aioredis.Redis,
    openai_stub: OpenAIStub,
    make_model: ModelFactory,
    answers: list[StubAnswer],
    timeout_seconds: float,
) -> None:
    openai_stub.reply(*answers)
    policy = LLMPolicy(make_model(timeout_seconds=timeout_seconds), max_attempts=len(answers))
    kit = await make_engine(redis, None, policy=policy, start="2026-09-01 10:00")

    await kit.engine.run(max_steps=1)

    assert kit.stats.fallbacks == 1
    her = await kit.character()
    assert her is not None and her.running is not None
    assert her.running.decided_by == "fallback:utility"
    assert len(openai_stub.requests) == len(answers)


async def test_a_spent_budget_makes_no_http_call_and_falls_back(
    redis: aioredis.Redis, openai_stub: OpenAIStub, make_model: ModelFactory
) -> None:
    asked: list[datetime] = []

    async def budget_allows(now: datetime) -> bool:
        asked.append(now)
        return False

    policy = LLMPolicy(make_model(), budget_allows=budget_allows)
    kit = await make_engine(redis, None, policy=policy, start="2026-09-01 10:00")

    await kit.engine.run(max_steps=1)

    assert openai_stub.requests == []
    assert kit.stats.fallbacks == 1 and policy.calls == 0
    assert len(asked) == 1


async def test_tokens_of_every_attempt_are_counted_by_purpose(
    openai_stub: OpenAIStub, make_model: ModelFactory
) -> None:
    replies = [answer("游泳"), answer(), answer("在家看书", durationMinute=30)]
    openai_stub.reply(*replies)
    totals = UsageTotals()
    policy = LLMPolicy(MeteredModel(make_model(), max_tokens={"decide": 300}, sink=totals))

    await policy.decide(request_at())
    await policy.decide(request_at("2026-09-01 10:30"))

    prompts = ["".join(m["content"] for m in r["messages"]) for r in openai_stub.requests]
    decide = totals.by_purpose["decide"]
    assert decide.prompt_tokens == sum(len(p) // 2 for p in prompts)  # the stub's usage report
    assert decide.completion_tokens == sum(len(r) // 2 for r in replies)
    assert (decide.calls, decide.failed, decide.estimated_prompt_tokens) == (3, 0, 0)
    assert [r["max_tokens"] for r in openai_stub.requests] == [300, 300, 300]
    assert (policy.calls, policy.decisions, policy.first_attempt_ok, policy.invalid) == (3, 2, 1, 1)
    assert policy.invalid_answers == 1


async def test_a_failed_attempt_counts_its_estimated_prompt_when_all_fail(
    openai_stub: OpenAIStub, make_model: ModelFactory
) -> None:
    openai_stub.reply(answer("游泳"), StubError(500))
    totals = UsageTotals()
    policy = LLMPolicy(MeteredModel(make_model(), sink=totals), max_attempts=2)

    with pytest.raises(PolicyFailed):
        await policy.decide(request_at())

    decide = totals.by_purpose["decide"]
    assert decide.completion_tokens == len(answer("游泳")) // 2
    assert (decide.calls, decide.failed) == (2, 1)
    failed_prompt = openai_stub.requests[1]["messages"]
    assert decide.estimated_prompt_tokens == estimate_prompt_tokens(failed_prompt) > 0
    assert policy.calls == 2 and policy.failed == 1


async def test_the_simulate_report_counts_invalid_decisions_in_decisions_and_answers_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_stub: OpenAIStub
) -> None:
    """Before: ``invalid_decisions`` counted attempts (75 for 25 decisions)."""
    monkeypatch.chdir(tmp_path)
    openai_stub.handler = lambda _body: answer("游泳")  # never a candidate
    cfg = load_config(
        environ={},
        overrides={"llm": {"base_url": openai_stub.base_url, "model": "m", "max_attempts": 2}},
    )

    report = await simulate(cfg, days=1, seed=3, policy="llm", progress=False)

    decisions = report["decisions"]
    assert decisions > 10 and report["fallbacks"] == decisions
    assert report["invalid_decisions"] == decisions
    assert report["invalid_answers"] == 2 * decisions == len(openai_stub.requests)


async def test_with_the_stable_schema_every_decision_sends_the_same_schema_and_states_the_moment(
    openai_stub: OpenAIStub, make_model: ModelFactory
) -> None:
    """Before: the schema enumerated the moment's candidates and changed in 194 of 199 requests;
    OpenAI puts it before the system message, so its prompt cache kept ~23 % of each prompt."""
    openai_stub.reply(answer("游泳"), answer(), answer("在日和食堂吃饭", params={"item": "乌冬面"}))
    policy = LLMPolicy(make_model(output_mode="json_schema"), schema="stable")
    home = request_at()
    diner = request_at("2026-09-01 12:10", location="diner", satiety=30)

    decision = await policy.decide(home)  # a wrong answer goes back with the reason
    await policy.decide(diner)

    assert decision.action.id == "idle"
    _, retry, third = openai_stub.requests
    schemas = [r["response_format"]["json_schema"]["schema"] for r in openai_stub.requests]
    assert schemas[0] == schemas[1] == schemas[2]  # the same schema at every moment
    assert "游泳" in retry["messages"][-1]["content"]  # the reason went back
    moment = third["messages"][1]["content"]
    assert "可选行为：" in moment and "在日和食堂吃饭" in moment
    assert "在日和食堂吃饭的 params：{" in moment  # what the moment's schema would have said


async def test_json_object_mode_with_the_stable_schema_shows_it_once_in_the_system_message(
    openai_stub: OpenAIStub, make_model: ModelFactory
) -> None:
    openai_stub.reply(answer(), answer())
    policy = LLMPolicy(
        make_model(output_mode="json_object"), schema_in_prompt=True, schema="stable"
    )

    await policy.decide(request_at())
    await policy.decide(request_at("2026-09-01 16:40", location="park"))

    (system_1, moment_1), (system_2, moment_2) = (
        [m["content"] for m in r["messages"]] for r in openai_stub.requests
    )
    assert system_1 == system_2 and "只输出符合下面 JSON Schema（decision）" in system_1
    assert "$ref" not in system_1 and "JSON Schema" not in moment_1 + moment_2
    assert "可选行为：" in moment_1 and "可选行为：" in moment_2


@pytest.mark.parametrize(
    ("llm", "chosen"),
    [
        ({"base_url": "https://api.openai.com/v1"}, "stable"),  # the schema is in its prompt
        ({"base_url": "https://x.openai.azure.com/openai/v1"}, "stable"),
        ({"base_url": "https://api.deepseek.com/v1"}, "stable"),  # json_object: in the prompt
        ({"base_url": "http://127.0.0.1:8080/v1"}, "moment"),  # a grammar engine enforces it
        ({"base_url": "http://127.0.0.1:8080/v1", "output_mode": "json_object"}, "stable"),
        ({"base_url": "https://api.deepseek.com/v1", "decision_schema": "moment"}, "moment"),
        ({"base_url": "https://api.openai.com/v1", "decision_schema": "moment"}, "moment"),
    ],
)
def test_the_decision_schema_is_chosen_per_provider_unless_set(llm: dict, chosen: str) -> None:
    assert load_config(environ={}, overrides={"llm": llm}).llm.resolved_decision_schema == chosen
