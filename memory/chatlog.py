"""Bulk import of chat logs into her chat memories (``yuiju memory import FILE``).

The file is JSON Lines, UTF-8, one message per line::

    {"time": "2026-03-05T20:15:00+08:00", "user_id": "qq:12345", "text": "我下周要去海边",
     "group_id": "qq:67890", "nickname": "小明"}

- ``time``: ISO 8601 with a UTC offset (a time without one is refused: it would be guessed);
- ``user_id``: who said it, platform-qualified like the bot writes it (``qq:<number>``,
  ``tg:<id>``); a plain number is read as a QQ number;
- ``text``: what they said (not empty);
- ``group_id`` (optional): the group it was said in, platform-qualified (a plain number: a QQ
  group); absent or empty: said to
  her in private, so it is recalled only in her private chat with that user (as live chat is);
- ``nickname`` (optional): the speaker's display name, indexed with the line.

Blank lines are ignored. The whole file is checked before anything is written: with a bad line
(not JSON, a missing or wrong field) nothing is imported and every bad line is reported with its
number, unless ``skip_bad`` is set, in which case the bad lines are reported and skipped and the
rest imported. Importing is idempotent (a line's id comes from user, time and text), so running
the same file again, or again after an interruption, adds nothing twice: a line already stored is
counted as such and left as it is (distilled or not). Lines are written in
batches: one history write and one embedding call per batch; if the embedder or the vector store
fails the lines are still stored and the memory worker indexes them later.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, field_validator

from yuiju.config import qualify_id
from yuiju.memory.distill import CHAT_MEMORIES, ChatLine, ChatMemories


class LogLine(BaseModel):
    """One line of a chat log (see the module docstring)."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)
    time: AwareDatetime
    user_id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    group_id: str = ""
    nickname: str = ""

    @field_validator("user_id", "group_id")
    @classmethod
    def _qualified(cls, value: str) -> str:
        return qualify_id(value) if value else value


@dataclass
class ParsedLog:
    lines: list[ChatLine] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """``line N: what is wrong``, in file order."""


def parse_chat_log(path: Path) -> ParsedLog:
    """Read and check every line of ``path``; nothing is written."""
    out = ParsedLog()
    with path.open(encoding="utf-8") as f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                line = LogLine.model_validate(json.loads(raw))
            except json.JSONDecodeError as exc:
                out.errors.append(f"line {number}: not JSON ({exc.msg} at column {exc.colno})")
                continue
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'line'}: {e['msg']}" for e in exc.errors()
                )
                out.errors.append(f"line {number}: {problems}")
                continue
            out.lines.append(
                ChatLine(
                    user_id=line.user_id,
                    text=line.text,
                    time=line.time,
                    group_id=line.group_id,
                    nickname=line.nickname,
                )
            )
    return out


@dataclass
class ImportReport:
    imported: int = 0
    """New lines stored."""
    already: int = 0
    """Lines of the log stored before (an earlier import of it), left as they were."""
    skipped: int = 0
    """Bad lines left out (with ``skip_bad``)."""
    not_indexed: int = 0
    """Stored, but waiting for the memory worker to index them (embedder or vector store failed)."""


async def import_chat_log(
    chat: ChatMemories,
    lines: list[ChatLine],
    *,
    batch: int = 256,
    progress: Callable[[int], object] | None = None,
) -> ImportReport:
    """Store ``lines`` as chat memories, ``batch`` at a time."""
    report = ImportReport()
    for start in range(0, len(lines), batch):
        part = lines[start : start + batch]
        added, already = await chat.add_new(part)
        report.imported += len(added)
        report.already += already
        if progress:
            progress(len(part))
    report.not_indexed = await chat.history.count(
        CHAT_MEMORIES.name, eq={"character_id": chat.character_id, "indexed": False}
    )
    return report
