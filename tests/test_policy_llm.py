"""The LLM policy against the real local OpenAI-compatible HTTP stub."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from datetime import datetime

import pytest
import redis.asyncio as aioredis

from characters import load_card
from llm import OpenAIChatModel
from llm.structured import Attempt
from tests.conftest import make_ctx, make_engine
from tests.openai_stub import OpenAIStub, StubAnswer, StubDelay, StubError
from world.loader import load_actions
from world.policies.llm import LLMPolicy
from world.policy import DecisionRequest, PolicyFailed

CATALOGUE = load_actions()


def answer(action: str = "发呆", reason: str = "有点累，先放空一下", **extra: object) -> str:
    return json.dumps({"action": action, "reason": reason, **extra}, ensure_ascii=False)


def request_at(now: str = "2026-09-01 10:00", **character: object) -> DecisionRequest:
    ctx = make_ctx(now, **character)
    return DecisionRequest(ctx=ctx, candidates=[a for a in CATALOGUE if a.available(ctx)],
                           recent=["09:30 发呆（想放空）"], card=load_card("yuiju"))


ModelFactory = Callable[..., OpenAIChatModel]


@pytest.fixture
async def make_model(openai_stub: OpenAIStub) -> AsyncIterator[ModelFactory]:
    made: list[OpenAIChatModel] = []

    def make(**kw: object) -> OpenAIChatModel:
        model = OpenAIChatModel(base_url=openai_stub.base_url, api_key=None,
                                **{"model": "stub-chat", **kw})  # type: ignore[arg-type]
        made.append(model)
        return model

    yield make
    for model in made:
        await model.aclose()


async def test_json_schema_mode_constrains_action_to_the_candidate_names(
    openai_stub: OpenAIStub, make_model: ModelFactory
) -> None:
    openai_stub.reply(answer(durationMinute=30))
    request = request_at()
    policy = LLMPolicy(make_model(output_mode="json_schema"), temperature=0.3)

    decision = await policy.decide(request)

    assert (decision.action.id, decision.duration_minute, decision.decided_by) == ("idle", 30, "llm")
    [sent] = openai_stub.requests
    fmt = sent["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"]["properties"]["action"]["enum"] == [a.name for a in request.candidates]
    assert sent["temperature"] == 0.3
    prompt = sent["messages"][-1]["content"]
    assert all(f"- {a.name}：" in prompt for a in request.candidates)
    assert "星期二" in prompt and "09:30 发呆（想放空）" in prompt and "你是悠酱，" in prompt


async def test_json_object_mode_asks_for_an_object_and_puts_the_schema_in_the_prompt(
    openai_stub: OpenAIStub, make_model: ModelFactory
) -> None:
    openai_stub.reply(f"好的：\n```json\n{answer()}\n```")
    request = request_at()
    policy = LLMPolicy(make_model(output_mode="json_object"))

    decision = await policy.decide(request)

    assert decision.action.id == "idle"
    [sent] = openai_stub.requests
    assert sent["response_format"] == {"type": "json_object"}
    system = sent["messages"][0]["content"]
    assert all(json.dumps(a.name, ensure_ascii=False) in system for a in request.candidates)


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
    assert "durationMinute 必须在 1 到 1440 之间" in openai_stub.requests[1]["messages"][-1]["content"]


async def test_garbage_three_times_raises_policy_failed(
    openai_stub: OpenAIStub, make_model: ModelFactory
) -> None:
    openai_stub.reply("我不想选", "{oops", answer("游泳"))
    policy = LLMPolicy(make_model(), max_attempts=3)

    with pytest.raises(PolicyFailed, match="3 attempt"):
        await policy.decide(request_at())

    assert len(openai_stub.requests) == 3
    assert (policy.calls, policy.invalid) == (3, 3)


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
    redis: aioredis.Redis, openai_stub: OpenAIStub, make_model: ModelFactory,
    answers: list[StubAnswer], timeout_seconds: float,
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


async def test_tokens_accumulate_over_attempts_and_decisions(
    openai_stub: OpenAIStub, make_model: ModelFactory
) -> None:
    replies = [answer("游泳"), answer(), answer("在家看书")]
    openai_stub.reply(*replies)
    recorded: list[list[Attempt]] = []

    async def record_usage(_now: datetime, attempts: list[Attempt]) -> None:
        recorded.append(attempts)

    policy = LLMPolicy(make_model(), record_usage=record_usage)

    await policy.decide(request_at())
    await policy.decide(request_at("2026-09-01 10:30"))

    prompts = ["".join(m["content"] for m in r["messages"]) for r in openai_stub.requests]
    assert policy.prompt_tokens == sum(len(p) // 2 for p in prompts)  # the stub's usage report
    assert policy.completion_tokens == sum(len(r) // 2 for r in replies)
    assert policy.calls == 3
    assert [len(a) for a in recorded] == [2, 1]
    assert sum(a.result.prompt_tokens for batch in recorded for a in batch if a.result) == policy.prompt_tokens


async def test_a_rejected_answer_still_counts_its_tokens_when_all_fail(
    openai_stub: OpenAIStub, make_model: ModelFactory
) -> None:
    openai_stub.reply(answer("游泳"), StubError(500))
    policy = LLMPolicy(make_model(), max_attempts=2)

    with pytest.raises(PolicyFailed):
        await policy.decide(request_at())

    assert policy.completion_tokens == len(answer("游泳")) // 2
    assert policy.prompt_tokens > 0 and policy.calls == 2
