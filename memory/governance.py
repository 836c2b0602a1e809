"""What she keeps about a person or a group: see it (`Governance.export`), erase it
(`Governance.forget`), forget or correct one memory (`forget_item`, `correct_fact`), audited.

A person is every account linked to them and the plain ids QQ accounts were stored under before
ids were qualified (`Subject.ids`, built by the caller: the links live with the chat side). What
this module covers lives below the world: the history store (chat memories, facts, the person
profile, the message log, conversation and plan episodes, diaries), the vector store (every point
from or about them, and the rewritten episodes re-indexed), and the chat side's Redis keys (the
sessions' recent messages, open windows, model context and rolling summary, queued and rejected
world commands, account links, the event stream). What lives in the characters' states
(closeness, news, appointments, notes, gifts) is the world's: the ``forget_person`` world command
erases it, applied by the engine, the one writer.

Their lines are taken out of the records they share with others (a group's conversation episode,
a talk between characters that passed their news on): the record stays, rewritten without them.
A sentence that names them (a summary, a diary) goes as a whole (`scrub`). After a forget the
stores are compacted (`HistoryStore.compact`, `VectorStore.compact`, Redis's AOF and RDB
rewritten), so the embedded stores' files under the data dir no longer hold their words.

The audit log (``memory_audit``) records who asked, when, what kind of subject and the counts per
store, never the content nor the subject's ids.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, Literal

from yuiju.memory.diary import DIARIES, Diary, DiaryVoice, DiaryWriter
from yuiju.memory.distill import CHAT_MEMORIES, FACTS, ChatMemories
from yuiju.memory.episodes import EPISODES, EpisodeRepo
from yuiju.memory.messagelog import CHAT_LOG
from yuiju.memory.persons import PERSONS
from yuiju.memory.semantic import NewMemory, SemanticMemory
from yuiju.memory.vectors import Where, group_scope, private_scope, user_scope
from yuiju.storage.history import CollectionSpec, HistoryStore
from yuiju.storage.keys import Keys
from yuiju.storage.redis import RedisClient, decoded

log = logging.getLogger(__name__)

__all__ = [
    "MEMORY_AUDIT",
    "Governance",
    "GovernanceDeps",
    "Item",
    "Overview",
    "Subject",
    "scrub",
]

MEMORY_AUDIT = CollectionSpec(
    name="memory_audit", fields=("time", "request_id"), indexes=(("time",), ("request_id",))
)
"""One document per forget or correction: who asked, when, counts per store; no content."""

SubjectKind = Literal["user", "group"]
FORGOTTEN = "（这条消息已按要求遗忘）"
"""What a model-context item that held their words says instead (the conversation's turns stay
in order: a tool call keeps its answer)."""
_2MS = timedelta(milliseconds=2)
PAGE = 500
"""Documents read per query while scanning a character's episodes or message log."""
_SENTENCE = re.compile(r"[^。！？!?；;\n]*[。！？!?；;\n]?")


@dataclass(frozen=True)
class Subject:
    """Whose memories: a person (``user``) or a group, and every id they are stored under."""

    kind: SubjectKind
    id: str
    """As asked: the person (the first account of a link) or the group, platform-qualified."""
    ids: tuple[str, ...]
    """Every id their memories may be stored under: each linked account, and the plain number a
    QQ account or group was stored under before ids were qualified."""

    def __post_init__(self) -> None:
        if not self.ids or self.id not in self.ids:
            raise ValueError(f"Subject {self.id!r}: ids {self.ids!r} must include the id itself")

    @property
    def scopes(self) -> list[str]:
        """The vector-store scopes of what is theirs."""
        if self.kind == "group":
            return [group_scope(i) for i in self.ids]
        return [s for i in self.ids for s in (user_scope(i), private_scope(i))]

    @property
    def sessions(self) -> list[str]:
        """Their own chat sessions (a person's private chat, a group's chat)."""
        prefix = "private" if self.kind == "user" else "group"
        return [f"{prefix}:{i}" for i in self.ids]


@dataclass(frozen=True, kw_only=True)
class Item:
    """One thing kept about them, and where it lives."""

    store: Literal["history", "vectors", "redis"]
    where: str
    """The collection, or the Redis key."""
    id: str
    """The document's id, the point's id, or the entry's position."""
    content: Any
    """The document, the payload, the value."""

    def document(self) -> dict[str, Any]:
        return {"store": self.store, "where": self.where, "id": self.id, "content": self.content}


