"""The vector store seam: one Qdrant collection of memories, behind a small async protocol.

Two implementations:

- `EdgeVectorStore`: Qdrant's own in-process engine (``qdrant-edge-py``), the embedded default
  under the data dir. Measured in ``bench/memory_bench.py``: a filtered query at 50k points takes
  well under a millisecond, where qdrant-client's local mode scans every point.
- `QdrantClientStore`: ``qdrant-client``'s `AsyncQdrantClient` — a Qdrant server (``url=``), or
  its local mode (``:memory:`` or ``path=``) for comparison.

Every point carries the payload of `MemoryPoint`: ``kind`` (episode, diary, chat, fact, file),
``character_id``, ``user_id``, ``group_id``, ``scope`` (who may recall it), ``time`` (epoch
seconds), ``importance`` (0..1), ``text`` and ``ref`` (the id of the source document), with
payload indexes on each of them.

The vector size is checked when the store is opened: an empty collection of the wrong size is
recreated, one holding data raises `VectorSizeMismatch` and is never dropped.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

MemoryKind = Literal["episode", "diary", "chat", "fact", "file"]

KEYWORD_FIELDS = ("kind", "character_id", "user_id", "group_id", "scope", "ref")
"""Payload fields with a keyword index; filters use only these and the float fields below."""
FLOAT_FIELDS = ("time", "importance")
"""Payload fields with a float index (range filters)."""

PUBLIC = "public"
"""The scope of what anyone talking to her may hear about: her episodes, diary, lore files."""


class VectorStoreError(Exception):
    """The vector store cannot be used; the message says why and what to do."""


class VectorSizeMismatch(VectorStoreError):
    """The collection holds vectors of another size than the embedder produces."""


def point_id(*parts: str) -> str:
    """A deterministic point id (a UUID string, as Qdrant requires) from the source's key."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "yuiju:" + "|".join(parts)))


def user_scope(user_id: str) -> str:
    return f"user:{user_id}"


def group_scope(group_id: str) -> str:
    return f"group:{group_id}"


def private_scope(user_id: str) -> str:
    """What a user said to her in private: recalled only in her private chat with that user."""
    return f"private:{user_id}"


@dataclass(frozen=True, kw_only=True)
class MemoryPoint:
    """One memory as stored: its vector and payload."""

    id: str
    """A `point_id` (deterministic: writing the same memory twice is one point)."""
    vector: list[float]
    kind: MemoryKind
    character_id: str
    text: str
    """What is recalled, and what was embedded."""
    time: float
    """When it happened, epoch seconds (aware datetimes converted by the caller)."""
    importance: float = 0.5
    """0..1; how much it mattered (a nap 0.2, a first date 0.9)."""
    scope: str = PUBLIC
    """``public``, ``user:<id>`` or ``group:<id>``: who may recall it."""
    user_id: str = ""
    """Platform-qualified user id (``qq:12345``) for chat and facts; empty otherwise."""
    group_id: str = ""
    ref: str = ""
    """Id of the source document (episode id, diary id, file path), for updates and deletes."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Further payload (chunk lines, source, ...), stored but not indexed."""

    def payload(self) -> dict[str, Any]:
        return {
            **self.extra,
            "kind": self.kind, "character_id": self.character_id, "user_id": self.user_id,
            "group_id": self.group_id, "scope": self.scope, "ref": self.ref, "text": self.text,
            "time": float(self.time), "importance": float(self.importance),
        }


@dataclass(frozen=True, kw_only=True)
class Where:
    """A conjunctive filter over indexed payload fields."""

    eq: Mapping[str, str | Sequence[str]] = field(default_factory=dict)
    """Keyword field -> value, or a list of values meaning "one of"."""
    time_from: float | None = None
    """Inclusive lower bound of ``time``."""
    time_to: float | None = None
    """Exclusive upper bound of ``time``."""

    def __post_init__(self) -> None:
        for key in self.eq:
            if key not in KEYWORD_FIELDS:
                raise ValueError(f"filter on {key!r}: only indexed fields {KEYWORD_FIELDS} may be filtered")


