"""Semantic memory: remember texts as vectors, recall them ranked, within a token budget.

Recall ranking (Generative Agents' retrieval, without per-query min-max normalisation so that a
score means the same thing in every query)::

    score     = w_relevance * relevance + w_recency * recency + w_importance * importance
    relevance = max(0, cosine(query, memory))                       in [0, 1]
    recency   = recency_decay ** hours_since(memory.time)           in (0, 1]   (0.995 per hour,
                                                                     half-life about 5.8 days)
    importance = the memory's importance                            in [0, 1]

Candidates are the ``candidates`` nearest memories that pass the filter (her character id, the
asked kinds, and a scope: ``public`` plus ``user:<id>`` of the speaker and ``group:<id>`` of the
group); memories with relevance below ``min_relevance`` are dropped; the rest are sorted by score
and taken in order while their text fits the token budget (a memory that does not fit is skipped,
smaller ones after it may still fit).

Recall never raises: if the embedder or Qdrant fails it logs a warning and returns nothing, so
the world and the chat carry on. Writes do raise, so their callers can retry.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from llm.tokens import estimate_tokens
from memory.embeddings import Embedder
from memory.vectors import (
    PUBLIC,
    Hit,
    MemoryKind,
    MemoryPoint,
    VectorStore,
    Where,
    group_scope,
    point_id,
    private_scope,
    user_scope,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class RankWeights:
    relevance: float = 1.0
    recency: float = 1.0
    importance: float = 1.0
    recency_decay: float = 0.995
    """Recency multiplier per hour of age (Generative Agents' value)."""


def rank_score(
    *, cosine: float, age_hours: float, importance: float, weights: RankWeights = RankWeights()
) -> float:
    """The recall score of one memory; see the module docstring."""
    relevance = max(0.0, cosine)
    recency = weights.recency_decay ** max(0.0, age_hours)
    importance = min(1.0, max(0.0, importance))
    return weights.relevance * relevance + weights.recency * recency + weights.importance * importance


def to_epoch(value: datetime) -> float:
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r}: memory times must be timezone-aware")
    return value.timestamp()


@dataclass(frozen=True, kw_only=True)
class NewMemory:
    """A memory to store."""

    kind: MemoryKind
    character_id: str
    text: str
    time: datetime
    """When it happened (aware)."""
    key: str
    """Stable identity of the memory (episode id, diary id + chunk, ...): same key, same point."""
    importance: float = 0.5
    user_id: str = ""
    """Platform-qualified (``qq:12345``): memories about or from this person."""
    group_id: str = ""
    scope: str | None = None
    """Who may recall it; default: the user's scope if user_id, else the group's, else public."""
    ref: str = ""
    """Source document id, for deleting a source's points (defaults to ``key``)."""
    embed_text: str | None = None
    """What to embed, if not ``text`` (e.g. the date prefixed to a diary chunk)."""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Recalled:
    id: str
    kind: str
    text: str
    time: datetime
    score: float
    relevance: float
    importance: float
    user_id: str
    group_id: str
    payload: dict[str, Any]
    tokens: int


