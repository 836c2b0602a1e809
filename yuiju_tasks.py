"""asyncio housekeeping shared by every yuiju process: stopping a background task within a
bound, and the event-loop lag monitor (``[app] loop_lag_warn_ms``). Imports nothing of ours.

A stop must be prompt whatever a task is doing: waiting on a model call, or inside a Redis
command whose cancellation redis-py may swallow (redis/redis-py#2028, #2551). So a task is asked
to stop first (its own stop event), then cancelled, and each step waits a bounded time; a task
that still has not ended is left to end by itself, and the caller moves on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger("yuiju")

STOP_GRACE_SECONDS = 0.5
"""How long a stop waits at each step (asked, then cancelled) for one background task."""


async def finish(
    task: asyncio.Future[Any] | None,
    *,
    grace: float = STOP_GRACE_SECONDS,
    cancel_grace: float | None = None,
    what: str = "task",
) -> bool:
    """Wait up to ``grace`` for ``task`` (already asked to stop), then cancel it and wait up to
    ``cancel_grace`` (default: ``grace``). True when it ended; never raises what the task raised
    (it is logged)."""
    if task is None:
        return True
    if not task.done():
        await asyncio.wait({task}, timeout=grace)
    if not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=grace if cancel_grace is None else cancel_grace)
    if not task.done():
        log.warning("%s still finishing a store command at stop; it ends by itself", what)
        return False
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.warning("%s ended with %s: %s", what, type(exc).__name__, exc)
    return True


async def bounded(step: Callable[[], Awaitable[object]], *, seconds: float, what: str) -> bool:
    """Run one stop step (a closer) for at most ``seconds``; True when it finished. A step that
    fails or overruns is logged and the stop goes on."""
    task = asyncio.ensure_future(step())
    return await finish(task, grace=seconds, cancel_grace=0.2, what=what)


class LoopLagMonitor:
    """A task that sleeps `interval` seconds and measures how late it wakes: a late wake-up means
    something held the event loop (a blocking call), and every process here serves a page, a bot
    or the world from that one loop. Stalls over ``warn_ms`` are logged with their length."""

    def __init__(self, warn_ms: float, *, interval: float = 0.1) -> None:
        self.warn_ms = warn_ms
        self.interval = interval
        self.worst_ms = 0.0
        """The longest stall seen so far."""
        self.stalls = 0
        """Stalls logged so far."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> LoopLagMonitor:
        if self.warn_ms > 0 and self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._watch(), name="loop-lag-monitor"
            )
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _watch(self) -> None:
        while True:
            started = time.monotonic()
            await asyncio.sleep(self.interval)
            lag_ms = (time.monotonic() - started - self.interval) * 1000
            self.worst_ms = max(self.worst_ms, lag_ms)
            if lag_ms >= self.warn_ms:
                self.stalls += 1
                log.warning(
                    "event loop stalled for %.0f ms (something blocked it; [app] loop_lag_warn_ms)",
                    lag_ms,
                )
