"""OpenAIChatModel against a real local HTTP server (tests/openai_stub.py)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import yuiju.llm.model
from tests.openai_stub import OpenAIStub, StubDelay, StubError, StubToolCall
from yuiju.llm import (
    JsonSchema,
    LLMUnavailable,
    MeteredModel,
    ModelRequestsBlocked,
    OpenAIChatModel,
    UsageTotals,
    check_allow_model_requests,
    estimate_prompt_tokens,
)
from yuiju.llm.openai_model import with_schema_instruction

SCHEMA = JsonSchema(
    name="decision",
    schema={
        "type": "object",
        "properties": {"action_id": {"type": "string"}, "reason": {"type": "string"}},
        "required": ["action_id"],
    },
)
MESSAGES = [
    {"role": "system", "content": "你是悠酱。"},
    {"role": "user", "content": "现在做什么？"},
]


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as running:
        yield running


@pytest.fixture
async def model(stub: OpenAIStub) -> AsyncIterator[OpenAIChatModel]:
    chat = OpenAIChatModel(base_url=stub.base_url, api_key=None, model="stub-chat")
    yield chat
    await chat.aclose()


async def test_json_schema_mode_sends_the_schema_in_response_format(
    stub: OpenAIStub, model: OpenAIChatModel
) -> None:
    stub.reply('{"action_id": "sleep"}')

    result = await model.complete(MESSAGES, json_schema=SCHEMA, temperature=0.2)

    assert result.text == '{"action_id": "sleep"}'
    [sent] = stub.requests
    assert sent["model"] == "stub-chat"
    assert sent["messages"] == MESSAGES
    assert sent["temperature"] == 0.2
    assert sent["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "decision", "schema": SCHEMA.schema, "strict": False},
    }


NESTED = JsonSchema(
    name="decision",
    schema={
        "$defs": {"reason": {"type": "string", "maxLength": 40}},
        "type": "object",
        "properties": {
            "action_id": {"enum": ["sleep", "study"]},
            "reason": {"$ref": "#/$defs/reason"},
        },
        "required": ["action_id"],
    },
)


async def test_json_object_mode_shows_one_self_contained_schema_at_the_end_of_the_request(
    stub: OpenAIStub,
) -> None:
    """Before: ``{"$ref": "#/$defs/decision", ...}`` at the end of the user message and the
    ``$defs`` appended to the system message: a model reading it had to join the two."""
    stub.reply('{"action_id": "sleep"}', '{"action_id": "study"}')
    chat = OpenAIChatModel(
        base_url=stub.base_url, api_key=None, model="llama", output_mode="json_object"
    )
    try:
        await chat.complete(MESSAGES, json_schema=NESTED)
        await chat.complete(MESSAGES[1:], json_schema=NESTED)
    finally:
        await chat.aclose()

    with_system, without_system = stub.requests
    assert with_system["response_format"] == {"type": "json_object"}
    [system, user] = with_system["messages"]
    assert system == MESSAGES[0]  # the stable system prompt is left alone
    inlined = {
        "type": "object",
        "properties": {
            "action_id": {"enum": ["sleep", "study"]},
            "reason": {"type": "string", "maxLength": 40},
        },
        "required": ["action_id"],
    }
    assert user["content"] == (
        "现在做什么？\n\n只输出符合下面 JSON Schema（decision）的一个 JSON 对象：\n"
        + json.dumps(inlined, ensure_ascii=False, separators=(",", ":"))
    )
    assert without_system["messages"] == [user]


def test_a_recursive_schema_is_shown_whole_in_one_place() -> None:
    tree = JsonSchema(
        name="tree",
        schema={
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                }
            },
            "$ref": "#/$defs/node",
        },
    )
    [user] = with_schema_instruction([{"role": "user", "content": "画一棵树"}], tree)
    shown = json.loads(user["content"][user["content"].index("{") :])
    assert shown == tree.schema


async def test_json_object_mode_puts_the_schema_before_a_wrong_answer_so_a_retry_extends_the_prompt(
    stub: OpenAIStub,
) -> None:
    stub.reply('{"action_id": "sleep"}', '{"action_id": "study"}')
    chat = OpenAIChatModel(
        base_url=stub.base_url, api_key=None, model="llama", output_mode="json_object"
    )
    retry = [
        *MESSAGES,
        {"role": "assistant", "content": "{oops"},
        {"role": "user", "content": "请修正"},
    ]
    try:
        await chat.complete(MESSAGES, json_schema=NESTED)
        await chat.complete(retry, json_schema=NESTED)
    finally:
        await chat.aclose()

    first, second = (r["messages"] for r in stub.requests)
    assert second[: len(first)] == first
    assert second[len(first) :] == retry[len(MESSAGES) :]


async def test_every_request_sends_its_max_tokens_and_a_timeout_that_fits_it(
    stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    stub.reply("好", "好")
    chat = OpenAIChatModel(
        base_url=stub.base_url,
        api_key=None,
        model="m",
        timeout_seconds=30,
        min_tokens_per_second=10,
    )
    timeouts: list[object] = []
    post = chat._client.post

    async def spy(path: str, **kwargs: Any) -> object:
        timeouts.append(kwargs["options"].get("timeout"))
        return await post(path, **kwargs)

    monkeypatch.setattr(chat._client, "post", spy)
    try:
        await chat.complete(MESSAGES, max_tokens=300)
        await chat.complete_tools(MESSAGES, max_tokens=50)
    finally:
        await chat.aclose()

    assert [r["max_tokens"] for r in stub.requests] == [300, 50]
    assert timeouts == [30 + 300 / 10, 30 + 50 / 10]
    assert chat.request_timeout(None) == 30


async def test_a_timed_out_request_carries_the_estimated_tokens_of_its_prompt(
    stub: OpenAIStub,
) -> None:
    stub.reply(StubDelay(2.0, "late"))
    chat = OpenAIChatModel(base_url=stub.base_url, api_key=None, model="m", timeout_seconds=0.2)
    try:
        with pytest.raises(LLMUnavailable, match=r"decide call.*timed out after 0\.2 s") as caught:
            await chat.complete(MESSAGES, purpose="decide")
    finally:
        await chat.aclose()

    assert caught.value.prompt_tokens == estimate_prompt_tokens(MESSAGES) > 0
    assert caught.value.result is None


async def test_plain_request_sends_no_response_format(
    stub: OpenAIStub, model: OpenAIChatModel
) -> None:
    stub.reply("早上好")

    result = await model.complete(MESSAGES)

    assert result.text == "早上好"
    assert "response_format" not in stub.requests[0]
    assert stub.requests[0]["temperature"] == 0.7


async def test_usage_and_latency_are_recorded(stub: OpenAIStub, model: OpenAIChatModel) -> None:
    stub.reply(StubDelay(0.05, '{"action_id": "sleep"}'))

    result = await model.complete(MESSAGES)

    prompt_chars = sum(len(m["content"]) for m in MESSAGES)
    assert result.prompt_tokens == prompt_chars // 2
    assert result.completion_tokens == len('{"action_id": "sleep"}') // 2
    assert result.model == "stub-chat"
    assert 50 <= result.latency_ms < 5000


async def test_http_500_is_unavailable_and_names_the_endpoint(
    stub: OpenAIStub, model: OpenAIChatModel
) -> None:
    stub.reply(StubError(500))

    with pytest.raises(LLMUnavailable, match="HTTP 500") as caught:
        await model.complete(MESSAGES, json_schema=SCHEMA)

    assert stub.base_url in str(caught.value)
    assert "output_mode" not in str(caught.value)  # nothing says json_schema is the problem
    assert caught.value.retryable
    assert len(stub.requests) == 1  # the client did not retry on its own


LLAMA_CPP_NO_SCHEMA = {
    "error": {
        "code": 500,
        "message": 'response_format type must be one of "text" or "json_object", but got: '
        "json_schema",
        "type": "server_error",
    }
}


async def test_output_mode_is_suggested_only_when_json_schema_itself_fails(
    stub: OpenAIStub,
) -> None:
    """Before: every HTTP 500 of a json_schema request suggested json_object mode, even after
    the endpoint had answered json_schema 14 times."""
    stub.reply(
        StubError(500, LLAMA_CPP_NO_SCHEMA),
        StubError(400, {"error": {"message": "This response_format type is unavailable now"}}),
        '{"action_id": "sleep"}',
        StubError(500, {"error": {"message": "CUDA out of memory"}}),
        StubError(500, LLAMA_CPP_NO_SCHEMA),
    )
    chat = OpenAIChatModel(base_url=stub.base_url, api_key=None, model="m")
    errors = []
    try:
        for _ in range(5):
            try:
                await chat.complete(MESSAGES, json_schema=SCHEMA)
            except LLMUnavailable as exc:
                errors.append(str(exc))
    finally:
        await chat.aclose()

    hinted = ["output_mode = 'json_object'" in e for e in errors]
    # json_schema refused (llama.cpp, DeepSeek): the hint; once json_schema has been answered,
    # a failure is the provider's, not the mode's
    assert hinted == [True, True, False, False], errors


async def test_http_401_is_unavailable_and_not_retryable(
    stub: OpenAIStub, model: OpenAIChatModel
) -> None:
    stub.reply(StubError(401, {"error": {"message": "bad key"}}))

    with pytest.raises(LLMUnavailable, match=r"HTTP 401.*api_key") as caught:
        await model.complete(MESSAGES)

    assert not caught.value.retryable


async def test_empty_content_is_unavailable_but_keeps_its_usage(
    stub: OpenAIStub, model: OpenAIChatModel
) -> None:
    stub.reply("")

    with pytest.raises(LLMUnavailable, match="empty answer") as caught:
        await model.complete(MESSAGES)

    assert caught.value.retryable
    assert caught.value.result is not None
    assert caught.value.result.prompt_tokens > 0


async def test_timeout_is_unavailable(stub: OpenAIStub) -> None:
    stub.reply(StubDelay(2.0, "{}"))
    chat = OpenAIChatModel(
        base_url=stub.base_url, api_key=None, model="stub-chat", timeout_seconds=0.2
    )
    started = time.perf_counter()
    try:
        with pytest.raises(LLMUnavailable, match=r"timed out after 0\.2 s"):
            await chat.complete(MESSAGES)
    finally:
        await chat.aclose()

    assert time.perf_counter() - started < 1.5


async def test_refused_connection_is_unavailable() -> None:
    with socket.socket() as sock:  # bind, then close: a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}/v1"
    chat = OpenAIChatModel(base_url=base_url, api_key=None, model="stub-chat")
    try:
        with pytest.raises(LLMUnavailable, match="connection failed") as caught:
            await chat.complete(MESSAGES)
    finally:
        await chat.aclose()

    assert base_url in str(caught.value)
    assert caught.value.sent and not caught.value.reached


async def test_a_request_that_never_reached_the_server_is_no_call_and_spends_no_tokens() -> None:
    """Before: a refused connection was reported as a call with the prompt's estimated tokens
    (27 calls and 25,637 tokens for an endpoint that was never up)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    totals = UsageTotals()
    chat = OpenAIChatModel(base_url=f"http://127.0.0.1:{port}/v1", api_key=None, model="m")
    metered = MeteredModel(chat, sink=totals)
    try:
        for _ in range(2):
            with pytest.raises(LLMUnavailable, match="connection failed"):
                await metered.complete(MESSAGES, purpose="decide")
    finally:
        await chat.aclose()

    decide = totals.by_purpose["decide"]
    assert (decide.calls, decide.prompt_tokens, decide.failed, decide.unreached) == (0, 0, 0, 2)


