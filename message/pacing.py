"""How long she takes to send each line of an answer, as a person typing in a chat would.

Her first line comes no sooner than reading the message and typing that line would take — the
time the model took counts toward it, so a slow model adds no wait. Every further line waits a
beat and its own typing time. Each wait varies a little (a seeded generator: the same seed gives
the same waits) and never exceeds ``[chat] max_pause_seconds``.

Pacing is a dependency of the chat side (`message.deps.ChatDeps.pacing`): `message.bot` builds it
from ``[chat]`` for the running bot; tests and benchmarks leave it out (no waits) unless they pass
one, with their own ``sleep``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from yuiju.config import ChatConfig

BEAT_SECONDS = 0.5
"""Between two lines, besides typing the second: a glance at what she wrote, the send button."""
JITTER = 0.2
"""Each wait is its length times a factor drawn from [1 - JITTER, 1 + JITTER]."""

Sleep = Callable[[float], Awaitable[None]]


@dataclass
class Pacing:
    typing_chars_per_second: float
    reading_chars_per_second: float
    max_seconds: float
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    """Draws the jitter: seeded, so the waits of a run can be replayed."""
    sleep: Sleep = asyncio.sleep
    """How a wait is waited (a test's fake records it instead)."""

    @classmethod
    def from_config(cls, cfg: ChatConfig, *, seed: int | str = 0) -> Pacing | None:
        """Her pacing from ``[chat]``; None when ``max_pause_seconds`` is 0 (every line at once)."""
        if cfg.max_pause_seconds <= 0:
            return None
        return cls(
            typing_chars_per_second=cfg.chars_per_second,
            reading_chars_per_second=cfg.read_chars_per_second,
            max_seconds=cfg.max_pause_seconds,
            rng=random.Random(f"pacing:{seed}"),
        )

    def _jittered(self, seconds: float) -> float:
        return seconds * self.rng.uniform(1 - JITTER, 1 + JITTER)

    def first_delay(self, message: str, line: str, *, elapsed: float) -> float:
        """Seconds to wait before her first line answering ``message``, ``elapsed`` seconds after
        it arrived: reading it and typing the line, less the time already gone."""
        needed = self._jittered(
            len(message) / self.reading_chars_per_second + len(line) / self.typing_chars_per_second
        )
        return min(self.max_seconds, max(0.0, needed - max(0.0, elapsed)))

    def next_delay(self, line: str) -> float:
        """Seconds to wait before a further line: a beat and typing it."""
        needed = self._jittered(BEAT_SECONDS + len(line) / self.typing_chars_per_second)
        return min(self.max_seconds, needed)

    async def wait(self, seconds: float) -> None:
        if seconds > 0:
            await self.sleep(seconds)
