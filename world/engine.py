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
same character; a second engine says so and waits.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from redis.exceptions import ClusterDownError  # a cluster master down, until failover
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from storage.history import HistoryStore
from world.behavior import BehaviorLoop
from world.clock import Clock
from world.commands import CommandRejected, apply_command, parse_command
from world.errors import CorruptState, LeaseLost
from world.evolutions import Event, Evolution, TickContext
from world.state import WorldState
from world.store import Commit, Snapshot, StateStore
from world.town import Town

log = logging.getLogger(__name__)

LEASE_TTL_MS = 30_000
LEASE_RENEW = timedelta(seconds=10)
CORRUPT_RETRY = timedelta(minutes=1)
MAX_BACKOFF_SECONDS = 60.0
CORRUPT_LOG_EVERY_SECONDS = 300.0
OUTBOX_LOCK_MS = 30_000


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

    async def tick(self, now: datetime) -> bool:
        """Advance the world to ``now``; False if it already was there and nothing was queued."""
        corrupt: list[CorruptState] = []

        def apply(snap: Snapshot) -> tuple[Commit, bool]:
            corrupt[:] = snap.corrupt
            return self._apply(snap, now)

        advanced = await self.store.transact(
            apply, characters=self.character_ids, take_commands=True, now=now, skip_corrupt_characters=True
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
        self._stop = asyncio.Event()
        self._due: dict[str, datetime] = {}
        self._held: set[str] = set()
        self._waiting_logged: set[str] = set()
        self.outbox_failures = 0
        self._corrupt_logged: dict[str, float] = {}
        self._flushed_at = -1
        self._flush_pending = True
        """Flush at start-up: episodes left in the outbox by a crash are written first."""

    def stop(self) -> None:
        self._stop.set()

    # -- leases -----------------------------------------------------------------------------

    async def _refresh_leases(self) -> None:
        for cid, loop in self.loops.items():
            if cid in self._held:
                if not await self.store.renew_lease(cid, self.token, LEASE_TTL_MS):
                    log.error("lost the lease on %s; another engine drives her now", cid)
                    self._held.discard(cid)
                    loop.lease_token = None
            elif await self.store.acquire_lease(cid, self.token, LEASE_TTL_MS):
                self._held.add(cid)
                loop.lease_token = self.token
                self._waiting_logged.discard(cid)
                log.info("driving character %s", cid)
            elif cid not in self._waiting_logged:
                holder = await self.store.lease_holder(cid)
                log.warning("character %s is driven by another engine (lease %s); waiting for it to stop",
                            cid, (holder or "?")[:8])
                self._waiting_logged.add(cid)

    async def release(self) -> None:
        for cid in list(self._held):
            await self.store.release_lease(cid, self.token)
            self.loops[cid].lease_token = None
        self._held.clear()

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

    async def _flush_locked(self) -> int:
        assert self.history is not None
        written = 0
        while True:
            raw, batch = await self.store.peek_outbox(200)
            if not batch:
                return written
            try:
                # consecutive entries of one collection go as one batch; order is kept
                for collection, group in itertools.groupby(batch, key=lambda e: e["collection"]):
                    # an episode's running and completed versions often share a batch: upsert only
                    # the last version of each id (the result is the same, with half the writes)
                    latest = {e["doc"]["_id"]: e["doc"] for e in group}
                    await self.history.put_many(collection, list(latest.values()))
            except Exception as exc:
                self.outbox_failures += 1
                log.warning("history store unavailable (%s); %d episode(s) stay queued in Redis and will be retried",
                            exc, await self.store.outbox_size())
                self._flush_pending = True
                return written
            if not await self.store.drop_outbox(raw, self.token, OUTBOX_LOCK_MS):
                # our lock expired during a slow write and someone else flushed: the upserts were
                # idempotent, so leave the outbox to them rather than trim what we did not write
                log.warning("outbox changed under a slow flush; leaving it to the current flusher")
                return written
            written += len(batch)

    # -- the loop ---------------------------------------------------------------------------

    async def run_once(self) -> datetime:
        """Do everything due now; return when something is next due."""
        now = self.clock.now()
        try:
            await self.ticker.tick(now)
        except CorruptState as exc:  # characters whose own state is fine go on
            self._log_corrupt("world tick skipped", exc)
        for exc in self.ticker.corrupt:
            self._log_corrupt("left out of the world tick", exc)
        next_tick = now + self.tick
        for cid, loop in self.loops.items():
            if cid not in self._held:
                continue
            due = self._due.get(cid, now)
            if due > now:
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
        await self.flush_outbox()
        if self.on_step is not None:
            self.on_step()
        dues = [self._due.get(c, now) for c in self._held]
        return min([next_tick, *dues])

    async def run(self, *, until: datetime | None = None, max_steps: int | None = None) -> None:
        """Run until `stop()`, ``until`` (world time) or ``max_steps`` iterations."""
        keeper = asyncio.create_task(self._keep_leases())
        try:
            await self._run(until=until, max_steps=max_steps)
        finally:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)

    async def _keep_leases(self) -> None:
        """Renew held leases in the background, so a long sleep or a slow LLM call never lets one
        expire while this engine still drives the character."""
        while True:
            await asyncio.sleep(min(LEASE_RENEW.total_seconds(), LEASE_TTL_MS / 3000))
            for cid in list(self._held):
                try:
                    if not await self.store.renew_lease(cid, self.token, LEASE_TTL_MS):
                        log.error("lost the lease on %s; another engine drives her now", cid)
                        self._held.discard(cid)
                        self.loops[cid].lease_token = None
                except (RedisConnectionError, RedisTimeoutError, ClusterDownError, OSError) as exc:
                    log.warning("could not renew the lease on %s (%s); retrying", cid, exc)

    async def _run(self, *, until: datetime | None, max_steps: int | None) -> None:
        steps = 0
        backoff = 1.0
        last_lease: float | None = None
        while not self._stop.is_set():
            try:
                # Leases expire in wall time, whatever the world clock does.
                wall = time.monotonic()
                if last_lease is None or wall - last_lease >= LEASE_RENEW.total_seconds() or not self._held:
                    await self._refresh_leases()
                    last_lease = wall
                wake = await self.run_once()
                backoff = 1.0
            except (RedisConnectionError, RedisTimeoutError, ClusterDownError, OSError) as exc:
                log.error("Redis unreachable (%s); retrying in %.0f s", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(MAX_BACKOFF_SECONDS, backoff * 2)
                continue
            except CorruptState as exc:
                self._log_corrupt("engine", exc)
                await self._sleep_or_stop(self.clock.now() + CORRUPT_RETRY)
                continue
            steps += 1
            if max_steps is not None and steps >= max_steps:
                break
            if until is not None and wake >= until:
                await self.clock.sleep_until(until)
                await self.run_once()
                await self.flush_outbox(force=True)
                break
            if not self._held:
                wake = min(wake, self.clock.now() + LEASE_RENEW)
            await self._sleep_or_stop(wake)

    def _log_corrupt(self, what: str, exc: CorruptState) -> None:
        """Log a corrupt value once per key every few minutes, not on every retry."""
        wall = time.monotonic()
        if wall - self._corrupt_logged.get(exc.key, -1e9) >= CORRUPT_LOG_EVERY_SECONDS:
            self._corrupt_logged[exc.key] = wall
            log.error("%s: %s", what, exc)

    async def _sleep_or_stop(self, wake: datetime) -> None:
        sleeper = asyncio.ensure_future(self.clock.sleep_until(wake))
        stopper = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, stopper):
                if not task.done():
                    task.cancel()
            await asyncio.gather(sleeper, stopper, return_exceptions=True)