class SemanticMemory:
    """Remember and recall, over a `VectorStore` and an `Embedder` of the same size."""

    def __init__(
        self, store: VectorStore, embedder: Embedder, *, weights: RankWeights | None = None,
        candidates: int = 48, min_relevance: float = 0.0,
    ) -> None:
        if store.dim != embedder.dim:
            from memory.vectors import VectorSizeMismatch

            raise VectorSizeMismatch(f"store {store.name} has size {store.dim}, embedder {embedder.name} {embedder.dim}")
        self.store = store
        self.embedder = embedder
        self.weights = weights or RankWeights()
        self.candidates = candidates
        self.min_relevance = min_relevance

    # -- writing --------------------------------------------------------------------------------

    async def remember(self, items: Sequence[NewMemory]) -> list[str]:
        """Embed and upsert; returns the point ids. Raises when the embedder or store fails."""
        if not items:
            return []
        vectors = await self.embedder.embed_documents([i.embed_text or i.text for i in items])
        points = []
        for item, vector in zip(items, vectors, strict=True):
            scope = item.scope or (
                user_scope(item.user_id) if item.user_id else group_scope(item.group_id) if item.group_id else PUBLIC
            )
            points.append(MemoryPoint(
                id=point_id(item.kind, item.character_id, item.key), vector=vector, kind=item.kind,
                character_id=item.character_id, text=item.text, time=to_epoch(item.time),
                importance=item.importance, scope=scope, user_id=item.user_id, group_id=item.group_id,
                ref=item.ref or item.key, extra=item.extra,
            ))
        await self.store.upsert(points)
        return [p.id for p in points]

    async def forget(self, *, ref: str | Sequence[str], kind: MemoryKind | None = None) -> None:
        """Delete every point of a source document (or several)."""
        eq: dict[str, Any] = {"ref": ref if isinstance(ref, str) else list(ref)}
        if kind:
            eq["kind"] = kind
        await self.store.delete(Where(eq=eq))

    # -- reading --------------------------------------------------------------------------------

    @staticmethod
    def scope_filter(
        character_id: str, *, user_id: str | None = None, group_id: str | None = None,
        kinds: Sequence[MemoryKind] | None = None, time_from: datetime | None = None,
        time_to: datetime | None = None, public: bool = True,
    ) -> Where:
        scopes = [PUBLIC] if public else []
        if user_id:
            scopes.append(user_scope(user_id))
            if not group_id:  # a private chat with this user: what they said in private too
                scopes.append(private_scope(user_id))
        if group_id:
            scopes.append(group_scope(group_id))
        eq: dict[str, Any] = {"character_id": character_id, "scope": scopes}
        if kinds:
            eq["kind"] = list(kinds)
        return Where(
            eq=eq, time_from=to_epoch(time_from) if time_from else None,
            time_to=to_epoch(time_to) if time_to else None,
        )

    def rank(self, hits: Sequence[Hit], now: datetime) -> list[Recalled]:
        """Score hits (see the module docstring), best first."""
        out = []
        now_s = to_epoch(now)
        for hit in hits:
            p = hit.payload
            if hit.score < self.min_relevance:
                continue
            t = float(p.get("time", now_s))
            importance = float(p.get("importance", 0.5))
            text = str(p.get("text", ""))
            out.append(Recalled(
                id=hit.id, kind=str(p.get("kind", "")), text=text,
                time=datetime.fromtimestamp(t, UTC).astimezone(now.tzinfo),
                score=rank_score(cosine=hit.score, age_hours=(now_s - t) / 3600, importance=importance, weights=self.weights),
                relevance=max(0.0, hit.score), importance=importance, user_id=str(p.get("user_id", "")),
                group_id=str(p.get("group_id", "")), payload=p, tokens=estimate_tokens(text),
            ))
        out.sort(key=lambda r: (-r.score, -r.time.timestamp(), r.id))
        return out

    async def search(self, query: str, where: Where, *, now: datetime, limit: int = 8) -> list[Recalled]:
        """Ranked memories for ``query`` under ``where``. Raises on failure (see `recall`)."""
        vector = await self.embedder.embed_query(query)
        hits = await self.store.query(vector, where, max(limit, self.candidates))
        return self.rank(hits, now)[:limit]

    async def recall(
        self, query: str, *, character_id: str, now: datetime, user_id: str | None = None,
        group_id: str | None = None, kinds: Sequence[MemoryKind] | None = None, limit: int = 8,
        token_budget: int | None = None,
    ) -> list[Recalled]:
        """The best memories for ``query`` that this speaker may hear, within ``token_budget``.

        Never raises: on a failure it logs a warning and returns ``[]``.
        """
        where = self.scope_filter(character_id, user_id=user_id, group_id=group_id, kinds=kinds)
        try:
            ranked = await self.search(query, where, now=now, limit=max(limit, self.candidates))
        except Exception as exc:
            log.warning("memory recall failed, answering without memories: %s", exc)
            return []
        return fit_budget(ranked, limit=limit, token_budget=token_budget)


def fit_budget(ranked: Sequence[Recalled], *, limit: int, token_budget: int | None) -> list[Recalled]:
    """Take ranked memories in order while they fit; one that does not fit is skipped."""
    out: list[Recalled] = []
    left = token_budget
    for item in ranked:
        if len(out) >= limit:
            break
        if left is not None:
            if item.tokens > left:
                continue
            left -= item.tokens
        out.append(item)
    return out


KIND_LABELS = {"episode": "经历", "diary": "日记", "chat": "聊天", "fact": "记得", "file": "资料"}


def render_memories(items: Sequence[Recalled], tz: Any = None) -> str:
    """``- [日记 09-01] ...`` lines, for a prompt."""
    lines = []
    for item in items:
        when = item.time.astimezone(tz) if tz else item.time
        lines.append(f"- [{KIND_LABELS.get(item.kind, item.kind)} {when:%m-%d}] {item.text}")
    return "\n".join(lines)
