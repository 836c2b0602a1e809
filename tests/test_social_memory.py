"""A meeting becomes a memory of each other: the memory worker indexes conversation episodes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from tests.test_memory_services import NOW, FixedClock, service
from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.episodes import Episode
from yuiju.memory.indexer import MemoryWorker
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.vectors import QdrantClientStore, Where
from yuiju.storage.history import HistoryStore


@pytest.fixture
async def semantic() -> AsyncIterator[SemanticMemory]:
    store = await QdrantClientStore.open(collection="t", dim=64, location=":memory:")
    yield SemanticMemory(store, HashingEmbedder(64))
    await store.close()


async def test_the_memory_worker_remembers_whom_she_met_and_what_was_said(
    history: HistoryStore,
    semantic: SemanticMemory,
    redis: object,
) -> None:
    m = await service(history, semantic)
    summary = "悠酱和枫在南风公园聊天；悠酱告诉枫：小林下周要搬家（小林说的）"
    await m.episodes.put(
        Episode.model_validate(
            {
                "_id": "cnv_1",
                "character_id": "yuiju",
                "type": "conversation",
                "time": NOW - timedelta(hours=2),
                "summary": summary,
                "data": {"meeting_id": "mtg_1", "with": [{"id": "kaede", "name": "枫"}]},
            }
        )
    )
    stream = "yuiju:events"
    worker = MemoryWorker(redis, stream, {"yuiju": m}, clock=FixedClock(), block_ms=10)
    await worker.ensure_group()
    talk = {"episode_id": "cnv_1", "meeting_id": "mtg_1", "with": ["kaede"], "summary": summary}
    await redis.xadd(  # type: ignore[attr-defined]
        stream,
        {
            "type": "conversation",
            "character_id": "yuiju",
            "time": NOW.isoformat(),
            "data": json.dumps(talk, ensure_ascii=False),
        },
    )

    assert await worker.run_once(block=False) == 1

    assert await semantic.store.count(Where(eq={"kind": "episode"})) == 1
    found = await m.memory_search("小林搬家", now=NOW, kinds=["episode"])
    assert [r.text for r in found] == [summary]
