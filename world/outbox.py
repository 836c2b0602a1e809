"""The episode outbox flush: what was queued in Redis is written to the history store.

Every write of world state queues its episodes in the town's outbox in the same atomic step
(`StateStore.transact`), so nothing is lost while the history store is down or slow. An
`OutboxFlusher` writes them to the history store in order and trims what it wrote:

- one flusher per town at a time, under the town's flush lock (peek-write-trim by two at once
  could drop an entry), so any process that queues entries (the engine, the bot) may flush them;
- a store that is unavailable (locked, busy, unreachable, failing over: `HISTORY_DOWN`) keeps
  every entry queued (said once, then every few minutes);
- only an entry that no store can ever take (bad JSON, a document the store refuses: `REFUSED`)
  is moved to the dead-letter list in the same atomic step as the trim, and reported once.

The engine owns one and flushes after its own writes (`flush`) and every few seconds what other
writers queued (`flush_once`); a process without an engine can `run` one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from redis.exceptions import RedisError

from yuiju.storage.errors import InvalidDocument, StoreUnavailable, UndeclaredField
from yuiju.storage.history import HistoryStore
from yuiju.world.store import OutboxEntry, StateStore

log = logging.getLogger(__name__)

OUTBOX_LOCK_MS = 30_000
"""The flush lock's TTL at most; an engine keeps it under its lease TTL, so the flush lock of a
worker that died in the middle of a flush runs out with its leases and the others flush that town
again."""
OUTBOX_BATCH = 200
FLUSH_RETRY = timedelta(seconds=1)
"""Wall time before flushing again when another worker held the town's flush lock, so an episode
never waits for this engine's next step to be written."""
QUEUED_FLUSH_SECONDS = 10.0
"""How often what other writers queued in the outbox is written (`OutboxFlusher.flush_once`)."""
HISTORY_DOWN_LOG_EVERY_SECONDS = 300.0
HISTORY_DOWN = (StoreUnavailable, OSError)
"""Errors that mean the history store cannot write now (unreachable, locked, busy, full, failing
over, damaged): every entry stays queued and is retried. Both backends map their errors here by
kind (result code, error class and code), never by message."""
REFUSED = (InvalidDocument, UndeclaredField)
"""Errors that mean this entry can never be stored (a document no store takes, an unknown
collection): it is dead-lettered. Any other error from a store that still answers is taken as a
refusal too, once the entry is found to be the only one that fails."""


@dataclass(eq=False)
class _Town:
    """One town's outbox as this flusher follows it."""

    store: StateStore
    flushed_at: int = -1
    """The store's `outbox_writes` at the last flush."""
    pending: bool = True
    """Flush at start-up: episodes left in the outbox by a crash are written first."""
    lock_busy: bool = False
    """Another flusher held the flush lock at the last try: try again soon."""


