"""The engine: owns the loop, the clock and the single writer per character.

One asyncio task sequences everything due, in time order:

- the **world tick** every ``tick_minutes`` of world time: load → apply queued commands →
  evolutions in config order → atomic save → events (a tick from ``last_advanced_at`` straight
  to now converges after downtime);
- each **character's behavior step** when her running action ends (a world tick catches the
  world up to the same instant first, so decisions always see the present);
- the **outbox flush** that writes committed episodes to the history store.

The same code runs under `RealClock` (``yuiju run``) and `SimClock` (``yuiju simulate``).
Characters are driven under a Redis lease, so two engines on the same stores never drive the
same character; a second engine says so and waits. The world tick runs under a lease of its own,
the town lease, which any engine may hold (with all, some or none of the characters): one engine
advances the shared world, and another takes it over within `LEASE_TTL_MS` when it stops. Leases
expire in wall time, so every lease wait is in wall time too, whatever the world clock's speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from redis.exceptions import (
    ClusterDownError,  # a cluster master down, until failover
    RedisError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from storage.errors import StoreUnavailable
from storage.history import HistoryStore
from world.behavior import BehaviorLoop
from world.clock import Clock
from world.commands import CommandRejected, apply_command, parse_command
from world.errors import CorruptState, LeaseLost
from world.evolutions import Event, Evolution, TickContext
from world.state import WorldState
from world.store import Commit, OutboxEntry, Snapshot, StateStore
from world.town import Town

log = logging.getLogger(__name__)

LEASE_TTL_MS = 30_000
LEASE_RENEW = timedelta(seconds=10)
LEASE_POLL = timedelta(seconds=2)
"""Wall time between two tries at a lease another engine holds (its holder may stop any time)."""
TOWN = "<town>"
CORRUPT_RETRY = timedelta(minutes=1)
MAX_BACKOFF_SECONDS = 10.0
STOP_GRACE_SECONDS = 1.0
RELEASE_TIMEOUT_SECONDS = 0.5
CORRUPT_LOG_EVERY_SECONDS = 300.0
OUTBOX_LOCK_MS = 30_000
OUTBOX_BATCH = 200
HISTORY_DOWN_LOG_EVERY_SECONDS = 300.0
HISTORY_DOWN = (StoreUnavailable, OSError)
"""Errors that mean the history store is unreachable (entries stay queued), not that it refuses
an entry (which is then dead-lettered). Both backends map their connection failures here."""


@dataclass(kw_only=True)
class NamedEvolution:
    name: str
    fn: Evolution


class WorldTicker:
    """Runs the world pipeline: commands, then evolutions, then one atomic save."""

    def __init__(
        self,
        *,
        store: StateStore,
        evolutions: Sequence[NamedEvolution],
        town: Town,
        seed: int,
        character_ids: Sequence[str],
    ) -> None:
        self.store = store
        self.evolutions = list(evolutions)
        self.town = town
        self.seed = seed
        self.character_ids = list(character_ids)
        self.ticks = 0
        self.rejected = 0
        self.corrupt: list[CorruptState] = []
        """Characters the last tick skipped because their state is corrupt."""

    def _apply(self, snap: Snapshot, now: datetime) -> tuple[Commit, bool]:
        world = snap.world or WorldState(time=now, last_advanced_at=now)
        if world.last_advanced_at >= now and world.calendar is not None and not snap.commands:
            return Commit(), False
        characters = {cid: c for cid, c in snap.characters.items() if c is not None}
        events: list[Event] = []
        rejected: list[dict[str, Any]] = []
        for raw in snap.commands:
            try:
                command = parse_command(raw)
                done = apply_command(command, world, characters)
                events.append(Event("command_applied", {"command": command.model_dump(), "result": done}))
            except CommandRejected as exc:
                rejected.append({"command": raw, "reason": str(exc), "time": now.isoformat()})
                events.append(Event("command_rejected", {"command": raw, "reason": str(exc)}))
                log.warning("rejected world command %s: %s", raw, exc)
        ctx = TickContext(
            from_time=world.last_advanced_at, to_time=max(now, world.last_advanced_at),
            world=world, characters=characters, town=self.town, seed=self.seed,
        )
        for evolution in self.evolutions:
            try:
                evolution.fn(ctx)
            except Exception:  # a user evolution's bug must not stop the world
                log.exception("evolution %s failed and was skipped this tick", evolution.name)
                events.append(Event("evolution_failed", {"evolution": evolution.name}))
        world.last_advanced_at = ctx.to_time
        return (
            Commit(world=world, characters=characters, events=events + ctx.events,
                   commands_taken=len(snap.commands), rejected=rejected),
            True,
        )

    async def tick(self, now: datetime, *, lease_token: str | None = None) -> bool:
        """Advance the world to ``now``; False if it already was there and nothing was queued.

        With ``lease_token`` the write is fenced on the town lease (`LeaseLost` if not held)."""
        corrupt: list[CorruptState] = []

        def apply(snap: Snapshot) -> tuple[Commit, bool]:
            corrupt[:] = snap.corrupt
            return self._apply(snap, now)

        advanced = await self.store.transact(
            apply, characters=self.character_ids, take_commands=True, now=now, skip_corrupt_characters=True,
            town_lease=lease_token,
        )
        self.corrupt = corrupt
        if advanced:
            self.ticks += 1
        return advanced


class Engine:
    def __init__(
        self,
        *,
        clock: Clock,
        store: StateStore,
        history: HistoryStore | None,
        ticker: WorldTicker,
        loops: Sequence[BehaviorLoop],
        tick_minutes: int = 1,
        on_step: Callable[[], Any] | None = None,
        flush_every: int = 1,
    ) -> None:
        self.clock = clock
        self.store = store
        self.history = history
        self.ticker = ticker
        self.loops = {loop.character_id: loop for loop in loops}
        self.tick = timedelta(minutes=tick_minutes)
        self.on_step = on_step
        self.flush_every = flush_every
        """Flush the outbox after this many committing steps (1 = at once; simulate batches)."""
        self.token = uuid.uuid4().hex
        self.holds_town = False
        """Whether this engine holds the town lease, and so advances the shared world."""
        self._stop = asyncio.Event()
        self._failing_since: float | None = None
        self._failing_logged = 0.0
        self._due: dict[str, datetime] = {}
        self._held: set[str] = set()
        self._waiting_logged: set[str] = set()
        self.outbox_failures = 0
        self._corrupt_logged: dict[str, float] = {}
        self._history_down_since: float | None = None
        self._history_down_logged = 0.0
        self._flushed_at = -1
        self._flush_pending = True
        """Flush at start-up: episodes left in the outbox by a crash are written first."""

    def stop(self) -> None:
        self._stop.set()

    # -- leases ---------------------------------------------------------------------------------
    # Leases expire in wall time, whatever the world clock does: every lease wait is in wall time.

    async def _refresh_leases(self) -> bool:
        """Renew what this engine holds, try to take what it does not; True if it took something."""
        took = False
        if self.holds_town:
            if not await self.store.renew_town_lease(self.token, LEASE_TTL_MS):
                self._lost_town()
        elif await self.store.acquire_town_lease(self.token, LEASE_TTL_MS):
            self.holds_town = took = True
            self._waiting_logged.discard(TOWN)
            log.info("advancing the world (town lease %s)", self.token[:8])
        elif TOWN not in self._waiting_logged:
            holder = await self.store.town_lease_holder()
            log.warning("the world is advanced by another engine (lease %s); this one waits to take it "
                        "over when that one stops", (holder or "?")[:8])
            self._waiting_logged.add(TOWN)
        for cid, loop in self.loops.items():
            if cid in self._held:
                if not await self.store.renew_lease(cid, self.token, LEASE_TTL_MS):
                    self._lost(cid)
            elif await self.store.acquire_lease(cid, self.token, LEASE_TTL_MS):
                self._held.add(cid)
                loop.lease_token = self.token
                self._waiting_logged.discard(cid)
                took = True
                log.info("driving character %s", cid)
            elif cid not in self._waiting_logged:
                holder = await self.store.lease_holder(cid)
                log.warning("character %s is driven by another engine (lease %s); waiting for it to stop",
                            cid, (holder or "?")[:8])
                self._waiting_logged.add(cid)
        return took

    def _lost(self, cid: str) -> None:
        log.error("lost the lease on %s; another engine drives her now", cid)
        self._held.discard(cid)
        self.loops[cid].lease_token = None

    def _lost_town(self) -> None:
        log.error("lost the town lease; another engine advances the world now")
        self.holds_town = False

    @property
    def holds_everything(self) -> bool:
        return self.holds_town and len(self._held) == len(self.loops)

    async def release(self) -> None:
        """Give up every lease so another engine can take over at once. Never raises: with Redis
        unreachable the leases simply expire (`LEASE_TTL_MS`) and the stop goes on."""
        held, town = list(self._held), self.holds_town
        self._held.clear()
        self.holds_town = False
        for loop in self.loops.values():
            loop.lease_token = None
        try:
            async with asyncio.timeout(RELEASE_TIMEOUT_SECONDS):
                for cid in held:
                    await self.store.release_lease(cid, self.token)
                if town:
                    await self.store.release_town_lease(self.token)
        except (RedisError, OSError, TimeoutError) as exc:
            log.warning("could not release the leases (%s); they expire by themselves within %d s",
                        exc or type(exc).__name__, LEASE_TTL_MS // 1000)

    # -- outbox -----------------------------------------------------------------------------

    async def flush_outbox(self, *, force: bool = False) -> int:
        """Write committed episodes to the history store; keep them queued if it is down."""
        if self.history is None:
            return 0
        pending = self.store.outbox_writes - self._flushed_at
        if not force and not self._flush_pending and (pending == 0 or pending < self.flush_every):
            return 0
        self._flushed_at = self.store.outbox_writes
        self._flush_pending = False
        # One flusher at a time: peek-write-trim by two engines at once could drop an entry.
        if not await self.store.acquire_outbox_lock(self.token, OUTBOX_LOCK_MS):
            self._flush_pending = True
            return 0
        try:
            return await self._flush_locked()
        finally:
            await self.store.release_outbox_lock(self.token)

    async def flush_queued(self) -> int:
        """Write what other writers queued (the chat's LLM ledger and conversation episodes, another
        process): they do not count in this engine's `outbox_writes`, so they waited for her next
        own episode, an hour at real speed. Checked on every lease check (one LLEN)."""
        if self.history is None or not await self.store.outbox_size():
            return 0
        return await self.flush_outbox(force=True)

    async def _flush_locked(self) -> int:
        assert self.history is not None
        written = 0
        while True:
            entries = await self.store.peek_outbox(OUTBOX_BATCH)
            if not entries:
                self._history_is_up(written)
                return written
            good = [e for e in entries if e.problem is None]
            dead = [(e.raw, e.problem) for e in entries if e.problem is not None]
            try:
                refused = await self._write(good)
            except Exception as exc:  # the store is down or slow: every entry stays queued
                await self._history_is_down(exc)
                self._flush_pending = True
                return written
            dead += refused
            if not await self.store.drop_outbox([e.raw for e in entries], self.token, OUTBOX_LOCK_MS, dead=dead):
                # our lock expired during a slow write and someone else flushed: the upserts were
                # idempotent, so leave the outbox to them rather than trim what we did not write
                log.warning("outbox changed under a slow flush; leaving it to the current flusher")
                return written
            if dead:
                self._report_dead_letters(dead)
            written += len(good) - len(refused)

    async def _write(self, entries: Sequence[OutboxEntry]) -> list[tuple[str, str]]:
        """Upsert the entries into history in order; return the ``(entry, reason)`` pairs the store
        refused for good. Raises when the store itself is unavailable (nothing is refused then)."""
        assert self.history is not None
        refused: list[tuple[str, str]] = []
        # consecutive entries of one collection go as one batch; order is kept
        for collection, run in itertools.groupby(entries, key=lambda e: e.collection):
            group = list(run)
            # an episode's running and completed versions often share a batch: upsert only the
            # last version of each id (the result is the same, with half the writes)
            latest = {e.doc["_id"]: e.doc for e in group}
            try:
                await self.history.put_many(collection, list(latest.values()))
                continue
            except HISTORY_DOWN:
                raise
            except Exception:  # the store answers but refuses something: find out which, one by one
                pass
            for doc_id, doc in latest.items():
                try:
                    await self.history.put_many(collection, [doc])
                except HISTORY_DOWN:
                    raise
                except Exception as exc:
                    try:
                        await self.history.ping()
                    except Exception:  # not the document: the store went away under us
                        raise exc from None
                    reason = f"the history store refuses it ({type(exc).__name__}: {exc})"
                    refused += [(e.raw, reason) for e in group if e.doc["_id"] == doc_id]
        return refused

    def _report_dead_letters(self, dead: Sequence[tuple[str, str]]) -> None:
        """One error line per batch moved: these entries are out of the way for good, so each is
        reported exactly once (and stays listed by ``yuiju status``)."""
        shown = "; ".join(f"{entry[:120]!r} {reason}" for entry, reason in dead[:5])
        more = f" (and {len(dead) - 5} more)" if len(dead) > 5 else ""
        log.error("moved %d malformed outbox entr%s to the dead-letter list %s: %s%s; the episodes behind "
                  "%s are written as usual (see `yuiju status`)", len(dead), "y" if len(dead) == 1 else "ies",
                  self.store.keys.outbox_dead, shown, more, "it" if len(dead) == 1 else "them")

    async def _history_is_down(self, exc: Exception) -> None:
        """Say the history store is down once, then every few minutes, not on every retry."""
        self.outbox_failures += 1
        wall = time.monotonic()
        if self._history_down_since is None or wall - self._history_down_logged >= HISTORY_DOWN_LOG_EVERY_SECONDS:
            still = "still " if self._history_down_since is not None else ""
            log.warning("history store %sunavailable (%s); %d episode(s) stay queued in Redis and will be retried",
                        still, exc, await self.store.outbox_size())
            self._history_down_logged = wall
        if self._history_down_since is None:
            self._history_down_since = wall

    def _history_is_up(self, written: int) -> None:
        if self._history_down_since is not None:
            log.info("history store is back after %.0f s; %d queued episode(s) written",
                     time.monotonic() - self._history_down_since, written)
            self._history_down_since = None

    # -- the loop ---------------------------------------------------------------------------

    async def run_once(self) -> datetime | None:
        """Do everything due now; return when something is next due (None: nothing until a lease
        is taken)."""
        now = self.clock.now()
        dues: list[datetime] = []
        if self.holds_town:
            try:
                await self.ticker.tick(now, lease_token=self.token)
            except CorruptState as exc:  # characters whose own state is fine go on
                self._log_corrupt("world tick skipped", exc)
            except LeaseLost:
                self._lost_town()
            for exc in self.ticker.corrupt:
                self._log_corrupt("left out of the world tick", exc)
            dues.append(now + self.tick)
        for cid, loop in self.loops.items():
            if cid not in self._held:
                continue
            due = self._due.get(cid, now)
            if due > now:
                dues.append(due)
                continue
            try:
                self._due[cid] = await loop.step(now)
            except CorruptState as exc:
                self._log_corrupt(f"{cid} paused", exc)
                self._due[cid] = now + CORRUPT_RETRY
            except LeaseLost as exc:
                log.error("%s", exc)
                self._held.discard(cid)
                loop.lease_token = None
                continue
            dues.append(self._due[cid])
        await self.flush_outbox()
        if self.on_step is not None:
            self.on_step()
        return min(dues, default=None)

    async def run(self, *, until: datetime | None = None, max_steps: int | None = None) -> None:
        """Run until `stop()`, ``until`` (world time) or ``max_steps`` steps.

        `stop()` is prompt: a step still in flight then (a slow model call, Redis retrying) gets
        `STOP_GRACE_SECONDS` to finish and is cancelled after that. Every write is one atomic
        script and every history write an idempotent upsert, so a cancelled step leaves nothing
        half-done: the next start redoes it.
        """
        # redis-py can swallow a task's cancellation in the middle of a command (redis/redis-py#2028,
        # #2551), so the two loops also watch `halt` and end after their current command.
        halt = asyncio.Event()
        keeper = asyncio.create_task(self._keep_leases(halt))
        main = asyncio.create_task(self._run(until=until, max_steps=max_steps, halt=halt))
        stopper = asyncio.create_task(self._stop.wait())
        try:
            await asyncio.wait({main, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if not main.done():
                await asyncio.wait({main}, timeout=STOP_GRACE_SECONDS)
                if not main.done():
                    log.info("stopping: the step in flight is cancelled (the next start redoes it)")
        finally:
            halt.set()
            tasks = {keeper, main, stopper}
            for task in tasks:
                task.cancel()
            _, late = await asyncio.wait(tasks, timeout=STOP_GRACE_SECONDS)
            if late:
                log.warning("%d engine task(s) still finishing a Redis command; they end by themselves", len(late))
        if main.done() and not main.cancelled() and (exc := main.exception()) is not None:
            raise exc

    async def _keep_leases(self, halt: asyncio.Event) -> None:
        """Renew held leases in the background, so a long sleep or a slow LLM call never lets one
        expire while this engine still drives the character."""
        while not halt.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(halt.wait(), min(LEASE_RENEW.total_seconds(), LEASE_TTL_MS / 3000))
            if halt.is_set():
                return
            try:
                if self.holds_town and not await self.store.renew_town_lease(self.token, LEASE_TTL_MS):
                    self._lost_town()
                for cid in list(self._held):
                    if not await self.store.renew_lease(cid, self.token, LEASE_TTL_MS):
                        self._lost(cid)
            except (RedisError, OSError) as exc:
                log.warning("could not renew the leases (%s); retrying", exc)

    async def _run(self, *, until: datetime | None, max_steps: int | None, halt: asyncio.Event) -> None:
        steps = 0
        backoff = 1.0
        next_lease_check = 0.0  # time.monotonic()
        due: datetime | None = None  # world time the next step is due; None: only a lease can bring work
        run_now = True
        while not (self._stop.is_set() or halt.is_set()):
            try:
                if time.monotonic() >= next_lease_check:
                    run_now = await self._refresh_leases() or run_now
                    await self.flush_queued()
                    # waiting for a lease: ask every LEASE_POLL; holding all: renew (the keeper does too)
                    next_lease_check = time.monotonic() + (
                        LEASE_RENEW if self.holds_everything else LEASE_POLL).total_seconds()
                now = self.clock.now()
                at_end = until is not None and now >= until
                if run_now or at_end or (due is not None and now >= due):
                    due = await self.run_once()
                    run_now = False
                    steps += 1
                if at_end:
                    await self.flush_outbox(force=True)
                    break
                if self._failing_since is not None:
                    log.info("running again after %.0f s", time.monotonic() - self._failing_since)
                    self._failing_since = None
                backoff = 1.0
            except CorruptState as exc:
                self._log_corrupt("engine", exc)
                due, run_now = self.clock.now() + CORRUPT_RETRY, False
            except Exception as exc:  # Redis down, or a bug in one step: the daemon carries on after a pause
                bounded = until is not None or max_steps is not None  # simulate, tests: report the bug
                if bounded and not isinstance(exc, RedisError | OSError):
                    raise
                self._step_failed(exc, backoff)
                await self._sleep_or_stop(None, wall_seconds=backoff)
                backoff = min(MAX_BACKOFF_SECONDS, backoff * 2)
                run_now = True
                continue
            if max_steps is not None and steps >= max_steps:
                break
            wake = due if until is None else min(until, due or until)
            await self._sleep_or_stop(wake, wall_seconds=max(0.0, next_lease_check - time.monotonic()))

    def _step_failed(self, exc: Exception, backoff: float) -> None:
        """Say what stopped the step once, then every few minutes while it lasts; not per retry."""
        wall = time.monotonic()
        unreachable = isinstance(exc, RedisConnectionError | RedisTimeoutError | ClusterDownError | OSError)
        what = f"Redis unreachable ({exc})" if unreachable else f"a step failed ({type(exc).__name__}: {exc})"
        if self._failing_since is None:
            self._failing_since = self._failing_logged = wall
            log.error("%s; retrying, at most %.0f s apart", what, MAX_BACKOFF_SECONDS, exc_info=not unreachable)
        elif wall - self._failing_logged >= CORRUPT_LOG_EVERY_SECONDS:
            self._failing_logged = wall
            log.error("still failing after %.0f s: %s; retrying in %.0f s", wall - self._failing_since, what, backoff)

    def _log_corrupt(self, what: str, exc: CorruptState) -> None:
        """Log a corrupt value once per key every few minutes, not on every retry."""
        wall = time.monotonic()
        if wall - self._corrupt_logged.get(exc.key, -1e9) >= CORRUPT_LOG_EVERY_SECONDS:
            self._corrupt_logged[exc.key] = wall
            log.error("%s: %s", what, exc)

    async def _sleep_or_stop(self, wake: datetime | None, *, wall_seconds: float | None = None) -> None:
        """Sleep until world time ``wake`` or ``wall_seconds`` of real time, whichever comes first
        (either may be None), or until `stop()`."""
        waits = [asyncio.ensure_future(self._stop.wait())]
        if wake is not None:
            waits.append(asyncio.ensure_future(self.clock.sleep_until(wake)))
        if wall_seconds is not None:
            waits.append(asyncio.ensure_future(asyncio.sleep(wall_seconds)))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                if not task.done():
                    task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
