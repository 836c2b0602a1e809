"""Chat memories and their nightly distillation into facts per user.

Raw chat memories (what a user said to her, with the platform-qualified user id) go to the
history store (``chat_memories``) and to semantic memory (kind ``chat``, the user's scope).
`Distiller.run` — an APScheduler job at ``[memory].distill_at`` local time, or on demand — takes
the undistilled ones, groups them **per user** (one LLM call sees one user's messages only),
extracts facts that keep that user id, merges them with the user's existing facts (the same
normalised text, or a near-identical one by embedding, updates the existing fact instead of adding
one), marks the raw memories distilled, and applies retention. Running it twice changes nothing.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field

from yuiju.llm import ChatModel, JsonSchema, ask_structured
from yuiju.llm.errors import LLMError
from yuiju.llm.tokens import estimate_tokens
from yuiju.memory.lexical import addressed_names
from yuiju.memory.semantic import NewMemory, SemanticMemory
from yuiju.memory.timeparse import referred_range
from yuiju.memory.vectors import Where, group_scope, point_id, private_scope, user_scope
from yuiju.storage.history import CollectionSpec, HistoryStore

log = logging.getLogger(__name__)

CHAT_MEMORIES = CollectionSpec(
    name="chat_memories",
    fields=("character_id", "user_id", "group_id", "distilled", "indexed", "time"),
    indexes=(
        ("character_id", "distilled", "time"),
        ("character_id", "user_id", "time"),
        ("character_id", "indexed", "time"),
        ("character_id", "group_id", "time"),
    ),
)
FACTS = CollectionSpec(
    name="facts",
    fields=("character_id", "user_id", "indexed", "time"),
    indexes=(("character_id", "user_id", "time"), ("character_id", "indexed", "time")),
)

DUPLICATE_SIMILARITY = 0.92
"""A new fact at least this similar (cosine) to an existing fact of the same user updates it."""


def _norm(text: str) -> str:
    return re.sub(r"[\s\u3000。，、！？,.!?；;：:\"'“”‘’]+", "", text).lower()


def chat_memory_id(character_id: str, user_id: str, time: datetime, text: str) -> str:
    digest = hashlib.sha1(
        f"{character_id}|{user_id}|{time.isoformat()}|{text}".encode()
    ).hexdigest()[:20]
    return f"chat_{digest}"


def fact_id(character_id: str, user_id: str, content: str) -> str:
    digest = hashlib.sha1(f"{character_id}|{user_id}|{_norm(content)}".encode()).hexdigest()[:20]
    return f"fact_{digest}"


class Fact(BaseModel):
    content: str = Field(min_length=1, max_length=200)
    importance: float = Field(0.6, ge=0, le=1)


class Extracted(BaseModel):
    facts: list[Fact] = Field(default_factory=list)


PROMPT = """你是记忆整理员。下面是用户 {user_id} 对{name}说过的话。
提取值得长期记住的关于这个用户的事实：他陈述的事实、喜好、习惯、重要的决定和计划、反复出现的话题。
跳过一次性的问答、寒暄和已经过时的信息。每条事实是一句完整的中文，主语写"这个用户"。没有就输出空列表。
已经记住的事实（不要重复）：
{known}

用户说过的话：
{transcript}

只输出一个 JSON 对象：{{"facts": [{{"content": "事实", "importance": 0.0-1.0}}]}}"""


@dataclass
class DistillReport:
    users: int = 0
    processed: int = 0
    facts_added: int = 0
    facts_updated: int = 0
    deleted: int = 0
    failed_users: list[str] = field(default_factory=list)
    waiting_without_model: int = 0
    """Chat memories left undistilled because no model is configured (``[llm]``)."""


@dataclass(frozen=True, kw_only=True)
class ChatLine:
    """One thing a user said (see `ChatMemories.add`)."""

    user_id: str
    """Platform-qualified, e.g. ``qq:12345``."""
    text: str
    time: datetime
    """When it was said (aware)."""
    group_id: str = ""
    """Where it was said; empty: in a private chat with her."""
    nickname: str = ""
    """The speaker's display name: indexed with the line, so a question naming them finds it."""


CONTEXT_TOKENS = 24
"""How much of the line before a line is embedded with: its last sentences, up to about this many
tokens (`llm.tokens.estimate_tokens`: some 80 Latin or 40 Chinese characters). A reply answers the
end of a line, where a question usually is; more would blur the line's own meaning and cost
embedding time (bench/README.md)."""

