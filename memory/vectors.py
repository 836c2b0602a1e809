"""The vector store seam: one Qdrant collection of memories, behind a small async protocol.

Every memory is one point with two named vectors: ``dense`` (the embedder's, cosine) and
``lexical`` (a sparse BM25 term vector from `memory.lexical`, with Qdrant's ``IDF`` modifier so
Qdrant keeps the document frequencies). `VectorStore.search_many` runs several nearest-neighbour
searches, each by one of the two vectors under its own filter, as one batch, and returns their
raw scores (cosine, BM25); `memory.semantic` fuses them, so both implementations rank exactly the
same and recall sees how well each list matched.

Two implementations:

- `EdgeVectorStore`: Qdrant's own in-process engine (``qdrant-edge-py``), the embedded default
  under the data dir. Measured in ``bench/memory_bench.py``: a filtered query at 50k points takes
  well under a millisecond, where qdrant-client's local mode scans every point.
- `QdrantClientStore`: ``qdrant-client``'s `AsyncQdrantClient` — a Qdrant server (``url=``), or
  its local mode (``:memory:`` or ``path=``) for comparison.

Every point carries the payload of `MemoryPoint`: ``kind`` (episode, diary, chat, fact, file),
``character_id``, ``user_id``, ``group_id``, ``scope`` (who may recall it), ``time`` (epoch
seconds: when it was said or happened), ``about_start`` / ``about_end`` (when what it tells of
happened: "last month" in a line said on 8 August is July; else its ``time``), ``importance``
(0..1), ``text`` and ``ref`` (the id of the source document), with payload indexes on each of
them; chat lines also carry ``speaker`` and ``addressed`` (the names a line greets someone by),
indexed so that the names a store knows can be listed (`VectorStore.names`).

The vector size is checked when the store is opened: an empty collection of the wrong size is
recreated, one holding data raises `VectorSizeMismatch` and is never dropped. A store written
before hybrid recall (one unnamed dense vector per point) raises `LegacyLayout`, which names the
command that converts it in place: `migrate_store` (``yuiju memory reindex``) copies every point
with its stored dense vector and adds the lexical one, so nothing is re-embedded and nothing lost.
The embedder's name is kept with the collection; opening it with another embedder of the same
size raises `EmbedderChanged` (its vectors would not be comparable) instead of mixing them.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

from yuiju.config import redact_url
from yuiju.memory.lexical import SparseVector

if TYPE_CHECKING:
    from qdrant_edge import Filter as EdgeFilter

MemoryKind = Literal["episode", "diary", "chat", "fact", "file"]

KEYWORD_FIELDS = (
    "kind",
    "character_id",
    "user_id",
    "group_id",
    "scope",
    "ref",
    "speaker",
    "addressed",
)
"""Payload fields with a keyword index; filters use only these and the float fields below."""
NAME_FIELDS = ("speaker", "addressed")
"""Keyword fields holding people's names (`VectorStore.names`)."""
FLOAT_FIELDS = ("time", "importance", "about_start", "about_end")
"""Payload fields with a float index (range filters)."""

PUBLIC = "public"
"""The scope of what anyone talking to her may hear about: her episodes, diary, lore files."""


class VectorStoreError(Exception):
    """The vector store cannot be used; the message says why and what to do."""


class VectorSizeMismatch(VectorStoreError):
    """The collection holds vectors of another size than the embedder produces."""


class LegacyLayout(VectorStoreError):
    """The collection predates hybrid recall (dense vectors only): `migrate_store` converts it."""


class EmbedderChanged(VectorStoreError):
    """The collection was embedded by another model than the configured one."""


DENSE = "dense"
"""Name of the dense vector of every point."""
LEXICAL = "lexical"
"""Name of the sparse BM25 vector of every point (IDF modifier)."""
LAYOUT = 2
"""Collection layout version: 1 = one unnamed dense vector, 2 = dense + lexical."""
Fusion = Literal["rrf", "dbsf"]


