"""A circuit breaker in front of the model: during an outage, stop asking.

Without it every decision in a full outage costs its attempts plus backoff before the utility
policy takes over (a hanging provider: the whole timeout, each time), and every chat message
waits for a timeout. After ``failures`` unanswered requests in a row the circuit opens: for
``cooldown_seconds`` calls fail at once, without a request (`LLMUnavailable` with
``sent=False``), so callers fall back at once. Then one request is let through as a probe; an
answer closes the circuit, a failure opens it again for twice as long (up to
``max_cooldown_seconds``), and a probe that ends without either (cancelled) opens it again for
as long as before.

The cooldown runs on an injected clock, wall time (monotonic) by default: an outage lasts so
many real seconds whatever the world's speed. ``simulate`` runs it on the simulated clock, so a
recorded outage replays identically. Hand-written rather than a library for that clock, and
because it is a few lines.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from yuiju.llm.errors import LLMUnavailable
from yuiju.llm.model import ChatModel
from yuiju.llm.wrapper import ChatModelWrapper

log = logging.getLogger(__name__)


class CircuitBreaker(ChatModelWrapper):
    """A `ToolChatModel` that stops calling ``inner`` while the provider is down."""

    def __init__(
        self,
        inner: ChatModel,
        *,
        failures: int = 3,
        cooldown_seconds: float = 300.0,
        max_cooldown_seconds: float | None = None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        if failures < 1:
            raise ValueError(f"failures must be at least 1, got {failures!r}")
        super().__init__(inner)
        self.failures = failures
        """Unanswered requests in a row that open the circuit."""
        self.cooldown_seconds = cooldown_seconds
        """How long it stays open the first time before one probe request is let through."""
        self.max_cooldown_seconds = max(cooldown_seconds, max_cooldown_seconds or cooldown_seconds)
        """The longest wait: each failed probe doubles the last one, up to this."""
        self.now = now
        """Seconds on a monotonic clock: wall time, or the simulated clock under ``simulate``."""
        self.cooldown = cooldown_seconds
        """The current wait between probes (doubled by each failed probe, reset by an answer)."""
        self.consecutive = 0
        """Unanswered requests since the last answer."""
        self.open_until: float | None = None
        """While set, calls fail at once until this time; then one probe goes out."""
        self.probing = False
        self.opened = 0
        """How many times the circuit has opened (for reports)."""
        self.rejected = 0
        """Calls refused without a request while open."""

    def __repr__(self) -> str:
        return f"CircuitBreaker({self.inner!r}, state={self.state!r})"

    @property
    def state(self) -> str:
        """'closed' (calling), 'open' (refusing) or 'probing' (one request on trial)."""
        if self.probing:
            return "probing"
        return "open" if self.open_until is not None else "closed"

    async def around(self, kind: str, messages: Sequence[Any], options: dict[str, Any]) -> Any:
        probe = self._admit()
        try:
            result = await self.call(kind, messages, options)
        except LLMUnavailable as exc:
            if exc.sent:
                if self._failed(probe):
                    # The circuit is open (this failure opened it, or one before it while this
                    # request was under way): asking again now is pointless.
                    raise LLMUnavailable(
                        f"{exc} (circuit breaker open, next probe in {self._left():.0f} s)",
                        retryable=False,
                        result=exc.result,
                        prompt_tokens=exc.prompt_tokens,
                        reached=exc.reached,
                    ) from exc
            elif probe:
                self._probe_ended()
            raise
        except BaseException:
            if probe:
                self._probe_ended()
            raise
        self._answered()
        return result

    def _admit(self) -> bool:
        """Let the call through (True: as the probe), or raise `LLMUnavailable` (not sent)
        while the circuit is open."""
        if self.open_until is None:
            return False
        now = self.now()
        if now >= self.open_until and not self.probing:
            self.probing = True
            log.info("%s: circuit breaker lets one probe request through", self.name)
            return True
        self.rejected += 1
        reason = (
            "a probe request is under way"
            if self.probing
            else f"{self.open_until - now:.0f} s left"
        )
        raise LLMUnavailable(
            f"{self.name}: not asked, the provider failed {self.failures} time(s) in a row and the "
            f"circuit breaker is open ({reason}); deciding offline meanwhile",
            retryable=False,
            sent=False,
        )

    def _left(self) -> float:
        return max(0.0, (self.open_until or 0.0) - self.now())

    def _failed(self, probe: bool) -> bool:
        """Count an unanswered request; True when the circuit is open after it."""
        self.consecutive += 1
        if probe:
            self.probing = False
            self.cooldown = min(self.cooldown * 2, self.max_cooldown_seconds)
            why = "the probe failed"
        elif self.open_until is not None:
            # Admitted before the circuit opened, failed after: it says nothing new.
            return True
        elif self.consecutive >= self.failures:
            why = f"{self.consecutive} failures in a row"
        else:
            return False
        self.open_until = self.now() + self.cooldown
        self.opened += 1
        log.warning(
            "%s: %s; circuit breaker open, next probe in %g s", self.name, why, self.cooldown
        )
        return True

    def _probe_ended(self) -> None:
        """The probe ended without an answer or a failure (cancelled, or not sent): the circuit
        stays open for the current wait, so the next call is not a probe at once."""
        self.probing = False
        self.open_until = self.now() + self.cooldown

    def _answered(self) -> None:
        if self.open_until is not None:
            log.info("%s: the provider answers again; circuit breaker closed", self.name)
        self.consecutive = 0
        self.open_until = None
        self.probing = False
        self.cooldown = self.cooldown_seconds