@dataclass
class Overview:
    """`Governance.overview`: their profiles, their facts, how many of their lines are kept."""

    profiles: list[dict[str, Any]] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)
    chat_memories: int = 0
    log_lines: int = 0


@dataclass(frozen=True, kw_only=True)
class GovernanceDeps:
    """What governance reads and writes."""

    history: HistoryStore
    semantic: SemanticMemory | None
    """The vector store and its embedder (re-indexes the episodes rewritten); None: no memory."""
    redis: RedisClient | None
    keys: Keys
    character_ids: Sequence[str]
    tz: tzinfo = UTC
    """The town's zone ([app].timezone): a rewritten diary is indexed at 21:00 of its last day."""


@dataclass
class _Plan:
    """What a forget does to the history store, worked out before anything is written."""

    deleted: dict[str, list[str]] = field(default_factory=dict)
    """Collection -> ids of documents to delete."""
    rewritten: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Collection -> documents to write back without them."""

    def delete(self, collection: str, doc_id: str) -> None:
        self.deleted.setdefault(collection, []).append(doc_id)

    def rewrite(self, collection: str, doc: dict[str, Any]) -> None:
        self.rewritten.setdefault(collection, []).append(doc)


def scrub(text: str, names: Iterable[str]) -> str:
    """``text`` without the sentences that name any of ``names``."""
    wanted = [n for n in names if n]
    if not wanted or not any(n in text for n in wanted):
        return text
    kept = [s for s in _SENTENCE.findall(text) if s and not any(n in s for n in wanted)]
    return "".join(kept).strip()


def _names_in(value: Any, names: Sequence[str]) -> bool:
    """Whether any of ``names`` is in any string of ``value`` (nested)."""
    if isinstance(value, str):
        return any(n in value for n in names)
    if isinstance(value, Mapping):
        return any(_names_in(v, names) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_names_in(v, names) for v in value)
    return False


def _party_id(value: Any) -> str:
    return str(value.get("id", "")) if isinstance(value, Mapping) else ""


def _split(account: str) -> tuple[str, str]:
    """(platform, user id) of an account; a plain number is QQ's."""
    platform, sep, rest = account.partition(":")
    return (platform, rest) if sep else ("qq", account)


