"""`yuiju memory reindex`: rewrite the memory store in the current layout, losing nothing.

Every point is copied with its payload into a fresh store of the current layout (dense +
lexical, `memory.vectors`), its lexical vector computed from the stored text. The dense vector
is copied as stored when the model is unchanged — the store records the embedder's name; a store
from before that record is taken to be the configured model's when the vector size matches — and
re-embedded from the stored text otherwise (or with ``re_embed=True``).

Chat memories indexed before lines were read in their conversation (their payload has no
``speaker``) get what `memory.distill.ChatMemories` gives a new line: the line before them in
the same chat (found among the stored points by scope and time, within ``context_minutes``) as
``reply_to``, and as context for both vectors when it asked something, and their speaker's name
(from the embedded ``name: text``). Only those that get a context are re-embedded; the others keep their vector.

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

from yuiju.memory.distill import asks, embedded_chat_text
from yuiju.memory.embeddings import Embedder
from yuiju.memory.lexical import LexicalEncoder
from yuiju.memory.vectors import (
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
STANDARD = (
    "kind",
    "character_id",
    "user_id",
    "group_id",
    "scope",
    "ref",
    "text",
    "time",
    "about_start",
    "about_end",
    "importance",
)

Progress = Callable[[int], None]
"""Called with the number of points just copied."""


@dataclass
class ReindexReport:
    where: str
    points: int = 0
    re_embedded: bool = False
    backup: Path | None = None
    chat_upgraded: int = 0
    """Chat memories given their conversation context (see the module docstring)."""
    chat_re_embedded: int = 0

    def __str__(self) -> str:
        if not self.points:
            return f"{self.where}: nothing stored yet, nothing to re-index"
        how = (
            "re-embedded from their text"
            if self.re_embedded
            else "stored vectors kept (not re-embedded)"
        )
        if self.chat_upgraded and not self.re_embedded:
            how += (
                f"; {self.chat_upgraded} chat memories now read in their conversation, "
                f"{self.chat_re_embedded} of them re-embedded with the line before them"
            )
        kept = (
            f"; the old store is kept at {self.backup} (delete it once satisfied)"
            if self.backup
            else ""
        )
        return f"{self.where}: {self.points} memories re-indexed, {how}{kept}"


def _speaker(payload: dict[str, Any]) -> str:
    """The speaker's name of an old chat point, from its embedded ``name: text``."""
    embedded, text = str(payload.get("embedded_text") or ""), str(payload.get("text", ""))
    return embedded[: -len(text) - 2] if text and embedded.endswith(": " + text) else ""


async def chat_context(
    source: AsyncIterator[list[StoredPoint]], context_minutes: float
) -> dict[str, dict[str, Any]]:
    """Payload additions for the chat points that predate conversation context, by point id."""
    chats: dict[tuple[str, str], list[tuple[float, str, dict[str, Any]]]] = {}
    async for batch in source:
        for p in batch:
            pl = p.payload
            if pl.get("kind") == "chat":
                key = (str(pl.get("character_id", "")), str(pl.get("scope", "")))
                chats.setdefault(key, []).append((float(pl.get("time", 0.0)), p.id, pl))
    out: dict[str, dict[str, Any]] = {}
    for lines in chats.values():
        lines.sort(key=lambda x: (x[0], x[1]))
        for i, (t, pid, pl) in enumerate(lines):
            if "speaker" in pl:
                continue
            doc = {"nickname": _speaker(pl), "text": str(pl.get("text", ""))}
            add: dict[str, Any] = {"speaker": doc["nickname"]}
            if context_minutes and i and t - lines[i - 1][0] <= context_minutes * 60:
                _, before_id, before = lines[i - 1]
                add["reply_to"] = before_id
                if asks(str(before.get("text", ""))):
                    doc["context_text"] = add["context_text"] = str(before.get("text", ""))
                    doc["context_nickname"] = str(before.get("speaker", _speaker(before)))
            embedded = embedded_chat_text(doc)
            if embedded != doc["text"]:
                add["embedded_text"] = embedded
            out[pid] = add
    return out


