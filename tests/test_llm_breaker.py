"""The circuit breaker: during an outage she decides offline at once, and one probe request at a
time finds out whether the provider is back."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TZ
from tests.openai_stub import OpenAIStub, StubError
from yuiju.config import load_config
from yuiju.llm import CircuitBreaker, FunctionChatModel, LLMUnavailable, ask_structured
from yuiju.llm.structured import StructuredOutputFailed
from yuiju.storage.keys import Keys
from yuiju.world.clock import RealClock
from yuiju.world.runtime import make_chat_model, metered_chat_model
from yuiju.world.simulate import simulate

MESSAGES = [{"role": "user", "content": "现在做什么？"}]


class Provider:
    """A model that is down until told otherwise, and a clock the test moves."""

    def __init__(self) -> None:
        self.up = False
        self.now = 1000.0
        self.model = FunctionChatModel(self.answer)

    def answer(self, _messages: list, _schema: object) -> str:
        if not self.up:
            raise LLMUnavailable("HTTP 500")
        return '{"ok": true}'


async def test_after_repeated_failures_it_stops_asking_until_the_cooldown_then_probes_once() -> (
    None
):
    provider = Provider()
    breaker = CircuitBreaker(
        provider.model, failures=3, cooldown_seconds=60, now=lambda: provider.now
    )

    for _ in range(2):
        with pytest.raises(LLMUnavailable) as failed:
            await breaker.complete(MESSAGES)
        assert failed.value.retryable and failed.value.sent
    with pytest.raises(LLMUnavailable, match="circuit breaker open") as third:
        await breaker.complete(MESSAGES)
    assert not third.value.retryable  # this failure opened it: retrying now is pointless
    assert (breaker.state, len(provider.model.calls)) == ("open", 3)

    provider.now += 59
    with pytest.raises(LLMUnavailable, match="not asked") as refused:
        await breaker.complete(MESSAGES)
    assert refused.value.sent is False and len(provider.model.calls) == 3

    provider.now += 1  # the cooldown is over: one probe, which fails and opens it again
    with pytest.raises(LLMUnavailable):
        await breaker.complete(MESSAGES)
    assert (breaker.state, len(provider.model.calls), breaker.opened) == ("open", 4, 2)
    with pytest.raises(LLMUnavailable, match="not asked"):
        await breaker.complete(MESSAGES)

    provider.now += 60
    provider.up = True
    assert (await breaker.complete(MESSAGES)).text == '{"ok": true}'  # the probe answers: closed
    assert breaker.state == "closed" and breaker.consecutive == 0
    await breaker.complete(MESSAGES)
    assert len(provider.model.calls) == 6


async def test_an_answer_between_failures_resets_the_count() -> None:
    provider = Provider()
    breaker = CircuitBreaker(
        provider.model, failures=2, cooldown_seconds=60, now=lambda: provider.now
    )
    with pytest.raises(LLMUnavailable):
        await breaker.complete(MESSAGES)
    provider.up = True
    await breaker.complete(MESSAGES)
    provider.up = False
    with pytest.raises(LLMUnavailable) as failed:
        await breaker.complete(MESSAGES)
    assert failed.value.retryable and breaker.state == "closed"


async def test_a_structured_request_makes_no_attempt_while_the_circuit_is_open() -> None:
    provider = Provider()
    breaker = CircuitBreaker(
        provider.model, failures=2, cooldown_seconds=60, now=lambda: provider.now
    )

    with pytest.raises(StructuredOutputFailed) as first:
        await ask_structured(breaker, MESSAGES, lambda text: text, max_attempts=3)
    assert len(first.value.attempts) == 2  # the second failure opened it: no third request
    with pytest.raises(StructuredOutputFailed) as second:
        await ask_structured(breaker, MESSAGES, lambda text: text, max_attempts=3)
    assert second.value.attempts == [] and len(provider.model.calls) == 2


async def test_in_a_full_outage_decisions_go_offline_and_only_probes_reach_the_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openai_stub: OpenAIStub
) -> None:
    """Before: every decision of an outage cost its 3 attempts (and backoff). Now: 3 requests open
    the circuit, then one probe per cooldown (one simulated hour here)."""
    monkeypatch.chdir(tmp_path)
    openai_stub.handler = lambda _body: StubError(500)
    cfg = load_config(
        environ={},
        overrides={
            "llm": {
                "base_url": openai_stub.base_url,
                "model": "down",
                "breaker_failures": 3,
                "breaker_cooldown_seconds": 3600,
            }
        },
    )

    report = await simulate(cfg, days=1, seed=5, policy="llm", progress=False)

    requests = len(openai_stub.requests)
    assert report["fallbacks"] == report["decisions"] > 10  # she lived the day offline
    assert requests <= 3 + 24 + 1, requests  # the opening three, then at most one probe an hour
    assert report["llm"]["breaker"]["opened"] >= 2 and report["llm"]["breaker"]["rejected"] > 0
    decide = report["llm"]["by_purpose"]["decide"]
    assert decide["calls"] == decide["failed"] == requests


# -- issue 20 item 9: wall time, backoff, logs that say the truth --------------------------------


async def test_at_a_world_speed_the_cooldown_still_runs_on_wall_time(redis: Any) -> None:
    """Before: the cooldown was world time, so at a high --speed it was over at once and every
    decision waited for another timeout of a hanging provider."""
    provider = Provider()
    cfg = load_config(environ={}, overrides={"llm": {"breaker_failures": 1}})
    clock = RealClock(TZ, speed=1_000_000)  # 300 world-seconds pass in 0.3 ms
    model = metered_chat_model(cfg, provider.model, redis=redis, keys=Keys("b"), clock=clock)

    with pytest.raises(LLMUnavailable, match="circuit breaker open"):
        await model.complete(MESSAGES)
    await asyncio.sleep(0.01)  # hours of world time
    with pytest.raises(LLMUnavailable, match="not asked"):
        await model.complete(MESSAGES)
    assert len(provider.model.calls) == 1


async def test_each_failed_probe_doubles_the_wait_up_to_the_cap_and_the_log_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = Provider()
    breaker = CircuitBreaker(
        provider.model,
        failures=1,
        cooldown_seconds=60,
        max_cooldown_seconds=200,
        now=lambda: provider.now,
    )
    waits = []
    with caplog.at_level(logging.WARNING, logger="yuiju.llm.breaker"):
        with pytest.raises(LLMUnavailable):
            await breaker.complete(MESSAGES)
        for _ in range(4):
            wait = breaker.open_until - provider.now  # type: ignore[operator]
            waits.append(wait)
            provider.now += wait - 1
            with pytest.raises(LLMUnavailable, match="not asked"):
                await breaker.complete(MESSAGES)
            provider.now += 1
            with pytest.raises(LLMUnavailable):  # the probe fails
                await breaker.complete(MESSAGES)

    assert waits == [60, 120, 200, 200]
    assert [r.getMessage().rsplit("next probe in ", 1)[-1] for r in caplog.records] == [
        "60 s",
        "120 s",
        "200 s",
        "200 s",
        "200 s",
    ]
    provider.now += 200
    provider.up = True
    await breaker.complete(MESSAGES)  # an answer: back to the first cooldown next time
    provider.up = False
    with pytest.raises(LLMUnavailable):
        await breaker.complete(MESSAGES)
    assert breaker.open_until - provider.now == 60  # type: ignore[operator]


async def test_a_probe_that_is_cancelled_leaves_the_circuit_open() -> None:
    """Before: a cancelled probe (a stop, a caller's timeout) closed nothing and opened nothing,
    so the very next call probed again: probes every few seconds during an outage."""
    now = 1000.0
    hanging = asyncio.Event()

    async def hang(_messages: list, _schema: object) -> str:
        if not hanging.is_set():  # the first request hangs; any later one answers at once
            hanging.set()
            await asyncio.sleep(3600)
        return "{}"

    inner = FunctionChatModel(hang)
    breaker = CircuitBreaker(inner, failures=1, cooldown_seconds=60, now=lambda: now)
    breaker.open_until = now  # an outage: the next call is a probe
    probe = asyncio.create_task(breaker.complete(MESSAGES))
    await hanging.wait()
    probe.cancel()
    with pytest.raises(asyncio.CancelledError):
        await probe

    with pytest.raises(LLMUnavailable, match="not asked"):
        await breaker.complete(MESSAGES)
    assert breaker.state == "open" and len(inner.calls) == 1


async def test_requests_in_flight_when_the_circuit_opens_do_not_open_it_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = Provider()
    release = asyncio.Event()

    async def slow_failure(_messages: list, _schema: object) -> str:
        await release.wait()
        raise LLMUnavailable("timed out")

    breaker = CircuitBreaker(
        FunctionChatModel(slow_failure), failures=1, cooldown_seconds=60, now=lambda: provider.now
    )
    calls = [asyncio.create_task(breaker.complete(MESSAGES)) for _ in range(3)]
    await asyncio.sleep(0)
    release.set()
    with caplog.at_level(logging.WARNING, logger="yuiju.llm.breaker"):
        await asyncio.gather(*calls, return_exceptions=True)

    assert breaker.opened == 1 and len(caplog.records) == 1


@pytest.mark.parametrize(
    ("base_url", "api_key", "warns"),
    [
        ("https://api.deepseek.com/v1", None, True),
        ("https://api.deepseek.com/v1", "sk-1", False),
        ("http://127.0.0.1:8080/v1", None, False),
        ("http://localhost:11434/v1", None, False),
        ("http://192.168.1.20:8000/v1", None, False),  # a server on the local network
    ],
)
def test_a_remote_endpoint_without_an_api_key_warns_at_start_up(
    base_url: str, api_key: str | None, warns: bool, caplog: pytest.LogCaptureFixture
) -> None:
    llm: dict[str, Any] = {"base_url": base_url, **({"api_key": api_key} if api_key else {})}
    cfg = load_config(environ={}, overrides={"llm": llm})
    with caplog.at_level(logging.WARNING, logger="yuiju.world.runtime"):
        make_chat_model(cfg)
    warned = [r.getMessage() for r in caplog.records]
    assert bool(warned) == warns, warned
    if warns:
        [line] = warned
        assert "api_key" in line and "YUIJU_LLM__API_KEY" in line and "deepseek" in line
