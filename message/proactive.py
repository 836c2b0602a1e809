"""Proactive life updates: when something worth sharing happens in her life, she tells her groups.

Pipeline, per ``action_completed`` event on ``Keys.events`` whose ``share`` is true:

    consumer group (at-least-once) → for each target group: anti-spam policy (pure, before any
    LLM call) → related memories → one LLM call {shouldSend, reason, message} → outbox record
    'sending' → send → outbox record 'sent' → the group's session history + her memory → ack

- **Delivery.** The stream is read through the consumer group ``proactive:<character>``, created
  at the stream's end on first start (old events are not replayed) and then remembered by Redis:
  events that arrive while the bot is down are read after it restarts. The consumer name is
  fixed, so a restarted service re-reads its own pending entries first, and entries another
  consumer left pending are claimed after `CLAIM_IDLE_MS`. An entry is acknowledged only after
  every target group's outbox record is written.
- **Exactly one decision per (event, group).** The outbox record id is derived from the event id
  and the group, and a record is written as 'sending' before the message leaves: a re-read event
  finds the record and neither asks the model again nor posts twice. A record still 'sending'
  after a crash becomes 'uncertain' and is never re-sent (one missed post beats a double post).
- **Nothing dropped silently.** Every decision is an outbox record: 'sent', 'skipped' with the
  rule or the model's reason, 'failed' when the group could not be sent to. An entry whose
  handling keeps raising is retried, then recorded as failed for every group and acknowledged.
  An entry that does not fit its event's model (`memory.event_data.parse_event`: hand-written,
  edited) is warned about once and acknowledged without a record: it is no shareable event.

- **Only what happened.** A message goes through the chat side's output filter, and what it
  claims she did or is doing is checked against the event it shares and her record of that day
  (and of any other day or span it names: `message.grounding`); whom it says she met, was with
  or heard from gets the chat side's people check (`message.people_grounding.PeopleCheck`: a
  name she does not know, a meeting or a saying her record lacks). The model is shown what does
  not match and writes again; a post still wrong after the last attempt is not sent.

The anti-spam rules live in `message.proactive_policy`; the prompts in
``message/prompts/proactive_*.md.j2``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from pydantic import BaseModel, ValidationError

from yuiju.characters import CharacterCard
from yuiju.config import LEGACY_PLATFORM, ProactiveConfig, ProactiveGroup
from yuiju.llm import (
    ChatModel,
    JsonSchema,
    LLMError,
    RetryWithFeedback,
    StructuredOutputFailed,
    ask_structured,
)
from yuiju.memory.episode_data import BehaviorData
from yuiju.memory.episodes import DOINGS, Episode, EpisodeRepo
from yuiju.memory.event_data import ActionCompleted, StreamEvent, parse_event, text_fields
from yuiju.memory.semantic import NewMemory, render_memories
from yuiju.memory.service import MemoryService
from yuiju.message.channel import GroupContext, GroupSender, SendFailed
from yuiju.message.grounding import SPANS, ClaimLexicon, DayKey, claims, feedback, read_past
from yuiju.message.model import BadPersonId, Conversation, legacy_forms, qualify
from yuiju.message.output import OutputFilter, Problem
from yuiju.message.people_grounding import PeopleCheck
from yuiju.message.proactive_policy import GroupSituation, Verdict, check_policy
from yuiju.storage.history import CollectionSpec, HistoryStore
from yuiju.storage.keys import Keys
from yuiju.storage.redis import RedisClient
from yuiju.world.clock import Clock
from yuiju.world.state import WorldState
from yuiju.world.store import StateStore
from yuiju.world.town import HAURA

log = logging.getLogger(__name__)

OUTBOX = CollectionSpec(
    name="proactive_outbox",
    fields=("character_id", "group_id", "status", "time"),
    indexes=(("character_id", "group_id", "status", "time"), ("character_id", "group_id", "time")),
)
"""One document per decision: (event, group) → sent / skipped / failed, with the reason."""

POSTED = ("sent", "sending", "uncertain")
"""Statuses that count as a post for caps, intervals and the unanswered rule (in doubt: posted)."""
CONSUMER = "proactive-1"
"""A fixed name: after a restart the same consumer re-reads its own pending entries."""
CLAIM_IDLE_MS = 60_000
"""Entries pending this long with another consumer (a crashed instance) are claimed."""
MAX_HANDLE_ATTEMPTS = 5
"""An entry whose handling raised this many times is recorded as failed and acknowledged."""
OWN_POSTS_SHOWN = 3
STAT_LABELS = {"stamina": "体力", "satiety": "饱腹", "mood": "心情"}
RECENT_FOR_REPLIES = 50
"""Messages read back to find the first human reply to her post."""
NOT_A_MESSAGE: dict[Problem, str] = {
    "reasoning": "message 里只有思考过程，不是一条聊天消息：message 只写要发到群里的话，不要写思考过程或标签。",
    "structured": "message 不是一条聊天消息（里面像是 JSON、代码或工具调用）：message 只写自然的中文口语。",
    "truncated": "message 不是一条完整的聊天消息（话没说完）：写一句完整、简短的话。",
    "meta": "message 写的是关于模型、格式或指令的话，不是你会在群里说的话：用你自己的口吻写一句自然的中文口语。",
}
"""What the model reads when its message is not one (the output filter's verdict)."""

PROMPTS = Environment(
    loader=PackageLoader("yuiju.message", "prompts"),
    undefined=StrictUndefined,
    autoescape=False,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def consumer_group(character_id: str) -> str:
    """The Redis consumer group of her proactive posts (one per character)."""
    return f"proactive:{character_id}"


def memory_group_id(group: Conversation) -> str:
    """The group id used in semantic memory: the same key the chat side recalls with."""
    return group.key


def record_id(event_id: str, group: Conversation) -> str:
    """The outbox record of (event, group); a QQ group keeps the id records had before platforms
    (a re-read event finds its decision and never posts twice)."""
    return f"pro_{event_id}_{group.id if group.platform == LEGACY_PLATFORM else group.key}"


def outbox_group(group: Conversation) -> list[str | int]:
    """The outbox's ``group_id`` values of ``group``: its key, and for a QQ group the number
    records were written with before platforms."""
    if group.platform == LEGACY_PLATFORM and group.id.lstrip("-").isdigit():
        return [group.key, int(group.id)]
    return [group.key]


def _switch_fields(group: Conversation) -> list[str]:
    """The Redis hash fields of ``group`` (switches, unreachable): its key, then the plain
    number a QQ group was written with before platforms."""
    return legacy_forms(group.key)


class ProactiveAnswer(BaseModel):
    """What the model answers for one group."""

    shouldSend: bool
    reason: str
    message: str = ""


ANSWER_SCHEMA = JsonSchema(name="proactive_post", schema=ProactiveAnswer.model_json_schema())


@dataclass(frozen=True, kw_only=True)
class SharedEvent:
    """An ``action_completed`` event with what its episode adds."""

    event_id: str
    time: datetime
    episode_id: str
    action: str
    name: str
    summary: str
    share: bool
    place: str = ""
    result: str = ""
    reason: str = ""
    intent: str = ""
    start: datetime | None = None
    end: datetime | None = None
    stats_after: dict[str, Any] | None = None


def shared_event(base: SharedEvent, episode: Episode) -> SharedEvent:
    """``base`` (the event) with what its stored episode adds: its times and summary, and from
    its record the place, result, reason and why she means to share. An episode whose record
    does not fit (warned, `Episode.record`) adds its times and summary only."""
    fields: dict[str, Any] = {
        "start": episode.time,
        "end": episode.end_time,
        "summary": episode.summary or base.summary,
    }
    if (d := episode.behavior()) is not None:
        intent = d.share_intent or {}
        fields |= {
            "place": d.place,
            "result": d.result,
            "reason": d.reason,
            "intent": str(intent.get("reason") or ""),
            "stats_after": d.stats_after,
        }
    return replace(base, **fields)


def _aware(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(value)
    return None


class ProactiveService:
    """Turns her shareable life events into at most a few well-timed posts per group."""

    def __init__(
        self,
        *,
        cfg: ProactiveConfig,
        character_id: str,
        card: CharacterCard,
        redis: RedisClient,
        keys: Keys,
        history: HistoryStore,
        clock: Clock,
        chat_model: ChatModel | None,
        memory: MemoryService | None,
        sender: GroupSender,
        group_context: GroupContext,
        max_attempts: int = 3,
        block_ms: int = 1000,
        batch: int = 20,
        output: OutputFilter | None = None,
        lexicon: ClaimLexicon | None = None,
        people: PeopleCheck | None = None,
    ) -> None:
        self.cfg = cfg
        self.character_id = character_id
        self.card = card
        self.redis = redis
        self.keys = keys
        self.history = history
        self.clock = clock
        self.chat_model = chat_model
        self.memory = memory
        self.sender = sender
        self.group_context = group_context
        self.output = output or OutputFilter(name=card.name, max_chars=cfg.max_message_chars)
        """The chat side's output filter: a post is a message or it is not sent."""
        self.lexicon = lexicon
        """The chat side's claim words: a post claims nothing that neither the event it shares
        nor today's record shows (None: posts are not checked)."""
        self.people = people
        """The chat side's people check: whom a post says she met, was with or heard from, and
        what they said, is in her record, and she knows them (None: not checked)."""
        self.max_attempts = max_attempts
        """Attempts per LLM answer (each failed one is shown its mistake)."""
        self.block_ms = block_ms
        self.batch = batch
        self.states = StateStore(redis, keys)
        self.episodes = EpisodeRepo(history)
        self.stream = keys.events
        self.group = consumer_group(character_id)
        self.handled = 0
        """Entries acknowledged."""
        self.failures = 0
        """Times reading or handling raised (the entry stayed pending)."""
        self._attempts: dict[str, int] = {}
        self._lock = asyncio.Lock()
        self._ensured = False

    # -- the stream ---------------------------------------------------------------------------

    async def ensure(self) -> None:
        """Create the outbox collection and the consumer group (at the stream's end); idempotent."""
        if self._ensured:
            return
        await self.history.ensure(OUTBOX)
        await self.episodes.ensure()  # read here; idempotent
        try:
            await self.redis.xgroup_create(self.stream, self.group, id="$", mkstream=True)
        except Exception as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._ensured = True

    async def run(self, stop_event: asyncio.Event) -> None:
        """Consume the event stream until ``stop_event`` is set; failures back off and retry."""
        await self.ensure()
        pause = 1.0
        while not stop_event.is_set():
            try:
                await self.run_once()
                pause = 1.0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.failures += 1
                log.warning(
                    "proactive posts: %s; retrying in %.0f s (the entry stays pending)", exc, pause
                )
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop_event.wait(), pause)
                pause = min(pause * 2, 60.0)

    async def run_once(self, *, block: bool = True) -> int:
        """Claim abandoned entries, handle pending ones, then new ones; returns how many were acked."""
        await self.ensure()
        with contextlib.suppress(
            Exception
        ):  # XAUTOCLAIM needs Redis 6.2; pending re-reads still work
            await self.redis.xautoclaim(
                self.stream, self.group, CONSUMER, CLAIM_IDLE_MS, "0-0", count=self.batch
            )
        acked = 0
        for start in ("0", ">"):
            answer: Any = await self.redis.xreadgroup(  # redis-py types stream replies loosely
                self.group,
                CONSUMER,
                {self.stream: start},
                count=self.batch,
                block=self.block_ms if (block and start == ">") else None,
            )
            for _stream, entries in answer or []:
                for raw_id, raw_fields in entries:
                    entry_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
                    if raw_fields:  # empty: trimmed away while pending
                        await self._handle_counted(entry_id, text_fields(raw_fields))
                    await self.redis.xack(self.stream, self.group, entry_id)
                    self._attempts.pop(entry_id, None)
                    acked += 1
                    self.handled += 1
        return acked

    async def _handle_counted(self, entry_id: str, fields: dict[str, str]) -> None:
        try:
            await self.handle(entry_id, fields)
        except Exception as exc:
            tries = self._attempts[entry_id] = self._attempts.get(entry_id, 0) + 1
            if tries < MAX_HANDLE_ATTEMPTS:
                raise
            log.exception(
                "proactive posts: event %s failed %d times; recorded as failed", entry_id, tries
            )
            await self._record_failed_event(
                entry_id, fields, f"处理这条事件一直出错：{type(exc).__name__}: {exc}"
            )

    async def _record_failed_event(
        self, entry_id: str, fields: dict[str, str], reason: str
    ) -> None:
        now = self.clock.now()
        for group in await self.target_groups():
            doc = {
                "_id": record_id(entry_id, group),
                "character_id": self.character_id,
                "group_id": group.key,
                "status": "failed",
                "time": now,
                "event_id": entry_id,
                "code": "error",
                "reason": reason,
                "event": fields,
            }
            await self.history.insert_new(OUTBOX.name, doc)

    # -- one event ----------------------------------------------------------------------------

    async def handle(self, event_id: str, fields: dict[str, str]) -> list[dict[str, Any]]:
        """Decide (and maybe post) for every target group; returns their outbox records.

        Events that are not her shareable completions give no record. Idempotent per event id.
        """
        await self.ensure()
        fields = text_fields(fields)
        read = parse_event(event_id, fields)  # None: does not fit (warned), not shareable
        if read is None or read.character_id != self.character_id:
            return []
        if not isinstance(read.data, ActionCompleted) or not read.data.share:
            return []
        await self.redis.set(
            self.keys.proactive_latest(self.character_id),
            json.dumps({"event_id": event_id, "fields": fields}, ensure_ascii=False),
        )
        event = await self._event(read)
        records = []
        async with self._lock:
            for group in await self.target_groups():
                records.append(await self._decide_group(event, group))
        return records

    async def _event(self, read: StreamEvent) -> SharedEvent:
        assert isinstance(read.data, ActionCompleted)
        data = read.data
        base = SharedEvent(
            event_id=read.id,
            time=read.time or self.clock.now(),
            episode_id=data.episode_id,
            action=data.action,
            name=data.name,
            summary=data.summary,
            share=data.share,
        )
        episode = await self.episodes.get(base.episode_id) if base.episode_id else None
        if episode is None:  # not flushed to history yet: the event alone is enough to write from
            return base
        return shared_event(base, episode)

    async def _decide_group(
        self, event: SharedEvent, group: Conversation, *, forced: bool = False
    ) -> dict[str, Any]:
        rid = record_id(event.event_id, group)
        if forced:
            rid = f"{rid}_forced_{int(self.clock.now().timestamp())}"
        existing = await self.history.get(OUTBOX.name, rid)
        if existing is not None:
            if (
                existing["status"] == "sending"
            ):  # crashed between 'sending' and 'sent': never re-send
                existing.update(
                    status="uncertain", reason="发送时进程中断，不确定是否已发出；不会重发"
                )
                await self.history.put(OUTBOX.name, existing)
            return existing
        now = self.clock.now()
        settings = self.settings(group)
        situation, recent = await self._situation(group, settings, event, now)
        verdict = check_policy(
            situation,
            settings,
            forced=forced,
            max_event_age=timedelta(minutes=self.cfg.max_event_age_minutes),
        )
        doc: dict[str, Any] = {
            "_id": rid,
            "character_id": self.character_id,
            "group_id": group.key,
            "time": now,
            "event_id": event.event_id,
            "episode_id": event.episode_id,
            "action": event.action,
            "summary": event.summary,
            "forced": forced,
            "message": "",
            "llm": None,
            "reply": None,
        }
        if not verdict.allowed:
            return await self._write(doc, "skipped", verdict.code, verdict.reason)
        try:
            answer = await self._ask(event, group, settings, recent, now, forced=forced)
        except _NoAnswer as exc:
            return await self._write(doc, "skipped", exc.code, exc.reason)
        doc["llm"] = answer.model_dump()
        if not answer.shouldSend:
            return await self._write(doc, "skipped", "declined", f"模型决定不发：{answer.reason}")
        text = answer.message.strip()
        doc["message"] = text
        await self._write(doc, "sending", "sending", answer.reason)
        try:
            await self.sender.send_group(group, text)
        except SendFailed as exc:
            await self._mark_unreachable(group, str(exc), now)
            return await self._write(doc, "failed", "send_failed", f"发不进这个群：{exc}")
        await self.redis.hdel(
            self.keys.proactive_unreachable(self.character_id), *_switch_fields(group)
        )
        record = await self._write(doc, "sent", "sent", answer.reason)
        await self._remember(event, group, text, rid, now)
        log.info("%s 主动在群 %s 分享「%s」：%s", self.character_id, group, event.name, text)
        return record

    async def _write(
        self, doc: dict[str, Any], status: str, code: str, reason: str
    ) -> dict[str, Any]:
        doc.update(status=status, code=code, reason=reason)
        await self.history.put(OUTBOX.name, doc)
        return dict(doc)

    async def _remember(
        self, event: SharedEvent, group: Conversation, text: str, rid: str, now: datetime
    ) -> None:
        """Continuity: the post enters the group's session and her memory (failures only logged)."""
        try:
            await self.group_context.record_bot_post(group, text, source="proactive")
        except Exception as exc:
            log.warning("proactive post to %s sent but not recorded in the session: %s", group, exc)
        if self.memory is None:
            return
        try:
            await self.memory.semantic.remember(
                [
                    NewMemory(
                        kind="chat",
                        character_id=self.character_id,
                        time=now,
                        key=rid,
                        ref=rid,
                        text=f"我在群里主动说起{event.name}：{text}（那件事：{event.summary}）",
                        group_id=memory_group_id(group),
                        importance=0.5,
                        extra={"source": "proactive", "episode_id": event.episode_id},
                    )
                ]
            )
        except Exception as exc:
            log.warning("proactive post to %s sent but not stored in memory: %s", group.key, exc)

    # -- the group's situation ------------------------------------------------------------------

    def settings(self, group: Conversation) -> ProactiveGroup:
        """Configured settings of the group, or the defaults (a group an admin switched on)."""
        return self.cfg.group(group.key) or ProactiveGroup()

    async def target_groups(self) -> list[Conversation]:
        """Configured groups plus groups an admin switched on, in a stable order."""
        switches = await self.redis.hgetall(self.keys.proactive_switches(self.character_id))
        extra = []
        for field, on in text_fields(switches).items():
            try:
                key = qualify(field)
            except BadPersonId:
                continue
            if on == "1":
                extra.append(key)
        return [Conversation.from_key(k) for k in sorted({*self.cfg.group_keys(), *extra})]

    async def _field(self, key: str, group: Conversation) -> str | None:
        """The group's value in a hash of groups, under its key or its pre-platform number."""
        for name in _switch_fields(group):
            raw = await self.redis.hget(key, name)
            if raw is not None:
                return text_fields({"v": raw})["v"]
        return None

    async def is_enabled(self, group: Conversation) -> bool:
        switch = await self._field(self.keys.proactive_switches(self.character_id), group)
        if switch is not None:
            return switch == "1"
        settings = self.cfg.group(group.key)
        return bool(self.cfg.enabled and settings and settings.enabled)

    async def _mark_unreachable(self, group: Conversation, reason: str, now: datetime) -> None:
        key = self.keys.proactive_unreachable(self.character_id)
        first = await self.redis.hsetnx(
            key,
            group.key,
            json.dumps({"reason": reason, "at": now.isoformat()}, ensure_ascii=False),
        )
        if first:  # reported once; later events skip the group until it is reachable again
            log.warning(
                "proactive posts: cannot send to group %s (%s); skipping it until someone speaks "
                "there again or an admin switches it on",
                group.key,
                reason,
            )

    async def _unreachable(self, group: Conversation, last_human: datetime | None) -> bool:
        key = self.keys.proactive_unreachable(self.character_id)
        raw = await self._field(key, group)
        if raw is None:
            return False
        since = _aware(json.loads(raw).get("at"))
        if last_human is not None and since is not None and last_human > since:
            # people talk there again: the bot is back in
            await self.redis.hdel(key, *_switch_fields(group))
            return False
        return True

    async def _asleep(self) -> bool:
        state = await self.states.load_character(self.character_id)
        return bool(
            state and (state.asleep or (state.running and state.running.action_id == "sleep"))
        )

    async def recent_posts(self, group: Conversation, limit: int = 10) -> list[dict[str, Any]]:
        """Her latest posts in the group, newest first."""
        return await self.history.find(
            OUTBOX.name,
            eq={
                "character_id": self.character_id,
                "group_id": outbox_group(group),
                "status": list(POSTED),
            },
            sort="time",
            descending=True,
            limit=limit,
        )

    async def records(self, group: Conversation, limit: int = 20) -> list[dict[str, Any]]:
        """The group's latest outbox records (every decision), newest first."""
        return await self.history.find(
            OUTBOX.name,
            eq={"character_id": self.character_id, "group_id": outbox_group(group)},
            sort="time",
            descending=True,
            limit=limit,
        )

    async def _situation(
        self,
        group: Conversation,
        settings: ProactiveGroup,
        event: SharedEvent,
        now: datetime,
    ) -> tuple[GroupSituation, list[dict[str, Any]]]:
        last_human = _aware(await self.group_context.last_human_message_at(group))
        said = await self.group_context.recent_messages(
            group, max(settings.recent_messages, settings.active_messages, RECENT_FOR_REPLIES)
        )
        recent: list[dict[str, Any]] = [{**m, "time": _aware(m.get("time")) or now} for m in said]
        posts = await self._settle_replies(group, settings, last_human, recent)
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        posts_today = await self.history.count(
            OUTBOX.name,
            eq={
                "character_id": self.character_id,
                "group_id": outbox_group(group),
                "status": list(POSTED),
            },
            ranges={"time": (midnight, None)},
        )
        last = posts[0] if posts else None
        last_post_at = _aware(last["time"]) if last else None
        streak = 0  # answered posts in a row, newest first, whose first reply came too late
        for post in posts:
            reply = post.get("reply")
            if not reply or reply.get("within_window"):
                break
            streak += 1
        situation = GroupSituation(
            now=now,
            enabled=await self.is_enabled(group),
            unreachable=await self._unreachable(group, last_human),
            asleep=await self._asleep(),
            event_age=max(timedelta(0), now - event.time),
            posts_today=posts_today,
            last_post_at=last_post_at,
            last_post_answered=bool(
                last is None
                or (
                    last_human is not None
                    and last_post_at is not None
                    and last_human > last_post_at
                )
            ),
            ignored_streak=streak,
            recent_human_times=tuple(m["time"] for m in recent if not m.get("from_bot")),
        )
        return situation, recent[-settings.recent_messages :] if settings.recent_messages else []

    async def _settle_replies(
        self,
        group: Conversation,
        settings: ProactiveGroup,
        last_human: datetime | None,
        recent: list[dict[str, Any]],
    ) -> list[dict[str, Any]]:
        """Her latest posts, newest first, each answered one marked with when the first reply came."""
        posts = await self.recent_posts(group)
        window = timedelta(minutes=settings.reply_window_minutes)
        for post in posts:
            posted_at = _aware(post["time"])
            if (
                post.get("reply")
                or posted_at is None
                or last_human is None
                or last_human <= posted_at
            ):
                continue
            first = min(
                (m["time"] for m in recent if not m.get("from_bot") and m["time"] > posted_at),
                default=last_human,
            )
            post["reply"] = {"first_at": first, "within_window": first - posted_at <= window}
            await self.history.put(OUTBOX.name, post)
        return posts

    # -- the model --------------------------------------------------------------------------------

    def render_prompt(
        self,
        event: SharedEvent,
        group: Conversation,
        settings: ProactiveGroup,
        *,
        recent: Sequence[dict[str, Any]],
        own_posts: Sequence[dict[str, Any]],
        memories: str,
        world: WorldState | None,
        now: datetime,
        forced: bool,
        promised: Sequence[str] = (),
    ) -> list[dict[str, str]]:
        """The post's prompt; ``promised`` are what people of this group asked of her that she
        did today (`promised_here`), which the post may tell them."""
        label = settings.label or f"群 {group.id}"
        system = PROMPTS.get_template("proactive_system.md.j2").render(
            card=self.card,
            group_label=label,
            max_chars=self.cfg.max_message_chars,
            stickers=list(self.output.stickers.names),
        )
        weather = world.weather if world is not None else None
        stats = event.stats_after or {}
        state = (
            "、".join(f"{label} {stats[k]}" for k, label in STAT_LABELS.items() if k in stats)
            or "（未知）"
        )
        humans = [m["time"] for m in recent if not m.get("from_bot")]
        quiet = (
            f"群里最后一条别人的消息在 {_ago(now - max(humans))}前。"
            if humans
            else "群里最近没有别人说话。"
        )
        tz = now.tzinfo
        user = PROMPTS.get_template("proactive_user.md.j2").render(
            now=now,
            calendar=world.calendar if world is not None else None,
            weather=f"{weather.type} / {weather.temperature}" if weather else "未知",
            event={
                **event.__dict__,
                "start": event.start.astimezone(tz) if event.start else None,
                "end": event.end.astimezone(tz) if event.end else None,
                "place": HAURA.place_name(event.place) if event.place else "（未记录）",
            },
            state=state,
            group_label=label,
            recent=[{**m, "time": m["time"].astimezone(tz)} for m in recent],
            quiet=quiet,
            own_posts=[
                {"time": _aware(p["time"]).astimezone(tz), "message": p.get("message", "")}  # type: ignore[union-attr]
                for p in own_posts
            ],
            memories=memories,
            forced=forced,
            promised=promised,
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    async def promised_here(
        self, group: Conversation, event: SharedEvent, now: datetime
    ) -> list[str]:
        """What someone asked of her in this group (an invitation from chat, a promise) that she
        kept today, where the event happened (anywhere, when its place is not known yet): from
        her state, as lines for the prompt."""
        try:
            her = await self.states.load_character(self.character_id)
        except Exception as exc:  # the post goes without it
            log.warning("proactive posts: her plans unavailable (%s)", exc)
            return []
        if her is None:
            return []
        today, here = now.date(), group.session_id
        tz = now.tzinfo
        out = []
        for a in her.social.appointments:
            start = a.start.astimezone(tz)
            there = not event.place or a.place == event.place
            if a.status == "kept" and a.via == here and start.date() == today and there:
                out.append(
                    f"{a.asked_by.name}在这个群里约你今天 {start:%H:%M} 来"
                    f"{HAURA.place_name(a.place)}{a.activity}，你 {a.note}"
                )
        for n in her.social.notes:
            at = n.at.astimezone(tz)
            there = not event.place or n.place == event.place
            if n.status == "done" and n.via == here and at.date() == today and there:
                out.append(f"你在这个群里答应{n.by.name}的事：{n.text}，你 {n.note}")
        return out

    async def _ask(
        self,
        event: SharedEvent,
        group: Conversation,
        settings: ProactiveGroup,
        recent: list[dict[str, Any]],
        now: datetime,
        *,
        forced: bool,
    ) -> ProactiveAnswer:
        if self.chat_model is None:
            raise _NoAnswer("no_llm", "没有配置 LLM，不写主动消息")
        own_posts = await self.recent_posts(group, OWN_POSTS_SHOWN)
        memories = ""
        if self.memory is not None and self.cfg.recall_limit:
            found = await self.memory.memory_search(
                event.summary or event.name,
                now=now,
                group_id=legacy_forms(memory_group_id(group)),
                limit=self.cfg.recall_limit,
                token_budget=300,
            )
            memories = render_memories(found, now.tzinfo, name=self.card.name) if found else ""
        world = await self.states.load_world()
        messages = self.render_prompt(
            event,
            group,
            settings,
            recent=recent,
            own_posts=own_posts,
            memories=memories,
            world=world,
            now=now,
            forced=forced,
            promised=await self.promised_here(group, event, now),
        )
        said = {p.get("message", "").strip() for p in own_posts if p.get("message")}
        limit = self.cfg.max_message_chars
        record = await self._record(event, now) if self.lexicon is not None else {}
        weather = [world.weather.type, world.weather.temperature] if world and world.weather else []

        def parse(text: str) -> ProactiveAnswer:
            answer = ProactiveAnswer.model_validate_json(text)
            message = answer.message.strip()
            if answer.shouldSend and message:
                filtered = self.output.review(message)
                if filtered.problem is not None:
                    raise RetryWithFeedback(NOT_A_MESSAGE[filtered.problem])
                if filtered.leaked:
                    raise RetryWithFeedback("message 引用了你的设定或规则：只写要发到群里的话。")
                message = filtered.text
                answer = answer.model_copy(update={"message": message})
                if self.lexicon is not None and (
                    wrong := feedback(
                        claims(message, self.lexicon, undated_is_now=True),
                        record,
                        now,
                        weather=weather,
                    )
                ):
                    raise RetryWithFeedback("message " + wrong.removeprefix("你的回答"))
            if forced and not answer.shouldSend:
                raise RetryWithFeedback(
                    "管理员要求现在发一条：shouldSend 必须为 true，并写好 message。"
                )
            if answer.shouldSend and not message:
                raise RetryWithFeedback(
                    "shouldSend 为 true 时 message 不能为空；不想发就把 shouldSend 改成 false。"
                )
            if answer.shouldSend and len(message) > limit:
                raise RetryWithFeedback(
                    f"message 有 {len(message)} 个字，超过了 {limit} 个字，请缩短。"
                )
            if answer.shouldSend and message in said:
                raise RetryWithFeedback(
                    "这句话你之前在这个群里已经说过了：换个说法，或者 shouldSend 填 false。"
                )
            return answer

        async def review(answer: ProactiveAnswer) -> str | None:
            """Her claims about people, as in chat (`PeopleCheck`, which reads her record)."""
            if self.people is None or not answer.shouldSend or not answer.message:
                return None
            try:
                her = await self.states.load_character(self.character_id)
            except Exception as exc:  # checked without her relations and news
                log.warning("proactive posts: her state unavailable for the people check (%s)", exc)
                her = None

            async def heard() -> list[tuple[str, str]]:  # what people of the group said lately
                return [(m["sender_id"], m["text"]) for m in recent if not m.get("from_bot")]

            wrong = await self.people.check(answer.message, char=her, now=now, recent=heard)
            return None if wrong is None else "message " + wrong.removeprefix("你的回答")

        try:
            outcome = await ask_structured(
                self.chat_model,
                messages,
                parse,
                json_schema=ANSWER_SCHEMA,
                max_attempts=self.max_attempts,
                purpose="proactive",
                review=review,
            )
        except StructuredOutputFailed as exc:
            raise _NoAnswer(
                "llm_invalid", f"模型没有给出可用的回答：{unusable(exc.last_error)}"
            ) from exc
        except LLMError as exc:
            raise _NoAnswer("llm_failed", f"模型调用失败：{exc}") from exc
        return outcome.value

    async def _record(self, event: SharedEvent, now: datetime) -> dict[DayKey, list[Episode]]:
        """What a post may claim: today's episodes (not conversations) with the event it shares,
        which history may not have yet, and her record of the other days and spans a post may
        speak of (yesterday, 上周, 以前 …: read once per post, a post is rare)."""
        diaries = self.memory.diary if self.memory is not None else None
        record = await read_past(
            self.episodes, self.character_id, now, [0, 1, 2, *SPANS], diaries=diaries
        )
        today = await self.episodes.today(self.character_id, now, type_=DOINGS)
        if not any(e.id == event.episode_id for e in today):
            shared = Episode(
                id=event.episode_id or event.event_id,
                character_id=self.character_id,
                type="behavior",
                time=event.start or event.time,
                end_time=event.end or event.time,
                status="completed",
                summary=event.summary or event.name,
                data=BehaviorData(
                    action=event.action,
                    name=event.name,
                    place=event.place,
                    reason=event.reason,
                    decided_by="",
                    result=event.result,
                ).dump(),
            )
            today = [*today, shared]
        record[0] = sorted([*today, *record.get(0, [])], key=lambda e: e.time)
        return record

    # -- control --------------------------------------------------------------------------------

    async def _latest(self) -> SharedEvent | None:
        raw = await self.redis.get(self.keys.proactive_latest(self.character_id))
        if raw is None:
            return None
        stored = json.loads(raw)
        read = parse_event(stored["event_id"], stored["fields"])
        if read is None or not isinstance(read.data, ActionCompleted):
            return None
        return await self._event(read)

    async def preview(self, group: Conversation) -> dict[str, Any]:
        """What would be posted next in the group: the policy's verdict and the model's draft.

        Sends nothing and records nothing (the draft still costs one LLM call).
        """
        await self.ensure()
        event = await self._latest()
        base: dict[str, Any] = {"group_id": group.key, "enabled": await self.is_enabled(group)}
        if event is None:
            return {
                **base,
                "event": None,
                "policy": None,
                "answer": None,
                "would_send": False,
                "reason": "还没有可以分享的事",
            }
        now = self.clock.now()
        settings = self.settings(group)
        situation, recent = await self._situation(group, settings, event, now)
        verdict = check_policy(
            situation, settings, max_event_age=timedelta(minutes=self.cfg.max_event_age_minutes)
        )
        out = {
            **base,
            "event": {
                "event_id": event.event_id,
                "name": event.name,
                "summary": event.summary,
                "time": event.time.isoformat(),
            },
            "policy": _verdict(verdict),
            "posts_today": situation.posts_today,
            "already_decided": await self.history.get(
                OUTBOX.name, record_id(event.event_id, group)
            ),
        }
        try:
            answer = await self._ask(event, group, settings, recent, now, forced=False)
        except _NoAnswer as exc:
            return {**out, "answer": None, "would_send": False, "reason": exc.reason}
        would = verdict.allowed and answer.shouldSend and out["already_decided"] is None
        return {
            **out,
            "answer": answer.model_dump(),
            "would_send": would,
            "reason": answer.reason if verdict.allowed else verdict.reason,
        }

    async def force(self, group: Conversation) -> dict[str, Any]:
        """Post the latest shareable event in the group now, past caps, intervals and quiet hours
        (an admin's command; never while she sleeps). Returns the outbox record."""
        await self.ensure()
        event = await self._latest()
        if event is None:
            return {
                "group_id": group.key,
                "status": "skipped",
                "code": "no_event",
                "reason": "还没有可以分享的事",
            }
        async with self._lock:
            return await self._decide_group(event, group, forced=True)

    async def set_enabled(self, group: Conversation, enabled: bool) -> None:
        """Switch her posts in the group on or off (kept in Redis, wins over the config).

        Switching on also forgets an earlier send failure, so the group is tried again.
        """
        switches = self.keys.proactive_switches(self.character_id)
        async with self.redis.pipeline(transaction=True) as pipe:
            if len(_switch_fields(group)) > 1:  # the pre-platform field gives way to the key
                pipe.hdel(switches, *_switch_fields(group)[1:])
            pipe.hset(switches, group.key, "1" if enabled else "0")
            if enabled:
                pipe.hdel(
                    self.keys.proactive_unreachable(self.character_id), *_switch_fields(group)
                )
            await pipe.execute()


class _NoAnswer(Exception):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def unusable(exc: Exception) -> str:
    """Why the model's last answer was not usable, in one short line: an admin reads it in chat
    (``/proactive force``) and in the outbox, where a pydantic report would run to a dozen lines."""
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False)
        if any(e["type"] == "json_invalid" for e in errors):
            return "回答不是有效的 JSON"
        fields = "、".join(dict.fromkeys(".".join(map(str, e["loc"])) or "回答" for e in errors))
        return f"这些字段缺了或写错了：{fields}"[:60]
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return first if len(first) <= 60 else first[:59] + "…"


def _verdict(v: Verdict) -> dict[str, Any]:
    return {"allowed": v.allowed, "code": v.code, "reason": v.reason}


def _ago(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    if minutes < 1:
        return "不到 1 分钟"
    if minutes < 60:
        return f"{minutes} 分钟"
    if minutes < 60 * 24:
        return f"{minutes // 60} 小时"
    return f"{minutes // (60 * 24)} 天"