@dataclass(frozen=True, kw_only=True)
class Hit:
    id: str
    score: float
    """Cosine similarity to the query vector."""
    payload: dict[str, Any]


class VectorStore(Protocol):
    """One collection of memory points."""

    name: str
    """For logs, e.g. 'qdrant-edge /path' or 'qdrant http://host:6333/yuiju_memory'."""
    dim: int

    async def upsert(self, points: Sequence[MemoryPoint]) -> None: ...

    async def query(self, vector: Sequence[float], where: Where, limit: int) -> list[Hit]:
        """The ``limit`` nearest points matching ``where``, best first."""
        ...

    async def scroll(self, where: Where, limit: int = 1000) -> list[Hit]:
        """Points matching ``where`` (score 0), up to ``limit``."""
        ...

    async def count(self, where: Where | None = None) -> int: ...

    async def set_payload(self, ids: Sequence[str], payload: Mapping[str, Any]) -> None: ...

    async def delete(self, where: Where) -> None: ...

    async def close(self) -> None: ...


# -- qdrant-edge-py -------------------------------------------------------------------------------


class EdgeVectorStore:
    """Qdrant Edge: Qdrant's engine in this process, persisted at ``path``.

    One process may open a path at a time (the WAL is locked); a second gets `VectorStoreError`.
    The engine's calls are synchronous and fast; writes run in a worker thread.
    """

    def __init__(self, shard: Any, path: Path | None, dim: int) -> None:
        self._shard = shard
        self.path = path
        self.dim = dim
        self.name = f"qdrant-edge {path}"

    @classmethod
    def open(cls, path: Path, dim: int) -> EdgeVectorStore:
        import qdrant_edge as q

        config_file = path / "edge_config.json"
        params = q.EdgeConfig(vectors=q.EdgeVectorParams(size=dim, distance=q.Distance.Cosine))
        try:
            if config_file.exists():
                stored = json.loads(config_file.read_text(encoding="utf-8"))
                size = int(stored["vectors"][""]["size"])
                shard = q.EdgeShard.load(str(path))
                if size != dim:
                    points = shard.count(q.CountRequest())
                    if points:
                        shard.close()
                        raise VectorSizeMismatch(
                            f"the memory store at {path} holds {points} vectors of size {size}, but "
                            f"the embedder makes vectors of size {dim}. Nothing was deleted. Either "
                            f"configure the embedder that wrote them, or move {path} away to start "
                            "a new memory (then re-index with `yuiju memory reindex`)"
                        )
                    shard.close()
                    _remove_tree(path)
                    shard = q.EdgeShard.create(str(path), params)
            else:
                path.mkdir(parents=True, exist_ok=True)
                shard = q.EdgeShard.create(str(path), params)
        except VectorSizeMismatch:
            raise
        except Exception as exc:
            if "WouldBlock" in str(exc) or "lock" in str(exc).lower():
                raise VectorStoreError(
                    f"the embedded memory store {path} is open in another process (one process "
                    "at a time: stop `yuiju run`, or configure [qdrant].url for a shared server)"
                ) from exc
            raise VectorStoreError(f"cannot open the embedded memory store {path}: {exc}") from exc
        for name in KEYWORD_FIELDS:
            shard.update(q.UpdateOperation.create_field_index(name, q.PayloadSchemaType.Keyword))
        for name in FLOAT_FIELDS:
            shard.update(q.UpdateOperation.create_field_index(name, q.PayloadSchemaType.Float))
        return cls(shard, path, dim)

    @staticmethod
    def _filter(where: Where | None) -> Any:
        import qdrant_edge as q

        if where is None:
            return None
        must: list[Any] = []
        for key, value in where.eq.items():
            if isinstance(value, str):
                must.append(q.FieldCondition(key=key, match=q.MatchValue(value)))
            else:
                must.append(q.FieldCondition(key=key, match=q.MatchAny(list(value))))
        if where.time_from is not None or where.time_to is not None:
            must.append(q.FieldCondition(key="time", range=q.RangeFloat(gte=where.time_from, lt=where.time_to)))
        return q.Filter(must=must) if must else None

    def _check(self, vector: Sequence[float]) -> None:
        if len(vector) != self.dim:
            raise VectorSizeMismatch(f"vector of size {len(vector)} for a store of size {self.dim}")

    async def upsert(self, points: Sequence[MemoryPoint]) -> None:
        import qdrant_edge as q

        for p in points:
            self._check(p.vector)
        batch = [q.Point(p.id, list(map(float, p.vector)), p.payload()) for p in points]
        if batch:
            await asyncio.to_thread(self._shard.update, q.UpdateOperation.upsert_points(batch))

    async def query(self, vector: Sequence[float], where: Where, limit: int) -> list[Hit]:
        import qdrant_edge as q

        self._check(vector)
        request = q.QueryRequest(
            limit=limit, query=q.Query.Nearest(list(map(float, vector))), filter=self._filter(where),
            with_payload=True, with_vector=False,
        )
        found = self._shard.query(request)  # sub-millisecond: no thread hop
        return [Hit(id=str(p.id), score=float(p.score), payload=dict(p.payload or {})) for p in found]

    async def scroll(self, where: Where, limit: int = 1000) -> list[Hit]:
        import qdrant_edge as q

        out: list[Hit] = []
        offset = None
        while len(out) < limit:
            records, offset = self._shard.scroll(q.ScrollRequest(
                offset=offset, limit=min(256, limit - len(out)), filter=self._filter(where),
                with_payload=True, with_vector=False,
            ))
            out.extend(Hit(id=str(r.id), score=0.0, payload=dict(r.payload or {})) for r in records)
            if offset is None or not records:
                break
        return out

    async def count(self, where: Where | None = None) -> int:
        import qdrant_edge as q

        return int(self._shard.count(q.CountRequest(exact=True, filter=self._filter(where))))

    async def set_payload(self, ids: Sequence[str], payload: Mapping[str, Any]) -> None:
        import qdrant_edge as q

        if ids:
            await asyncio.to_thread(self._shard.update, q.UpdateOperation.set_payload(list(ids), dict(payload)))

    async def delete(self, where: Where) -> None:
        import qdrant_edge as q

        flt = self._filter(where)
        if flt is None:
            raise ValueError("refusing to delete every point: give a filter")
        await asyncio.to_thread(self._shard.update, q.UpdateOperation.delete_points_by_filter(flt))

    async def close(self) -> None:
        if self._shard is not None:
            self._shard.flush()
            self._shard.close()
            self._shard = None


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path)


