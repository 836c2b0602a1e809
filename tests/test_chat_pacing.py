"""Pacing (issue 19, stickers and pacing): her lines arrive as a person sends them — the first no
sooner than reading the message and typing it take (the model's time counts), each further line
after a beat and its typing time, with a little seeded jitter, never longer than the cap; and no
waiting at all in tests and benchmarks unless they ask. Time is a fake here: nothing sleeps."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta
from typing import Any

import pytest

from tests.chatkit import RecordingSender, make_service
from tests.conftest import at_time
from tests.test_message_service import GROUP, FakeWorld, Kit, make_kit
from yuiju.config import ChatConfig, GroupPolicy
from yuiju.llm import FunctionChatModel
from yuiju.message.pacing import BEAT_SECONDS, JITTER, Pacing
from yuiju.world.clock import SimClock


class Clock(SimClock):
    """A simulated clock a test moves by hand (a slow model, a wait passing)."""

    def advance(self, by: timedelta) -> None:
        self._now += by


THREE_LINES = "刚到家，有点累\n今天在图书馆看了一下午的书\n晚上想吃咖喱"


class FakeSleep:
    """Records every wait instead of waiting (moving ``clock`` on); ``during`` runs at each."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.waits: list[float] = []
        self.clock = clock
        self.during: Any = None

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.clock is not None:
            self.clock.advance(timedelta(seconds=seconds))
        if self.during is not None:
            await self.during()


def pacing(sleep: FakeSleep, *, seed: int = 1, cap: float = 8.0) -> Pacing:
    return Pacing(
        typing_chars_per_second=5.0,
        reading_chars_per_second=20.0,
        max_seconds=cap,
        rng=random.Random(seed),
        sleep=sleep,
    )


async def paced_kit(redis: Any, answer: Any, sleep: FakeSleep, clock: Clock, **kw: Any) -> Kit:
    model = FunctionChatModel(answer if callable(answer) else (lambda m, s: answer))
    sender = RecordingSender()
    service = make_service(
        redis,
        cfg=ChatConfig(groups={str(GROUP): GroupPolicy()}),
        clock=clock,
        sender=sender,
        model=model,
        world=FakeWorld(),
        pacing=pacing(sleep, **kw),
    )
    await service.ensure()
    return Kit(service, sender.sent, model)


def within_jitter(wait: float, seconds: float) -> bool:
    return seconds * (1 - JITTER) - 1e-9 <= wait <= seconds * (1 + JITTER) + 1e-9


async def test_each_line_waits_reading_and_typing_time_with_seeded_jitter(redis: Any) -> None:
    clock = Clock(at_time("2026-09-01 10:00"))
    sleep = FakeSleep(clock)
    kit = await paced_kit(redis, THREE_LINES, sleep, clock)
    question = "今天过得怎么样？"
    await kit.say(question, at=True)
    lines = THREE_LINES.split("\n")
    assert [t for _, _, t in kit.sent] == lines
    first, *further = sleep.waits
    asked = f"@悠酱 {question}"  # how the message reads to her
    assert within_jitter(first, len(asked) / 20 + len(lines[0]) / 5)
    assert len(further) == 2
    for wait, line in zip(further, lines[1:], strict=True):
        assert within_jitter(wait, BEAT_SECONDS + len(line) / 5)
    again = FakeSleep()
    replay = pacing(again)
    replay.first_delay(asked, lines[0], elapsed=0)
    assert [
        replay.next_delay(line) for line in lines[1:]
    ] == further  # the same seed, the same waits


async def test_the_time_the_model_took_counts_toward_her_first_line(redis: Any) -> None:
    clock = Clock(at_time("2026-09-01 10:00"))
    sleep = FakeSleep(clock)

    def slow_model(messages: Any, schema: Any) -> str:
        clock.advance(timedelta(seconds=20))  # a slow provider
        return "在的"

    kit = await paced_kit(redis, slow_model, sleep, clock)
    await kit.say("在吗", at=True)
    assert [t for _, _, t in kit.sent] == ["在的"]
    assert sleep.waits == []  # twenty seconds already passed: no more waiting


async def test_no_wait_is_longer_than_the_cap(redis: Any) -> None:
    clock = Clock(at_time("2026-09-01 10:00"))
    sleep = FakeSleep(clock)
    long_line = "这是一句很长很长的话" * 3
    kit = await paced_kit(redis, f"{long_line}\n{long_line}", sleep, clock, cap=2.0)
    await kit.say("在吗" * 50, at=True)
    assert sleep.waits == [2.0, 2.0]


async def test_a_newer_message_during_a_pause_stops_the_rest(redis: Any) -> None:
    clock = Clock(at_time("2026-09-01 10:00"))
    sleep = FakeSleep(clock)
    typing, held = asyncio.Event(), asyncio.Event()
    answers = [THREE_LINES, "好的"]
    kit = await paced_kit(redis, lambda m, s: answers.pop(0), sleep, clock)

    async def hold_before_the_second_line() -> None:
        if len(sleep.waits) == 2:
            typing.set()
            await held.wait()  # she is typing her second line...

    sleep.during = hold_before_the_second_line
    first = asyncio.create_task(kit.service.handle(kit.entry("今天过得怎么样？", at=True)))
    await typing.wait()
    await kit.say("等一下", at=True, minutes=1)  # ...when a newer message comes
    outcome = await first
    assert outcome.reason == "superseded by a newer message"
    assert [t for _, _, t in kit.sent] == ["刚到家，有点累", "好的"]


async def test_tests_and_benchmarks_wait_for_nothing_unless_they_ask(redis: Any) -> None:
    kit = await make_kit(redis, fn=lambda m, s: THREE_LINES)
    assert kit.service.deps.pacing is None
    await kit.say("今天过得怎么样？", at=True)
    assert len(kit.sent) == 3
    assert Pacing.from_config(ChatConfig(max_pause_seconds=0)) is None
    built = Pacing.from_config(ChatConfig(), seed=7)
    assert built is not None and built.max_seconds == 8.0
    assert built.typing_chars_per_second == 5.0 and built.reading_chars_per_second == 20.0


@pytest.mark.parametrize("seed", [1, 2])
def test_the_same_seed_gives_the_same_waits(seed: int) -> None:
    cfg = ChatConfig()
    a, b = Pacing.from_config(cfg, seed=seed), Pacing.from_config(cfg, seed=seed)
    assert a is not None and b is not None
    lines = ["嗯嗯", "今天去了公园", "好开心"]
    assert [a.next_delay(line) for line in lines] == [b.next_delay(line) for line in lines]
