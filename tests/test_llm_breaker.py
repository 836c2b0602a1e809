"""The circuit breaker: during an outage she decides offline at once, and one probe request at a
time finds out whether the provider is back."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.openai_stub import OpenAIStub, StubError
from yuiju.config import load_config
from yuiju.llm import CircuitBreaker, FunctionChatModel, LLMUnavailable, ask_structured
from yuiju.llm.structured import StructuredOutputFailed
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
