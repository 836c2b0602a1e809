"""`ChatModel` for any OpenAI-compatible chat-completions endpoint."""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, cast

import httpx2
import openai

from yuiju.config import redact_url
from yuiju.llm import model as _model
from yuiju.llm.errors import LLMUnavailable
from yuiju.llm.model import (
    ChatMessage,
    ChatResult,
    JsonSchema,
    ToolCall,
    ToolChatResult,
)
from yuiju.llm.tokens import estimate_prompt_tokens

if TYPE_CHECKING:
    from openai.types.chat.completion_create_params import ResponseFormat

OutputMode = Literal["json_schema", "json_object"]

JSON_OBJECT_INSTRUCTION = "只输出符合下面 JSON Schema（{name}）的一个 JSON 对象：\n{schema}"
"""Appended to the request in "json_object" mode, where the provider never sees the schema."""

_RETRYABLE_STATUS = frozenset({408, 409, 429})

_SCHEMA_WORDS = ("response_format", "json_schema", "schema", "grammar")
"""Words of a provider's error that say the structured-output request itself was refused
(llama.cpp: 'response_format type must be one of "text" or "json_object", but got:
json_schema'; DeepSeek: 'This response_format type is unavailable now')."""

_NEVER_REACHED = (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout)
"""Transport errors raised before a request reached the provider."""


