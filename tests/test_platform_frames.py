"""Frames an adapter cannot read, on every platform (issues 19 and 21 items 3-4): the real `yuiju bot`
over each platform's real adapter against its fake on loopback (tests/fakes), as in
tests/test_platforms_e2e.py. A frame that is not JSON, nested 100,000 deep, of the wrong shape, or
an event that fits no model costs at most one short log line, never a traceback, never the
connection; a burst of them is rate-limited; a message among elements the adapter cannot read is
answered for the rest of it; and the next mention is answered once.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.fakes import (
    EDGE_FRAMES,
    ELEMENTS_TEXT,
    FeishuFake,
    OneBotFake,
    SatoriFake,
    TelegramFake,
)
from tests.openai_stub import OpenAIStub
from tests.yuiju_e2e import CHAT_REPLY, YuijuOverFake, her_model, replies, yuiju_over

pytestmark = pytest.mark.slow

FAKES = {
    "onebot": OneBotFake,
    "satori": SatoriFake,
    "telegram": TelegramFake,
    "feishu": FeishuFake,
}
LINE = 400
"""The longest a line about one bad frame may be (its time, level and logger name included)."""
BURST = 40
LOUD = re.compile(r"\[(WARNING|ERROR|CRITICAL)\]|Traceback|never retrieved")
"""What a line the operator is shown for something wrong looks like in the app's log."""


@pytest.fixture(scope="module")
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub(handler=her_model) as running:
        yield running


@pytest.fixture(scope="module", params=list(FAKES))
async def bot(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    stub: OpenAIStub,
    redis_url: str,
) -> AsyncIterator[YuijuOverFake]:
    name = request.param
    workdir = tmp_path_factory.mktemp(f"frames-{name}")
    async with (
        FAKES[name]() as fake,
        yuiju_over(
            fake, workdir, stub=stub, redis_url=redis_url, prefix=f"frames{name}"
        ) as running,
    ):
        yield running


async def mention_is_answered_once(bot: YuijuOverFake, text: str) -> None:
    await bot.fake.send_group_message(text, user=bot.setup.user, mention_bot=True)
    sent = [(s.chat, s.text) for s in await replies(bot)]
    assert sent == [(bot.setup.group, CHAT_REPLY)], bot.tail()


def loud_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if LOUD.search(line)]


def connections(bot: YuijuOverFake) -> int | None:
    """How many times the app has connected to the fake, where the platform has connections."""
    if isinstance(bot.fake, SatoriFake):
        return bot.fake.connections
    return None


async def test_frames_that_cannot_be_read_cost_one_short_line_each_and_keep_the_connection(
    bot: YuijuOverFake,
) -> None:
    # a mention first: she is up, and Satori has an event to resume from if it reconnects
    await mention_is_answered_once(bot, "在吗")
    before, connected = len(bot.log()), connections(bot)
    for kind in EDGE_FRAMES:
        await bot.fake.send_bad_frame(kind)
    await mention_is_answered_once(bot, "还在吗")
    window = bot.log()[before:]
    assert "Traceback" not in window, window[-6000:]
    lines = loud_lines(window)
    assert len(lines) <= len(EDGE_FRAMES), "\n".join(lines)
    assert all(len(line) <= LINE for line in lines), "\n".join(lines)
    assert connections(bot) == connected, window[-4000:]  # no reconnect: the socket stayed


async def test_a_message_among_elements_the_adapter_cannot_read_is_answered_for_the_rest(
    bot: YuijuOverFake,
) -> None:
    asked, before = len(bot.stub.requests), len(bot.log())
    await bot.fake.send_bad_frame("elements")
    sent = [(s.chat, s.text) for s in await replies(bot)]
    window = bot.log()[before:]
    assert sent == [(bot.setup.group, CHAT_REPLY)], window[-6000:]
    [request] = bot.stub.requests[asked:]
    assert ELEMENTS_TEXT in request["messages"][-1]["content"]
    assert "Traceback" not in window, window[-6000:]
    lines = loud_lines(window)
    # one line for the parts left out; on Satori one more for the quote it could not fetch
    most = 2 if isinstance(bot.fake, SatoriFake) else 1
    assert len(lines) <= most and all(len(line) <= LINE for line in lines), "\n".join(lines)


async def test_a_burst_of_bad_frames_is_rate_limited_and_the_next_mention_answered(
    bot: YuijuOverFake,
) -> None:
    before, connected = len(bot.log()), connections(bot)
    # Telegram's queued bad updates all come in one answer; other bad answers each cost a pause
    kind = "shape" if isinstance(bot.fake, TelegramFake) else "garbage"
    for _ in range(BURST):
        await bot.fake.send_bad_frame(kind)
    await mention_is_answered_once(bot, "都还好吗")
    window = bot.log()[before:]
    assert "Traceback" not in window, window[-6000:]
    lines = loud_lines(window)
    assert len(lines) <= 12, "\n".join(lines)
    assert connections(bot) == connected


async def test_she_stops_with_no_traceback_in_her_log(bot: YuijuOverFake) -> None:
    assert await bot.stop() == 0, bot.tail()
    log = bot.log()
    assert "Traceback" not in log and "never retrieved" not in log, log[-6000:]
