"""The chat-model seam: a protocol, its request/response data, and the test-time request switch."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from yuiju.config import redact_url
from yuiju.llm.errors import ModelRequestsBlocked

ALLOW_MODEL_REQUESTS: bool = True
"""Tests set this False: then any request to a host that is not loopback (127.0.0.0/8, localhost,
::1) raises `ModelRequestsBlocked`. Read at call time, so set it as `llm.model.ALLOW_MODEL_REQUESTS`
(never `from llm.model import ALLOW_MODEL_REQUESTS`)."""

ChatMessage = dict[str, str]
"""One chat message: {"role": "system" | "user" | "assistant", "content": ...}."""


def is_loopback_url(base_url: str) -> bool:
    """Whether `base_url` points at this machine (127.0.0.0/8, ::1 or localhost)."""
    host = urlsplit(base_url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_allow_model_requests(base_url: str) -> None:
    """Raise `ModelRequestsBlocked` if requests are switched off and `base_url` is not loopback."""
    if not ALLOW_MODEL_REQUESTS and not is_loopback_url(base_url):
        raise ModelRequestsBlocked(
            f"model request to {redact_url(base_url)!r} blocked: llm.model.ALLOW_MODEL_REQUESTS is "
            "False and the host is not loopback; use llm.testing.FunctionChatModel or the local "
            "HTTP stub (tests/openai_stub.py) in tests"
        )


@dataclass(frozen=True, kw_only=True)
class JsonSchema:
    """A JSON schema the answer should match, e.g. from `Model.model_json_schema()`.

    In ``json_object`` mode the schema is shown to the model in the prompt, as one
    self-contained schema (its ``$defs`` inlined): at the end of the request, or with the
    system message when it is ``stable``.
    """

    name: str
    """Schema name sent to the provider (letters, digits, '_' and '-')."""
    schema: dict[str, Any]
    """The JSON schema object: self-contained, what a provider enforces in ``json_schema`` mode."""
    prompt: dict[str, Any] | None = None
    """An equivalent, shorter form for the prompt in ``json_object`` mode (None: ``schema``)."""
    stable: bool = False
    """The same bytes at every call of its kind: in ``json_object`` mode it is shown with the
    leading system message, where providers' prompt caches keep it, instead of after the
    request."""


@dataclass(frozen=True, kw_only=True)
class ChatResult:
    """One completed chat request."""

    text: str
    """The assistant's answer, unparsed."""
    model: str
    """The model that answered, as reported by the provider."""
    prompt_tokens: int
    """Input tokens; 0 if the provider does not report usage."""
    completion_tokens: int
    """Output tokens; 0 if the provider does not report usage."""
    latency_ms: float
    """Wall time of the request in milliseconds."""
    finish_reason: str | None = None
    """Why the provider stopped: 'stop', 'length' (cut off at the token limit: the text is a
    fragment), 'tool_calls', 'content_filter'...; None when unknown."""

    @property
    def truncated(self) -> bool:
        """The answer was cut at ``max_tokens``."""
        return self.finish_reason == "length"


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """One function call the model asked for."""

    id: str
    """The provider's call id; the tool message answering it carries the same id."""
    name: str
    """The tool's name."""
    arguments: str
    """The arguments as the model wrote them (JSON text, possibly invalid)."""


@dataclass(frozen=True, kw_only=True)
class ToolChatResult(ChatResult):
    """A completed request that offered tools: text, tool calls, or both."""

    tool_calls: tuple[ToolCall, ...] = ()
    """The calls the model asked for, in order; empty when it answered in text."""


class ChatModel(Protocol):
    """Anything that can answer a list of chat messages with text."""

    name: str
    """Human-readable identity for logs, e.g. 'deepseek-chat @ https://api.deepseek.com/v1'
    (never a secret)."""

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: JsonSchema | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        purpose: str | None = None,
    ) -> ChatResult:
        """Answer `messages`; with `json_schema`, ask for one JSON object matching it.

        ``max_tokens`` bounds the answer; ``purpose`` ('decide', 'chat', 'diary'...) says what the
        call is for (usage accounting, bounds, logs, cassettes). Raises `LLMUnavailable` when the
        provider gives no usable answer.
        """
        ...


class ToolChatModel(ChatModel, Protocol):
    """A `ChatModel` that also speaks OpenAI tool calling (the chat side's agent loop)."""

    async def complete_tools(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] = (),
        temperature: float | None = None,
        max_tokens: int | None = None,
        purpose: str | None = None,
    ) -> ToolChatResult:
        """Answer ``messages`` (which may hold assistant ``tool_calls`` and ``tool`` messages),
        offering ``tools`` (OpenAI ``{"type": "function", "function": {...}}`` objects).

        Raises `LLMUnavailable` when the provider gives neither text nor a tool call.
        """
        ...
