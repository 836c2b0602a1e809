"""Benchmark the embedded history store: put and indexed find at a realistic size.

    python bench/history_bench.py [--docs 20000] [--backend sqlite|mongomock]

The design budget (ARCHITECTURE.md): SQLite with an index measured 0.03 ms per insert and
0.016 ms per indexed range query; Mongo-API emulations were hundreds of ms. mongomock is an
in-memory test double without real indexes, shown for contrast only.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from yuiju.storage.history import CollectionSpec, HistoryStore
from yuiju.storage.mongo_history import MongoHistory
from yuiju.storage.sqlite_history import SqliteHistory

EPISODES = CollectionSpec(
    name="episodes",
    fields=("character_id", "type", "time"),
    indexes=(("character_id", "time"), ("character_id", "type", "time")),
)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def run(store: HistoryStore, docs: int, queries: int) -> None:
    await store.ensure(EPISODES)
    started = time.perf_counter()
    for n in range(docs):
        await store.put(
            "episodes",
            {
                "_id": f"ep-{n}",
                "character_id": f"c{n % 3}",
                "type": ("behavior", "plan", "conversation")[n // 3 % 3],
                "time": T0 + timedelta(minutes=n),
                "detail": {"action": "walk_in_park", "mood": n % 100, "at": T0},
            },
        )
    put_ms = (time.perf_counter() - started) * 1000 / docs

    started = time.perf_counter()
    for q in range(queries):
        low = T0 + timedelta(minutes=(q * 7919) % docs)
        await store.find(
            "episodes",
            eq={"character_id": "c1"},
            ranges={"time": (low, low + timedelta(hours=6))},
            sort="time",
            descending=True,
            limit=10,
        )
    find_ms = (time.perf_counter() - started) * 1000 / queries
    print(f"{store.backend:7} {docs} docs: put {put_ms:.3f} ms/doc, indexed find {find_ms:.3f} ms")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--backend", choices=["sqlite", "mongomock"], default="sqlite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store: HistoryStore
        if args.backend == "sqlite":
            store = SqliteHistory.open(Path(tmp) / "history.sqlite3")
        else:
            from mongomock_motor import AsyncMongoMockClient

            client = AsyncMongoMockClient(tz_aware=True)
            store = MongoHistory(client["bench"], client=client, description="mongomock")
        try:
            await run(store, args.docs, args.queries)
        finally:
            await store.close()


if __name__ == "__main__":
    asyncio.run(main())
