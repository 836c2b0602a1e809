"""Test doubles that ship next to the real model (pydantic-ai's `FunctionModel`)."""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from llm.model import ChatMessage, ChatResult, JsonSchema, ToolCall, ToolChatResult

ChatFunc = Callable[[list[ChatMessage], JsonSchema | None], str | Awaitable[str]]
"""Plays the model: gets the messages and the requested schema, returns the answer text.
It may raise `LLMUnavailable` to simulate an outage. Through `complete_tools` it may also return a
`ToolCall`, a list of them, or a whole `ToolChatResult`."""


def estimate_tokens(text: str) -> int:
    """A cheap deterministic token estimate (about two characters of Chinese per token)."""
    return len(text) // 2


class FunctionChatModel:
    """A `ChatModel` whose answers come from a plain Python function (sync or async).

    >>> model = FunctionChatModel(lambda messages, schema: '{"action_id": "sleep"}')
    """

    def __init__(self, fn: ChatFunc, *, name: str = "function") -> None:
        self.fn = fn
        """The function that plays the model."""
        self.name = name
        """Identity for logs."""
        self.calls: list[list[ChatMessage]] = []
        """Every request's messages in order (copies), for assertions."""
        self.schemas: list[JsonSchema | None] = []
        """The `json_schema` of every request, parallel to `calls`."""
        self.tools: list[list[dict[str, Any]]] = []
        """The tools offered with every request, parallel to `calls` (empty for `complete`)."""

    def __repr__(self) -> str:
        return f"FunctionChatModel(name={self.name!r}, calls={len(self.calls)})"

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: JsonSchema | None = None,
        temperature: float | None = None,
    ) -> ChatResult:
        """Record the request and answer with `fn`; see `ChatModel.complete`."""
        sent = [dict(m) for m in messages]
        self.calls.append(sent)
        self.schemas.append(json_schema)
        self.tools.append([])
        started = time.perf_counter()
        answer = self.fn([dict(m) for m in sent], json_schema)
        text = await answer if inspect.isawaitable(answer) else answer
        return ChatResult(
            text=text,
            model=self.name,
            prompt_tokens=sum(estimate_tokens(m.get("content", "")) for m in sent),
            completion_tokens=estimate_tokens(text),
            latency_ms=(time.perf_counter() - started) * 1000,
        )

    async def complete_tools(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] = (),
        temperature: float | None = None,
    ) -> ToolChatResult:
        """Record the request and answer with `fn` (text, `ToolCall`(s) or a `ToolChatResult`)."""
        sent = [dict(m) for m in messages]
        self.calls.append(sent)  # type: ignore[arg-type]
        self.schemas.append(None)
        self.tools.append([dict(t) for t in tools])
        started = time.perf_counter()
        answer: Any = self.fn([dict(m) for m in sent], None)  # type: ignore[misc]
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, ToolChatResult):
            return answer
        calls: tuple[ToolCall, ...] = ()
        text = ""
        if isinstance(answer, ToolCall):
            calls = (answer,)
        elif isinstance(answer, list | tuple):
            calls = tuple(answer)
        else:
            text = str(answer)
        return ToolChatResult(
            text=text,
            model=self.name,
            prompt_tokens=sum(estimate_tokens(str(m.get("content") or "")) for m in sent),
            completion_tokens=estimate_tokens(text),
            latency_ms=(time.perf_counter() - started) * 1000,
            tool_calls=calls,
        )