_SENTENCE_END = re.compile(r"(?<=[.!?。！？…~])\s*")


def line_end(text: str, limit: int = CONTEXT_TOKENS) -> str:
    """The last sentences of ``text`` that fit in about ``limit`` tokens (at least the last one,
    cut to its end)."""
    sentences = [s for s in _SENTENCE_END.split(text.strip()) if s]
    out = ""
    for sentence in reversed(sentences):
        joined = f"{sentence} {out}".strip() if sentence.isascii() else sentence + out
        if out and estimate_tokens(joined) > limit:
            break
        out = joined
    while estimate_tokens(out) > limit:  # one long sentence: its end
        out = out[max(1, len(out) - int(len(out) * limit / estimate_tokens(out))) :]
    return out


def _told(line: dict[str, Any], tz_of: datetime) -> tuple[datetime, datetime] | None:
    """When what ``line`` tells of happened, if it names a time (stored, or read from its text
    for a line stored before that was kept)."""
    if line.get("about_start"):
        return line["about_start"], line["about_end"]
    referred = referred_range(line["text"], line["time"].astimezone(tz_of.tzinfo))
    return (referred.start, referred.last) if referred else None


def _chat(doc: dict[str, Any]) -> tuple[str, str]:
    """Which conversation a line belongs to: its group, or the private chat of its speaker."""
    return (doc["group_id"], "") if doc.get("group_id") else ("", doc["user_id"])


def asks(text: str) -> bool:
    """Whether a line ends by asking something (a question mark in its last sentences): the line
    after it is then read as its answer."""
    end = line_end(text)
    return "?" in end or "？" in end


def embedded_chat_text(doc: dict[str, Any]) -> str:
    """What the dense vector of a chat memory embeds: the line with its speaker's name, after the
    end of the line it answers with that speaker's name."""
    line = f"{doc['nickname']}: {doc['text']}" if doc.get("nickname") else doc["text"]
    context = line_end(doc.get("context_text", ""))
    if not context:
        return line
    return (
        f"{doc['context_nickname']}: {context}\n{line}"
        if doc.get("context_nickname")
        else f"{context}\n{line}"
    )


_MS = timedelta(milliseconds=1)
"""Stored times are cut to the millisecond: a line's time is matched within one."""
_CONTEXT_FIELDS = frozenset({"reply_to", "answer", "context_text", "context_nickname"})
"""What a line keeps of the line before it."""


