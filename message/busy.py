"""When she is too busy to answer everyone: a bounded number of answers prepared at once, a
bounded queue of answers waiting for a turn, and past it the oldest waiting answer is given up
(shed) so the newest are answered. Only answers are shed: every message was recorded before it
asked for a turn. An overload costs one log line, saying how many answers it shed, when it ends
(and once a minute while it lasts)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable

log = logging.getLogger(__name__)

REPORT_EVERY_SECONDS = 60.0
"""While an overload lasts, how often its line is written."""


class Shed(Exception):
    """This answer was given up: too many were waiting for a turn."""


class AnswerSlots:
    """At most ``concurrent`` answers at once and ``waiting`` in line (first come, first served)."""

    def __init__(
        self,
        concurrent: int,
        waiting: int,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.concurrent = concurrent
        self.waiting = waiting
        self.clock = clock
        self._free = concurrent
        self._line: deque[asyncio.Future[None]] = deque()
        self._quiet: list[asyncio.Future[None]] = []
        self.shed = 0
        """Answers shed in the current overload (reported when it ends)."""
        self.shed_total = 0
        self._since: float | None = None
        self._reported = 0.0

    async def quiet(self, at_most: float) -> None:
        """Return once no answer is being prepared, or after ``at_most`` seconds: background
        work (archiving a conversation window) steps aside for the answers in progress."""
        if self._free >= self.concurrent:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._quiet.append(waiter)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(waiter, at_most)

    @property
    def in_line(self) -> int:
        return sum(1 for f in self._line if not f.done())

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold one answer's turn; raises `Shed` when this answer is given up while waiting."""
        if self._free > 0 and not self._line:
            self._free -= 1
        else:
            waiter = asyncio.get_running_loop().create_future()
            self._line.append(waiter)
            while self.in_line > self.waiting:
                self._shed_oldest()
            try:
                await waiter
            except asyncio.CancelledError:
                # handed a turn just as it was cancelled (a newer message superseded it): pass it on
                if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                    self._release()
                raise
        try:
            yield
        finally:
            self._release()

    def _shed_oldest(self) -> None:
        while self._line:
            oldest = self._line.popleft()
            if not oldest.done():
                oldest.set_exception(Shed())
                self.shed += 1
                self.shed_total += 1
                now = self.clock()
                if self._since is None:
                    self._since, self._reported = now, now
                elif now - self._reported >= REPORT_EVERY_SECONDS:
                    self._report("still busy")
                return

    def _release(self) -> None:
        while self._line:
            waiter = self._line.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the turn passes straight to the next in line
                return
        self._free += 1
        if self._free >= self.concurrent:
            quiet, self._quiet = self._quiet, []
            for waiter in quiet:
                if not waiter.done():
                    waiter.set_result(None)
        if self._since is not None:
            self._report("busy")
            self._since = None

    def _report(self, what: str) -> None:
        now = self.clock()
        log.warning(
            "%s: %d answer%s given up in %.0f s (more than %d waiting for a turn); every message "
            "was recorded",
            what,
            self.shed,
            "" if self.shed == 1 else "s",
            now - (self._since or now),
            self.waiting,
        )
        self.shed = 0
        self._since = self._reported = now
