"""The LLM call ledger: one document per model call (tokens, latency, outcome), in history."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from llm.structured import Attempt
from storage.history import CollectionSpec

LLM_CALLS = CollectionSpec(
    name="llm_calls",
    fields=("time", "purpose"),
    indexes=(("time",), ("purpose", "time")),
)


def call_documents(now: datetime, purpose: str, model: str, attempts: list[Attempt]) -> list[dict[str, Any]]:
    """Ledger documents for the attempts of one structured request (deterministic ids)."""
    docs = []
    for n, attempt in enumerate(attempts):
        result = attempt.result
        digest = hashlib.sha1(f"{now.isoformat()}|{purpose}|{n}".encode()).hexdigest()[:20]
        docs.append({
            "_id": f"llm_{digest}",
            "time": now,
            "purpose": purpose,
            "model": result.model if result else model,
            "ok": attempt.error is None,
            "error": attempt.error,
            "prompt_tokens": result.prompt_tokens if result else 0,
            "completion_tokens": result.completion_tokens if result else 0,
            "latency_ms": result.latency_ms if result else None,
        })
    return docs