class OpenAIChatModel:
    """Chat completions over HTTP with the official `openai` client.

    The client never retries on its own (`max_retries=0`): `ask_structured` owns the retry loop, so
    every attempt is visible and counted.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        output_mode: OutputMode = "json_schema",
        timeout_seconds: float = 60.0,
        min_tokens_per_second: float | None = None,
        temperature: float = 0.7,
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url
        """OpenAI-compatible endpoint, e.g. 'https://api.deepseek.com/v1'."""
        self.model = model
        """Model name sent with every request."""
        self.output_mode: OutputMode = output_mode
        """How a `json_schema` is requested: provider-enforced ("json_schema") or prompted
        ("json_object", for providers such as llama.cpp's server that reject json_schema)."""
        self.timeout_seconds = timeout_seconds
        """Time allowed before the answer starts (connecting, queueing, reading the prompt); a
        request with ``max_tokens`` gets the time to write them on top (`request_timeout`)."""
        self.min_tokens_per_second = min_tokens_per_second
        """The slowest generation accepted; None: ``timeout_seconds`` is the whole timeout."""
        self.temperature = temperature
        """Default sampling temperature when `complete` is not given one."""
        self.name = f"{model} @ {redact_url(base_url)}"
        """Identity for logs and errors; contains no secret."""
        self.json_schema_answered = False
        """A json_schema request has been answered: the endpoint supports the mode, so a later
        failure is not the mode's (no hint to switch to json_object then)."""
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            # Local servers need no key, but the client refuses to start without one.
            api_key=api_key or "none",
            timeout=timeout_seconds,
            max_retries=0,
            http_client=http_client,
        )

    def __repr__(self) -> str:
        return f"OpenAIChatModel({self.name!r}, output_mode={self.output_mode!r})"

    def request_timeout(self, max_tokens: int | None) -> float:
        """Seconds one request may take: the time to start plus the time to write ``max_tokens``
        at ``min_tokens_per_second``, so a bounded answer is never cut off by the timeout."""
        if max_tokens is None or not self.min_tokens_per_second:
            return self.timeout_seconds
        return self.timeout_seconds + max_tokens / self.min_tokens_per_second

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: JsonSchema | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        purpose: str | None = None,
    ) -> ChatResult:
        """Send one chat-completions request; see `ChatModel.complete`."""
        _model.check_allow_model_requests(self.base_url)
        sent = list(messages)
        response_format: ResponseFormat | openai.Omit = openai.omit
        if json_schema is not None and self.output_mode == "json_schema":
            response_format = {
                "type": "json_schema",
                # Not strict: strict mode demands every property be required and forbids
                # unions at the root. We validate the answer ourselves anyway.
                "json_schema": {
                    "name": json_schema.name,
                    "schema": json_schema.schema,
                    "strict": False,
                },
            }
        elif json_schema is not None:
            response_format = {"type": "json_object"}
            sent = with_schema_instruction(sent, json_schema)
        completion, latency_ms = await self._create(
            sent,
            purpose,
            max_tokens,
            json_schema,
            response_format=response_format,
            temperature=self.temperature if temperature is None else temperature,
        )
        if isinstance(response_format, dict) and response_format["type"] == "json_schema":
            self.json_schema_answered = True
        answer = _Answer.read(completion)
        result = ChatResult(
            text=answer.text,
            model=answer.model or self.model,
            prompt_tokens=answer.prompt_tokens,
            completion_tokens=answer.completion_tokens,
            latency_ms=latency_ms,
            finish_reason=answer.finish_reason,
        )
        if not result.text.strip():
            # Retryable, not fed back to the model: an empty answer (a refusal, a content
            # filter, a base model with nothing to say) carries nothing to correct, and asking
            # again often works. The result rides along so its tokens are still counted.
            finish_reason = answer.finish_reason if answer.choice else "no choices"
            raise LLMUnavailable(
                f"{self.name}: empty answer (finish_reason={finish_reason!r})", result=result
            )
        return result

    async def complete_tools(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] = (),
        temperature: float | None = None,
        max_tokens: int | None = None,
        purpose: str | None = None,
    ) -> ToolChatResult:
        """One chat-completions request offering ``tools``; see `ToolChatModel.complete_tools`."""
        _model.check_allow_model_requests(self.base_url)
        completion, latency_ms = await self._create(
            list(messages),
            purpose,
            max_tokens,
            None,
            tools=cast("Any", list(tools)) if tools else openai.omit,
            temperature=self.temperature if temperature is None else temperature,
        )
        answer = _Answer.read(completion)
        result = ToolChatResult(
            text=answer.text,
            model=answer.model or self.model,
            prompt_tokens=answer.prompt_tokens,
            completion_tokens=answer.completion_tokens,
            latency_ms=latency_ms,
            finish_reason=answer.finish_reason,
            tool_calls=answer.tool_calls,
        )
        if not result.text.strip() and not answer.tool_calls:
            finish_reason = answer.finish_reason if answer.choice else "no choices"
            raise LLMUnavailable(
                f"{self.name}: empty answer (finish_reason={finish_reason!r})", result=result
            )
        return result

    async def _create(
        self,
        sent: list[Any],
        purpose: str | None,
        max_tokens: int | None,
        json_schema: JsonSchema | None,
        **request: Any,
    ) -> tuple[object, float]:
        """Send one request; returns the completion's JSON and its latency in ms, or raises
        `LLMUnavailable` naming the call and the fix (with the prompt's estimated tokens)."""
        what = f"{self.name} ({purpose} call)" if purpose else self.name
        timeout = self.request_timeout(max_tokens)
        body: dict[str, Any] = {"model": self.model, "messages": sent}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        body.update((k, v) for k, v in request.items() if v is not openai.omit)
        started = time.perf_counter()
        try:
            # The client's `chat.completions.create` walks every message and tool schema through
            # its typed-dict transform first (for file and date fields we never send): 10-30 ms
            # of CPU per chat turn with her tools offered, more than everything else in a turn.
            # Our body is plain JSON already, so it goes as it is, to the same endpoint with the
            # same headers, timeout and error classes (the client's documented `post`). The
            # answer comes back as its JSON (`cast_to=object`), not the client's ChatCompletion
            # model built field by field: `_Answer.read` takes the few fields we use.
            completion = await self._client.post(
                "/chat/completions",
                cast_to=object,
                body=body,
                options={"timeout": timeout, "security": {"bearer_auth": True}},
            )
        except openai.APITimeoutError as exc:
            raise LLMUnavailable(
                f"{what}: timed out after {timeout:g} s; check that the endpoint is up, or raise "
                "llm.timeout_seconds (or lower llm.min_tokens_per_second for a slow model)",
                prompt_tokens=estimate_prompt_tokens(sent),
                reached=not isinstance(exc.__cause__, _NEVER_REACHED),
            ) from exc
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            raise LLMUnavailable(
                f"{what}: connection failed ({type(cause).__name__}: {cause}); check that "
                "llm.base_url is right and the server is running",
                prompt_tokens=estimate_prompt_tokens(sent),
                reached=not isinstance(cause, _NEVER_REACHED),
            ) from exc
        except openai.APIStatusError as exc:
            error = self._status_error(exc, json_schema, what)
            error.prompt_tokens = estimate_prompt_tokens(sent)
            raise error from exc
        return completion, (time.perf_counter() - started) * 1000

    def _status_error(
        self, exc: openai.APIStatusError, json_schema: JsonSchema | None, what: str
    ) -> LLMUnavailable:
        status = exc.status_code
        retryable = status in _RETRYABLE_STATUS or status >= 500
        if status in (401, 403):
            fix = "check llm.api_key (YUIJU_LLM__API_KEY)"
        elif status == 404:
            fix = f"check llm.base_url (usually ends in /v1) and llm.model={self.model!r}"
        elif status == 429:
            fix = "rate limited or out of quota; wait, or lower the request rate"
        elif self._json_schema_refused(exc, json_schema):
            fix = (
                "this provider seems not to support response_format json_schema (DeepSeek "
                "answers 400, older llama.cpp servers 500): set llm.output_mode = 'json_object'"
            )
        elif retryable:
            fix = "the provider failed; try again later"
        else:
            fix = "the provider rejected the request"
        return LLMUnavailable(
            f"{what}: HTTP {status}: {exc.message}; {fix}",
            retryable=retryable,
            retry_after=retry_after_seconds(exc.response.headers.get("retry-after"))
            if status == 429
            else None,
        )

    def _json_schema_refused(
        self, exc: openai.APIStatusError, json_schema: JsonSchema | None
    ) -> bool:
        """Whether the structured-output mode itself is what failed: a json_schema request the
        provider refused saying so, from an endpoint that has never answered one."""
        if json_schema is None or self.output_mode != "json_schema" or self.json_schema_answered:
            return False
        said = str(exc.message).lower()
        return any(word in said for word in _SCHEMA_WORDS)

    async def aclose(self) -> None:
        """Close the HTTP connections (including a passed-in `http_client`)."""
        await self._client.close()


