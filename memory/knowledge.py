"""Knowledge files: lore texts indexed for search, incrementally.

Files ending in .md or .txt under the given folders (``characters/<id>/lore`` and
``[memory].knowledge_dirs``) are cut into chunks of whole paragraphs up to ``chunk_chars``
characters, each chunk repeating the last ``overlap`` characters of the previous one (a real
character overlap, so a sentence cut at a boundary is whole in one of the two). A paragraph
longer than a chunk is split by characters. Only files whose content hash changed are
re-indexed; deleted files lose their points. Nothing else is read (no config, no secrets).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from yuiju.memory.semantic import NewMemory, SemanticMemory
from yuiju.storage.history import CollectionSpec, HistoryStore

log = logging.getLogger(__name__)

KNOWLEDGE_FILES = CollectionSpec(
    name="knowledge_files",
    fields=("character_id",),
    indexes=(("character_id",),),
)
EXTENSIONS = (".md", ".txt")


@dataclass(frozen=True)
class Chunk:
    text: str
    start_line: int
    """1-based line of the chunk's first new paragraph."""
    end_line: int


def chunk_paragraphs(text: str, *, size: int = 500, overlap: int = 80) -> list[Chunk]:
    """Paragraph chunks (blank-line separated) of at most ``size`` characters plus ``overlap``."""
    if overlap >= size:
        raise ValueError(f"overlap {overlap} must be smaller than the chunk size {size}")
    paragraphs: list[tuple[str, int, int]] = []
    lines = text.splitlines()
    start: int | None = None
    buf: list[str] = []
    for n, line in enumerate([*lines, ""], start=1):
        if line.strip():
            start = n if start is None else start
            buf.append(line.rstrip())
        elif buf:
            assert start is not None
            whole = "\n".join(buf)
            for i in range(0, len(whole), size):  # an overlong paragraph is split by characters
                paragraphs.append((whole[i : i + size], start, n - 1))
            buf, start = [], None
    chunks: list[Chunk] = []
    current: list[tuple[str, int, int]] = []

    def flush() -> None:
        body = "\n\n".join(p for p, _, _ in current)
        tail = chunks[-1].text[-overlap:] if chunks and overlap else ""
        chunks.append(Chunk((tail + "\n" if tail else "") + body, current[0][1], current[-1][2]))

    for para in paragraphs:
        if current and sum(len(p) + 2 for p, _, _ in current) + len(para[0]) > size:
            flush()
            current = []
        current.append(para)
    if current:
        flush()
    return chunks


@dataclass
class SyncReport:
    indexed: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


class KnowledgeIndex:
    def __init__(
        self,
        history: HistoryStore,
        semantic: SemanticMemory,
        character_id: str,
        *,
        chunk_chars: int = 500,
        overlap: int = 80,
    ) -> None:
        self.history = history
        self.semantic = semantic
        self.character_id = character_id
        self.chunk_chars = chunk_chars
        self.overlap = overlap

    async def ensure(self) -> None:
        await self.history.ensure(KNOWLEDGE_FILES)

    @staticmethod
    def files(roots: Sequence[Path]) -> dict[str, Path]:
        out: dict[str, Path] = {}
        for root in roots:
            if not root.is_dir():
                continue
            for path in sorted(root.rglob("*")):
                if (
                    path.is_file()
                    and path.suffix.lower() in EXTENSIONS
                    and not any(p.startswith(".") for p in path.parts)
                ):
                    out[str(path.resolve())] = path
        return out

    async def sync(self, roots: Sequence[Path], now: datetime) -> SyncReport:
        """Index changed and new files, drop deleted ones."""
        report = SyncReport()
        known = {
            d["_id"]: d
            for d in await self.history.find(
                KNOWLEDGE_FILES.name, eq={"character_id": self.character_id}
            )
        }
        found = self.files(roots)
        for key, path in found.items():
            doc_id = f"kf_{hashlib.sha1(f'{self.character_id}|{key}'.encode()).hexdigest()[:20]}"
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                log.warning("knowledge file %s skipped: %s", path, exc)
                report.failed.append(key)
                continue
            digest = hashlib.sha256(text.encode()).hexdigest()
            if known.get(doc_id, {}).get("sha256") == digest:
                report.unchanged += 1
                continue
            chunks = chunk_paragraphs(text, size=self.chunk_chars, overlap=self.overlap)
            await self.semantic.forget(ref=doc_id, kind="file")
            await self.semantic.remember(
                [
                    NewMemory(
                        kind="file",
                        character_id=self.character_id,
                        text=c.text,
                        time=now,
                        key=f"{doc_id}:{i}",
                        ref=doc_id,
                        importance=0.5,
                        embed_text=f"{path.stem}\n{c.text}",
                        extra={"path": key, "start_line": c.start_line, "end_line": c.end_line},
                    )
                    for i, c in enumerate(chunks)
                ]
            )
            await self.history.put(
                KNOWLEDGE_FILES.name,
                {
                    "_id": doc_id,
                    "character_id": self.character_id,
                    "path": key,
                    "sha256": digest,
                    "chunks": len(chunks),
                    "indexed_at": now,
                },
            )
            report.indexed.append(key)
        paths = set(found)
        for doc_id, doc in known.items():
            if doc["path"] not in paths:
                await self.semantic.forget(ref=doc_id, kind="file")
                await self.history.delete(KNOWLEDGE_FILES.name, doc_id)
                report.removed.append(doc["path"])
        return report