@dataclass(frozen=True, kw_only=True)
class Search:
    """One nearest-neighbour search by one vector: ``dense`` (cosine) or ``lexical`` (BM25)."""

    dense: Sequence[float] | None = None
    lexical: SparseVector | None = None
    where: Where
    limit: int
    fields: tuple[str, ...] | None = None
    """The payload fields to return (None: all): ranking needs a few, the text only the best."""


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
    """The dense vector."""
    lexical: SparseVector = field(default_factory=lambda: SparseVector([], []))
    """The sparse BM25 vector of the indexed text (empty: found by the dense vector only)."""
    kind: MemoryKind
    character_id: str
    text: str
    """What is recalled, and what was embedded."""
    time: float
    """When it happened, epoch seconds (aware datetimes converted by the caller)."""
    about: tuple[float, float] | None = None
    """When what it tells of happened, if not at ``time``: first and last moment (inclusive)."""
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
            "kind": self.kind,
            "character_id": self.character_id,
            "user_id": self.user_id,
            "group_id": self.group_id,
            "scope": self.scope,
            "ref": self.ref,
            "text": self.text,
            "time": float(self.time),
            "about_start": float(self.about[0] if self.about else self.time),
            "about_end": float(self.about[1] if self.about else self.time),
            "importance": float(self.importance),
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
    about_from: float | None = None
    """What a memory tells of happened at or after this (its ``about_end``; before those fields
    existed, its ``time``)."""
    about_to: float | None = None
    """... and before this (its ``about_start``, exclusive)."""

    def __post_init__(self) -> None:
        for key in self.eq:
            if key not in KEYWORD_FIELDS:
                raise ValueError(
                    f"filter on {key!r}: only indexed fields {KEYWORD_FIELDS} may be filtered"
                )


class Hit(NamedTuple):
    """One point found (a tuple: recall builds a few hundred per question)."""

    id: str
    score: float
    """Cosine similarity by the dense vector, BM25 by the lexical one; the fused relevance once
    fused (`memory.semantic`)."""
    payload: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class StoredPoint:
    """A point read back with its vectors (for re-indexing)."""

    id: str
    vector: list[float]
    payload: dict[str, Any]