# -- qdrant-client --------------------------------------------------------------------------------


class QdrantClientStore:
    """A collection through qdrant-client's `AsyncQdrantClient` (server, or local mode)."""

    def __init__(self, client: Any, collection: str, dim: int, name: str) -> None:
        self.client = client
        self.collection = collection
        self.dim = dim
        self.name = name

    @classmethod
    async def open(
        cls, *, collection: str, dim: int, url: str | None = None, api_key: str | None = None,
        location: str | None = None, path: Path | None = None,
    ) -> QdrantClientStore:
        from qdrant_client import AsyncQdrantClient, models

        if url:
            client = AsyncQdrantClient(url=url, api_key=api_key)
            name = f"qdrant {url}/{collection}"
        elif path is not None:
            try:
                client = AsyncQdrantClient(path=str(path))
            except RuntimeError as exc:
                raise VectorStoreError(f"cannot open qdrant local mode at {path}: {exc}") from exc
            name = f"qdrant-local {path}"
        else:
            client = AsyncQdrantClient(location=location or ":memory:")
            name = "qdrant-local :memory:"
        try:
            if await client.collection_exists(collection):
                info = await client.get_collection(collection)
                vectors = info.config.params.vectors
                size = vectors.size if isinstance(vectors, models.VectorParams) else None
                if size != dim:
                    points = (await client.count(collection, exact=True)).count
                    if points:
                        raise VectorSizeMismatch(
                            f"collection {collection!r} holds {points} vectors of size {size}, but the "
                            f"embedder makes size {dim}. Nothing was deleted: configure the embedder "
                            "that wrote them, or set [qdrant].collection to a new name"
                        )
                    await client.delete_collection(collection)
            if not await client.collection_exists(collection):
                await client.create_collection(
                    collection, vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE)
                )
            if url:  # local mode ignores payload indexes (and warns about them)
                for key in KEYWORD_FIELDS:
                    await client.create_payload_index(collection, key, models.PayloadSchemaType.KEYWORD)
                for key in FLOAT_FIELDS:
                    await client.create_payload_index(collection, key, models.PayloadSchemaType.FLOAT)
        except VectorStoreError:
            await client.close()
            raise
        except Exception as exc:
            await client.close()
            raise VectorStoreError(f"cannot open {name}: {exc}") from exc
        return cls(client, collection, dim, name)

    @staticmethod
    def _filter(where: Where | None) -> Any:
        from qdrant_client import models

        if where is None:
            return None
        must: list[Any] = []
        for key, value in where.eq.items():
            match = models.MatchValue(value=value) if isinstance(value, str) else models.MatchAny(any=list(value))
            must.append(models.FieldCondition(key=key, match=match))
        if where.time_from is not None or where.time_to is not None:
            must.append(models.FieldCondition(key="time", range=models.Range(gte=where.time_from, lt=where.time_to)))
        return models.Filter(must=must) if must else None

    async def upsert(self, points: Sequence[MemoryPoint]) -> None:
        from qdrant_client import models

        for p in points:
            if len(p.vector) != self.dim:
                raise VectorSizeMismatch(f"vector of size {len(p.vector)} for a store of size {self.dim}")
        if points:
            await self.client.upsert(self.collection, points=[
                models.PointStruct(id=p.id, vector=list(map(float, p.vector)), payload=p.payload()) for p in points
            ])

    async def query(self, vector: Sequence[float], where: Where, limit: int) -> list[Hit]:
        found = await self.client.query_points(
            self.collection, query=list(map(float, vector)), query_filter=self._filter(where),
            limit=limit, with_payload=True,
        )
        return [Hit(id=str(p.id), score=float(p.score), payload=dict(p.payload or {})) for p in found.points]

    async def scroll(self, where: Where, limit: int = 1000) -> list[Hit]:
        out: list[Hit] = []
        offset = None
        while len(out) < limit:
            records, offset = await self.client.scroll(
                self.collection, scroll_filter=self._filter(where), limit=min(256, limit - len(out)),
                offset=offset, with_payload=True,
            )
            out.extend(Hit(id=str(r.id), score=0.0, payload=dict(r.payload or {})) for r in records)
            if offset is None or not records:
                break
        return out

    async def count(self, where: Where | None = None) -> int:
        return int((await self.client.count(self.collection, count_filter=self._filter(where), exact=True)).count)

    async def set_payload(self, ids: Sequence[str], payload: Mapping[str, Any]) -> None:
        if ids:
            await self.client.set_payload(self.collection, payload=dict(payload), points=list(ids))

    async def delete(self, where: Where) -> None:
        from qdrant_client import models

        flt = self._filter(where)
        if flt is None:
            raise ValueError("refusing to delete every point: give a filter")
        await self.client.delete(self.collection, points_selector=models.FilterSelector(filter=flt))

    async def close(self) -> None:
        await self.client.close()


async def open_vector_store(
    *, url: str | None, api_key: str | None, collection: str, dim: int, data_dir: Path | None,
    engine: Literal["edge", "local"] = "edge",
) -> VectorStore:
    """The configured store: a Qdrant server at ``url``; else the embedded one under ``data_dir``
    (``engine`` 'edge' = qdrant-edge-py, 'local' = qdrant-client local mode); ``data_dir`` None =
    in memory (qdrant-client ``:memory:``)."""
    if url:
        return await QdrantClientStore.open(collection=collection, dim=dim, url=url, api_key=api_key)
    if data_dir is None:
        return await QdrantClientStore.open(collection=collection, dim=dim, location=":memory:")
    if engine == "local":
        return await QdrantClientStore.open(collection=collection, dim=dim, path=data_dir / "qdrant-local")
    return await asyncio.to_thread(EdgeVectorStore.open, data_dir / "qdrant-edge" / collection, dim)
