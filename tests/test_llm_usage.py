"""Every call bounded by its purpose and counted, failed ones included (their prompt estimated),
on the world's day; the daily budget sees them all."""

from __future__ import annotations

import ast
import json
from datetime import datetime
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.conftest import at_time, make_ctx
from tests.openai_stub import OpenAIStub, StubDelay
from yuiju.config import load_config
from yuiju.llm import (
    CallRecord,
    FunctionChatModel,
    LLMUnavailable,
    MeteredModel,
    OpenAIChatModel,
    UsageTotals,
    estimate_prompt_tokens,
)
from yuiju.llm.testing import schema_following
from yuiju.memory.ledger import usage_fields, usage_of_day
from yuiju.storage.keys import Keys
from yuiju.world.clock import SimClock
from yuiju.world.decision_schema import decision_schema
from yuiju.world.loader import load_actions
from yuiju.world.simulate import simulate
from yuiju.world.store import decode_doc
from yuiju.world.usage import UsageLedger

ROOT = Path(__file__).resolve().parent.parent
MESSAGES = [
    {"role": "system", "content": "你是悠酱。"},
    {"role": "user", "content": "现在做什么？"},
]


async def test_each_purpose_gets_its_own_bound_unless_the_call_sets_one() -> None:
    inner = FunctionChatModel(lambda _m, _s: "好")
    model = MeteredModel(inner, max_tokens={"decide": 300, "chat": 500}, purpose="chat")

    await model.complete(MESSAGES, purpose="decide")
    await model.complete_tools(MESSAGES)  # the agent loop names no purpose: the default
    await model.for_purpose("diary").complete(MESSAGES)  # none configured: the fallback bound
    await model.complete(MESSAGES, purpose="decide", max_tokens=42)

    assert inner.max_tokens == [300, 500, 600, 42]
    assert inner.purposes == ["decide", "chat", "diary", "decide"]


async def test_a_failed_call_is_counted_with_the_estimated_tokens_of_its_prompt() -> None:
    def down(_messages: list, _schema: object) -> str:
        raise LLMUnavailable("timed out")

    totals = UsageTotals()
    model = MeteredModel(FunctionChatModel(down), sink=totals)

    with pytest.raises(LLMUnavailable):
        await model.complete(MESSAGES, purpose="decide")

    decide = totals.by_purpose["decide"]
    assert (decide.calls, decide.failed) == (1, 1)
    assert (
        decide.prompt_tokens
        == decide.estimated_prompt_tokens
        == estimate_prompt_tokens(MESSAGES)
        > 0
    )


async def test_a_timed_out_http_call_counts_the_prompt_it_sent(openai_stub: OpenAIStub) -> None:
    openai_stub.reply(StubDelay(2.0, "late"))
    records: list[CallRecord] = []

    async def sink(call: CallRecord) -> None:
        records.append(call)

    inner = OpenAIChatModel(
        base_url=openai_stub.base_url, api_key=None, model="m", timeout_seconds=0.2
    )
    try:
        with pytest.raises(LLMUnavailable, match="timed out"):
            await MeteredModel(inner, sink=sink).complete(MESSAGES, purpose="chat")
    finally:
        await inner.aclose()

    [call] = records
    assert (call.ok, call.estimated, call.completion_tokens) == (False, True, 0)
    assert call.prompt_tokens == estimate_prompt_tokens(MESSAGES)
    assert call.max_tokens == 600 and "timed out" in (call.error or "")


