"""The memory worker: consumes the event stream, indexes episodes, writes the diary at bedtime,
syncs knowledge files at start, and runs the nightly distillation.

It reads ``Keys.events`` through the Redis consumer group ``memory`` (XREADGROUP): an entry is
acknowledged only after it was handled, so a failure (embedder or Qdrant down) leaves it pending
and it is retried — first the pending entries, then new ones — with a growing pause; nothing is
lost across restarts. Handling is idempotent (deterministic point ids, diaries written once per
day), so a replay duplicates nothing.

- ``action_completed`` → the episode (from history, else from the event) into semantic memory;
  the completed episodes of one read are embedded in one call (batch embedding).
- ``conversation`` → a meeting's conversation episode, the same way: her memory of whom she met
  and what they told each other.
- ``action_started`` with action ``sleep`` in the evening or night → the diary of that day.
- ``command_applied`` of a ``forget_person`` command (the world erased a person or a group from
  the characters' states) → the rest of them erased from the history and vector stores and
  Redis, and the audit entry written (`memory.governance`), once the engine's outbox is written.

Each entry is read once with `memory.event_data.parse_event`; one that does not fit its event's
model (hand-written, edited) is warned about once and acknowledged, and the worker goes on.

Run one per deployment: the embedded vector store can be opened by one process only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import datetime
from typing import Any

from yuiju.memory.diary import DiaryClaimCheck, DiaryVoice, diary_date
from yuiju.memory.distill import schedule_distillation
from yuiju.memory.event_data import (
    ActionCompleted,
    ActionStarted,
    CommandApplied,
    Conversation,
    StreamEvent,
    parse_event,
)
from yuiju.memory.governance import Governance, GovernanceDeps, Subject
from yuiju.memory.semantic import NewMemory, SemanticMemory
from yuiju.memory.service import MemoryService, build_memory, open_semantic

log = logging.getLogger(__name__)

GROUP = "memory"
CONSUMER = "memory-1"
"""A fixed name: after a restart the same consumer re-reads its own pending entries."""
SLEEP_ACTIONS = frozenset({"sleep"})
DRAIN_POLL_SECONDS = 0.2
RETRY_INDEX_SECONDS = 60.0

IMPORTANCE_BY_ACTION: dict[str, float] = {"sleep": 0.1, "idle": 0.1, "wake_up": 0.1}
DEFAULT_IMPORTANCE = 0.4
CONVERSATION_IMPORTANCE = 0.6
"""Meeting someone and what was said weighs more than an ordinary step of her day."""
EpisodeEvent = ActionCompleted | Conversation
"""Events whose episode becomes a memory: a completed step, a meeting's conversation (her
memory of the other and of what they told each other)."""


class MemoryWorker:
    def __init__(
        self,
        redis: Any,
        stream: str,
        services: dict[str, MemoryService],
        *,
        clock: Any,
        block_ms: int = 1000,
        batch: int = 50,
        max_backoff: float = 60.0,
        outbox: str | None = None,
        drain_seconds: float = 10.0,
        governance: Governance | None = None,
    ) -> None:
        self.redis = redis
        self.stream = stream
        self.services = services
        self.clock = clock
        self.block_ms = block_ms
        self.batch = batch
        self.max_backoff = max_backoff
        self.outbox = outbox
        """The engine's episode outbox key: the diary waits until the day's episodes are written."""
        self.drain_seconds = drain_seconds
        self.governance = governance
        """Erases what the world's ``forget_person`` commands name from the stores (None: not
        this worker's job)."""
        self.handled = 0
        self.failures = 0

    async def ensure_group(self) -> None:
        try:
            await self.redis.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except Exception as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def run_once(self, *, block: bool = True) -> int:
        """Handle pending entries, then new ones; returns how many were acknowledged."""
        acked = 0
        for start in ("0", ">"):
            answer = await self.redis.xreadgroup(
                GROUP,
                CONSUMER,
                {self.stream: start},
                count=self.batch,
                block=self.block_ms if (block and start == ">") else None,
            )
            for _stream, entries in answer or []:
                acked += await self._handle_entries(entries)
        return acked

    async def _handle_entries(self, entries: list[tuple[Any, Any]]) -> int:
        """Handle entries in order; a run of completed episodes is embedded in one call and
        acknowledged after it is stored (a failure leaves the whole run pending)."""
        acked = 0
        episodes: list[tuple[Any, MemoryService, NewMemory]] = []

        async def flush() -> None:
            nonlocal acked
            by_store: dict[int, tuple[MemoryService, list[NewMemory]]] = {}
            for _, service, item in episodes:
                by_store.setdefault(id(service.semantic), (service, []))[1].append(item)
            for service, items in by_store.values():
                await service.semantic.remember(items)
            for entry_id, _, _ in episodes:
                await self.redis.xack(self.stream, GROUP, entry_id)
            acked += len(episodes)
            self.handled += len(episodes)
            episodes.clear()

        for entry_id, fields in entries:
            event = parse_event(entry_id, fields) if fields else None  # empty: trimmed away
            if event is not None:
                service = self.services.get(event.character_id or "")
                if service is not None and isinstance(event.data, EpisodeEvent):
                    when = event.time or self.clock.now()
                    item = await episode_memory(service, event.data, when)
                    if item is not None:
                        episodes.append((entry_id, service, item))
                        continue
                else:
                    await flush()  # what came before (e.g. the day's episodes before the diary)
                    await self.handle(event)
            await self.redis.xack(self.stream, GROUP, entry_id)
            acked += 1
            self.handled += 1
        await flush()
        return acked

    async def handle(self, event: StreamEvent) -> None:
        data = event.data
        if isinstance(data, CommandApplied) and self.governance is not None:
            await self._forget(data)
            return
        service = self.services.get(event.character_id or "")
        if service is None:
            return
        when = event.time or self.clock.now()
        if isinstance(data, ActionCompleted):
            await index_episode(service, data, when)
        elif (
            isinstance(data, ActionStarted)
            and data.action in SLEEP_ACTIONS
            and (day := diary_date(when.astimezone(self.clock.tz))) is not None
        ):
            await self._wait_for_outbox()
            await service.diary.write_day(service.character_id, day, when)

    async def _forget(self, applied: CommandApplied) -> None:
        """A ``forget_person`` command the world applied: the stores' part of it."""
        forget = applied.forget()
        if forget is None or self.governance is None:
            return
        command, result = forget
        subject = Subject(kind=command.subject, id=command.id, ids=tuple(command.ids))
        await self._wait_for_outbox()  # episodes of commands applied before it, written first
        counts = await self.governance.forget(
            subject,
            requested_by=command.requested_by,
            now=self.clock.now(),
            request_id=command.request_id,
            state_counts=result.state,
        )
        log.info("forgot a %s on request %s: %s", subject.kind, command.request_id, counts)

    async def retry_unindexed(self) -> int:
        """Index facts and chat memories whose indexing failed while the vector store or embedder was down."""
        done = 0
        for service in self.services.values():
            done += await service.index_pending()
        return done

    async def _wait_for_outbox(self) -> None:
        """Give the engine a moment to write the day's last episodes to history (its outbox).

        The sleep event is published in the same Redis transaction that queues the episodes, so
        without this the diary could be written from history a few milliseconds too early.
        """
        if self.outbox is None:
            return
        for _ in range(
            max(1, int(self.drain_seconds / DRAIN_POLL_SECONDS))
        ):  # polling another process's list
            if not await self.redis.llen(self.outbox):
                return
            await asyncio.sleep(DRAIN_POLL_SECONDS)
        if await self.redis.llen(self.outbox):
            log.warning(
                "diary: episodes still queued after %.0f s (history store slow or down); "
                "writing from what history has",
                self.drain_seconds,
            )

    async def run(self, stop: asyncio.Event) -> None:
        await self.ensure_group()
        pause = 1.0
        last_retry = time.monotonic()
        while not stop.is_set():
            try:
                await self.run_once()
                pause = 1.0
                if time.monotonic() - last_retry >= RETRY_INDEX_SECONDS:
                    last_retry = time.monotonic()
                    await self.retry_unindexed()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.failures += 1
                log.warning(
                    "memory worker: %s; retrying in %.0f s (the entry stays pending)", exc, pause
                )
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), pause)
                pause = min(pause * 2, self.max_backoff)


