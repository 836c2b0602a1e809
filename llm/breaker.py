"""A circuit breaker in front of the model: during an outage, stop asking.

Without it every decision in a full outage costs its attempts plus backoff before the utility
policy takes over, and every chat message waits for a timeout. After ``failures`` unanswered
requests in a row the circuit opens: for ``cooldown_seconds`` calls fail at once, without a
request (`LLMUnavailable` with ``sent=False``), so callers fall back at once. Then one request is
let through as a probe; an answer closes the circuit, a failure opens it for another cooldown.

Hand-written rather than a library: it needs an injected clock (``simulate`` runs it on the
simulated one, so a recorded outage replays identically), and it is a few lines.
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
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        if failures < 1:
            raise ValueError(f"failures must be at least 1, got {failures!r}")
        super().__init__(inner)
        self.failures = failures
        """Unanswered requests in a row that open the circuit."""
        self.cooldown_seconds = cooldown_seconds
        """How long it stays open before one probe request is let through."""
        self.now = now
        """Seconds on some clock (the world's under ``simulate``)."""
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
        self._admit()
        try:
            result = await self.call(kind, messages, options)
        except LLMUnavailable as exc:
            if exc.sent:
                if self._failed():
                    # This failure opened the circuit: asking again now is pointless.
                    raise LLMUnavailable(
                        f"{exc} (circuit breaker open for {self.cooldown_seconds:g} s)",
                        retryable=False,
                        result=exc.result,
                        prompt_tokens=exc.prompt_tokens,
                    ) from exc
            elif self.probing:
                self.probing = False
            raise
        except BaseException:
            self.probing = False
            raise
        self._answered()
        return result

    def _admit(self) -> None:
        """Let the call through, or raise `LLMUnavailable` (not sent) while the circuit is open."""
        if self.open_until is None:
            return
        now = self.now()
        if now >= self.open_until and not self.probing:
            self.probing = True
            log.info("%s: circuit breaker lets one probe request through", self.name)
            return
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

    def _failed(self) -> bool:
        """Count an unanswered request; True when it opens the circuit."""
        self.consecutive += 1
        if self.probing or self.consecutive >= self.failures:
            was_probe, self.probing = self.probing, False
            self.open_until = self.now() + self.cooldown_seconds
            self.opened += 1
            log.warning(
                "%s: %s; circuit breaker open for %g s",
                self.name,
                "the probe failed" if was_probe else f"{self.consecutive} failures in a row",
                self.cooldown_seconds,
            )
            return True
        return False

    def _answered(self) -> None:
        if self.open_until is not None:
            log.info("%s: the provider answers again; circuit breaker closed", self.name)
        self.consecutive = 0
        self.open_until = None
        self.probing = False
