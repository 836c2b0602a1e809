"""Log lines about bad input, rate-limited: a fuzzer or a broken peer must not fill the disk."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class RateLimitedLog:
    """One line per event, at most ``burst`` lines per ``window`` seconds. Events past the burst
    are counted, and the next line that gets through says how many were left out."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        burst: int = 10,
        window: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.burst = burst
        self.window = window
        self.clock = clock
        self._start = -window
        self._lines = 0
        self.suppressed = 0
        """Events left out since the last line."""

    def __call__(self, level: int, message: str, *args: object, exc_info: bool = False) -> bool:
        """Log ``message % args`` unless over the burst; True when it was logged."""
        now = self.clock()
        if now - self._start >= self.window:
            self._start, self._lines = now, 0
        if self._lines >= self.burst:
            self.suppressed += 1
            return False
        self._lines += 1
        if self.suppressed:
            message += f" (and {self.suppressed} more like it not logged)"
            self.suppressed = 0
        self.logger.log(level, message, *args, exc_info=exc_info)
        return True

    def reset(self) -> None:
        self._start, self._lines, self.suppressed = -self.window, 0, 0
