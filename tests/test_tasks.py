"""Stopping a background task within a bound, and the event-loop lag monitor (yuiju_tasks)."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from yuiju.tasks import LoopLagMonitor, finish


async def test_a_task_that_swallows_its_cancellation_does_not_hold_the_stop() -> None:
    # redis-py can swallow a cancellation mid-command (redis/redis-py#2028): the stop moves on
    release = asyncio.Event()

    async def stubborn() -> None:
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                continue

    task = asyncio.create_task(stubborn())
    started = time.monotonic()
    assert not await finish(task, grace=0.1, what="stubborn")
    assert time.monotonic() - started < 0.5
    release.set()  # the command it was in ends by itself, as the stop assumed
    await task


async def test_a_task_that_stops_when_asked_is_not_cancelled() -> None:
    stop = asyncio.Event()

    async def polite() -> str:
        await stop.wait()
        return "done"

    task = asyncio.create_task(polite())
    stop.set()
    assert await finish(task, grace=1.0)
    assert task.result() == "done"


async def test_a_blocking_call_on_the_event_loop_is_logged_with_its_length(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="yuiju")
    monitor = LoopLagMonitor(200, interval=0.02).start()
    await asyncio.sleep(0.05)
    time.sleep(0.4)  # noqa: ASYNC251 (the point: something blocks the loop)
    await asyncio.sleep(0.1)
    await monitor.stop()
    [line] = [r.getMessage() for r in caplog.records if "event loop stalled" in r.getMessage()]
    assert monitor.stalls == 1 and 350 <= monitor.worst_ms < 1000, line