async def test_blocked_requests_raise_before_any_network_io(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(yuiju.llm.model, "ALLOW_MODEL_REQUESTS", False)

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("network I/O attempted")

    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    chat = OpenAIChatModel(
        base_url="https://user:secret@api.deepseek.com/v1", api_key="sk-x", model="deepseek-chat"
    )
    try:
        with pytest.raises(ModelRequestsBlocked, match="ALLOW_MODEL_REQUESTS") as caught:
            await chat.complete(MESSAGES)
    finally:
        await chat.aclose()

    assert "secret" not in str(caught.value)
    assert "secret" not in chat.name


@pytest.mark.parametrize(
    ("base_url", "blocked"),
    [
        ("http://127.0.0.1:8080/v1", False),
        ("http://127.9.9.9/v1", False),
        ("http://localhost:11434/v1", False),
        ("http://[::1]:8080/v1", False),
        ("https://api.deepseek.com/v1", True),
        ("http://192.168.1.5:8080/v1", True),
        ("http://localhost.example.com/v1", True),
        ("not a url", True),
    ],
)
def test_only_loopback_is_allowed_when_requests_are_off(
    monkeypatch: pytest.MonkeyPatch, base_url: str, blocked: bool
) -> None:
    monkeypatch.setattr(yuiju.llm.model, "ALLOW_MODEL_REQUESTS", False)

    if blocked:
        with pytest.raises(ModelRequestsBlocked):
            check_allow_model_requests(base_url)
    else:
        check_allow_model_requests(base_url)


def test_any_host_is_allowed_when_requests_are_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yuiju.llm.model, "ALLOW_MODEL_REQUESTS", True)

    check_allow_model_requests("https://api.deepseek.com/v1")