async def index_episode(service: MemoryService, data: EpisodeEvent, when: datetime) -> None:
    """Embed and store one completed episode (deduplicated by its id)."""
    item = await episode_memory(service, data, when)
    if item is not None:
        await service.semantic.remember([item])


async def episode_memory(
    service: MemoryService, data: EpisodeEvent, when: datetime
) -> NewMemory | None:
    """The memory of a completed episode or a meeting's conversation (from history, else from
    the event), or None."""
    if not data.episode_id:
        return None
    stored = await service.episodes.get(data.episode_id)
    told = data.name if isinstance(data, ActionCompleted) else ""
    summary = (stored.summary if stored else None) or data.summary or told
    if not summary:
        return None
    extra: dict[str, Any]
    if isinstance(data, Conversation) and data.meeting_id:  # whom she met
        importance = CONVERSATION_IMPORTANCE
        extra = {"with": list(data.partners), "meeting_id": data.meeting_id}
    else:
        action = data.action if isinstance(data, ActionCompleted) else ""
        shared = isinstance(data, ActionCompleted) and data.share
        importance = IMPORTANCE_BY_ACTION.get(action, DEFAULT_IMPORTANCE) + (0.2 if shared else 0.0)
        extra = {"action": action}
    return NewMemory(
        kind="episode",
        character_id=service.character_id,
        text=summary,
        time=stored.time if stored else when,
        key=data.episode_id,
        ref=data.episode_id,
        importance=min(1.0, importance),
        extra=extra,
    )