def _point(p: StoredPoint, vector: list[float], lexical: LexicalEncoder) -> MemoryPoint:
    pl = p.payload
    return MemoryPoint(
        id=p.id,
        vector=vector,
        lexical=lexical.document(str(pl.get("text", "")), str(pl.get("context_text", ""))),
        kind=pl.get("kind", "chat"),
        character_id=str(pl.get("character_id", "")),
        text=str(pl.get("text", "")),
        time=float(pl.get("time", 0.0)),
        about=(float(pl["about_start"]), float(pl["about_end"])) if "about_start" in pl else None,
        importance=float(pl.get("importance", 0.5)),
        scope=str(pl.get("scope", "")),
        user_id=str(pl.get("user_id", "")),
        group_id=str(pl.get("group_id", "")),
        ref=str(pl.get("ref", "")),
        extra={k: v for k, v in pl.items() if k not in STANDARD},
    )


async def copy_points(
    source: AsyncIterator[list[StoredPoint]],
    target: VectorStore,
    *,
    lexical: LexicalEncoder,
    embedder: Embedder | None,
    progress: Progress | None = None,
    chat: dict[str, dict[str, Any]] | None = None,
    context_embedder: Embedder | None = None,
) -> int:
    """Copy every point into ``target``; ``embedder`` given: re-embed each from its text.
    ``chat``: payload additions of old chat points (`chat_context`); those given a context are
    re-embedded with ``context_embedder``."""
    copied = 0
    chat = chat or {}
    async for stored in source:
        batch = [
            StoredPoint(id=p.id, vector=p.vector, payload={**p.payload, **chat[p.id]})
            if p.id in chat
            else p
            for p in stored
        ]
        if embedder is not None:
            texts = [
                str(p.payload.get("embedded_text") or p.payload.get("text", "")) for p in batch
            ]
            vectors = await embedder.embed_documents(texts)
        else:
            vectors = [p.vector for p in batch]
            again = [i for i, p in enumerate(batch) if "context_text" in chat.get(p.id, {})]
            if again and context_embedder is not None:
                fresh = await context_embedder.embed_documents(
                    [str(batch[i].payload["embedded_text"]) for i in again]
                )
                for i, v in zip(again, fresh, strict=True):
                    vectors[i] = v
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
    *,
    url: str | None,
    api_key: str | None,
    collection: str,
    data_dir: Path | None,
    engine: Literal["edge", "local"],
    embedder: Embedder,
    lexical: LexicalEncoder | None = None,
    re_embed: bool = False,
    progress: Callable[[int], Progress] | None = None,
    context_minutes: float = 60.0,
) -> ReindexReport:
    """Re-index the configured store (see the module docstring). ``progress(total)`` returns the
    per-batch callback (e.g. a progress bar's ``update``)."""
    lexical = lexical or LexicalEncoder()
    kind, path = store_location(url=url, collection=collection, data_dir=data_dir, engine=engine)
    if kind == "memory":
        return ReindexReport(where="in-memory store")
    if kind == "edge":
        assert path is not None
        return await _reindex_edge(path, embedder, lexical, re_embed, progress, context_minutes)
    client, name = await QdrantClientStore.connect(
        url=url, api_key=api_key, path=path, collection=collection
    )
    try:
        return await _reindex_client(
            client,
            name,
            collection,
            embedder,
            lexical,
            re_embed,
            progress,
            context_minutes,
            indexes=bool(url),
        )
    finally:
        await client.close()


