"""Ask for JSON, validate it, and show the model its mistakes until it gets it right."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from yuiju.llm.errors import LLMUnavailable, StructuredOutputFailed
from yuiju.llm.model import ChatMessage, ChatModel, ChatResult, JsonSchema

T = TypeVar("T")

BACKOFF_SECONDS: float = 1.0
"""Wait before retrying an `LLMUnavailable`, doubled on each further one. Read at call time, so
tests can set `llm.structured.BACKOFF_SECONDS = 0`; `backoff_seconds=` overrides it per call."""

CORRECTION_REQUEST = "请只输出一个修正后的 JSON 对象，不要附加任何其他文字。"
"""Ends every feedback message."""


class RetryWithFeedback(Exception):
    """Raised by a parse function: the message (Chinese) is shown to the model on the next attempt.

    For example `raise RetryWithFeedback("'swim' 不在可选行为里，请从 ['sleep', 'study'] 中选择")`.
    """


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """One request and what became of it."""

    raw: str | None
    """The answer text; None when the request failed."""
    error: str | None
    """Why the attempt was rejected; None for the successful one."""
    result: ChatResult | None
    """The response with its token counts; None when the request itself failed."""


@dataclass(frozen=True, kw_only=True)
class StructuredOutcome(Generic[T]):
    """The parsed value and every attempt it took."""

    value: T
    """What `parse` returned for the last attempt."""
    attempts: list[Attempt]
    """All attempts including the successful last one (for token accounting)."""

    @property
    def prompt_tokens(self) -> int:
        """Input tokens over all attempts."""
        return sum(a.result.prompt_tokens for a in self.attempts if a.result)

    @property
    def completion_tokens(self) -> int:
        """Output tokens over all attempts."""
        return sum(a.result.completion_tokens for a in self.attempts if a.result)


_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)


def extract_json_text(raw: str) -> str:
    """The outermost JSON object in `raw`, without code fences or surrounding prose.

    If no complete object can be decoded, returns the best guess (from the first '{' to the last
    '}', or the stripped text) so that `json.loads` reports a precise error for the feedback.
    """
    text = raw.strip()
    fenced = _FENCE.search(text)
    if fenced is not None and "{" in fenced.group(1):
        text = fenced.group(1).strip()
    start = text.find("{")
    if start < 0:
        return text
    try:
        _, end = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError:
        stop = text.rfind("}")
        return text[start : stop + 1] if stop > start else text[start:]
    return text[start:end]


TRUNCATED = (
    "你的回答太长，在长度上限处被截断了。请只输出一个更简短的 JSON 对象，不要附加任何其他文字。"
)
"""The feedback when the wrong answer was cut at ``max_tokens``."""


def feedback_for(error: Exception, raw: str, *, truncated: bool = False) -> str:
    """The Chinese message that tells the model what was wrong with its answer `raw`."""
    if truncated:
        return TRUNCATED
    if isinstance(error, RetryWithFeedback):
        return f"{error}\n{CORRECTION_REQUEST}"
    if "{" not in raw:
        return f"你的回答里没有 JSON 对象。{CORRECTION_REQUEST}"
    if isinstance(error, json.JSONDecodeError):
        return (
            f"你的回答不是合法的 JSON：{error.msg}（第 {error.lineno} 行第 {error.colno} 列）。"
            f"{CORRECTION_REQUEST}"
        )
    if isinstance(error, ValidationError):
        details = error.errors(include_url=False)
        # `Model.model_validate_json` reports bad syntax as a validation error.
        syntax = [d for d in details if d["type"] == "json_invalid"]
        if syntax:
            return f"你的回答不是合法的 JSON：{syntax[0]['msg']}。{CORRECTION_REQUEST}"
        problems = "\n".join(_describe_detail(d) for d in details)
        return (
            f"你的 JSON 没有通过校验，共 {len(details)} 处问题：\n{problems}\n{CORRECTION_REQUEST}"
        )
    raise TypeError(f"no feedback for {type(error).__name__}")  # pragma: no cover


def _describe_detail(detail: ErrorDetails) -> str:
    where = ".".join(str(part) for part in detail["loc"]) or "（整个对象）"
    line = f"- {where}：{detail['msg']}"
    if detail["type"] != "missing":  # for a missing field the input is the whole object
        line += f"（收到：{json.dumps(detail['input'], ensure_ascii=False, default=str)}）"
    return line


def _describe(error: Exception) -> str:
    """One-line-per-problem text for `Attempt.error` and logs."""
    if isinstance(error, ValidationError):
        problems = "; ".join(
            f"{'.'.join(map(str, d['loc'])) or '<root>'}: {d['msg']}"
            for d in error.errors(include_url=False)
        )
        return f"ValidationError: {problems}"
    return f"{type(error).__name__}: {error}"


async def ask_structured(
    model: ChatModel,
    messages: Sequence[ChatMessage],
    parse: Callable[[str], T],
    *,
    json_schema: JsonSchema | None = None,
    max_attempts: int = 3,
    temperature: float | None = None,
    backoff_seconds: float | None = None,
    max_tokens: int | None = None,
    purpose: str | None = None,
    review: Callable[[T], Awaitable[str | None]] | None = None,
) -> StructuredOutcome[T]:
    """Ask `model` until `parse` accepts the answer, feeding each mistake back to it.

    `parse` gets the answer reduced by `extract_json_text`. A `json.JSONDecodeError`, a pydantic
    `ValidationError` or a `RetryWithFeedback` from it sends the original messages, the wrong
    answer and a Chinese correction request on the next attempt; any other exception is a bug and
    propagates. An `LLMUnavailable` is retried with the same messages after a backoff, unless it
    is not retryable (e.g. HTTP 401, or the circuit breaker opened), which ends the loop at once;
    a request that was never sent (the breaker is open) is not an attempt. ``max_tokens`` and
    ``purpose`` go to every request. ``review``: a check of the parsed value that needs I/O (a
    store read); the Chinese reason it returns goes back to the model as a `RetryWithFeedback`
    from `parse` would, None accepts the value.

    Raises `StructuredOutputFailed` with every attempt when no attempt succeeded.
    """
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be at least 1, got {max_attempts!r}")
    backoff = BACKOFF_SECONDS if backoff_seconds is None else backoff_seconds
    original = list(messages)
    current = original
    attempts: list[Attempt] = []
    outages = 0
    last_error: Exception | None = None
    for _ in range(max_attempts):
        try:
            result = await model.complete(
                current,
                json_schema=json_schema,
                temperature=temperature,
                max_tokens=max_tokens,
                purpose=purpose,
            )
        except LLMUnavailable as exc:
            last_error = exc
            if not exc.sent:
                break
            raw = exc.result.text if exc.result else None
            attempts.append(Attempt(raw=raw, error=str(exc), result=exc.result))
            if not exc.retryable:
                break
            outages += 1
            if backoff > 0 and len(attempts) < max_attempts:
                await asyncio.sleep(backoff * 2 ** (outages - 1))
            continue
        try:
            value = parse(extract_json_text(result.text))
            if review is not None and (wrong := await review(value)) is not None:
                raise RetryWithFeedback(wrong)
        except (json.JSONDecodeError, ValidationError, RetryWithFeedback) as exc:
            last_error = exc
            attempts.append(Attempt(raw=result.text, error=_describe(exc), result=result))
            current = [
                *original,
                {"role": "assistant", "content": result.text},
                {
                    "role": "user",
                    "content": feedback_for(exc, result.text, truncated=result.truncated),
                },
            ]
            continue
        attempts.append(Attempt(raw=result.text, error=None, result=result))
        return StructuredOutcome(value=value, attempts=attempts)
    assert last_error is not None
    raise StructuredOutputFailed(
        f"{model.name}: no usable answer after {len(attempts)} attempt(s); last error: "
        f"{_describe(last_error)}",
        attempts=attempts,
        last_error=last_error,
    ) from last_error
