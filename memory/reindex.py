"""`yuiju memory reindex`: rewrite the memory store in the current layout, losing nothing.

Every point is copied with its payload into a fresh store of the current layout (dense +
lexical, `memory.vectors`), its lexical vector computed from the stored text. The dense vector
is copied as stored when the model is unchanged — the store records the embedder's name; a store
from before that record is taken to be the configured model's when the vector size matches — and
re-embedded from the stored text otherwise (or with ``re_embed=True``).

Nothing is deleted before its copy is complete and counted:

- embedded (qdrant-edge): the copy is built next to the store, then the old directory is
  renamed to ``<name>.before-reindex-<time>`` (kept: delete it once satisfied) and the copy
  takes its place;
- Qdrant server or local mode: the copy goes to ``<collection>_reindexing``; once it holds every
  point, the collection is recreated in the new layout, filled from the copy, counted, and only
  then the copy is dropped. An interrupted run is simply run again.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from memory.embeddings import Embedder
from memory.lexical import LexicalEncoder
from memory.vectors import (
    DENSE,
    META_FILE,
    EdgeVectorStore,
    MemoryPoint,
    QdrantClientStore,
    StoredPoint,
    VectorStore,
    VectorStoreError,
    _edge_records,
    _read_meta,
    store_location,
)

BATCH = 256
STANDARD = ("kind", "character_id", "user_id", "group_id", "scope", "ref", "text", "time", "importance")

Progress = Callable[[int], None]
"""Called with the number of points just copied."""


@dataclass
class ReindexReport:
    where: str
    points: int = 0
    re_embedded: bool = False
    backup: Path | None = None

    def __str__(self) -> str:
        if not self.points:
            return f"{self.where}: nothing stored yet, nothing to re-index"
        how = "re-embedded from their text" if self.re_embedded else "stored vectors kept (not re-embedded)"
        kept = f"; the old store is kept at {self.backup} (delete it once satisfied)" if self.backup else ""
        return f"{self.where}: {self.points} memories re-indexed, {how}{kept}"


def _point(p: StoredPoint, vector: list[float], lexical: LexicalEncoder) -> MemoryPoint:
    pl = p.payload
    return MemoryPoint(
        id=p.id, vector=vector, lexical=lexical.document(str(pl.get("text", ""))),
        kind=pl.get("kind", "chat"), character_id=str(pl.get("character_id", "")), text=str(pl.get("text", "")),
        time=float(pl.get("time", 0.0)), importance=float(pl.get("importance", 0.5)), scope=str(pl.get("scope", "")),
        user_id=str(pl.get("user_id", "")), group_id=str(pl.get("group_id", "")), ref=str(pl.get("ref", "")),
        extra={k: v for k, v in pl.items() if k not in STANDARD},
    )


async def copy_points(
    source: AsyncIterator[list[StoredPoint]], target: VectorStore, *, lexical: LexicalEncoder,
    embedder: Embedder | None, progress: Progress | None = None,
) -> int:
    """Copy every point into ``target``; ``embedder`` given: re-embed each from its text."""
    copied = 0
    async for batch in source:
        if embedder is not None:
            texts = [str(p.payload.get("embedded_text") or p.payload.get("text", "")) for p in batch]
            vectors = await embedder.embed_documents(texts)
        else:
            vectors = [p.vector for p in batch]
        await target.upsert([_point(p, v, lexical) for p, v in zip(batch, vectors, strict=True)])
        copied += len(batch)
        if progress:
            progress(len(batch))
    return copied


def _must_re_embed(stored_name: str, stored_size: int, embedder: Embedder, forced: bool) -> bool:
    if forced or stored_size != embedder.dim:
        return True
    return bool(stored_name) and stored_name != embedder.name


async def reindex_store(
    *, url: str | None, api_key: str | None, collection: str, data_dir: Path | None,
    engine: Literal["edge", "local"], embedder: Embedder, lexical: LexicalEncoder | None = None,
    re_embed: bool = False, progress: Callable[[int], Progress] | None = None,
) -> ReindexReport:
    """Re-index the configured store (see the module docstring). ``progress(total)`` returns the
    per-batch callback (e.g. a progress bar's ``update``)."""
    lexical = lexical or LexicalEncoder()
    kind, path = store_location(url=url, collection=collection, data_dir=data_dir, engine=engine)
    if kind == "memory":
        return ReindexReport(where="in-memory store")
    if kind == "edge":
        assert path is not None
        return await _reindex_edge(path, embedder, lexical, re_embed, progress)
    client, name = await QdrantClientStore.connect(url=url, api_key=api_key, path=path, collection=collection)
    try:
        return await _reindex_client(client, name, collection, embedder, lexical, re_embed, progress, indexes=bool(url))
    finally:
        await client.close()


async def _reindex_edge(
    path: Path, embedder: Embedder, lexical: LexicalEncoder, re_embed: bool,
    progress: Callable[[int], Progress] | None,
) -> ReindexReport:
    import json

    import qdrant_edge as q

    report = ReindexReport(where=f"qdrant-edge {path}")
    config_file = path / "edge_config.json"
    if not config_file.exists():
        return report
    vectors = json.loads(config_file.read_text(encoding="utf-8")).get("vectors") or {}
    size = int((vectors.get(DENSE) or vectors.get("") or {}).get("size", 0))
    try:
        old = await asyncio.to_thread(q.EdgeShard.load, str(path))
    except Exception as exc:
        raise VectorStoreError(f"cannot open {path} to re-index it (stop `yuiju run` first): {exc}") from exc
    target_path = path.with_name(path.name + ".reindexing")
    try:
        total = int(old.count(q.CountRequest(exact=True)))
        if not total:
            return report
        report.re_embedded = _must_re_embed(_read_meta(path / META_FILE).get("embedder", ""), size, embedder, re_embed)
        if target_path.exists():  # left by an interrupted run
            shutil.rmtree(target_path)
        target = await asyncio.to_thread(EdgeVectorStore.open, target_path, embedder.dim, embedder=embedder.name)
        try:
            report.points = await copy_points(
                _edge_records(old, BATCH), target, lexical=lexical,
                embedder=embedder if report.re_embedded else None, progress=progress(total) if progress else None)
            copied = await target.count()
        finally:
            await target.close()
        if copied != total:
            raise VectorStoreError(f"re-index of {path} copied {copied} of {total} memories; the store is unchanged")
    finally:
        old.close()
    report.backup = await asyncio.to_thread(_swap, path, target_path)
    return report


def _swap(path: Path, replacement: Path) -> Path:
    """Put ``replacement`` at ``path``; the old directory is kept under a dated name (returned)."""
    backup = path.with_name(f"{path.name}.before-reindex-{datetime.now(UTC):%Y%m%d%H%M%S}")
    path.rename(backup)
    replacement.rename(path)
    return backup


async def _reindex_client(
    client: Any, name: str, collection: str, embedder: Embedder, lexical: LexicalEncoder, re_embed: bool,
    progress: Callable[[int], Progress] | None, *, indexes: bool,
) -> ReindexReport:
    from qdrant_client import models

    report = ReindexReport(where=name)
    if not await client.collection_exists(collection):
        return report
    total = int((await client.count(collection, exact=True)).count)
    if not total:
        return report
    info = await client.get_collection(collection)
    vectors = info.config.params.vectors
    size = (vectors[DENSE].size if isinstance(vectors, dict) and DENSE in vectors
            else vectors.size if isinstance(vectors, models.VectorParams) else 0)
    report.re_embedded = _must_re_embed((info.config.metadata or {}).get("embedder", ""), size, embedder, re_embed)
    staging = f"{collection}_reindexing"
    if await client.collection_exists(staging):  # left by an interrupted run
        await client.delete_collection(staging)
    await QdrantClientStore._prepare(client, staging, embedder.dim, embedder.name, name, indexes=indexes)
    source = QdrantClientStore(client, collection, size, name)
    copy = QdrantClientStore(client, staging, embedder.dim, name)
    bar = progress(2 * total) if progress else None
    await copy_points(source.points(BATCH), copy, lexical=lexical,
                      embedder=embedder if report.re_embedded else None, progress=bar)
    if (copied := await copy.count()) != total:
        raise VectorStoreError(f"re-index of {name} copied {copied} of {total} memories; the collection is unchanged")
    await client.delete_collection(collection)
    await QdrantClientStore._prepare(client, collection, embedder.dim, embedder.name, name, indexes=indexes)
    final = QdrantClientStore(client, collection, embedder.dim, name)
    report.points = await copy_points(copy.points(BATCH), final, lexical=lexical, embedder=None, progress=bar)
    if (back := await final.count()) != total:
        raise VectorStoreError(f"re-index of {name}: {back} of {total} memories back; every one is still in {staging!r}")
    await client.delete_collection(staging)
    return report