async def _reindex_edge(
    path: Path,
    embedder: Embedder,
    lexical: LexicalEncoder,
    re_embed: bool,
    progress: Callable[[int], Progress] | None,
    context_minutes: float,
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
        raise VectorStoreError(
            f"cannot open {path} to re-index it (stop `yuiju run` first): {exc}"
        ) from exc
    target_path = path.with_name(path.name + ".reindexing")
    try:
        total = int(old.count(q.CountRequest(exact=True)))
        if not total:
            return report
        report.re_embedded = _must_re_embed(
            _read_meta(path / META_FILE).get("embedder", ""), size, embedder, re_embed
        )
        if target_path.exists():  # left by an interrupted run
            shutil.rmtree(target_path)
        chat = await chat_context(_edge_records(old, BATCH), context_minutes)
        _count_upgrades(report, chat)
        target = await asyncio.to_thread(
            EdgeVectorStore.open, target_path, embedder.dim, embedder=embedder.name
        )
        try:
            report.points = await copy_points(
                _edge_records(old, BATCH),
                target,
                lexical=lexical,
                embedder=embedder if report.re_embedded else None,
                progress=progress(total) if progress else None,
                chat=chat,
                context_embedder=embedder,
            )
            copied = await target.count()
        finally:
            await target.close()
        if copied != total:
            raise VectorStoreError(
                f"re-index of {path} copied {copied} of {total} memories; the store is unchanged"
            )
    finally:
        old.close()
    report.backup = await asyncio.to_thread(_swap, path, target_path)
    return report


def _count_upgrades(report: ReindexReport, chat: dict[str, dict[str, Any]]) -> None:
    report.chat_upgraded = len(chat)
    report.chat_re_embedded = (
        0 if report.re_embedded else sum(1 for add in chat.values() if "context_text" in add)
    )


def _swap(path: Path, replacement: Path) -> Path:
    """Put ``replacement`` at ``path``; the old directory is kept under a dated name (returned)."""
    backup = path.with_name(f"{path.name}.before-reindex-{datetime.now(UTC):%Y%m%d%H%M%S}")
    n = 1
    while backup.exists():  # re-indexed twice within a second
        backup, n = (
            path.with_name(f"{path.name}.before-reindex-{datetime.now(UTC):%Y%m%d%H%M%S}-{n}"),
            n + 1,
        )
    path.rename(backup)
    replacement.rename(path)
    return backup


async def _reindex_client(
    client: Any,
    name: str,
    collection: str,
    embedder: Embedder,
    lexical: LexicalEncoder,
    re_embed: bool,
    progress: Callable[[int], Progress] | None,
    context_minutes: float,
    *,
    indexes: bool,
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
    size = (
        vectors[DENSE].size
        if isinstance(vectors, dict) and DENSE in vectors
        else vectors.size
        if isinstance(vectors, models.VectorParams)
        else 0
    )
    report.re_embedded = _must_re_embed(
        (info.config.metadata or {}).get("embedder", ""), size, embedder, re_embed
    )
    staging = f"{collection}_reindexing"
    if await client.collection_exists(staging):  # left by an interrupted run
        await client.delete_collection(staging)
    await QdrantClientStore._prepare(
        client, staging, embedder.dim, embedder.name, name, indexes=indexes
    )
    source = QdrantClientStore(client, collection, size, name)
    copy = QdrantClientStore(client, staging, embedder.dim, name)
    chat = await chat_context(source.points(BATCH), context_minutes)
    _count_upgrades(report, chat)
    bar = progress(2 * total) if progress else None
    await copy_points(
        source.points(BATCH),
        copy,
        lexical=lexical,
        embedder=embedder if report.re_embedded else None,
        progress=bar,
        chat=chat,
        context_embedder=embedder,
    )
    if (copied := await copy.count()) != total:
        raise VectorStoreError(
            f"re-index of {name} copied {copied} of {total} memories; the collection is unchanged"
        )
    await client.delete_collection(collection)
    await QdrantClientStore._prepare(
        client, collection, embedder.dim, embedder.name, name, indexes=indexes
    )
    final = QdrantClientStore(client, collection, embedder.dim, name)
    report.points = await copy_points(
        copy.points(BATCH), final, lexical=lexical, embedder=None, progress=bar
    )
    if (back := await final.count()) != total:
        raise VectorStoreError(
            f"re-index of {name}: {back} of {total} memories back; every one is still in {staging!r}"
        )
    await client.delete_collection(staging)
    return report