def test_stub_answers_404_on_unknown_paths(stub: OpenAIStub) -> None:
    import httpx2

    assert httpx2.get(f"{stub.base_url}/models").status_code == 404
    assert httpx2.post(f"{stub.base_url}/embeddings", json={}).status_code == 404


async def test_http_client_is_passed_through() -> None:
    import httpx2

    seen: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(str(request.url))
        return httpx2.Response(
            200,
            json={
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": "mock",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "嗯"},
                        "finish_reason": "stop",
                    }
                ],
            },
        )

    chat = OpenAIChatModel(
        base_url="http://127.0.0.1:9/v1",
        api_key="sk-test",
        model="mock",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    try:
        result = await chat.complete(MESSAGES)
    finally:
        await chat.aclose()

    assert seen == ["http://127.0.0.1:9/v1/chat/completions"]
    assert (result.text, result.prompt_tokens, result.completion_tokens) == ("嗯", 0, 0)


async def test_a_request_with_tools_is_sent_as_built_without_the_clients_param_transform(
    stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 21 item 10: the client's typed-dict transform walked every message and tool schema of
    # a chat turn, 10-30 ms of CPU per request; our requests are plain JSON already
    from openai.resources.chat.completions import completions

    walked: list[object] = []
    transform = completions.async_maybe_transform

    async def counted(data: object, *args: Any, **kwargs: Any) -> object:
        walked.append(data)
        return await transform(data, *args, **kwargs)

    monkeypatch.setattr(completions, "async_maybe_transform", counted)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "today_events",
                "description": "查今天做过的事",
                "parameters": {
                    "type": "object",
                    "properties": {"start_hour": {"type": "integer", "default": 0}},
                },
            },
        }
    ]
    stub.reply("好")
    chat = OpenAIChatModel(base_url=stub.base_url, api_key="k", model="m")
    try:
        result = await chat.complete_tools(MESSAGES, tools=tools, max_tokens=20)
    finally:
        await chat.aclose()
    assert result.text == "好"
    assert walked == []
    [sent] = stub.requests
    assert (sent["model"], sent["messages"], sent["tools"], sent["max_tokens"]) == (
        "m",
        MESSAGES,
        tools,
        20,
    )