async def run_memory_worker(
    cfg: Any,
    redis: Any,
    history: Any,
    *,
    clock: Any,
    stop_event: asyncio.Event,
    chat_model: Any = None,
    semantic: SemanticMemory | None = None,
    diary_check: DiaryClaimCheck | None = None,
) -> None:
    """Run until ``stop_event`` is set: the stream consumer, knowledge sync and the nightly
    distillation (APScheduler). ``cfg`` is the `YuijuConfig`; ``redis`` an asyncio client;
    ``diary_check`` checks every character's diary against her record (the daemon passes
    `message.diary_grounding.DiaryGrounding`)."""
    from yuiju.storage.keys import Keys

    own_semantic = semantic is None
    if semantic is None:
        semantic = await open_semantic(cfg)
    scheduler = None
    try:
        services: dict[str, MemoryService] = {}
        for cid in cfg.world.characters:
            voice = DiaryVoice.of(cid)
            services[cid] = await build_memory(
                cfg,
                history,
                semantic,
                character_id=cid,
                chat_model=chat_model,
                voice=voice,
                diary_check=diary_check,
            )
        for service in services.values():
            try:
                report = await service.knowledge.sync(service.knowledge_roots, clock.now())
                if report.indexed or report.removed:
                    log.info(
                        "knowledge files: %d indexed, %d removed",
                        len(report.indexed),
                        len(report.removed),
                    )
            except Exception as exc:
                log.warning("knowledge files not synced: %s", exc)
        from apscheduler.schedulers.asyncio import AsyncIOScheduler

        scheduler = AsyncIOScheduler(timezone=cfg.app.tz)
        for cid, service in services.items():

            async def distil(service: MemoryService = service) -> None:
                await service.distiller.run(clock.now())

            schedule_distillation(
                scheduler,
                distil,
                at=cfg.memory.distill_at,
                tz=cfg.app.tz,
                job_id=f"memory-distill-{cid}",
            )
        scheduler.start()
        keys = Keys(cfg.redis.prefix)
        governance = Governance(
            GovernanceDeps(
                history=history,
                semantic=semantic,
                redis=redis,
                keys=keys,
                character_ids=list(cfg.world.characters),
                tz=cfg.app.tz,
            )
        )
        worker = MemoryWorker(
            redis,
            keys.events,
            services,
            clock=clock,
            outbox=keys.episode_outbox,
            governance=governance,
        )
        log.info(
            "memory worker: %s, embedder %s, diary lines checked against her record: %s",
            semantic.store.name,
            semantic.embedder.name,
            "yes" if diary_check is not None else "no (citations and the model's review only)",
        )
        await worker.run(stop_event)
    finally:
        if scheduler is not None:
            scheduler.shutdown(wait=False)
        if own_semantic:
            await semantic.store.close()
