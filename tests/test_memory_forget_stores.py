"""Forgetting leaves no bytes behind: the history backends and the vector stores compact."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.semantic import NewMemory, SemanticMemory
from yuiju.memory.vectors import EdgeVectorStore, QdrantClientStore, VectorStore, Where
from yuiju.storage.history import CollectionSpec, HistoryStore
from yuiju.storage.sqlite_history import SqliteHistory

NOTES = CollectionSpec(name="notes", fields=("who",), indexes=(("who",),))
SECRET = "海盐柠檬汽水配方XQ"
T0 = datetime(2026, 9, 1, tzinfo=UTC)


def holding(root: Path, text: str) -> list[str]:
    """Files under ``root`` whose bytes contain ``text`` (UTF-8)."""
    found = subprocess.run(
        ["grep", "-rlaF", text, str(root)], capture_output=True, text=True, check=False
    )
    return found.stdout.split()


async def test_history_compact_keeps_the_rest_on_both_backends(history: HistoryStore) -> None:
    await history.ensure(NOTES)
    await history.put_many(
        NOTES.name, [{"_id": "a", "who": "qq:777", "t": SECRET}, {"_id": "b", "who": "qq:888"}]
    )
    assert await history.delete(NOTES.name, "a")
    await history.compact()
    assert [d["_id"] for d in await history.find(NOTES.name)] == ["b"]


async def test_sqlite_file_and_wal_hold_no_deleted_text_after_compact(tmp_path: Path) -> None:
    store = SqliteHistory.open(tmp_path / "h.sqlite3")
    try:
        await store.ensure(NOTES)
        docs = [{"_id": f"n{i}", "who": "qq:777", "t": f"{SECRET}{i}"} for i in range(300)]
        await store.put_many(NOTES.name, [*docs, {"_id": "keep", "who": "qq:888", "t": "留着"}])
        assert holding(tmp_path, SECRET)
        for doc in docs:
            await store.delete(NOTES.name, doc["_id"])
        await store.compact()
        assert holding(tmp_path, SECRET) == []
        assert await store.get(NOTES.name, "keep") is not None
    finally:
        await store.close()
    assert holding(tmp_path, SECRET) == []


async def remember(store: VectorStore) -> SemanticMemory:
    semantic = SemanticMemory(store, HashingEmbedder(64))
    await semantic.remember(
        [
            NewMemory(
                kind="chat",
                character_id="yuiju",
                text=f"{SECRET} 第{i}次",
                time=T0,
                key=f"c{i}",
                user_id="qq:777",
            )
            for i in range(50)
        ]
        + [
            NewMemory(
                kind="chat",
                character_id="yuiju",
                text="我喜欢下雨天",
                time=T0,
                key="k",
                user_id="qq:888",
            )
        ]
    )
    return semantic


@pytest.mark.parametrize("engine", ["edge", "local"])
async def test_vector_store_files_hold_no_deleted_payload_after_compact(
    tmp_path: Path, engine: str
) -> None:
    store: VectorStore
    if engine == "edge":
        store = EdgeVectorStore.open(tmp_path / "edge", 64)
    else:
        store = await QdrantClientStore.open(collection="m", dim=64, path=tmp_path / "local")
    try:
        semantic = await remember(store)
        await store.close()  # persisted: the text is on disk
        assert holding(tmp_path, SECRET)
        if engine == "edge":
            store = EdgeVectorStore.open(tmp_path / "edge", 64)
        else:
            store = await QdrantClientStore.open(collection="m", dim=64, path=tmp_path / "local")
        semantic = SemanticMemory(store, HashingEmbedder(64))
        await store.delete(Where(eq={"user_id": "qq:777"}))
        await store.compact()
        assert await store.count() == 1
        found = await semantic.recall("下雨天", character_id="yuiju", now=T0, user_id="qq:888")
        assert [r.text for r in found] == ["我喜欢下雨天"]
    finally:
        await store.close()
    assert holding(tmp_path, SECRET) == []


async def test_delete_ids_removes_just_those_points(vector_store: VectorStore) -> None:
    semantic = await remember(vector_store)
    ids = [h.id for h in await vector_store.scroll(Where(eq={"user_id": "qq:777"}), limit=3)]
    await vector_store.delete_ids(ids)
    assert await vector_store.count() == 48
    await vector_store.compact()  # in memory: nothing to do, nothing lost
    assert await semantic.store.count() == 48


async def test_a_write_during_compaction_of_the_edge_store_is_kept(tmp_path: Path) -> None:
    import asyncio

    store = EdgeVectorStore.open(tmp_path / "edge", 64)
    try:
        semantic = await remember(store)
        late = NewMemory(kind="chat", character_id="yuiju", text="晚到的一句", time=T0, key="late")
        await asyncio.gather(store.compact(), semantic.remember([late]))
        assert await store.count() == 52
        found = await semantic.recall("晚到的一句", character_id="yuiju", now=T0, every_scope=True)
        assert found and found[0].text == "晚到的一句"
    finally:
        await store.close()