async def test_an_answer_is_read_from_its_json_without_the_clients_response_models(
    stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # issue 21 item 10: the client built its typed ChatCompletion (every choice, message, tool
    # call and usage as a model) for the handful of fields we read, at every model call
    from openai import _base_client

    built: list[object] = []
    construct = _base_client.construct_type

    def counted(*, value: object, type_: object, **kwargs: Any) -> object:
        built.append(type_)
        return construct(value=value, type_=type_, **kwargs)

    monkeypatch.setattr(_base_client, "construct_type", counted)
    stub.reply(StubToolCall("today_events", {"start_hour": 8}, text="查一下"), "好呀好呀")
    chat = OpenAIChatModel(base_url=stub.base_url, api_key="k", model="m")
    try:
        called = await chat.complete_tools(MESSAGES, tools=[], max_tokens=20)
        answered = await chat.complete(MESSAGES, max_tokens=20)
    finally:
        await chat.aclose()
    assert built == []
    [call] = called.tool_calls
    assert (call.name, json.loads(call.arguments), called.text) == (
        "today_events",
        {"start_hour": 8},
        "查一下",
    )
    assert called.finish_reason == "tool_calls"
    assert (answered.text, answered.finish_reason, answered.model) == ("好呀好呀", "stop", "m")
    assert (answered.prompt_tokens, answered.completion_tokens) == (
        sum(len(m["content"]) for m in MESSAGES) // 2,
        2,
    )
