"""The LLM call ledger: one document per model call (tokens, latency, outcome), in history, and
the daily usage counters in Redis (``Keys.llm_usage``) that the budget and the observer read."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from yuiju.llm.usage import PURPOSES, CallRecord, Usage
from yuiju.storage.history import CollectionSpec

LLM_CALLS = CollectionSpec(
    name="llm_calls",
    fields=("time", "purpose"),
    indexes=(("time",), ("purpose", "time")),
)

COUNTERS = (
    "calls",
    "failed",
    "prompt_tokens",
    "completion_tokens",
    "estimated_prompt_tokens",
    "truncated",
    "unreached",
)
"""The `Usage` fields counted per day and purpose."""


def call_document(now: datetime, call: CallRecord) -> dict[str, Any]:
    """The ledger document of one call. Its id is drawn once, so replaying the outbox entry that
    carries it writes it once."""
    return {
        "_id": f"llm_{uuid.uuid4().hex[:20]}",
        "time": now,
        "purpose": call.purpose,
        "model": call.model,
        "ok": call.ok,
        "error": call.error,
        "prompt_tokens": call.prompt_tokens,
        "completion_tokens": call.completion_tokens,
        "estimated": call.estimated,
        "latency_ms": call.latency_ms,
        "max_tokens": call.max_tokens,
        "truncated": call.truncated,
    }


def usage_increments(day: str, call: CallRecord) -> dict[str, int]:
    """The counters one call adds to the day's usage hash: ``{day}:tokens`` (everything, the
    budget reads it), ``{day}:calls``, and ``{day}:{purpose}:{counter}`` for each of `COUNTERS`."""
    if not call.reached:  # not a call, no tokens: counted apart
        return {f"{day}:{call.purpose}:unreached": 1}
    one = Usage()
    one.add(call)
    out = {f"{day}:tokens": call.prompt_tokens + call.completion_tokens, f"{day}:calls": 1}
    out |= {f"{day}:{call.purpose}:{name}": getattr(one, name) for name in COUNTERS}
    return out


def usage_fields(day: str) -> list[str]:
    """The usage hash's fields of ``day`` for every known purpose (read them with ``HMGET``)."""
    return [f"{day}:{purpose}:{name}" for purpose in PURPOSES for name in COUNTERS]


def usage_of_day(day: str, values: list[str | None]) -> dict[str, Usage]:
    """The day's usage by purpose from the values of `usage_fields` (purposes without calls are
    left out)."""
    out: dict[str, Usage] = {}
    for field, value in zip(usage_fields(day), values, strict=True):
        if value is not None:
            _, purpose, name = field.split(":")
            setattr(out.setdefault(purpose, Usage()), name, int(value))
    return {p: u for p, u in out.items() if u.calls or u.unreached}