class VectorStore(Protocol):
    """One collection of memory points."""

    name: str
    """For logs, e.g. 'qdrant-edge /path' or 'qdrant http://host:6333/yuiju_memory'."""
    dim: int

    async def upsert(self, points: Sequence[MemoryPoint]) -> None: ...

    async def query(self, vector: Sequence[float], where: Where, limit: int) -> list[Hit]:
        """The ``limit`` nearest points by the dense vector matching ``where``, best first."""
        ...

    async def search_many(self, searches: Sequence[Search]) -> list[list[Hit]]:
        """Each search's best points, best first, with their raw scores; one batch."""
        ...

    async def names(self, keys: Sequence[str] = NAME_FIELDS, limit: int = 100_000) -> set[str]:
        """Every value the points hold under ``keys`` (keyword-indexed fields)."""
        ...

    async def payloads(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The whole payload of each of these points (missing ones left out)."""
        ...

    def points(self, batch: int = 512) -> AsyncIterator[list[StoredPoint]]:
        """Every point with its dense vector, in batches (for re-indexing)."""
        ...

    async def scroll(self, where: Where, limit: int = 1000) -> list[Hit]:
        """Points matching ``where`` (score 0), up to ``limit``."""
        ...

    async def count(self, where: Where | None = None) -> int: ...

    async def set_payload(self, ids: Sequence[str], payload: Mapping[str, Any]) -> None: ...

    async def delete(self, where: Where) -> None: ...

    async def delete_ids(self, ids: Sequence[str]) -> None:
        """Delete these points (missing ones are no error)."""
        ...

    async def compact(self) -> None:
        """Rewrite the store's files without the deleted points, so no file under the data dir
        still holds their payload (after a forget); a server manages its own files."""
        ...

    async def close(self) -> None: ...


# -- qdrant-edge-py -------------------------------------------------------------------------------

META_FILE = "yuiju_meta.json"
"""Next to the shard's own config: the layout version and the embedder's name."""


def _legacy_message(where: str, points: int) -> str:
    return (
        f"the memory store {where} was written before hybrid recall ({points} memories with a dense "
        "vector only). Nothing was changed. Run `yuiju memory reindex` once: it adds the lexical "
        "index to every memory, keeping the stored vectors (nothing is re-embedded, nothing lost)"
    )


def _embedder_message(where: str, stored: str, configured: str) -> str:
    return (
        f"the memory store {where} was embedded with {stored!r}, but the configured embedder is "
        f"{configured!r}: their vectors cannot be compared. Nothing was changed. Configure "
        f"{stored!r} again, or run `yuiju memory reindex` to re-embed every memory with {configured!r}"
    )


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
        self._writes = asyncio.Lock()
        """Held by each write and by `compact`: a write never lands in a shard being replaced."""
        self._characters: set[str] | None = None
        """Every ``character_id`` the store holds (or held: a delete does not shrink it), read
        once and kept up to date by `upsert` (this process is the only writer: the WAL is
        locked); None until first needed."""

    @staticmethod
    def config(dim: int) -> Any:
        import qdrant_edge as q

        return q.EdgeConfig(
            vectors={DENSE: q.EdgeVectorParams(size=dim, distance=q.Distance.Cosine)},
            sparse_vectors={LEXICAL: q.EdgeSparseVectorParams(modifier=q.Modifier.Idf)},
        )

    @classmethod
    def open(cls, path: Path, dim: int, *, embedder: str = "") -> EdgeVectorStore:
        """Open (or create) the store; ``embedder`` names the model (checked against the store's)."""
        import qdrant_edge as q

        config_file = path / "edge_config.json"
        meta_file = path / META_FILE
        try:
            if config_file.exists():
                vectors = json.loads(config_file.read_text(encoding="utf-8")).get("vectors") or {}
                shard = q.EdgeShard.load(str(path))
                points = shard.count(q.CountRequest(exact=True))
                size = int((vectors.get(DENSE) or vectors.get("") or {}).get("size", 0))
                if points and DENSE not in vectors:
                    shard.close()
                    raise LegacyLayout(_legacy_message(f"at {path}", points))
                if points and size != dim:
                    shard.close()
                    raise VectorSizeMismatch(
                        f"the memory store at {path} holds {points} vectors of size {size}, but "
                        f"the embedder makes vectors of size {dim}. Nothing was deleted. Either "
                        f"configure the embedder that wrote them, or run `yuiju memory reindex` to "
                        "re-embed them with this one"
                    )
                stored = _read_meta(meta_file).get("embedder", "")
                if points and embedder and stored and stored != embedder:
                    shard.close()
                    raise EmbedderChanged(_embedder_message(f"at {path}", stored, embedder))
                if not points and (DENSE not in vectors or size != dim):  # empty: start afresh
                    shard.close()
                    _remove_tree(path)
                    shard = q.EdgeShard.create(str(path), cls.config(dim))
            else:
                path.mkdir(parents=True, exist_ok=True)
                shard = q.EdgeShard.create(str(path), cls.config(dim))
        except VectorStoreError:
            raise
        except Exception as exc:
            if "WouldBlock" in str(exc) or "lock" in str(exc).lower():
                raise VectorStoreError(
                    f"the embedded memory store {path} is open in another process (one process "
                    "at a time: stop `yuiju run`, or configure [qdrant].url for a shared server)"
                ) from exc
            raise VectorStoreError(f"cannot open the embedded memory store {path}: {exc}") from exc
        if embedder and _read_meta(meta_file).get("embedder") != embedder:
            meta_file.write_text(
                json.dumps({"layout": LAYOUT, "embedder": embedder}), encoding="utf-8"
            )
        for name in KEYWORD_FIELDS:
            shard.update(q.UpdateOperation.create_field_index(name, q.PayloadSchemaType.Keyword))
        for name in FLOAT_FIELDS:
            shard.update(q.UpdateOperation.create_field_index(name, q.PayloadSchemaType.Float))
        return cls(shard, path, dim)

    @staticmethod
    def _filter(where: Where | None) -> EdgeFilter | None:
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
            must.append(
                q.FieldCondition(
                    key="time", range=q.RangeFloat(gte=where.time_from, lt=where.time_to)
                )
            )
        if where.about_from is not None or where.about_to is not None:
            told = q.Filter(
                must=[
                    q.FieldCondition(key="about_start", range=q.RangeFloat(lt=where.about_to)),
                    q.FieldCondition(key="about_end", range=q.RangeFloat(gte=where.about_from)),
                ]
            )
            older = q.Filter(  # stored before about_start existed: when it was said
                must=[
                    q.IsEmptyCondition(key="about_start"),
                    q.FieldCondition(
                        key="time", range=q.RangeFloat(gte=where.about_from, lt=where.about_to)
                    ),
                ]
            )
            must.append(q.Filter(should=[told, older]))
        return q.Filter(must=must) if must else None

    def _search_filter(self, where: Where) -> EdgeFilter | None:
        """`_filter` for a search, without a ``character_id`` condition every point meets: the
        engine checks each further condition per candidate (about 2 ms a search at 50k memories
        of one character), and most stores hold one character."""
        wanted = where.eq.get("character_id")
        if wanted is None:
            return self._filter(where)
        if self._characters is None:
            self._characters = set(self._values("character_id"))
        if not self._characters <= ({wanted} if isinstance(wanted, str) else set(wanted)):
            return self._filter(where)
        eq = {k: v for k, v in where.eq.items() if k != "character_id"}
        return self._filter(replace(where, eq=eq))

    def _values(self, key: str, limit: int = 100_000) -> list[str]:
        """Every value of a keyword-indexed field (approximate facets may leave one out)."""
        import qdrant_edge as q

        found = self._shard.facet(q.FacetRequest(key=key, limit=limit, exact=True))
        return [str(h.value) for h in found.hits]

    def _check(self, vector: Sequence[float]) -> None:
        if len(vector) != self.dim:
            raise VectorSizeMismatch(f"vector of size {len(vector)} for a store of size {self.dim}")

    async def upsert(self, points: Sequence[MemoryPoint]) -> None:
        import qdrant_edge as q

        batch = []
        for p in points:
            self._check(p.vector)
            vectors: dict[str, Any] = {DENSE: list(map(float, p.vector))}
            if p.lexical:
                vectors[LEXICAL] = q.SparseVector(p.lexical.indices, p.lexical.values)
            batch.append(q.Point(p.id, vectors, p.payload()))
        if self._characters is not None:
            self._characters.update(p.character_id for p in points)
        if batch:
            async with self._writes:
                await asyncio.to_thread(self._shard.update, q.UpdateOperation.upsert_points(batch))

    async def query(self, vector: Sequence[float], where: Where, limit: int) -> list[Hit]:
        import qdrant_edge as q

        self._check(vector)
        request = q.QueryRequest(
            limit=limit,
            query=q.Query.Nearest(list(map(float, vector)), using=DENSE),
            filter=self._search_filter(where),
            with_payload=True,
            with_vector=False,
        )
        return _hits(self._shard.query(request))  # sub-millisecond: no thread hop

    async def search_many(self, searches: Sequence[Search]) -> list[list[Hit]]:
        import qdrant_edge as q

        requests = []
        for s in searches:
            if s.dense is not None:
                self._check(s.dense)
                query = q.Query.Nearest(list(map(float, s.dense)), using=DENSE)
            elif s.lexical:
                sparse = q.SparseVector(s.lexical.indices, s.lexical.values)
                query = q.Query.Nearest(sparse, using=LEXICAL)
            else:
                raise ValueError("a search needs a dense or a non-empty lexical vector")
            requests.append(
                q.QueryRequest(
                    limit=s.limit,
                    query=query,
                    filter=self._search_filter(s.where),
                    with_payload=_selector(s.fields),
                    with_vector=False,
                )
            )
        if not requests:
            return []
        found = self._shard.query_batch(q.QueryBatchRequest(requests))  # a few ms: no thread hop
        return [_hits(points) for points in found]

    async def names(self, keys: Sequence[str] = NAME_FIELDS, limit: int = 100_000) -> set[str]:
        return {value for key in keys for value in self._values(key, limit)}

    async def payloads(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        found = self._shard.retrieve(list(ids), with_payload=True, with_vector=False)
        return {str(r.id): dict(r.payload or {}) for r in found}

    async def points(self, batch: int = 512) -> AsyncIterator[list[StoredPoint]]:
        async for records in _edge_records(self._shard, batch):
            yield records

    async def scroll(self, where: Where, limit: int = 1000) -> list[Hit]:
        import qdrant_edge as q

        out: list[Hit] = []
        offset = None
        while len(out) < limit:
            records, offset = self._shard.scroll(
                q.ScrollRequest(
                    offset=offset,
                    limit=min(256, limit - len(out)),
                    filter=self._filter(where),
                    with_payload=True,
                    with_vector=False,
                )
            )
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
            async with self._writes:
                await asyncio.to_thread(
                    self._shard.update, q.UpdateOperation.set_payload(list(ids), dict(payload))
                )

    async def delete(self, where: Where) -> None:
        import qdrant_edge as q

        flt = self._filter(where)
        if flt is None:
            raise ValueError("refusing to delete every point: give a filter")
        async with self._writes:
            await asyncio.to_thread(
                self._shard.update, q.UpdateOperation.delete_points_by_filter(flt)
            )

    async def delete_ids(self, ids: Sequence[str]) -> None:
        import qdrant_edge as q

        if ids:
            async with self._writes:
                await asyncio.to_thread(
                    self._shard.update, q.UpdateOperation.delete_points(list(ids))
                )

    async def compact(self) -> None:
        """Rebuild the shard with the points it holds: a deleted point's payload stays in the
        old segments and WAL until the engine's optimizers get to them (at thresholds a forget
        may not reach), so the kept points are copied into a fresh shard that replaces it.
        Searches go on meanwhile (on the old shard); writes wait for the swap."""
        if self.path is None:
            return
        async with self._writes:
            fresh = await asyncio.to_thread(self._copy, self.path)
            self._swap(self.path, fresh)  # on the loop: no search meets a closed shard

    def _copy(self, path: Path) -> Path:
        """A fresh shard next to ``path`` with every point of this one."""
        import qdrant_edge as q

        fresh = path.with_name(path.name + ".compacting")
        if fresh.exists():
            _remove_tree(fresh)
        fresh.mkdir(parents=True)
        shard = q.EdgeShard.create(str(fresh), self.config(self.dim))
        offset = None
        while True:
            records, offset = self._shard.scroll(
                q.ScrollRequest(offset=offset, limit=2048, with_payload=True, with_vector=True)
            )
            if records:
                shard.update(
                    q.UpdateOperation.upsert_points(
                        [q.Point(str(r.id), dict(r.vector), dict(r.payload or {})) for r in records]
                    )
                )
            if offset is None or not records:
                break
        for name in KEYWORD_FIELDS:  # indexed once, after the points: faster than as they come
            shard.update(q.UpdateOperation.create_field_index(name, q.PayloadSchemaType.Keyword))
        for name in FLOAT_FIELDS:
            shard.update(q.UpdateOperation.create_field_index(name, q.PayloadSchemaType.Float))
        shard.flush()
        shard.close()
        if (path / META_FILE).exists():
            (fresh / META_FILE).write_bytes((path / META_FILE).read_bytes())
        return fresh

    def _swap(self, path: Path, fresh: Path) -> None:
        import qdrant_edge as q

        self._shard.close()
        old = path.with_name(path.name + ".old")
        path.rename(old)
        fresh.rename(path)
        _remove_tree(old)
        self._shard = q.EdgeShard.load(str(path))

    async def close(self) -> None:
        if self._shard is not None:
            self._shard.flush()
            self._shard.close()
            self._shard = None


def _selector(fields: tuple[str, ...] | None) -> list[str] | bool:
    """Qdrant's ``with_payload`` for `Search.fields` (an empty list would cost a payload read)."""
    if fields is None:
        return True
    return list(fields) if fields else False


def _hits(found: Any) -> list[Hit]:
    # the engines hand out a fresh dict per point (qdrant-edge builds it at each read of
    # ``payload``: read once): no copy (recall ranks a few hundred a time)
    out = []
    for p in found:
        payload = p.payload
        out.append(
            Hit(
                str(p.id),
                float(p.score),
                payload if isinstance(payload, dict) else dict(payload or {}),
            )
        )
    return out


def _dense_of(vector: Any) -> list[float]:
    """The dense vector of a record of either layout (named ``dense`` or the unnamed one)."""
    if isinstance(vector, dict):
        vector = vector.get(DENSE, vector.get(""))
    return list(map(float, vector or []))


async def _edge_records(shard: Any, batch: int) -> AsyncIterator[list[StoredPoint]]:
    import qdrant_edge as q

    offset = None
    while True:
        records, offset = await asyncio.to_thread(
            shard.scroll,
            q.ScrollRequest(offset=offset, limit=batch, with_payload=True, with_vector=True),
        )
        if records:
            yield [
                StoredPoint(id=str(r.id), vector=_dense_of(r.vector), payload=dict(r.payload or {}))
                for r in records
            ]
        if offset is None or not records:
            return


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path)


# -- qdrant-client --------------------------------------------------------------------------------


class QdrantClientStore:
    """A collection through qdrant-client's `AsyncQdrantClient` (server, or local mode)."""

    def __init__(
        self, client: Any, collection: str, dim: int, name: str, *, local_path: Path | None = None
    ) -> None:
        self.client = client
        self.collection = collection
        self.dim = dim
        self.name = name
        self.local_path = local_path
        """The folder of local mode on disk (``path=``), else None."""
        self._writes = asyncio.Lock()
        """Held by each write and by `compact`: no write lands in a collection being rebuilt."""

    @staticmethod
    async def connect(
        *,
        url: str | None = None,
        api_key: str | None = None,
        location: str | None = None,
        path: Path | None = None,
        collection: str = "",
    ) -> tuple[Any, str]:
        """An `AsyncQdrantClient` and a name for logs."""
        from qdrant_client import AsyncQdrantClient

        if url:
            shown = f"qdrant {redact_url(url)}/{collection}"
            return AsyncQdrantClient(url=url, api_key=api_key), shown
        if path is not None:
            try:
                return AsyncQdrantClient(path=str(path)), f"qdrant-local {path}/{collection}"
            except RuntimeError as exc:
                raise VectorStoreError(f"cannot open qdrant local mode at {path}: {exc}") from exc
        return AsyncQdrantClient(
            location=location or ":memory:"
        ), f"qdrant-local :memory:/{collection}"

    @classmethod
    async def open(
        cls,
        *,
        collection: str,
        dim: int,
        url: str | None = None,
        api_key: str | None = None,
        location: str | None = None,
        path: Path | None = None,
        embedder: str = "",
        client: Any = None,
    ) -> QdrantClientStore:
        """Open (or create) ``collection``; ``client`` reuses a connection (else one is made)."""
        if client is None:
            client, name = await cls.connect(
                url=url, api_key=api_key, location=location, path=path, collection=collection
            )
        else:
            name = f"qdrant {collection}"
        try:
            await cls._prepare(client, collection, dim, embedder, name, indexes=bool(url))
        except VectorStoreError:
            await client.close()
            raise
        except Exception as exc:
            await client.close()
            raise VectorStoreError(f"cannot open {name}: {exc}") from exc
        return cls(client, collection, dim, name, local_path=None if url else path)

    @staticmethod
    async def _prepare(
        client: Any, collection: str, dim: int, embedder: str, name: str, *, indexes: bool
    ) -> None:
        from qdrant_client import models

        if await client.collection_exists(collection):
            info = await client.get_collection(collection)
            vectors = info.config.params.vectors
            named = isinstance(vectors, dict) and DENSE in vectors
            size = (
                vectors[DENSE].size
                if named
                else vectors.size
                if isinstance(vectors, models.VectorParams)
                else None
            )
            points = (await client.count(collection, exact=True)).count
            if points and not named:
                raise LegacyLayout(_legacy_message(f"{name}", points))
            if points and size != dim:
                raise VectorSizeMismatch(
                    f"collection {collection!r} holds {points} vectors of size {size}, but the "
                    f"embedder makes size {dim}. Nothing was deleted: configure the embedder "
                    "that wrote them, run `yuiju memory reindex` to re-embed them, or set "
                    "[qdrant].collection to a new name"
                )
            stored = (info.config.metadata or {}).get("embedder", "")
            if points and embedder and stored and stored != embedder:
                raise EmbedderChanged(_embedder_message(name, stored, embedder))
            if not points and (not named or size != dim):
                await client.delete_collection(collection)
        if not await client.collection_exists(collection):
            await client.create_collection(
                collection,
                vectors_config={
                    DENSE: models.VectorParams(size=dim, distance=models.Distance.COSINE)
                },
                sparse_vectors_config={
                    LEXICAL: models.SparseVectorParams(modifier=models.Modifier.IDF)
                },
                metadata={"layout": LAYOUT, "embedder": embedder},
            )
        elif (
            embedder
            and ((await client.get_collection(collection)).config.metadata or {}).get("embedder")
            != embedder
        ):
            await client.update_collection(
                collection, metadata={"layout": LAYOUT, "embedder": embedder}
            )
        if indexes:  # local mode ignores payload indexes (and warns about them)
            for key in KEYWORD_FIELDS:
                await client.create_payload_index(collection, key, models.PayloadSchemaType.KEYWORD)
            for key in FLOAT_FIELDS:
                await client.create_payload_index(collection, key, models.PayloadSchemaType.FLOAT)

    @staticmethod
    def _filter(where: Where | None) -> Any:
        from qdrant_client import models

        if where is None:
            return None
        must: list[Any] = []
        for key, value in where.eq.items():
            match = (
                models.MatchValue(value=value)
                if isinstance(value, str)
                else models.MatchAny(any=list(value))
            )
            must.append(models.FieldCondition(key=key, match=match))
        if where.time_from is not None or where.time_to is not None:
            must.append(
                models.FieldCondition(
                    key="time", range=models.Range(gte=where.time_from, lt=where.time_to)
                )
            )
        if where.about_from is not None or where.about_to is not None:
            told = models.Filter(
                must=[
                    models.FieldCondition(key="about_start", range=models.Range(lt=where.about_to)),
                    models.FieldCondition(
                        key="about_end", range=models.Range(gte=where.about_from)
                    ),
                ]
            )
            older = models.Filter(  # stored before about_start existed: when it was said
                must=[
                    models.IsEmptyCondition(is_empty=models.PayloadField(key="about_start")),
                    models.FieldCondition(
                        key="time", range=models.Range(gte=where.about_from, lt=where.about_to)
                    ),
                ]
            )
            must.append(models.Filter(should=[told, older]))
        return models.Filter(must=must) if must else None

    async def upsert(self, points: Sequence[MemoryPoint]) -> None:
        from qdrant_client import models

        structs = []
        for p in points:
            if len(p.vector) != self.dim:
                raise VectorSizeMismatch(
                    f"vector of size {len(p.vector)} for a store of size {self.dim}"
                )
            vectors: dict[str, Any] = {DENSE: list(map(float, p.vector))}
            if p.lexical:
                vectors[LEXICAL] = models.SparseVector(
                    indices=p.lexical.indices, values=p.lexical.values
                )
            structs.append(models.PointStruct(id=p.id, vector=vectors, payload=p.payload()))
        if structs:
            async with self._writes:
                await self.client.upsert(self.collection, points=structs)

    async def query(self, vector: Sequence[float], where: Where, limit: int) -> list[Hit]:
        found = await self.client.query_points(
            self.collection,
            query=list(map(float, vector)),
            using=DENSE,
            query_filter=self._filter(where),
            limit=limit,
            with_payload=True,
        )
        return _hits(found.points)

    async def search_many(self, searches: Sequence[Search]) -> list[list[Hit]]:
        from qdrant_client import models

        requests = []
        for s in searches:
            query: Any
            if s.dense is not None:
                if len(s.dense) != self.dim:
                    raise VectorSizeMismatch(
                        f"vector of size {len(s.dense)} for a store of size {self.dim}"
                    )
                query, using = list(map(float, s.dense)), DENSE
            elif s.lexical:
                query = models.SparseVector(indices=s.lexical.indices, values=s.lexical.values)
                using = LEXICAL
            else:
                raise ValueError("a search needs a dense or a non-empty lexical vector")
            requests.append(
                models.QueryRequest(
                    query=query,
                    using=using,
                    filter=self._filter(s.where),
                    limit=s.limit,
                    with_payload=_selector(s.fields),
                )
            )
        if not requests:
            return []
        found = await self.client.query_batch_points(self.collection, requests=requests)
        return [_hits(r.points) for r in found]

    async def names(self, keys: Sequence[str] = NAME_FIELDS, limit: int = 100_000) -> set[str]:
        out: set[str] = set()
        for key in keys:
            found = await self.client.facet(self.collection, key=key, limit=limit, exact=False)
            out.update(str(h.value) for h in found.hits)
        return out

    async def payloads(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        if not ids:
            return {}
        found = await self.client.retrieve(
            self.collection, ids=list(ids), with_payload=True, with_vectors=False
        )
        return {str(r.id): dict(r.payload or {}) for r in found}

    async def points(self, batch: int = 512) -> AsyncIterator[list[StoredPoint]]:
        offset = None
        while True:
            records, offset = await self.client.scroll(
                self.collection, limit=batch, offset=offset, with_payload=True, with_vectors=True
            )
            if records:
                yield [
                    StoredPoint(
                        id=str(r.id), vector=_dense_of(r.vector), payload=dict(r.payload or {})
                    )
                    for r in records
                ]
            if offset is None or not records:
                return

    async def scroll(self, where: Where, limit: int = 1000) -> list[Hit]:
        out: list[Hit] = []
        offset = None
        while len(out) < limit:
            records, offset = await self.client.scroll(
                self.collection,
                scroll_filter=self._filter(where),
                limit=min(256, limit - len(out)),
                offset=offset,
                with_payload=True,
            )
            out.extend(Hit(id=str(r.id), score=0.0, payload=dict(r.payload or {})) for r in records)
            if offset is None or not records:
                break
        return out

    async def count(self, where: Where | None = None) -> int:
        return int(
            (
                await self.client.count(
                    self.collection, count_filter=self._filter(where), exact=True
                )
            ).count
        )

    async def set_payload(self, ids: Sequence[str], payload: Mapping[str, Any]) -> None:
        if ids:
            async with self._writes:
                await self.client.set_payload(
                    self.collection, payload=dict(payload), points=list(ids)
                )

    async def delete(self, where: Where) -> None:
        from qdrant_client import models

        flt = self._filter(where)
        if flt is None:
            raise ValueError("refusing to delete every point: give a filter")
        async with self._writes:
            await self.client.delete(
                self.collection, points_selector=models.FilterSelector(filter=flt)
            )

    async def delete_ids(self, ids: Sequence[str]) -> None:
        from qdrant_client import models

        if ids:
            async with self._writes:
                await self.client.delete(
                    self.collection, points_selector=models.PointIdsList(points=list(ids))
                )

    async def compact(self) -> None:
        """Local mode on disk (``path=``): the collection is rebuilt with the points it holds (its
        SQLite file would keep a deleted point's bytes in free pages); writes wait, a search
        meanwhile may find the collection missing (local mode is for comparison, not serving). A
        server and ``:memory:``: nothing (Qdrant's vacuum optimizer reclaims a server's deleted
        points)."""
        if not self.local_path:
            return
        async with self._writes:
            await self._rebuild()

    async def _rebuild(self) -> None:
        from qdrant_client import models

        kept = [p async for batch in self._records() for p in batch]
        info = await self.client.get_collection(self.collection)
        await self.client.delete_collection(self.collection)
        await self.client.create_collection(
            self.collection,
            vectors_config=info.config.params.vectors,
            sparse_vectors_config=info.config.params.sparse_vectors,
            metadata=info.config.metadata,
        )
        for i in range(0, len(kept), 512):
            await self.client.upsert(
                self.collection,
                points=[
                    models.PointStruct(id=r.id, vector=r.vector, payload=r.payload)
                    for r in kept[i : i + 512]
                ],
            )

    async def _records(self) -> AsyncIterator[list[Any]]:
        offset = None
        while True:
            records, offset = await self.client.scroll(
                self.collection, limit=512, offset=offset, with_payload=True, with_vectors=True
            )
            if records:
                yield records
            if offset is None or not records:
                return

    async def close(self) -> None:
        await self.client.close()


def store_location(
    *,
    url: str | None,
    collection: str,
    data_dir: Path | None,
    engine: Literal["edge", "local"] = "edge",
) -> tuple[str, Path | None]:
    """Which store the config means: ('server' | 'memory' | 'local' | 'edge', its path or None)."""
    if url:
        return "server", None
    if data_dir is None:
        return "memory", None
    if engine == "local":
        return "local", data_dir / "qdrant-local"
    return "edge", data_dir / "qdrant-edge" / collection


async def open_vector_store(
    *,
    url: str | None,
    api_key: str | None,
    collection: str,
    dim: int,
    data_dir: Path | None,
    engine: Literal["edge", "local"] = "edge",
    embedder: str = "",
) -> VectorStore:
    """The configured store: a Qdrant server at ``url``; else the embedded one under ``data_dir``
    (``engine`` 'edge' = qdrant-edge-py, 'local' = qdrant-client local mode); ``data_dir`` None =
    in memory (qdrant-client ``:memory:``)."""
    kind, path = store_location(url=url, collection=collection, data_dir=data_dir, engine=engine)
    if kind == "edge":
        assert path is not None
        return await asyncio.to_thread(EdgeVectorStore.open, path, dim, embedder=embedder)
    return await QdrantClientStore.open(
        collection=collection,
        dim=dim,
        url=url,
        api_key=api_key,
        embedder=embedder,
        path=path,
        location=":memory:" if kind == "memory" else None,
    )
