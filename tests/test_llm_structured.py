"""ask_structured: fence stripping, feedback to the model, retries, exhaustion."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from pydantic import BaseModel, Field

from tests.openai_stub import OpenAIStub
from yuiju.llm import (
    FunctionChatModel,
    JsonSchema,
    LLMUnavailable,
    OpenAIChatModel,
    RetryWithFeedback,
    StructuredOutputFailed,
    ask_structured,
    extract_json_text,
)
from yuiju.llm.model import ChatMessage

MESSAGES: list[ChatMessage] = [
    {"role": "system", "content": "你是悠酱。"},
    {"role": "user", "content": "现在做什么？"},
]


class Decision(BaseModel):
    action_id: str
    minutes: int = Field(ge=1, le=240)
    reason: str = ""


SCHEMA = JsonSchema(name="decision", schema=Decision.model_json_schema())


def scripted(*answers: str | Exception) -> FunctionChatModel:
    """A model that gives `answers` in order (an exception is raised instead of answered)."""
    queue = list(answers)

    def answer(messages: list[ChatMessage], schema: JsonSchema | None) -> str:
        next_answer = queue.pop(0)
        if isinstance(next_answer, Exception):
            raise next_answer
        return next_answer

    return FunctionChatModel(answer, name="scripted")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1}', '{"a": 1}'),
        ('  {"a": 1}\n', '{"a": 1}'),
        ('```json\n{"a": 1}\n```', '{"a": 1}'),
        ('```JSON\n{"a": 1}```', '{"a": 1}'),
        ('```\n{"a": {"b": [1, 2]}}\n```', '{"a": {"b": [1, 2]}}'),
        ('好的，我的决定是：\n```json\n{"a": 1}\n```\n希望这样可以！', '{"a": 1}'),
        ('我的决定是 {"a": "}"} 就这样。', '{"a": "}"}'),
        ('{"a": 1} 另外 {"b": 2}', '{"a": 1}'),
        ('前言 {"a": 1,} 后记', '{"a": 1,}'),  # invalid: kept whole so the error points into it
        ('{"a": 1', '{"a": 1'),
        ("没有 JSON", "没有 JSON"),
        ("", ""),
    ],
)
def test_extract_json_text(raw: str, expected: str) -> None:
    assert extract_json_text(raw) == expected


async def test_first_answer_valid_takes_one_attempt() -> None:
    model = scripted('```json\n{"action_id": "sleep", "minutes": 30}\n```')

    outcome = await ask_structured(
        model, MESSAGES, Decision.model_validate_json, json_schema=SCHEMA
    )

    assert outcome.value == Decision(action_id="sleep", minutes=30)
    assert [a.error for a in outcome.attempts] == [None]
    assert model.schemas == [SCHEMA]
    assert outcome.prompt_tokens > 0
    assert outcome.completion_tokens > 0


async def test_garbage_then_valid_feeds_the_json_error_back() -> None:
    model = scripted('{"action_id": "sleep", minutes: 30}', '{"action_id": "sleep", "minutes": 30}')

    outcome = await ask_structured(model, MESSAGES, Decision.model_validate_json)

    assert outcome.value.action_id == "sleep"
    assert len(outcome.attempts) == 2
    assert "Invalid JSON" in (outcome.attempts[0].error or "")
    first, second = model.calls
    assert first == MESSAGES
    assert second[:2] == MESSAGES
    assert second[2] == {"role": "assistant", "content": '{"action_id": "sleep", minutes: 30}'}
    assert second[3]["role"] == "user"
    assert "不是合法的 JSON" in second[3]["content"]
    assert "只输出一个修正后的 JSON 对象" in second[3]["content"]


async def test_answer_without_json_is_told_so() -> None:
    model = scripted("我想去公园散步。", '{"action_id": "walk", "minutes": 30}')

    await ask_structured(model, MESSAGES, Decision.model_validate_json, backoff_seconds=0)

    assert "没有 JSON 对象" in model.calls[1][-1]["content"]


async def test_validation_error_feedback_names_the_field_and_value() -> None:
    model = scripted(
        '{"action_id": "sleep", "minutes": 999}', '{"action_id": "sleep", "minutes": 60}'
    )

    outcome = await ask_structured(model, MESSAGES, Decision.model_validate_json)

    assert outcome.value.minutes == 60
    feedback = model.calls[1][-1]["content"]
    assert "minutes" in feedback
    assert "less than or equal to 240" in feedback
    assert "999" in feedback
    assert "https://" not in feedback  # errors(include_url=False)


async def test_missing_field_feedback_names_the_field() -> None:
    model = scripted('{"minutes": 30}', '{"action_id": "sleep", "minutes": 30}')

    await ask_structured(model, MESSAGES, Decision.model_validate_json)

    feedback = model.calls[1][-1]["content"]
    assert "- action_id：Field required" in feedback


async def test_retry_with_feedback_message_reaches_the_model() -> None:
    offered = {"sleep", "study"}

    def parse(text: str) -> Decision:
        decision = Decision.model_validate_json(text)
        if decision.action_id not in offered:
            raise RetryWithFeedback(
                f"{decision.action_id!r} 不在可选行为里，请从 {sorted(offered)} 中选择"
            )
        return decision

    model = scripted(
        '{"action_id": "swim", "minutes": 30}', '{"action_id": "study", "minutes": 30}'
    )

    outcome = await ask_structured(model, MESSAGES, parse)

    assert outcome.value.action_id == "study"
    assert model.calls[1][-1]["content"].startswith(
        "'swim' 不在可选行为里，请从 ['sleep', 'study'] 中选择"
    )


async def test_an_async_review_of_the_parsed_value_sends_its_reason_back() -> None:
    reviewed: list[str] = []

    async def review(decision: Decision) -> str | None:
        await asyncio.sleep(0)  # it may read a store
        reviewed.append(decision.action_id)
        return "记录里没有游泳这件事" if decision.action_id == "swim" else None

    model = scripted(
        '{"action_id": "swim", "minutes": 30}', '{"action_id": "study", "minutes": 30}'
    )

    outcome = await ask_structured(model, MESSAGES, Decision.model_validate_json, review=review)

    assert outcome.value.action_id == "study" and reviewed == ["swim", "study"]
    assert model.calls[1][-1]["content"].startswith("记录里没有游泳这件事")
    assert outcome.attempts[0].error == "RetryWithFeedback: 记录里没有游泳这件事"


async def test_unavailable_is_retried_with_the_same_messages() -> None:
    model = scripted(LLMUnavailable("HTTP 503"), '{"action_id": "sleep", "minutes": 30}')

    outcome = await ask_structured(model, MESSAGES, Decision.model_validate_json, backoff_seconds=0)

    assert outcome.value.action_id == "sleep"
    assert model.calls == [MESSAGES, MESSAGES]
    failed, succeeded = outcome.attempts
    assert failed.result is None
    assert failed.raw is None
    assert failed.error == "HTTP 503"
    assert succeeded.error is None


async def test_unavailable_backs_off_per_module_setting(monkeypatch: pytest.MonkeyPatch) -> None:

    import yuiju.llm.structured

    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(yuiju.llm.structured, "BACKOFF_SECONDS", 0.5)
    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    model = scripted(
        LLMUnavailable("timeout"), LLMUnavailable("timeout"), LLMUnavailable("timeout")
    )

    with pytest.raises(StructuredOutputFailed):
        await ask_structured(model, MESSAGES, Decision.model_validate_json)

    assert slept == [0.5, 1.0]  # doubling, and no wait after the last attempt


async def test_not_retryable_unavailable_stops_at_once() -> None:
    model = scripted(LLMUnavailable("HTTP 401", retryable=False), "{}")

    with pytest.raises(StructuredOutputFailed) as caught:
        await ask_structured(model, MESSAGES, Decision.model_validate_json, backoff_seconds=0)

    assert len(model.calls) == 1
    assert isinstance(caught.value.last_error, LLMUnavailable)


async def test_exhaustion_raises_with_every_attempt() -> None:
    model = scripted("不知道", '{"action_id": 1}', LLMUnavailable("HTTP 500"))

    with pytest.raises(StructuredOutputFailed, match="after 3 attempt") as caught:
        await ask_structured(
            model, MESSAGES, Decision.model_validate_json, max_attempts=3, backoff_seconds=0
        )

    attempts = caught.value.attempts
    assert [a.raw for a in attempts] == ["不知道", '{"action_id": 1}', None]
    assert all(a.error for a in attempts)
    assert [a.result is not None for a in attempts] == [True, True, False]
    assert isinstance(caught.value.last_error, LLMUnavailable)
    assert caught.value.__cause__ is caught.value.last_error


async def test_other_parse_exceptions_are_bugs_and_propagate() -> None:
    def parse(text: str) -> Decision:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        await ask_structured(scripted("{}"), MESSAGES, parse)


async def test_async_function_model_is_awaited() -> None:
    async def answer(messages: list[ChatMessage], schema: JsonSchema | None) -> str:
        return json.dumps({"action_id": "sleep", "minutes": 30})

    outcome = await ask_structured(
        FunctionChatModel(answer), MESSAGES, Decision.model_validate_json
    )

    assert outcome.value.action_id == "sleep"


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as running:
        yield running


async def test_end_to_end_over_http_with_feedback(stub: OpenAIStub) -> None:
    stub.reply(
        '好的！\n```json\n{"action_id": "sleep", "minutes": 0}\n```',
        '{"action_id": "sleep", "minutes": 45, "reason": "累了"}',
    )
    model = OpenAIChatModel(base_url=stub.base_url, api_key=None, model="stub-chat")
    try:
        outcome = await ask_structured(
            model, MESSAGES, Decision.model_validate_json, json_schema=SCHEMA
        )
    finally:
        await model.aclose()

    assert outcome.value == Decision(action_id="sleep", minutes=45, reason="累了")
    assert len(outcome.attempts) == 2
    assert outcome.prompt_tokens == sum(
        a.result.prompt_tokens for a in outcome.attempts if a.result
    )
    retry = stub.requests[1]["messages"]
    assert retry[-2]["role"] == "assistant"
    assert "minutes" in retry[-1]["content"]
    assert "greater than or equal to 1" in retry[-1]["content"]
    assert stub.requests[1]["response_format"]["json_schema"]["name"] == "decision"


async def test_json_loads_errors_are_fed_back_with_their_position() -> None:
    model = scripted('{"action_id": "sleep",}', '{"action_id": "sleep", "minutes": 5}')

    await ask_structured(model, MESSAGES, lambda text: Decision(**json.loads(text)))

    assert "不是合法的 JSON" in model.calls[1][-1]["content"]
    assert "第 1 行" in model.calls[1][-1]["content"]