class OutboxFlusher:
    """Writes the episode outbox of one or more towns (one `StateStore` each) to ``history``."""

    def __init__(
        self,
        stores: StateStore | Sequence[StateStore],
        history: HistoryStore | None,
        *,
        token: str | None = None,
        lock_ms: int = OUTBOX_LOCK_MS,
        every: int = 1,
    ) -> None:
        """``token`` names this flusher in the flush lock (an engine passes its own); ``every``:
        `flush` writes after this many committing writes of these stores (1 = at once)."""
        self._towns = [_Town(s) for s in ([stores] if isinstance(stores, StateStore) else stores)]
        self.history = history
        """None: nothing is flushed (the entries stay queued)."""
        self.token = token or uuid.uuid4().hex
        self.lock_ms = lock_ms
        self.every = every
        self.failures = 0
        """Flushes that found the history store unavailable."""
        self._down_since: float | None = None
        self._down_logged = 0.0
        self._stop = asyncio.Event()

    @property
    def lock_busy(self) -> bool:
        """Whether another flusher held a town's flush lock at the last try (flush again soon)."""
        return any(town.lock_busy for town in self._towns)

    async def flush(self, *, force: bool = False) -> int:
        """Write committed episodes to the history store; keep them queued if it is down.

        Without ``force`` a town is flushed only once its store queued `every` writes since the
        last flush (or a flush is pending: the first one, a retry). Returns the entries written."""
        written = 0
        for town in self._towns:
            written += await self._flush_town(town, force=force)
        return written

    async def flush_once(self) -> int:
        """Write whatever is queued now, whoever queued it (another process's entries do not
        count in this one's writes). One LLEN a town when there is nothing to do."""
        if self.history is None:
            return 0
        written = 0
        for town in self._towns:
            if await town.store.outbox_size():
                written += await self._flush_town(town, force=True)
        return written

    async def run(self, *, every_seconds: float = QUEUED_FLUSH_SECONDS) -> None:
        """Flush what is queued every ``every_seconds`` (wall time) until `stop()`; sooner while
        another flusher holds a lock. Redis trouble is logged once and retried."""
        self._stop.clear()
        trouble: float | None = None
        while not self._stop.is_set():
            try:
                await self.flush_once()
                if trouble is not None:
                    log.info("outbox flushed again after %.0f s", time.monotonic() - trouble)
                    trouble = None
            except (RedisError, OSError) as exc:
                if trouble is None:
                    trouble = time.monotonic()
                    log.warning(
                        "could not flush the outbox (%s); retrying every %.0f s", exc, every_seconds
                    )
            wait = FLUSH_RETRY.total_seconds() if self.lock_busy else every_seconds
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), wait)

    def stop(self) -> None:
        self._stop.set()

    async def _flush_town(self, town: _Town, *, force: bool) -> int:
        if self.history is None:
            return 0
        store = town.store
        pending = store.outbox_writes - town.flushed_at
        if not force and not town.pending and (pending == 0 or pending < self.every):
            return 0
        town.flushed_at = store.outbox_writes
        town.pending = town.lock_busy = False
        # One flusher at a time: peek-write-trim by two at once could drop an entry.
        if not await store.acquire_outbox_lock(self.token, self.lock_ms):
            town.pending = town.lock_busy = True
            return 0
        try:
            return await self._flush_locked(town)
        finally:
            await store.release_outbox_lock(self.token)

    async def _flush_locked(self, town: _Town) -> int:
        store = town.store
        written = 0
        while True:
            entries = await store.peek_outbox(OUTBOX_BATCH)
            if not entries:
                self._history_is_up(written)
                return written
            good = [e for e in entries if e.problem is None]
            dead = [(e.raw, e.problem) for e in entries if e.problem is not None]
            try:
                refused = await self._write(good)
            except Exception as exc:  # the store is down or slow: every entry stays queued
                await self._history_is_down(exc, store)
                town.pending = True
                return written
            dead += refused
            if not await store.drop_outbox(
                [e.raw for e in entries], self.token, self.lock_ms, dead=dead
            ):
                # our lock expired during a slow write and someone else flushed: the upserts were
                # idempotent, so leave the outbox to them rather than trim what we did not write
                log.warning("outbox changed under a slow flush; leaving it to the current flusher")
                return written
            if dead:
                self._report_dead_letters(dead, store)
            written += len(good) - len(refused)

    async def _write(self, entries: Sequence[OutboxEntry]) -> list[tuple[str, str]]:
        """Upsert the entries into history in order; return the ``(entry, reason)`` pairs the store
        refused for good. Raises when the store itself is unavailable (nothing is refused then)."""
        history = self.history
        assert history is not None
        refused: list[tuple[str, str]] = []
        # consecutive entries of one collection go as one batch; order is kept
        for collection, run in itertools.groupby(entries, key=lambda e: e.collection):
            group = list(run)
            # an episode's running and completed versions often share a batch: upsert only the
            # last version of each id (the result is the same, with half the writes)
            latest = {e.doc["_id"]: e.doc for e in group}
            try:
                await history.put_many(collection, list(latest.values()))
                continue
            except HISTORY_DOWN:
                raise
            except Exception:  # the store answers but refuses something: find out which, one by one
                pass
            for doc_id, doc in latest.items():
                error: Exception
                try:
                    await history.put_many(collection, [doc])
                    continue
                except HISTORY_DOWN:
                    raise
                except REFUSED as exc:
                    error = exc
                except Exception as exc:  # a kind no backend names: refused if the store answers
                    try:
                        await history.ping()
                    except Exception:  # not the document: the store went away under us
                        raise exc from None
                    error = exc
                reason = f"the history store refuses it ({type(error).__name__}: {error})"
                refused += [(e.raw, reason) for e in group if e.doc["_id"] == doc_id]
        return refused

    def _report_dead_letters(self, dead: Sequence[tuple[str, str]], store: StateStore) -> None:
        """One error line per batch moved: these entries are out of the way for good, so each is
        reported exactly once (and stays listed by ``yuiju status``)."""
        shown = "; ".join(f"{entry[:120]!r} {reason}" for entry, reason in dead[:5])
        more = f" (and {len(dead) - 5} more)" if len(dead) > 5 else ""
        log.error(
            "moved %d malformed outbox entr%s to the dead-letter list %s: %s%s; the episodes behind "
            "%s are written as usual (see `yuiju status`)",
            len(dead),
            "y" if len(dead) == 1 else "ies",
            store.keys.outbox_dead,
            shown,
            more,
            "it" if len(dead) == 1 else "them",
        )

    async def _history_is_down(self, exc: Exception, store: StateStore) -> None:
        """Say the history store is down once, then every few minutes, not on every retry."""
        self.failures += 1
        wall = time.monotonic()
        if self._down_since is None or wall - self._down_logged >= HISTORY_DOWN_LOG_EVERY_SECONDS:
            still = "still " if self._down_since is not None else ""
            log.warning(
                "history store %sunavailable (%s); %d episode(s) stay queued in Redis and will be retried",
                still,
                exc,
                await store.outbox_size(),
            )
            self._down_logged = wall
        if self._down_since is None:
            self._down_since = wall

    def _history_is_up(self, written: int) -> None:
        if self._down_since is not None:
            log.info(
                "history store is back after %.0f s; %d queued episode(s) written",
                time.monotonic() - self._down_since,
                written,
            )
            self._down_since = None