class ChatMemories:
    """Raw chat memories: store one per user message.

    A line is read in its conversation. It is linked (``reply_to``) to the line before it in the
    same chat (group, or private chat) when that came at most ``context_minutes`` earlier. When
    it answers that line (the line before asked something, `asks`) or asks about it (the line
    itself asks: "Wow, how was it?" after "I went to the support group!"), it is also embedded
    after the end of that line and indexed at a lower weight with its words (`memory.semantic`);
    at recall an answer moves toward the relevance of what it answers. A reaction ("Glad to
    hear.") is read alone: carrying the news along, it would crowd the news out of the first
    places (bench/README.md). ``add`` is called one line at a time, so the last line of each chat
    is kept here; after a restart it is read back from the history store. Lines must come in the
    order they were said.

    A line that names a time ("上个月我去青岛冲浪了", "I'm flying to Lisbon next week") tells of
    that time, resolved against when it was said (`memory.timeparse.referred_range`), and an
    answer or a question about it that names none tells of the same time ("Ooh, what's it of?" /
    "A stormy sea."): ``about_start`` / ``about_end``, which a question naming a time searches
    (`memory.semantic`). The names a line greets someone by ("Hey Han!") are kept as
    ``addressed``: with the speakers' names they are not searched as words.
    """

    LAST_CHATS = 4096
    """Chats whose last line is kept in memory (the oldest is dropped; the history has them all)."""

    def __init__(
        self,
        history: HistoryStore,
        semantic: SemanticMemory | None,
        character_id: str,
        *,
        context_minutes: float = 60.0,
    ) -> None:
        self.history = history
        self.semantic = semantic
        self.character_id = character_id
        self.context_gap = timedelta(minutes=context_minutes)
        self._last: dict[tuple[str, str], dict[str, Any]] = {}

    async def ensure(self) -> None:
        await self.history.ensure(CHAT_MEMORIES, FACTS)

    async def add(
        self, user_id: str, text: str, time: datetime, *, group_id: str = "", nickname: str = ""
    ) -> str:
        """Store what ``user_id`` said; idempotent for the same (user, time, text)."""
        return (
            await self.add_many(
                [
                    ChatLine(
                        user_id=user_id, text=text, time=time, group_id=group_id, nickname=nickname
                    )
                ]
            )
        )[0]

    async def add_many(self, lines: Sequence[ChatLine]) -> list[str]:
        """Store many chat lines with one history write and one embedding call (bulk import), in
        the order they were said."""
        docs: list[dict[str, Any]] = [
            {
                "_id": chat_memory_id(self.character_id, line.user_id, line.time, line.text),
                "character_id": self.character_id,
                "user_id": line.user_id,
                "group_id": line.group_id,
                "nickname": line.nickname,
                "text": line.text,
                "time": line.time,
                "distilled": False,
                "indexed": False,
            }
            for line in lines
        ]
        for doc in docs:
            if referred := referred_range(doc["text"], doc["time"]):
                doc.update(about_start=referred.start, about_end=referred.last)
            if addressed := addressed_names(doc["text"]):
                doc["addressed"] = addressed
        await self._link(docs)
        await self.history.put_many(CHAT_MEMORIES.name, docs)
        await self._index(docs)
        return [d["_id"] for d in docs]

    async def add_new(self, lines: Sequence[ChatLine]) -> tuple[list[str], int]:
        """`add_many` for the lines not stored yet (a log imported again, or after an
        interruption): the ids of the new ones, and how many were there already (left as they
        are: their distillation and indexing are kept). A new line after one already there is
        read with it, as if the whole log were added in order."""
        ids = [chat_memory_id(self.character_id, li.user_id, li.time, li.text) for li in lines]
        there = {
            d["_id"]: d
            for d in await self.history.find(CHAT_MEMORIES.name, eq={"_id": tuple(set(ids))})
        }
        added: list[str] = []
        already = 0
        run: list[ChatLine] = []
        for line, doc_id in zip(lines, ids, strict=True):
            if doc_id not in there:
                there[doc_id] = {}  # the same line twice in one log: the second is there
                run.append(line)
                continue
            already += 1
            if run:
                added += await self.add_many(run)
                run = []
            if stored := there[doc_id]:  # the context of the next new line in its chat
                self._last.pop(_chat(stored), None)
                self._last[_chat(stored)] = {
                    k: stored[k]
                    for k in ("_id", "time", "nickname", "text", "about_start", "about_end")
                    if k in stored
                }
        if run:
            added += await self.add_many(run)
        return added, already

    async def _link(self, docs: list[dict[str, Any]]) -> None:
        """Give each line the line before it in its chat as context (see the class docstring)."""
        if not self.context_gap:
            return
        batch = {d["_id"] for d in docs}  # not stored yet: linked among themselves
        for doc in docs:
            chat = _chat(doc)
            before = self._last.get(chat)
            if (
                before is None
                or before["_id"] == doc["_id"]
                or before["time"] > doc["time"]
                or (before["_id"] not in batch and await self._forgotten(before, doc))
            ):
                before = await self._line_before(doc)
            if (
                before is not None
                and before["_id"] != doc["_id"]
                and timedelta(0) <= doc["time"] - before["time"] <= self.context_gap
            ):
                doc["reply_to"] = before["_id"]
                doc["answer"] = asks(before["text"])
                if doc["answer"] or asks(
                    doc["text"]
                ):  # an answer, or a question about what was just said
                    doc.update(
                        context_nickname=before.get("nickname", ""), context_text=before["text"]
                    )
                    if "about_start" not in doc and (told := _told(before, doc["time"])):
                        doc["about_start"], doc["about_end"] = told
            self._last.pop(chat, None)
            self._last[chat] = {
                k: doc[k]
                for k in ("_id", "time", "nickname", "text", "about_start", "about_end")
                if k in doc
            }
            if len(self._last) > self.LAST_CHATS:
                del self._last[next(iter(self._last))]

    async def _forgotten(self, before: dict[str, Any], doc: dict[str, Any]) -> bool:
        """Whether the kept last line ``before`` was forgotten since (`memory.governance`, maybe
        in another process): it must not become the context of ``doc``."""
        if doc["time"] - before["time"] > self.context_gap:
            return False  # too old to be its context anyway
        return not await self.history.count(CHAT_MEMORIES.name, eq={"_id": before["_id"]})

    async def _line_before(self, doc: dict[str, Any]) -> dict[str, Any] | None:
        """The latest stored line of the chat of ``doc`` said no later than it (after a restart)."""
        group, user = _chat(doc)
        eq = {
            "character_id": self.character_id,
            "group_id": group,
            **({"user_id": user} if user else {}),
        }
        found = await self.history.find(
            CHAT_MEMORIES.name,
            eq=eq,
            ranges={
                "time": (doc["time"] - self.context_gap, doc["time"] + timedelta(milliseconds=1))
            },
            sort="time",
            descending=True,
            limit=2,
        )
        return next((d for d in found if d["_id"] != doc["_id"]), None)

    async def _index(self, docs: list[dict[str, Any]]) -> int:
        """Put raw chat memories into semantic memory and mark them; a failure leaves them for
        `index_pending` (the memory worker retries), so nothing said is lost to recall."""
        if self.semantic is None or not docs:
            return 0
        try:
            await self.semantic.remember(
                [
                    NewMemory(
                        kind="chat",
                        character_id=self.character_id,
                        text=d["text"],
                        time=d["time"],
                        key=d["_id"],
                        user_id=d["user_id"],
                        group_id=d.get("group_id", ""),
                        importance=0.3,
                        about=(d["about_start"], d["about_end"]) if d.get("about_start") else None,
                        # who said it and what it answers are part of what is searched: "what did Ann say
                        # about ..." finds Ann's lines, and a reply is found by what it replied to
                        embed_text=embedded_chat_text(d)
                        if d.get("nickname") or d.get("context_text")
                        else None,
                        context=d.get("context_text", ""),
                        extra={
                            "speaker": d.get("nickname", ""),
                            **({"addressed": d["addressed"]} if d.get("addressed") else {}),
                            **(
                                {
                                    "reply_to": point_id("chat", self.character_id, d["reply_to"]),
                                    "answer": bool(d.get("answer")),
                                }
                                if d.get("reply_to")
                                else {}
                            ),
                        },
                        # said in a group: that group's; said in private: only her private chat with them
                        scope=group_scope(d["group_id"])
                        if d.get("group_id")
                        else private_scope(d["user_id"]),
                    )
                    for d in docs
                ]
            )
        except Exception as exc:
            log.warning(
                "%d chat memor(ies) stored but not indexed yet (will retry): %s", len(docs), exc
            )
            return 0
        await self.history.put_many(CHAT_MEMORIES.name, [{**d, "indexed": True} for d in docs])
        return len(docs)

    async def index_pending(self, limit: int = 200) -> int:
        """Retry indexing chat memories whose indexing failed earlier (vector store or embedder down)."""
        pending = await self.history.find(
            CHAT_MEMORIES.name,
            eq={"character_id": self.character_id, "indexed": False},
            sort="time",
            limit=limit,
        )
        return await self._index(pending)

    async def forget(self, user_id: str, time: datetime, text: str) -> int:
        """Forget what ``user_id`` said at ``time`` (a message taken back, 撤回): its stored
        line and its vector, and what the next line of its chat carried of it as context (that
        line is indexed again without it). How many lines were forgotten (0: none was stored)."""
        found = await self.history.find(
            CHAT_MEMORIES.name,
            eq={"character_id": self.character_id, "user_id": user_id},
            ranges={"time": (time - _MS, time + _MS)},
        )
        gone = [d for d in found if d.get("text") == text]
        for doc in gone:
            await self.history.delete(CHAT_MEMORIES.name, doc["_id"])
            if self.semantic is not None:
                await self.semantic.forget(ref=doc["_id"], kind="chat")
            chat = _chat(doc)
            if self._last.get(chat, {}).get("_id") == doc["_id"]:
                del self._last[chat]  # the next line must not be read after it
            await self._unlink(doc)
        return len(gone)

    async def _unlink(self, doc: dict[str, Any]) -> None:
        """Lines read after ``doc`` (forgotten) lose it as their context and are indexed again."""
        group, user = _chat(doc)
        eq = {
            "character_id": self.character_id,
            "group_id": group,
            **({"user_id": user} if user else {}),
        }
        later = await self.history.find(
            CHAT_MEMORIES.name,
            eq=eq,
            ranges={"time": (doc["time"], doc["time"] + self.context_gap + _MS)},
        )
        for line in later:
            if line.get("reply_to") != doc["_id"]:
                continue
            alone = {k: v for k, v in line.items() if k not in _CONTEXT_FIELDS}
            alone["indexed"] = False
            await self.history.put(CHAT_MEMORIES.name, alone)
            await self._index([alone])

    async def facts(self, user_id: str) -> list[dict[str, Any]]:
        return await self.history.find(
            FACTS.name, eq={"character_id": self.character_id, "user_id": user_id}, sort="time"
        )