async def test_the_ledger_counts_each_call_on_the_worlds_day_by_purpose(
    redis: aioredis.Redis,
) -> None:
    keys = Keys("yuiju")
    clock = SimClock(at_time("2026-09-01 23:59"))
    ledger = UsageLedger(redis, keys, clock)
    ok = CallRecord(
        purpose="decide",
        model="m",
        ok=True,
        error=None,
        prompt_tokens=1200,
        completion_tokens=40,
        estimated=False,
        latency_ms=800.0,
        max_tokens=400,
    )
    failed = CallRecord(
        purpose="decide",
        model="m",
        ok=False,
        error="timed out",
        prompt_tokens=1100,
        completion_tokens=0,
        estimated=True,
        latency_ms=60000.0,
        max_tokens=400,
    )

    await ledger(ok)
    await ledger(failed)
    await ledger(
        CallRecord(
            purpose="chat",
            model="m",
            ok=True,
            error=None,
            prompt_tokens=300,
            completion_tokens=50,
            estimated=False,
            latency_ms=500.0,
            max_tokens=600,
        )
    )

    day = "2026-09-01"
    usage = usage_of_day(day, await redis.hmget(keys.llm_usage, usage_fields(day)))
    assert vars(usage["decide"]) == {
        "calls": 2,
        "failed": 1,
        "prompt_tokens": 2300,
        "completion_tokens": 40,
        "estimated_prompt_tokens": 1100,
        "truncated": 0,
        "unreached": 0,
    }
    assert usage["chat"].calls == 1 and set(usage) == {"decide", "chat"}
    assert await ledger.tokens_on(clock.now()) == 1200 + 40 + 1100 + 300 + 50
    docs = [decode_doc(json.loads(raw)) for raw in await redis.lrange(keys.episode_outbox, 0, -1)]
    assert [d["collection"] for d in docs] == ["llm_calls"] * 3
    second = docs[1]["doc"]
    assert (second["ok"], second["estimated"], second["prompt_tokens"], second["purpose"]) == (
        False,
        True,
        1100,
        "decide",
    )
    assert isinstance(second["time"], datetime) and len({d["doc"]["_id"] for d in docs}) == 3


async def test_the_daily_budget_sees_the_estimated_prompts_of_failed_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider that times out every call: before, each failed call counted 0 tokens and the
    budget never stopped the calls; now they count, and the day's calls stop at the budget."""
    monkeypatch.chdir(tmp_path)
    model = FunctionChatModel(lambda _m, _s: (_ for _ in ()).throw(LLMUnavailable("timed out")))
    cfg = load_config(
        environ={}, overrides={"llm": {"daily_token_budget": 6000, "breaker_failures": 1000}}
    )

    report = await simulate(cfg, days=1, seed=3, policy="llm", chat_model=model, progress=False)

    decide = report["llm"]["by_purpose"]["decide"]
    per_call = decide["estimated_prompt_tokens"] / decide["calls"]
    assert decide["failed"] == decide["calls"] == len(model.calls)
    assert (
        6000 <= decide["estimated_prompt_tokens"] < 6000 + 3 * per_call + 1
    )  # one decision's attempts past it
    assert (
        report["decisions"] > 10 and report["fallbacks"] == report["decisions"]
    )  # she lived on, offline


# -- every call site says what it is for ---------------------------------------------------------


def _llm_calls(tree: ast.AST) -> list[ast.Call]:
    """Calls of ``ask_structured(...)`` and ``<something>.complete(...)`` (not ``complete_tools``,
    the chat agent loop, whose purpose is the chat model's default)."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = (
            func.id
            if isinstance(func, ast.Name)
            else func.attr
            if isinstance(func, ast.Attribute)
            else ""
        )
        if name == "ask_structured" or (name == "complete" and isinstance(func, ast.Attribute)):
            out.append(node)
    return out


def test_every_model_call_in_the_code_names_its_purpose() -> None:
    missing: list[str] = []
    found = 0
    for package in ("world", "memory", "message", "web"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for call in _llm_calls(tree):
                if any(isinstance(a, ast.Name) and a.id in ("ctx", "snap") for a in call.args):
                    continue  # an action's completion (``action.complete(ctx)``), not a model
                found += 1
                if not any(k.arg == "purpose" for k in call.keywords):
                    missing.append(f"{path.relative_to(ROOT)}:{call.lineno}")
    assert found >= 8
    assert missing == [], f"model calls without purpose=: {missing}"


async def test_the_schema_following_fake_is_deterministic_for_a_seed() -> None:
    ctx = make_ctx("2026-09-01 10:00")
    candidates = [a for a in load_actions() if a.available(ctx)]
    schema = decision_schema(candidates, ctx)
    first, again, other = (schema_following(seed)(MESSAGES, schema) for seed in (1, 1, 2))
    assert first == again and json.loads(first)["action"] in {a.name for a in candidates}
    assert isinstance(other, str)
