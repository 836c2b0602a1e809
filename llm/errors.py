"""Errors raised by the LLM seam: one small tree under `LLMError`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from yuiju.llm.model import ChatResult
    from yuiju.llm.structured import Attempt


class LLMError(Exception):
    """Base class for errors raised by `llm`."""


class LLMUnavailable(LLMError):
    """The provider gave no usable answer: HTTP error, timeout, refused connection, empty content.

    Raised after the HTTP client's own attempt; `ask_structured` retries it with the same messages.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = True,
        result: ChatResult | None = None,
        prompt_tokens: int = 0,
        sent: bool = True,
        reached: bool = True,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        """False when asking again cannot help (e.g. HTTP 401 or 404): fix the config instead."""
        self.result = result
        """The response when there was one (e.g. empty content), so its tokens can be counted."""
        self.prompt_tokens = prompt_tokens
        """Estimated tokens of the prompt that was sent when the provider did not count them
        (a timeout, an HTTP error); 0 when unknown (the caller then estimates from its messages)."""
        self.sent = sent
        """False when no request left this process (the circuit breaker is open): nothing to
        count, and nothing to retry."""
        self.reached = sent and reached
        """False when the request never reached the provider (connection refused, no route, a
        connect timeout): it is a failure to retry and to open the circuit breaker on, but not a
        call, and it spent no tokens."""
        self.retry_after = retry_after
        """Seconds the provider asked us to wait (HTTP 429, its Retry-After; 1 s when it named
        none); None for any other failure. `AdmissionGate` holds further requests back for as
        long and sends this one again, instead of failing it."""


class ModelRequestsBlocked(LLMError):
    """A request to a non-loopback endpoint while `llm.model.ALLOW_MODEL_REQUESTS` is False."""


class StructuredOutputFailed(LLMError):
    """`ask_structured` used up its attempts without a value that `parse` accepted."""

    def __init__(self, message: str, *, attempts: list[Attempt], last_error: Exception) -> None:
        super().__init__(message)
        self.attempts = attempts
        """Every attempt in order, so the caller can still count the tokens spent."""
        self.last_error = last_error
        """The error of the final attempt (a parse error or an `LLMUnavailable`)."""