class Distiller:
    def __init__(
        self,
        history: HistoryStore,
        semantic: SemanticMemory | None,
        model: ChatModel | None,
        *,
        character_id: str,
        name: str = "悠酱",
        keep_distilled_days: int = 7,
        keep_undistilled_days: int = 30,
        keep_chat_log_days: int | None = None,
        keep_unreferenced_chat_days: int | None = None,
        batch: int = 500,
    ) -> None:
        self.history = history
        self.semantic = semantic
        self.model = model
        self.character_id = character_id
        self.name = name
        self.keep_distilled = timedelta(days=keep_distilled_days)
        self.keep_undistilled = timedelta(days=keep_undistilled_days)
        self.keep_chat_log = timedelta(days=keep_chat_log_days) if keep_chat_log_days else None
        """Message-log lines older than this are deleted (None: kept)."""
        self.keep_unreferenced = (
            timedelta(days=keep_unreferenced_chat_days) if keep_unreferenced_chat_days else None
        )
        """Chat memories no fact cites, older than this, are deleted (None: kept)."""
        self.batch = batch

    async def run(self, now: datetime) -> DistillReport:
        report = DistillReport()
        if self.model is not None:
            pending = await self.history.find(
                CHAT_MEMORIES.name,
                eq={"character_id": self.character_id, "distilled": False},
                ranges={"time": (None, now)},
                sort="time",
                limit=self.batch,
            )
            by_user: dict[str, list[dict[str, Any]]] = {}
            for doc in pending:
                by_user.setdefault(doc["user_id"], []).append(doc)
            for user_id, docs in by_user.items():
                report.users += 1
                try:
                    added, updated = await self._distil_user(user_id, docs, now)
                except LLMError as exc:
                    log.warning("distillation for %s failed, will retry next run: %s", user_id, exc)
                    report.failed_users.append(user_id)
                    continue
                report.facts_added += added
                report.facts_updated += updated
                for doc in docs:  # marked only after the facts are stored
                    await self.history.put(
                        CHAT_MEMORIES.name, {**doc, "distilled": True, "distilled_at": now}
                    )
                report.processed += len(docs)
        else:  # say what waits, not "nothing to distil"
            report.waiting_without_model = await self.history.count(
                CHAT_MEMORIES.name,
                eq={"character_id": self.character_id, "distilled": False},
                ranges={"time": (None, now)},
            )
        report.deleted = await self._retention(now)
        log.info("distillation: %s", report)
        return report

    async def _distil_user(
        self, user_id: str, docs: list[dict[str, Any]], now: datetime
    ) -> tuple[int, int]:
        assert self.model is not None
        existing = await self.history.find(
            FACTS.name, eq={"character_id": self.character_id, "user_id": user_id}, sort="time"
        )
        prompt = PROMPT.format(
            user_id=user_id,
            name=self.name,
            known="\n".join(f"- {f['content']}" for f in existing) or "（无）",
            transcript="\n".join(f"[{d['time']:%m-%d %H:%M}] {d['text']}" for d in docs),
        )
        facts = (
            await ask_structured(
                self.model,
                [{"role": "user", "content": prompt}],
                Extracted.model_validate_json,
                max_attempts=2,
                json_schema=JsonSchema(name="facts", schema=Extracted.model_json_schema()),
                temperature=0.1,
                purpose="distill",
            )
        ).value.facts
        known = {f["_id"]: f for f in existing}
        added = updated = 0
        for fact in facts:
            target = fact_id(self.character_id, user_id, fact.content)
            if target not in known and self.semantic is not None:
                target = await self._near_duplicate(user_id, fact.content, now) or target
            previous = known.get(target)
            doc: dict[str, Any] = {
                "_id": target,
                "character_id": self.character_id,
                "user_id": user_id,
                "content": fact.content,
                "importance": max(fact.importance, previous["importance"])
                if previous
                else fact.importance,
                "time": previous["time"] if previous else now,
                "updated_at": now,
                "sources": sorted(
                    {*(previous or {}).get("sources", []), *(d["_id"] for d in docs)}
                ),
                "indexed": False,
            }
            if (
                previous
                and previous["content"] == doc["content"]
                and previous["importance"] == doc["importance"]
            ):
                continue
            await self.history.put(FACTS.name, doc)
            known[target] = doc
            if self.semantic is not None:
                try:
                    await self.semantic.remember(
                        [
                            NewMemory(
                                kind="fact",
                                character_id=self.character_id,
                                text=fact.content,
                                time=now,
                                key=target,
                                user_id=user_id,
                                importance=doc["importance"],
                            )
                        ]
                    )
                    await self.history.put(FACTS.name, {**doc, "indexed": True})
                except Exception as exc:  # kept with indexed=False: the memory worker retries it
                    log.warning("fact %s stored but not indexed yet (will retry): %s", target, exc)
            added, updated = (added, updated + 1) if previous else (added + 1, updated)
        return added, updated

    async def _near_duplicate(self, user_id: str, content: str, now: datetime) -> str | None:
        assert self.semantic is not None
        vector = await self.semantic.embedder.embed_query(content)
        hits = await self.semantic.store.query(
            vector,
            Where(
                eq={"character_id": self.character_id, "kind": "fact", "scope": user_scope(user_id)}
            ),
            1,
        )
        if hits and hits[0].score >= DUPLICATE_SIMILARITY:
            return str(hits[0].payload.get("ref")) or None
        return None

    async def _retention(self, now: datetime) -> int:
        """Delete raw chat memories distilled more than keep_distilled ago (by message time) and
        undistilled ones older than keep_undistilled; when set, chat memories no fact cites older
        than keep_unreferenced and message-log lines older than keep_chat_log (then compact)."""
        doomed: list[str] = []
        for distilled, keep in ((True, self.keep_distilled), (False, self.keep_undistilled)):
            docs = await self.history.find(
                CHAT_MEMORIES.name,
                eq={"character_id": self.character_id, "distilled": distilled},
                ranges={"time": (None, now - keep)},
                sort="time",
            )
            doomed += [d["_id"] for d in docs]
        if self.keep_unreferenced is not None:
            cited = {
                source
                for fact in await self.history.find(
                    FACTS.name, eq={"character_id": self.character_id}
                )
                for source in fact.get("sources", [])
            }
            for distilled in (True, False):
                docs = await self.history.find(
                    CHAT_MEMORIES.name,
                    eq={"character_id": self.character_id, "distilled": distilled},
                    ranges={"time": (None, now - self.keep_unreferenced)},
                )
                doomed += [d["_id"] for d in docs if d["_id"] not in cited]
        doomed = list(dict.fromkeys(doomed))
        for doc_id in doomed:
            await self.history.delete(CHAT_MEMORIES.name, doc_id)
        logged = 0
        if self.keep_chat_log is not None:
            from yuiju.memory.messagelog import CHAT_LOG

            await self.history.ensure(CHAT_LOG)
            while old := await self.history.find(
                CHAT_LOG.name,
                eq={"character_id": self.character_id},
                ranges={"time": (None, now - self.keep_chat_log)},
                limit=self.batch,
            ):
                for doc in old:
                    logged += int(await self.history.delete(CHAT_LOG.name, doc["_id"]))
            if logged:
                log.info("retention: %d message-log lines deleted", logged)
        if logged or (doomed and self.keep_unreferenced is not None):
            await self.history.compact()  # what retention removed leaves no bytes behind
        if doomed and self.semantic is not None:
            try:
                await self.semantic.forget(ref=doomed, kind="chat")
            except Exception as exc:
                log.warning("retention: %d chat memories left in Qdrant: %s", len(doomed), exc)
        return len(doomed)


def schedule_distillation(
    scheduler: Any,
    job: Callable[[], Awaitable[Any]],
    *,
    at: str,
    tz: Any,
    job_id: str = "memory-distill",
) -> Any:
    """Add the nightly job to an APScheduler 3.x `AsyncIOScheduler` (aware, in ``tz``)."""
    from apscheduler.triggers.cron import CronTrigger

    hour, minute = (int(x) for x in at.split(":"))
    return scheduler.add_job(
        job,
        CronTrigger(hour=hour, minute=minute, timezone=tz),
        id=job_id,
        replace_existing=True,
        coalesce=True,
        max_instances=1,
        misfire_grace_time=3600,
    )