class Governance:
    """Export, forget and correct what she keeps, for every configured character."""

    def __init__(self, deps: GovernanceDeps) -> None:
        self.deps = deps
        self.history = deps.history
        self._ensured = False

    async def ensure(self) -> None:
        if not self._ensured:
            await self.history.ensure(
                CHAT_MEMORIES, FACTS, PERSONS, CHAT_LOG, EPISODES, DIARIES, MEMORY_AUDIT
            )
            self._ensured = True

    # -- reading ----------------------------------------------------------------------------

    async def names(self, subject: Subject) -> list[str]:
        """The names they went by (profiles, what they said, the message log) and their ids:
        what a sentence naming them contains. Names of one letter and the characters' ids are
        left out (they would match sentences about anyone)."""
        await self.ensure()
        # a plain legacy number only when long enough not to be any number in a sentence
        found = {i for i in subject.ids if ":" in i or len(i) >= 5}
        if subject.kind == "user":
            for cid in self.deps.character_ids:
                for doc in await self._persons(cid, subject):
                    found.add(str(doc.get("nickname") or ""))
                for doc in await self._find_by(CHAT_MEMORIES, cid, "user_id", subject.ids):
                    found.add(str(doc.get("nickname") or ""))
                for doc in await self._find_by(CHAT_LOG, cid, "user_id", subject.ids):
                    found.add(str(doc.get("sender_name") or ""))
        return sorted(n for n in found if len(n) >= 2 and n not in self.deps.character_ids)

    async def export(self, subject: Subject) -> list[Item]:
        """Everything kept about them outside the characters' states, with where it lives."""
        await self.ensure()
        names = await self.names(subject)
        items: list[Item] = []
        plan = await self._plan(subject, names)
        for collection, doc_ids in plan.deleted.items():
            for doc_id in doc_ids:
                doc = await self.history.get(collection, doc_id)
                if doc is not None:
                    items.append(Item(store="history", where=collection, id=doc_id, content=doc))
        for collection, docs in plan.rewritten.items():
            for doc in docs:
                original = await self.history.get(collection, doc["_id"])
                theirs = _removed(original or {}, doc)
                if theirs:  # only their part of a record shared with others
                    items.append(
                        Item(store="history", where=collection, id=doc["_id"], content=theirs)
                    )
        for hit in await self._points(subject, plan, rewritten=False):
            items.append(
                Item(
                    store="vectors",
                    where=self.deps.semantic.store.name if self.deps.semantic else "",
                    id=hit[0],
                    content=hit[1],
                )
            )
        items += await self._redis_items(subject, names)
        return items

    async def overview(self, subject: Subject) -> Overview:
        """What she keeps of a person at a glance (their own request in chat): cheap indexed
        reads, not the whole export."""
        await self.ensure()
        out = Overview()
        ids = list(subject.ids)
        for cid in self.deps.character_ids:
            out.profiles += await self._persons(cid, subject)
            out.facts += await self._find_by(FACTS, cid, "user_id", ids)
            eq = {"character_id": cid, "user_id": ids}
            out.chat_memories += await self.history.count(CHAT_MEMORIES.name, eq=eq)
            out.log_lines += await self.history.count(CHAT_LOG.name, eq=eq)
        return out

    async def _persons(self, cid: str, subject: Subject) -> list[dict[str, Any]]:
        out = []
        for account in subject.ids:
            platform, user = _split(account)
            out += await self.history.find(
                PERSONS.name, eq={"character_id": cid, "platform": platform, "user_id": user}
            )
        return out

    async def _find_by(
        self, spec: CollectionSpec, cid: str, field_: str, values: Sequence[str]
    ) -> list[dict[str, Any]]:
        return await self.history.find(spec.name, eq={"character_id": cid, field_: list(values)})

    async def _scan(self, spec: CollectionSpec, eq: dict[str, Any]) -> list[dict[str, Any]]:
        """Every document matching ``eq``, a page at a time in time order."""
        out: list[dict[str, Any]] = []
        after: datetime | None = None
        seen: set[str] = set()
        while True:
            page = await self.history.find(
                spec.name, eq=eq, ranges={"time": (after, None)}, sort="time", limit=PAGE
            )
            fresh = [d for d in page if d["_id"] not in seen]
            out += fresh
            seen.update(d["_id"] for d in fresh)
            if len(page) < PAGE or not fresh:
                return out
            after = page[-1]["time"]

    async def _plan(self, subject: Subject, names: Sequence[str]) -> _Plan:
        plan = _Plan()
        ids = set(subject.ids)
        for cid in self.deps.character_ids:
            key = "user_id" if subject.kind == "user" else "group_id"
            gone = await self._find_by(CHAT_MEMORIES, cid, key, subject.ids)
            gone_ids = {d["_id"] for d in gone}
            for doc in gone:
                plan.delete(CHAT_MEMORIES.name, doc["_id"])
            # a line of someone else read with theirs (it answered them): kept, read alone
            for doc in await self._answers_to(cid, gone):
                if doc["_id"] in gone_ids:
                    continue
                alone = {
                    k: v
                    for k, v in doc.items()
                    if k not in ("reply_to", "answer", "context_text", "context_nickname")
                }
                plan.rewrite(CHAT_MEMORIES.name, {**alone, "indexed": False})
            if subject.kind == "user":
                for doc in await self._find_by(FACTS, cid, "user_id", subject.ids):
                    plan.delete(FACTS.name, doc["_id"])
                for doc in await self._persons(cid, subject):
                    plan.delete(PERSONS.name, doc["_id"])
                for doc in await self._find_by(CHAT_LOG, cid, "user_id", subject.ids):
                    plan.delete(CHAT_LOG.name, doc["_id"])
            for doc in await self._find_by(CHAT_LOG, cid, "session_id", subject.sessions):
                if doc["_id"] not in plan.deleted.get(CHAT_LOG.name, ()):
                    plan.delete(CHAT_LOG.name, doc["_id"])
            # a user: any episode may name them (a kept appointment, a talk); a group: its chats
            kinds = (
                ("conversation", "plan", "behavior")
                if subject.kind == "user"
                else ("conversation", "plan")
            )
            for kind in kinds:
                for doc in await self._scan(EPISODES, {"character_id": cid, "type": kind}):
                    self._plan_episode(doc, subject, ids, names, plan)
            if subject.kind == "user":  # her diary's sentences that name them
                for doc in await self.history.find(
                    DIARIES.name, eq={"character_id": cid, "period": ["day", "week", "month"]}
                ):
                    if _names_in(doc.get("text", ""), names):
                        kept = scrub(str(doc["text"]), names) or "（这一段已按要求遗忘）"
                        rejected = [r for r in doc.get("rejected", []) if not _names_in(r, names)]
                        plan.rewrite(DIARIES.name, {**doc, "text": kept, "rejected": rejected})
        return plan

    async def _answers_to(self, cid: str, gone: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Lines linked (``reply_to``) to one of ``gone``: said right after, in the same chat."""
        out: list[dict[str, Any]] = []
        for doc in gone:
            later = await self.history.find(
                CHAT_MEMORIES.name,
                eq={"character_id": cid, "group_id": doc.get("group_id", "")},
                ranges={"time": (doc["time"], None)},
                sort="time",
                limit=20,
            )
            out += [d for d in later if d.get("reply_to") == doc["_id"]]
        return out

    @staticmethod
    def _plan_episode(
        doc: dict[str, Any], subject: Subject, ids: set[str], names: Sequence[str], plan: _Plan
    ) -> None:
        data: dict[str, Any] = dict(doc.get("data") or {})
        if subject.kind == "group":
            if data.get("session_id") in subject.sessions or data.get("via") in subject.sessions:
                plan.delete(EPISODES.name, doc["_id"])
            return
        news = data.get("news")
        if (
            _party_id(data.get("by")) in ids
            or _party_id(data.get("asked_by")) in ids
            or (isinstance(news, Mapping) and _party_id(news.get("about")) in ids)
            or data.get("session_id") in subject.sessions
        ):
            plan.delete(EPISODES.name, doc["_id"])
            return
        changed = False
        people = data.get("counterparties")
        if isinstance(people, list) and any(p.get("user_id") in ids for p in people):
            theirs = {str(p.get("name", "")) for p in people if p.get("user_id") in ids}
            others = [p for p in people if p.get("user_id") not in ids]
            if not others:
                plan.delete(EPISODES.name, doc["_id"])
                return
            said = [m for m in data.get("messages") or [] if m.get("speaker") not in theirs]
            data.update(counterparties=others, messages=said, message_count=len(said))
            changed = True
        if isinstance(news, list):  # a talk between characters: the news they passed on
            kept = [
                n
                for n in news
                if _party_id(n.get("origin")) not in ids
                and _party_id(n.get("teller_heard_from")) not in ids
                and not _names_in(n.get("text", ""), names)
            ]
            if len(kept) != len(news):
                data["news"] = kept
                changed = True
        for key in ("lines", "messages"):
            lines = data.get(key)
            if isinstance(lines, list) and any(_names_in(x, names) for x in lines):
                data[key] = [x for x in lines if not _names_in(x, names)]
                changed = True
        summary = str(doc.get("summary") or "")
        new_summary = scrub(summary, names)
        if changed or new_summary != summary or _names_in(data, names):
            if _names_in(data, names):
                data = _scrub_value(data, names)
            if not new_summary:
                said = data.get("messages") or data.get("lines") or []
                first = str(said[0].get("text", ""))[:40] if said else ""
                new_summary = f"聊天：{first}" if first else "聊天"
            plan.rewrite(EPISODES.name, {**doc, "summary": new_summary, "data": data})

    async def _points(
        self, subject: Subject, plan: _Plan, *, rewritten: bool
    ) -> list[tuple[str, dict[str, Any]]]:
        """The vector points from or about them: by id or scope, and those of documents the
        forget deletes (and with ``rewritten``, rewrites)."""
        semantic = self.deps.semantic
        if semantic is None:
            return []
        store = semantic.store
        key = "user_id" if subject.kind == "user" else "group_id"
        found: dict[str, dict[str, Any]] = {}
        refs = [i for ids in plan.deleted.values() for i in ids]
        if rewritten:  # their memories go too (read with their words); indexed again after
            refs += [d["_id"] for docs in plan.rewritten.values() for d in docs]
        wheres = [Where(eq={key: list(subject.ids)}), Where(eq={"scope": subject.scopes})]
        wheres += [Where(eq={"ref": refs[i : i + 256]}) for i in range(0, len(refs), 256)]
        for where in wheres:
            for hit in await store.scroll(where, limit=1_000_000):
                found[hit.id] = hit.payload
        return list(found.items())

    async def _redis_items(self, subject: Subject, names: Sequence[str]) -> list[Item]:
        redis = self.deps.redis
        if redis is None:
            return []
        out: list[Item] = []
        for key, values in (await self._redis_lists(subject, names)).items():
            out += [Item(store="redis", where=key, id=str(i), content=v) for i, v in values]
        for key, value in (await self._redis_strings(subject, names)).items():
            own = "#" in key or any(key.endswith(f":{s}:summary") for s in subject.sessions)
            theirs = value if own else _removed(value, scrub(value, names))
            out.append(Item(store="redis", where=key, id="", content=theirs))
        return out

    def _mentions(self, raw: str, subject: Subject, names: Sequence[str]) -> bool:
        try:
            value = json.loads(raw)
        except ValueError:
            return _names_in(raw, names)
        if isinstance(value, Mapping):
            if str(value.get("user_id", "")) in subject.ids:
                return True
            session = (value.get("conversation") or {}) if subject.kind == "group" else {}
            if isinstance(session, Mapping) and str(session.get("id", "")) in subject.ids:
                return True
        return _names_in(value, names)

    async def _chat_keys(self) -> list[tuple[str, str]]:
        """(character id, session id) of every chat session she keeps."""
        redis, keys = self.deps.redis, self.deps.keys
        assert redis is not None
        out = []
        for cid in self.deps.character_ids:
            for sid in await redis.smembers(keys.chat_sessions(cid)):
                out.append((cid, str(sid)))
        return out

    async def _redis_lists(
        self, subject: Subject, names: Sequence[str]
    ) -> dict[str, list[tuple[int, str]]]:
        """List key -> (position, entry) of the entries from or about them."""
        redis, keys = self.deps.redis, self.deps.keys
        assert redis is not None
        # queued commands, rejected ones, episodes waiting for the history store (a daemon that
        # stopped before writing them would write them back), outbox entries set aside
        lists = [keys.commands, keys.rejected_commands, keys.episode_outbox, keys.outbox_dead]
        for cid, sid in await self._chat_keys():
            lists += [
                keys.chat_recent(cid, sid),
                keys.chat_window(cid, sid),
                keys.chat_context(cid, sid),
            ]
        out: dict[str, list[tuple[int, str]]] = {}
        for key in lists:
            own = any(
                key.endswith(f":{s}:{k}")
                for s in subject.sessions
                for k in ("recent", "window", "context")
            )
            for i, raw in enumerate(await redis.lrange(key, 0, -1)):
                if own or self._mentions(str(raw), subject, names):
                    out.setdefault(key, []).append((i, str(raw)))
        return out

    async def _redis_strings(self, subject: Subject, names: Sequence[str]) -> dict[str, str]:
        redis, keys = self.deps.redis, self.deps.keys
        assert redis is not None
        out: dict[str, str] = {}
        for cid, sid in await self._chat_keys():
            key = keys.chat_summary(cid, sid)
            value = await redis.get(key)
            if value and (sid in subject.sessions or _names_in(str(value), names)):
                out[key] = str(value)
        if subject.kind == "user":
            links = await redis.hgetall(keys.people_links)
            for account, person in links.items():
                account, person = decoded(account), decoded(person)
                if account in subject.ids or person in subject.ids:
                    out[f"{keys.people_links}#{account}"] = person
        return out

    # -- forgetting -------------------------------------------------------------------------

    async def forget(
        self,
        subject: Subject,
        *,
        requested_by: str,
        now: datetime,
        request_id: str = "",
        state_counts: Mapping[str, int] | None = None,
    ) -> dict[str, int]:
        """Erase them from every store this module covers, compact the stores, write the audit
        entry; the counts per store. ``state_counts``: what the world command erased from the
        characters' states, for the audit."""
        await self.ensure()
        names = await self.names(subject)
        plan = await self._plan(subject, names)
        counts: Counter[str] = Counter()
        points = await self._points(subject, plan, rewritten=True)
        for collection, doc_ids in plan.deleted.items():
            for doc_id in doc_ids:
                counts[f"history.{collection}"] += int(
                    await self.history.delete(collection, doc_id)
                )
        for collection, docs in plan.rewritten.items():
            await self.history.put_many(collection, docs)
            counts[f"history.{collection}.rewritten"] += len(docs)
        semantic = self.deps.semantic
        if semantic is not None and points:
            await semantic.store.delete_ids([p for p, _ in points])
            counts["vectors.points"] += len(points)
            await self._reindex(plan.rewritten)
        if self.deps.redis is not None:
            counts.update(await self._forget_redis(subject, names))
        for key, n in (state_counts or {}).items():
            counts[f"state.{key}"] += n
        await self.compact()
        await self.audit(
            action=f"forget_{subject.kind}",
            requested_by=requested_by,
            now=now,
            request_id=request_id,
            counts=dict(counts),
        )
        return {k: v for k, v in counts.items() if v}

    async def _reindex(self, rewritten: Mapping[str, Sequence[dict[str, Any]]]) -> None:
        """The rewritten documents' memories, embedded again without them: the episodes from
        their new summary, the chat lines alone (`ChatMemories.index_pending`)."""
        semantic = self.deps.semantic
        assert semantic is not None
        items = [
            NewMemory(
                kind="episode",
                character_id=d["character_id"],
                text=d["summary"],
                time=d["time"],
                key=d["_id"],
                ref=d["_id"],
                importance=0.6,
            )
            for d in rewritten.get(EPISODES.name, [])
        ]
        try:
            await semantic.remember(items)
            for doc in rewritten.get(DIARIES.name, []):
                diary = Diary.model_validate(doc)
                writer = DiaryWriter(
                    self.history,
                    EpisodeRepo(self.history),
                    model=None,
                    voice=DiaryVoice(name=diary.character_id, persona=""),
                    tz=self.deps.tz,
                    semantic=semantic,
                )
                await writer.index(diary)
            for cid in {d["character_id"] for d in rewritten.get(CHAT_MEMORIES.name, [])}:
                await ChatMemories(self.history, semantic, cid).index_pending(limit=100_000)
        except Exception as exc:  # rewritten already; the memory worker indexes the lines later
            log.warning("forget: rewritten memories not indexed again yet: %s", exc)

    async def _forget_redis(self, subject: Subject, names: Sequence[str]) -> Counter[str]:
        redis, keys = self.deps.redis, self.deps.keys
        assert redis is not None
        counts: Counter[str] = Counter()
        for key, entries in (await self._redis_lists(subject, names)).items():
            kind = key.rsplit(":", 1)[-1]
            for _, raw in entries:
                if kind == "context" and not any(
                    key.endswith(f":{s}:context") for s in subject.sessions
                ):
                    item = json.loads(raw)
                    item.pop("message_id", None)
                    item["content"] = FORGOTTEN
                    await redis.lset(
                        key, await _index_of(redis, key, raw), json.dumps(item, ensure_ascii=False)
                    )
                else:
                    await redis.lrem(key, 0, raw)
                counts[f"redis.{kind}"] += 1
        for key, value in (await self._redis_strings(subject, names)).items():
            if "#" in key:
                hash_key, account = key.split("#", 1)
                await redis.hdel(hash_key, account)
                counts["redis.links"] += 1
                continue
            own = any(key.endswith(f":{s}:summary") for s in subject.sessions)
            kept = "" if own else scrub(value, names)
            if kept:
                await redis.set(key, kept)
            else:
                await redis.delete(key)
            counts["redis.summary"] += 1
        for cid in self.deps.character_ids:
            for sid in subject.sessions:
                if await redis.srem(keys.chat_sessions(cid), sid):
                    counts["redis.sessions"] += 1
        counts["redis.events"] += await self._forget_events(subject, names)
        return counts

    async def _forget_events(self, subject: Subject, names: Sequence[str]) -> int:
        """Stream entries from or about them (a command applied, a chat event) deleted."""
        redis, keys = self.deps.redis, self.deps.keys
        assert redis is not None
        doomed: list[str] = []
        start = "-"
        while True:
            page = await redis.xrange(keys.events, min=start, count=1000) or []
            for entry_id, fields in page:
                text = json.dumps(fields, ensure_ascii=False, default=str)
                if _names_in(text, names):  # their names and ids
                    doomed.append(str(entry_id))
            if len(page) < 1000:
                break
            start = f"({page[-1][0]!s}"
        for i in range(0, len(doomed), 500):
            await redis.xdel(keys.events, *doomed[i : i + 500])
        return len(doomed)

    async def compact(self) -> None:
        """Rewrite the stores' files without what was deleted (best effort for servers)."""
        await self.history.compact()
        if self.deps.semantic is not None:
            await self.deps.semantic.store.compact()
        if self.deps.redis is not None:
            await _rewrite_redis(self.deps.redis)

    # -- one memory ---------------------------------------------------------------------------

    async def forget_item(self, item_id: str, *, requested_by: str, now: datetime) -> str | None:
        """Forget one fact or chat memory by its id (``fact_…``, ``chat_…``), or one memory point
        by its point id; what it was (the collection or store), or None when nothing has it. A
        chat memory's line goes from the message log and the conversation episodes too."""
        await self.ensure()
        found: str | None = None
        counts: Counter[str] = Counter()
        if (line := await self.history.get(CHAT_MEMORIES.name, item_id)) is not None:
            counts.update(await self._forget_line(line))
        for spec in (FACTS, CHAT_MEMORIES):
            if await self.history.delete(spec.name, item_id):
                found = spec.name
                counts[f"history.{spec.name}"] += 1
        semantic = self.deps.semantic
        if semantic is not None:
            where = Where(eq={"ref": item_id})
            if n := await semantic.store.count(where):
                await semantic.store.delete(where)
                found = found or "vectors"
                counts["vectors.points"] += n
            elif found is None and _is_uuid(item_id) and await semantic.store.payloads([item_id]):
                await semantic.store.delete_ids([item_id])
                found = "vectors"
                counts["vectors.points"] += 1
        if found is not None:
            await self.compact()
            await self.audit(
                action="forget_item", requested_by=requested_by, now=now, counts=dict(counts)
            )
        return found

    async def _forget_line(self, line: dict[str, Any]) -> Counter[str]:
        """One chat line out of the message log and out of the conversation episodes it is in."""
        counts: Counter[str] = Counter()
        cid, when, text = line["character_id"], line["time"], line["text"]
        near = (when - timedelta(milliseconds=2), when + timedelta(milliseconds=2))
        logged = await self.history.find(
            CHAT_LOG.name,
            eq={"character_id": cid, "user_id": line["user_id"]},
            ranges={"time": near},
        )
        for doc in logged:
            if doc.get("text") == text:
                counts["history.chat_log"] += int(
                    await self.history.delete(CHAT_LOG.name, doc["_id"])
                )
        around = await self.history.find(
            EPISODES.name,
            eq={"character_id": cid, "type": "conversation"},
            ranges={"time": (when - timedelta(days=1), when + timedelta(seconds=1))},
        )
        for doc in around:
            said = list((doc.get("data") or {}).get("messages") or [])
            kept = [
                m
                for m in said
                if not (m.get("text") == text and abs((m.get("time") or when) - when) < _2MS)
            ]
            if len(kept) != len(said):
                data = {**doc["data"], "messages": kept, "message_count": len(kept)}
                await self.history.put(EPISODES.name, {**doc, "data": data})
                counts["history.episodes.rewritten"] += 1
        return counts

    async def correct_fact(
        self, fact: str, content: str, *, requested_by: str, now: datetime
    ) -> dict[str, Any]:
        """Replace fact ``fact``'s words with ``content``: the new fact (a new id, the same
        person) supersedes the old one, which is deleted from history and recall. Raises
        `KeyError` when there is no such fact."""
        from yuiju.memory.distill import fact_id

        await self.ensure()
        old = await self.history.get(FACTS.name, fact)
        if old is None:
            raise KeyError(fact)
        content = content.strip()
        if not content:
            raise ValueError("the corrected fact is empty; give its new words")
        new = {
            **old,
            "_id": fact_id(old["character_id"], old["user_id"], content),
            "content": content,
            "updated_at": now,
            "corrected_at": now,
            "supersedes": fact,
            "importance": max(float(old.get("importance", 0.6)), 0.8),
            "indexed": False,
        }
        await self.history.put(FACTS.name, new)
        if new["_id"] != fact:
            await self.history.delete(FACTS.name, fact)
        semantic = self.deps.semantic
        if semantic is not None:
            await semantic.forget(ref=fact, kind="fact")
            await semantic.remember(
                [
                    NewMemory(
                        kind="fact",
                        character_id=new["character_id"],
                        text=content,
                        time=now,
                        key=new["_id"],
                        user_id=new["user_id"],
                        importance=new["importance"],
                    )
                ]
            )
            await self.history.put(FACTS.name, {**new, "indexed": True})
        await self.compact()
        await self.audit(
            action="correct_fact", requested_by=requested_by, now=now, counts={"facts": 1}
        )
        return new

    # -- the audit log ------------------------------------------------------------------------

    async def audit(
        self,
        *,
        action: str,
        requested_by: str,
        now: datetime,
        counts: Mapping[str, int],
        request_id: str = "",
    ) -> dict[str, Any]:
        """Write one audit entry (no content: who asked, when, what, how many per store)."""
        digest = hashlib.sha1(f"{action}|{requested_by}|{now.isoformat()}|{request_id}".encode())
        doc = {
            "_id": f"audit_{digest.hexdigest()[:20]}",
            "time": now,
            "request_id": request_id or None,
            "action": action,
            "requested_by": requested_by,
            "counts": dict(counts),
        }
        await self.history.put(MEMORY_AUDIT.name, doc)
        return doc

    async def audit_log(self, limit: int = 50) -> list[dict[str, Any]]:
        """The latest audit entries, newest first."""
        await self.history.ensure(MEMORY_AUDIT)
        return await self.history.find(
            MEMORY_AUDIT.name,
            ranges={"time": (None, None)},
            sort="time",
            descending=True,
            limit=limit,
        )

    async def audited(self, request_id: str) -> dict[str, Any] | None:
        """The audit entry of a forget asked for with ``request_id`` (done), or None (not yet)."""
        await self.history.ensure(MEMORY_AUDIT)
        found = await self.history.find(MEMORY_AUDIT.name, eq={"request_id": request_id}, limit=1)
        return found[0] if found else None


def _scrub_value(value: Any, names: Sequence[str]) -> Any:
    if isinstance(value, str):
        return scrub(value, names)
    if isinstance(value, Mapping):
        return {k: _scrub_value(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_value(v, names) for v in value]
    return value


REDIS_REWRITE_SECONDS = 30.0
"""How long a compaction waits for Redis to rewrite its append-only file and snapshot."""


async def _rewrite_redis(redis: RedisClient) -> None:
    """Have Redis rewrite its append-only file and its snapshot from what it holds now (the old
    ones keep deleted values), waiting for each; a server that refuses (managed, a cluster) is
    left to its own schedule."""
    loop = asyncio.get_running_loop()
    for start, busy in (
        (redis.bgrewriteaof, ("aof_rewrite_in_progress", "aof_rewrite_scheduled")),
        (redis.bgsave, ("rdb_bgsave_in_progress",)),
    ):
        try:
            await start()
            deadline = loop.time() + REDIS_REWRITE_SECONDS
            while loop.time() < deadline:
                info = await redis.info("persistence")
                if not any(int(info.get(k) or 0) for k in busy):
                    break
                await asyncio.sleep(0.05)  # another process's work: polled
        except Exception as exc:
            log.info("redis not rewritten after a forget (%s): it saves on its own schedule", exc)


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _removed(original: Any, kept: Any) -> Any:
    """What ``original`` holds that ``kept`` (its rewrite) does not: their part of a shared record
    (list items gone, sentences gone, keys gone), None when nothing."""
    if isinstance(original, Mapping) and isinstance(kept, Mapping):
        out = {}
        for key, value in original.items():
            if key == "_id":
                continue
            part = value if key not in kept else _removed(value, kept[key])
            if part not in (None, "", [], {}):
                out[key] = part
        return out or None
    if isinstance(original, list) and isinstance(kept, list):
        return [x for x in original if x not in kept] or None
    if isinstance(original, str) and isinstance(kept, str) and original != kept:
        return "".join(s for s in _SENTENCE.findall(original) if s and s not in kept) or None
    return None


async def _index_of(redis: RedisClient, key: str, raw: str) -> int:
    for i, value in enumerate(await redis.lrange(key, 0, -1)):
        if value == raw:
            return i
    raise LookupError(raw)