@dataclass(frozen=True)
class _Answer:
    """What we read of a chat completion's JSON; a missing or malformed field reads as absent,
    as the client's own non-validating parse left it."""

    choice: bool
    """The completion had a choice (the first is read)."""
    text: str
    model: str | None
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None
    tool_calls: tuple[ToolCall, ...]

    @classmethod
    def read(cls, completion: object) -> _Answer:
        if isinstance(completion, str):  # served without a JSON content type
            try:
                completion = json.loads(completion)
            except ValueError:
                completion = None
        body = _mapping(completion)
        usage = _mapping(body.get("usage"))
        choices = body.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        choice = _mapping(first)
        message = _mapping(choice.get("message"))
        calls = message.get("tool_calls")
        return cls(
            choice=first is not None,
            text=_str(message.get("content")) or "",
            model=_str(body.get("model")),
            prompt_tokens=_int(usage.get("prompt_tokens")),
            completion_tokens=_int(usage.get("completion_tokens")),
            finish_reason=_str(choice.get("finish_reason")),
            tool_calls=tuple(
                ToolCall(
                    id=_str(call.get("id")) or "",
                    name=_str(function.get("name")) or "",
                    arguments=_str(function.get("arguments")) or "{}",
                )
                for call in map(_mapping, calls if isinstance(calls, list) else [])
                if (function := _mapping(call.get("function")))
            ),
        )


RATE_LIMIT_WAIT_SECONDS = 1.0
"""How long a 429 that names no Retry-After holds requests back."""


def retry_after_seconds(header: str | None) -> float:
    """A Retry-After header in seconds: a number of seconds (``"2"``, ``"0.5"``) or an HTTP
    date; `RATE_LIMIT_WAIT_SECONDS` when absent or unreadable."""
    if header:
        try:
            return max(0.0, float(header))
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError):
            return RATE_LIMIT_WAIT_SECONDS
        if when.tzinfo is not None:
            return max(0.0, (when - datetime.now(UTC)).total_seconds())
    return RATE_LIMIT_WAIT_SECONDS


def _mapping(value: object) -> dict[str, Any]:
    return cast("dict[str, Any]", value) if isinstance(value, dict) else {}


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def with_schema_instruction(
    messages: Sequence[ChatMessage], json_schema: JsonSchema
) -> list[ChatMessage]:
    """`messages` with the schema shown to the model: one self-contained schema in one place.

    Its ``$defs`` are inlined where they are referred to (`self_contained`), so the model reads
    one whole schema, compact. A ``stable`` schema (the same at every call) goes at the end of
    the leading system message (a new one if there is none), so that providers' prompt caches
    keep it with the rest of the stable prefix. Any other goes at the end of the request proper:
    the last message before any assistant message, so that a retry with feedback (request +
    wrong answer + correction) extends the first prompt instead of changing it, and the system
    prompt before it stays the same bytes.
    """
    schema = self_contained(json_schema.prompt or json_schema.schema)
    out = [dict(m) for m in messages]
    instruction = JSON_OBJECT_INSTRUCTION.format(name=json_schema.name, schema=_compact(schema))
    if json_schema.stable:
        # several chat templates (llama.cpp's among them) reject a system message that is not
        # the first: extend the first, or put one first
        if out and out[0].get("role") == "system":
            out[0]["content"] = f"{out[0]['content']}\n\n{instruction}"
        else:
            out.insert(0, {"role": "system", "content": instruction})
        return out
    first_answer = next((n for n, m in enumerate(out) if m.get("role") == "assistant"), len(out))
    target = first_answer - 1
    if target < 0 or out[target].get("role") == "system":
        out.insert(target + 1, {"role": "user", "content": instruction})
    else:
        out[target]["content"] = f"{out[target]['content']}\n\n{instruction}"
    return out


class _Recursive(Exception):
    """A definition refers to itself: it cannot be inlined."""


def self_contained(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every local ``$ref`` (``#/$defs/...``) replaced by its definition and
    ``$defs`` dropped: what a model reads in one piece. A schema whose definitions refer to
    themselves (a tree) cannot be inlined and is returned whole."""
    defs = schema.get("$defs")
    if not defs:
        return schema

    def resolve(node: Any, seen: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [resolve(v, seen) for v in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        rest = {k: resolve(v, seen) for k, v in node.items() if k not in ("$ref", "$defs")}
        if not (isinstance(ref, str) and ref.startswith("#/$defs/")):
            return rest
        name = ref.removeprefix("#/$defs/")
        if name in seen or name not in defs:
            raise _Recursive(name)
        target = resolve(defs[name], seen | {name})
        if set(target) & set(rest):  # keywords beside the $ref narrow it: both must hold
            return {"allOf": [target], **rest}
        return {**target, **rest}

    try:
        return dict(resolve(schema, frozenset()))
    except _Recursive:
        return schema


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
