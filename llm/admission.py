"""Admission to an endpoint: at most so many requests at once, and a rate limit slows, not fails.

`AdmissionGate` sits innermost around the provider's model (under the circuit breaker): every
request of the process waits for one of ``max_concurrent`` slots (first come, first served), and
an HTTP 429 holds every further request back for the Retry-After it named, then sends the refused
one again (up to ``max_rate_limited`` times). A rate limit is the provider saying "not so fast",
not "down": it neither fails a decision nor counts towards opening the circuit breaker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from yuiju.llm.errors import LLMUnavailable
from yuiju.llm.model import ChatModel
from yuiju.llm.wrapper import ChatModelWrapper

log = logging.getLogger(__name__)

MAX_RATE_LIMIT_WAIT_SECONDS = 60.0
"""The longest one Retry-After is honoured for; a longer one fails the request (quota gone)."""


class AdmissionGate(ChatModelWrapper):
    """A `ToolChatModel` that admits at most ``max_concurrent`` requests to ``inner`` at once
    and waits out rate limits before sending."""

    def __init__(
        self,
        inner: ChatModel,
        *,
        max_concurrent: int,
        max_rate_limited: int = 5,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, got {max_concurrent!r}")
        super().__init__(inner)
        self.max_concurrent = max_concurrent
        """Requests in flight to the endpoint at once; more wait their turn."""
        self.max_rate_limited = max_rate_limited
        """Times one request is sent again after a 429 before it fails."""
        self.now = now
        self._slots = asyncio.Semaphore(max_concurrent)
        self.paused_until = 0.0
        """Monotonic time before which nothing is sent (the last Retry-After)."""
        self.in_flight = 0
        """Requests sent and not answered yet."""
        self.rate_limited = 0
        """429 answers, each waited out and sent again."""

    async def around(self, kind: str, messages: Sequence[Any], options: dict[str, Any]) -> Any:
        for attempt in range(self.max_rate_limited + 1):
            async with self._slots:
                await self._wait_for_pause()
                self.in_flight += 1
                try:
                    return await self.call(kind, messages, options)
                except LLMUnavailable as exc:
                    wait = exc.retry_after
                    if (
                        wait is None
                        or wait > MAX_RATE_LIMIT_WAIT_SECONDS
                        or attempt == self.max_rate_limited
                    ):
                        raise
                    self._pause(wait)
                finally:
                    self.in_flight -= 1
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _pause(self, seconds: float) -> None:
        self.rate_limited += 1
        until = self.now() + seconds
        if until > self.paused_until:
            if self.paused_until <= self.now():
                log.warning(
                    "%s: rate limited (HTTP 429); holding requests back for %.1f s",
                    self.name,
                    seconds,
                )
            self.paused_until = until

    async def _wait_for_pause(self) -> None:
        # a pause may grow while it is waited out (another 429): wait again until it is over
        for _ in range(self.max_rate_limited + 1):
            left = self.paused_until - self.now()
            if left <= 0:
                return
            await asyncio.sleep(left)
