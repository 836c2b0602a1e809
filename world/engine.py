"""The engine: owns the loop, the clock and the single writer per character.

One asyncio task sequences everything due, in time order, for every town it drives:

- each town's **world tick** every ``tick_minutes`` of world time: load → apply queued commands →
  evolutions in config order → atomic save → events (a tick from ``last_advanced_at`` straight
  to now converges after downtime);
- each **character's behavior step** when her running action ends (a world tick catches the
  world up to the same instant first, unless the last one is under a world minute old, so decisions
  always see the present); a town's characters due at the same moment are stepped one after
  another in one `StateStore.batched` block (their state read in one round trip, their writes
  sent together), so a burst waits for Redis once, not once per character;
- each town's **outbox flush** that writes committed episodes to the history store (an
  `OutboxFlusher`, world/outbox.py, that the engine owns), in a task of its own: a history store
  that is slow, locked or away holds up that task, never the world tick or a step.

A model's decision is never awaited in a step either (with ``decisions``): it is an operation off
the step (world/decisions.py) whose answer a later step of hers collects and checks.

The same code runs under `RealClock` (``yuiju run``) and `SimClock` (``yuiju simulate``).

Engines are workers (world/leases.py). A town is a key prefix (one Redis Cluster slot) with its
world and characters; an engine can drive several towns, and several engines (``yuiju world
--worker`` processes, on one machine or many) share the towns' characters out evenly under Redis
leases: one engine drives a character at a time, and one, the town lease holder, advances each
town's world. A background task keeps the leases (one script per town, whatever the number of
characters) and takes over the characters of a worker that died within the lease TTL; the main
loop gives up extras when a worker joins only between two steps. Every write is fenced on its lease,
so an engine that lost one writes nothing. Leases expire in wall time, so every lease wait is in
wall time too, whatever the world clock's speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import logging
import math
import os
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from redis.exceptions import (
    ClusterDownError,  # a cluster master down, until failover
    RedisClusterException,  # redis-py 8: slots left uncovered after the client re-reads the cluster
    RedisError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from yuiju.config import compact_character_ids
from yuiju.memory import event_data as ev
from yuiju.storage.history import HistoryStore
from yuiju.world.behavior import BehaviorLoop
from yuiju.world.clock import Clock
from yuiju.world.commands import CommandRejected, apply_command, parse_command
from yuiju.world.decisions import DecisionLimits, DecisionPool
from yuiju.world.errors import CorruptState, LeaseLost
from yuiju.world.evolutions import Event, Evolution, TickContext
from yuiju.world.leases import LeaseChange, Leases
from yuiju.world.outbox import FLUSH_RETRY, OUTBOX_LOCK_MS, QUEUED_FLUSH_SECONDS, OutboxFlusher
from yuiju.world.randomness import UNSEEDED, Randomness
from yuiju.world.state import WorldState
from yuiju.world.steps import StepInputs, StepResult
from yuiju.world.store import BATCH_PIPELINE, Commit, Snapshot, StateStore
from yuiju.world.town import Town
from yuiju.world.transitions import Asked

log = logging.getLogger(__name__)

LEASE_TTL_MS = 30_000
"""Default lease TTL (``[world] lease_ttl_seconds``): how long a dead engine's leases outlive it."""
FIGURES_EVERY_SECONDS = 10.0
"""How often the figures a worker publishes in the registry (for `yuiju status`) are recomputed."""
FIGURES_SAMPLES = 10_000
"""Recent decisions and steps the published percentiles are computed over."""
CATCH_UP = timedelta(minutes=1)
"""A step ticks the world up to its moment first only when the last tick is this old (world time):
a tick rewrites every character of the town, so a big town ticking before each of its steps would
spend its size on every decision. Decisions see the world at most this stale (and needs drift on at
their usual pace); under `SimClock`, where steps fall on whole minutes, every step still catches up."""
CORRUPT_RETRY = timedelta(minutes=1)
STEP_BUG_RETRY = timedelta(minutes=1)
"""World time before a character whose step raised (a bug) is stepped again by the daemon."""
MAX_BACKOFF_SECONDS = 10.0
STOP_GRACE_SECONDS = 1.0
"""How long a stop waits, in all, for what the engine has under way (a step, the outbox flush)."""
CANCEL_GRACE_SECONDS = 0.2
"""What cancelled tasks get at least to end, past `STOP_GRACE_SECONDS` spent on the step."""
RELEASE_TIMEOUT_SECONDS = 0.5
CORRUPT_LOG_EVERY_SECONDS = 300.0


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
        character_ids: Sequence[str],
        names: Mapping[str, str] | None = None,
    ) -> None:
        self.store = store
        self.names = dict(names or {})
        """Display names by character id, for the episodes commands write."""
        self.evolutions = list(evolutions)
        self.town = town
        self.character_ids = list(character_ids)
        self.ticks = 0
        self.rejected = 0
        self.corrupt: list[CorruptState] = []
        """Characters the last tick skipped because their state is corrupt."""

    def _apply(self, snap: Snapshot, now: datetime, randomness: Randomness) -> tuple[Commit, bool]:
        world = snap.world or WorldState(time=now, last_advanced_at=now)
        if world.last_advanced_at >= now and world.calendar is not None and not snap.commands:
            return Commit(), False
        characters = {cid: c for cid, c in snap.characters.items() if c is not None}
        events: list[Event] = []
        rejected: list[dict[str, Any]] = []
        outbox: list[dict[str, Any]] = []
        for raw in snap.commands:
            try:
                command = parse_command(raw)
                done = apply_command(
                    command,
                    world,
                    characters,
                    now=now,
                    town=self.town,
                    names=self.names,
                    episodes=outbox,
                )
                events.append(Event(ev.CommandApplied(command=command.model_dump(), result=done)))
            except CommandRejected as exc:
                rejected.append({"command": raw, "reason": str(exc), "time": now.isoformat()})
                events.append(Event(ev.CommandRejected(command=raw, reason=str(exc))))
                log.warning("rejected world command %s: %s", raw, exc)
        ctx = TickContext(
            from_time=world.last_advanced_at,
            to_time=max(now, world.last_advanced_at),
            world=world,
            characters=characters,
            town=self.town,
            randomness=randomness,
        )
        for evolution in self.evolutions:
            try:
                evolution.fn(ctx)
            except Exception:  # a user evolution's bug must not stop the world
                log.exception("evolution %s failed and was skipped this tick", evolution.name)
                events.append(Event(ev.EvolutionFailed(evolution=evolution.name)))
        world.last_advanced_at = ctx.to_time
        return (
            Commit(
                world=world,
                characters=characters,
                events=events + ctx.events,
                commands_taken=len(snap.commands),
                rejected=rejected,
                outbox=outbox,
            ),
            True,
        )

    async def tick(
        self,
        now: datetime,
        *,
        randomness: Randomness = UNSEEDED,
        lease_token: str | None = None,
    ) -> bool:
        """Advance the world to ``now``; False if it already was there and nothing was queued.

        ``randomness``: the town's, as the engine hands it (evolutions draw from it). With
        ``lease_token`` the write is fenced on the town lease (`LeaseLost` if not held)."""

        def apply(snap: Snapshot) -> tuple[Commit, tuple[bool, list[CorruptState]]]:
            commit, advanced = self._apply(snap, now, randomness)
            return commit, (advanced, snap.corrupt)

        advanced, self.corrupt = await self.store.transact(
            apply,
            characters=self.character_ids,
            take_commands=True,
            now=now,
            skip_corrupt_characters=True,
            town_lease=lease_token,
        )
        if advanced:
            self.ticks += 1
        return advanced


@dataclass(eq=False)
class TownRun:
    """One town as an engine drives it: its store (its keys), its world ticker, its characters."""

    store: StateStore
    ticker: WorldTicker
    loops: Sequence[BehaviorLoop]
    seed: int | None = None
    """The town's own seed (``[towns.<prefix>] seed``); None: the engine's."""
    ticked_at: datetime | None = None
    """World time of this engine's last tick of the town."""

    @property
    def prefix(self) -> str:
        return self.store.keys.prefix


@dataclass
class EngineFigures:
    """How the engine keeps up, for the worker registry (`yuiju status`) and benchmarks."""

    lag_ms: deque[float] = field(default_factory=lambda: deque(maxlen=FIGURES_SAMPLES))
    """How late each step ran after it was due (wall ms; 0 under a simulated clock)."""
    steps: int = 0


class Engine:
    """Drives the towns' worlds and characters it holds leases for, in one asyncio loop."""

    def __init__(
        self,
        *,
        clock: Clock,
        history: HistoryStore | None,
        store: StateStore | None = None,
        ticker: WorldTicker | None = None,
        loops: Sequence[BehaviorLoop] = (),
        towns: Sequence[TownRun] = (),
        tick_minutes: int = 1,
        on_step: Callable[[], Any] | None = None,
        flush_every: int = 1,
        lease_ttl_ms: int | None = None,
        worker_name: str | None = None,
        decisions: DecisionLimits | None = None,
        wall: Callable[[], float] = time.monotonic,
        flush_in_step: bool = False,
        seed: int = 0,
    ) -> None:
        """One town from ``store``, ``ticker`` and ``loops``, and/or more as ``towns``; the first
        town is the default one, whose keys hold the worker registry. ``decisions``: a policy that
        is not instant decides off the step (world/decisions.py; deadlines on ``wall``).
        ``flush_in_step``: episodes are written before the next step (see `_keep_flushing`).
        ``seed``: the run's (``[world] seed``), whose randomness the engine hands each world tick
        and step, derived per town (and by them per character)."""
        first = []
        if store is not None and ticker is not None:
            first = [TownRun(store=store, ticker=ticker, loops=list(loops))]
        self._init_towns([*first, *towns], seed)
        self.clock = clock
        self.tick = timedelta(minutes=tick_minutes)
        self.on_step = on_step
        self.token = uuid.uuid4().hex
        self.lease_ttl_ms = lease_ttl_ms or LEASE_TTL_MS
        self._init_outbox(history, flush_every=flush_every, flush_in_step=flush_in_step)
        self.name = worker_name or f"{socket.gethostname()}:{os.getpid()}"
        """How `yuiju status` names this worker."""
        self.started_at = time.time()
        self.figures = EngineFigures()
        self._published: tuple[float, dict[str, Any]] = (-1e9, {})
        self.leases = Leases(
            [(t.store, [loop.character_id for loop in t.loops]) for t in self.towns],
            token=self.token,
            ttl_ms=self.lease_ttl_ms,
            info=self._worker_info,
        )
        self._lease_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        """Set when the lease keeper took characters or a town: the main loop runs at once."""
        self._stop = asyncio.Event()
        self._failing_since: float | None = None
        self._failing_logged = 0.0
        self._due: dict[str, datetime] = {}
        self.strict = True
        """A step that raises stops the run (simulate, tests); `run` without a bound (the daemon)
        logs it and steps her again later instead, while the others go on."""
        self._redo: set[str] = set()
        """Characters whose write sent with others' did not land: stepped next on their own."""
        self._waiting_logged = False
        self._lease_trouble_since: float | None = None
        self._corrupt_logged: dict[str, float] = {}
        self._released = False
        """`release` ran since the last `run`."""
        self._idle = False
        """The last lease check left this engine driving nothing: what it takes next, it takes
        over from another engine (`_continue_clock`). False at first: a start anchors the clock
        itself (`Runtime.continue_world_clock`)."""
        self._redis_silent = False
        """Redis answered nothing while the last `run` stopped (it hangs): `release` skips it."""
        self.decisions: DecisionPool[Asked] | None = None
        """The decisions in flight of this worker's characters (None: decided in the step)."""
        if decisions is not None:
            self.decisions = DecisionPool(decisions, wall=wall, on_ready=self._answer_ready)

    def _init_towns(self, towns: list[TownRun], seed: int) -> None:
        if not towns:
            raise ValueError("an engine needs a town: store and ticker, or towns")
        self.towns = towns
        self.randomness = Randomness.seeded(seed)
        """The run's randomness (mesa's ``Model.random``): nothing else holds a seed."""
        self._town_randomness = {
            town.prefix: self.randomness if town.seed is None else Randomness.seeded(town.seed)
            for town in towns
        }
        """Each town's: the run's, or the town's own seed's."""
        self.store = towns[0].store
        self.ticker = towns[0].ticker
        self.loops = {loop.character_id: loop for town in towns for loop in town.loops}
        if len(self.loops) != sum(len(town.loops) for town in towns):
            raise ValueError("a character id may live in one town of an engine only")

    def _init_outbox(
        self, history: HistoryStore | None, *, flush_every: int, flush_in_step: bool
    ) -> None:
        self.outbox = OutboxFlusher(
            [town.store for town in self.towns],
            history,
            token=self.token,
            lock_ms=max(1_000, min(OUTBOX_LOCK_MS, self.lease_ttl_ms)),
            every=flush_every,
        )
        """Writes the towns' episode outboxes to history: after this many committing steps
        (``flush_every``; 1 = at once, simulate batches) and what other writers queue."""
        self._flush_lock = asyncio.Lock()
        """One flush at a time in this engine (the flush lock in Redis is per engine token)."""
        self._flush_wanted: asyncio.Event | None = None
        """While `run` runs: set after a step to have its flusher write the outbox."""
        self.flush_in_step = flush_in_step
        """`run` writes each step's episodes before the next step (simulate: a decision that reads
        her recent episodes reads the same ones in a replay), not in its own task."""

    def stop(self) -> None:
        self._stop.set()

    def _answer_ready(self, character_id: str) -> None:
        """Her decision in flight ended: step her now (the main loop wakes)."""
        if character_id in self.loops:
            self._due[character_id] = self.clock.now()
            self._wake.set()

    def _answered_meanwhile(self, character_id: str) -> bool:
        """Her decision in flight is answered already (during her step, which then said to look
        again at its deadline)."""
        flight = self.decisions.get(character_id) if self.decisions is not None else None
        return flight is not None and flight.done()

    def _forget_decision(self, character_id: str) -> None:
        if self.decisions is not None:
            self.decisions.drop(character_id)

    def _drives(self, character_id: str) -> bool:
        """Whether this engine drives her (before its first lease check, as when a test steps
        the loops by hand: all of its own)."""
        return character_id in self.loops and (
            self.leases.holds(character_id) or not self.leases.live
        )

    @property
    def holds_town(self) -> bool:
        """Whether this engine advances the default town's world (holds its town lease)."""
        return self.leases.holds_town(self.towns[0].prefix)

    # -- leases ---------------------------------------------------------------------------------
    # world/leases.py decides what to hold; here the loops follow it and the log says what changed.

    async def _refresh_leases(self) -> bool:
        """One lease check; True if it took a character or a town."""
        async with self._lease_lock:
            change = await self.leases.refresh()
        self._follow(change)
        took = bool(change.taken or change.towns_taken)
        if took and self._idle:
            await self._continue_clock()
        self._idle = self.leases.held_count == 0 and not self.leases.towns_held()
        return took

    async def saved_world_time(self) -> datetime | None:
        """The latest world time the towns' stores have seen (one clock for every town), or None
        on a first start."""
        times = [
            await town.store.saved_world_time([loop.character_id for loop in town.loops])
            for town in self.towns
        ]
        return max(filter(None, times), default=None)

    async def _continue_clock(self) -> None:
        """Taking over after driving nothing (another engine drove the world meanwhile): world
        time goes on from where that engine saved it, as at a start, never from this engine's own
        clock, which ran on by itself at its own speed all the while (a standby at ``--speed 6000``
        would skip days of her life, one at speed 1 behind a demo would stall)."""
        saved = await self.saved_world_time()
        note = self.clock.continue_from(saved)
        if saved is None or (note is None and self.clock.speed == 1.0):
            return  # the wall clock at real speed, as it was: nothing to say
        log.warning(
            "taking over the world from another engine: world time continues from %s, where it "
            "was saved, not from this engine's own clock%s",
            self.clock.now().strftime("%m-%d %H:%M"),
            f"; {note}" if note else f", at this engine's speed {self.clock.speed:g}x",
        )

    def _follow(self, change: LeaseChange) -> None:
        """Follow what the leases say (what was lost is forgotten), and say what changed (one line
        each)."""
        for cid in change.taken:
            self._due.pop(cid, None)  # due now: her state in Redis says what she is doing
        for cid in change.lost:
            self._forget_decision(cid)
        share = (
            f"{self.leases.held_count} of {self.leases.total} (fair share {self.leases.share} with "
            f"{len(self.leases.live)} worker{'s' if len(self.leases.live) != 1 else ''})"
        )
        if change.taken:
            log.info(
                "driving %d more: %s; now %s",
                len(change.taken),
                compact_character_ids(change.taken),
                share,
            )
            self._waiting_logged = False
        if change.lost:
            log.error(
                "lost the lease on %s; another engine drives %s now; now %s",
                compact_character_ids(change.lost),
                "her" if len(change.lost) == 1 else "them",
                share,
            )
        for prefix in change.towns_taken:
            log.info("advancing the world of town %s (town lease %s)", prefix, self.token[:8])
        for prefix in change.towns_lost:
            log.error("lost the town lease of %s; another engine advances that world now", prefix)
        if (
            change.waiting
            and self.leases.held_count < self.leases.share
            and not self._waiting_logged
        ):
            # normal while a fleet rebalances; a second daemon by mistake shows here too
            log.info(
                "room for %d more, but %s %s driven by another engine; this one takes characters over as "
                "other engines give them up or stop",
                self.leases.share - self.leases.held_count,
                compact_character_ids(change.waiting),
                "is" if len(change.waiting) == 1 else "are",
            )
            self._waiting_logged = True

    async def _give_up_extras(self) -> None:
        """Between two steps only: release what is above the fair share (a worker joined)."""
        async with self._lease_lock:
            given, towns = await self.leases.give_up_extras(self._due)
        for cid in given:
            self._forget_decision(cid)
        if given:
            log.info(
                "gave up %d (%s) to share them with the %d workers; now %d",
                len(given),
                compact_character_ids(given),
                len(self.leases.live),
                self.leases.held_count,
            )
        for prefix in towns:
            log.info(
                "gave up the town lease of %s to share the towns with the other workers", prefix
            )

    async def release(self) -> None:
        """Give up every lease and leave the registry, so the other workers take over at once.
        Never raises: with Redis unreachable the leases simply expire (the lease TTL) and the
        stop goes on. Once per run: a second call (the stores' close after the daemon's own)
        does not wait on an unreachable Redis again."""
        if self._released:
            return
        self._released = True
        if self._redis_silent:
            log.warning(
                "Redis did not answer during the stop; the leases are not released but expire by "
                "themselves within %d s",
                self.lease_ttl_ms // 1000,
            )
            return
        try:
            async with asyncio.timeout(RELEASE_TIMEOUT_SECONDS):
                await self.leases.release_all()
        except (RedisError, OSError, TimeoutError) as exc:
            log.warning(
                "could not release the leases (%s); they expire by themselves within %d s",
                exc or type(exc).__name__,
                self.lease_ttl_ms // 1000,
            )

    def _worker_info(self) -> dict[str, Any]:
        """What the registry shows about this worker (`yuiju status`); the figures are recomputed
        every `FIGURES_EVERY_SECONDS` at most."""
        at, figures = self._published
        if time.monotonic() - at >= FIGURES_EVERY_SECONDS:
            figures = self._figures()
            self._published = (time.monotonic(), figures)
        return {
            "name": self.name,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": self.started_at,
            "characters": self.leases.held_count,
            "driving": compact_character_ids(self.leases.held()),
            "towns": self.leases.towns_held(),
            **figures,
        }

    def _figures(self) -> dict[str, Any]:
        stats = {id(loop.stats): loop.stats for loop in self.loops.values()}.values()
        overhead = sorted(
            x
            for s in stats
            for x in itertools.islice(reversed(s.decision_overhead_ms), FIGURES_SAMPLES)
        )
        lag = sorted(self.figures.lag_ms)
        return {
            "decisions": sum(s.decisions for s in stats),
            "steps": self.figures.steps,
            "overhead_ms": {"p50": _pct(overhead, 50), "p95": _pct(overhead, 95)},
            "lag_ms": {
                "p50": _pct(lag, 50),
                "p95": _pct(lag, 95),
                "max": round(lag[-1], 1) if lag else None,
            },
            "cpu_seconds": round(time.process_time(), 2),
            **(
                {
                    "decisions_in_flight": self.decisions.in_flight,
                    "decisions_by_model": self.decisions.figures.answered,
                    "decisions_overdue": self.decisions.figures.overdue,
                    "decisions_offline_at_once": self.decisions.figures.offline_at_once,
                    "decisions_stale": self.decisions.figures.stale,
                }
                if self.decisions is not None
                else {}
            ),
        }

    # -- outbox (world/outbox.py) ----------------------------------------------------------------

    @property
    def history(self) -> HistoryStore | None:
        return self.outbox.history

    @history.setter
    def history(self, history: HistoryStore | None) -> None:
        self.outbox.history = history

    @property
    def outbox_failures(self) -> int:
        """Flushes that found the history store unavailable."""
        return self.outbox.failures

    async def flush_outbox(self, *, force: bool = False) -> int:
        """Write committed episodes to the history store; keep them queued if it is down."""
        async with self._flush_lock:
            return await self.outbox.flush(force=force)

    async def flush_queued(self) -> int:
        """Write what other writers queued (the ledger of the chat's LLM calls, another process):
        they do not count in this engine's `outbox_writes`, so they waited for her next own
        episode, an hour at real speed. Every `QUEUED_FLUSH_SECONDS` (one LLEN a town)."""
        async with self._flush_lock:
            return await self.outbox.flush_once()

    async def _keep_flushing(self, wanted: asyncio.Event, halt: asyncio.Event) -> None:
        """The outbox flush, off the step (`run` starts it): a history store that is slow, locked
        or away makes this task wait, never the world tick or a character's step; what it has
        not written stays queued in Redis. Flushes when a step committed episodes (``wanted``),
        soon again while another worker holds a town's flush lock, and every
        `QUEUED_FLUSH_SECONDS` for what other writers queued."""
        next_queued = 0.0  # time.monotonic()
        trouble: float | None = None
        while not halt.is_set():
            wait = (
                FLUSH_RETRY.total_seconds()
                if self.outbox.lock_busy
                else max(0.0, next_queued - time.monotonic())
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wanted.wait(), wait)
            if halt.is_set():
                return
            wanted.clear()
            try:
                if time.monotonic() >= next_queued:
                    next_queued = time.monotonic() + QUEUED_FLUSH_SECONDS
                    await self.flush_queued()
                await self.flush_outbox()
                if trouble is not None:
                    log.info("outbox flushed again after %.0f s", time.monotonic() - trouble)
                    trouble = None
            except Exception as exc:  # Redis away, or a bug: the episodes stay queued, retried
                if trouble is None:
                    trouble = time.monotonic()
                    log.warning(
                        "could not flush the outbox (%s: %s); the episodes stay queued and the "
                        "flush is retried",
                        type(exc).__name__,
                        exc,
                        exc_info=not isinstance(exc, RedisError | OSError),
                    )
                with contextlib.suppress(TimeoutError):  # Redis away: not a retry every step
                    await asyncio.wait_for(halt.wait(), 1.0)

    # -- the loop ---------------------------------------------------------------------------

    async def run_once(self) -> datetime | None:
        """Do everything due now; return when something is next due (None: nothing until a lease
        is taken)."""
        now = self.clock.now()
        dues: list[datetime] = []
        for town in self.towns:
            if self.leases.holds_town(town.prefix):
                if town.ticked_at is None or not town.ticked_at <= now < town.ticked_at + min(
                    self.tick, CATCH_UP
                ):
                    await self._tick(town, now)
                    town.ticked_at = now
                dues.append(town.ticked_at + self.tick)
        ready: dict[str, list[str]] = {}  # town prefix -> characters due now
        for cid in self.leases.held():  # a copy: the lease keeper may change the set meanwhile
            due = self._due.get(cid)
            if due is not None and due > now:
                dues.append(due)
            else:
                ready.setdefault(self.loops[cid].store.keys.prefix, []).append(cid)
        for town in self.towns:
            if cids := ready.get(town.prefix):
                await self._step_town(town, cids, now, dues)
        if self._flush_wanted is not None:  # `run`'s flusher writes them, off the step
            self._flush_wanted.set()
        else:  # a step by hand (tests): flushed before it returns
            await self.flush_outbox()
            if self.outbox.lock_busy:  # another worker was flushing: soon again
                dues.append(now + FLUSH_RETRY * self.clock.speed)
        if self.on_step is not None:
            self.on_step()
        return min(dues, default=None)

    async def _step_town(
        self, town: TownRun, cids: list[str], now: datetime, dues: list[datetime]
    ) -> None:
        """Step a town's characters due now. Together (`StateStore.batched`): their state read in
        one round trip, their writes sent together. Alone, as before: one whose write did not land
        (stepped again at once on values read fresh, so a lost lease or a conflict shows as usual),
        and one whose policy is not instant (an LLM call takes seconds: nothing is held meanwhile,
        and a write that did not land never costs a second call; with decisions in flight her
        step only starts or collects her decision, world/decisions.py)."""
        cids = step_order(cids, now)
        alone = [cid for cid in cids if cid in self._redo or not self.loops[cid].policy.instant]
        for cid in alone:
            self._redo.discard(cid)
            self._wake_partners(await self._step(cid, now, dues), dues)
        together = [cid for cid in cids if cid not in alone]
        if not together:
            return
        stats = {id(loop.stats): loop.stats for loop in town.loops}.values()
        measured = [s.measured for s in stats]
        results: list[StepResult | None] = []
        try:
            everyone = [loop.character_id for loop in town.loops]
            async with town.store.batched(together, also=everyone) as batch:
                try:
                    for cid in together:
                        results.append(await self._step(cid, now, dues))
                        if len(batch.queued) >= BATCH_PIPELINE:
                            await town.store.send_queued()
                except Exception as exc:
                    if not isinstance(
                        exc, RedisError | OSError
                    ):  # one step's bug: the others' writes stand
                        await town.store.send_queued()
                    raise
        except BaseException:
            for (
                cid
            ) in together:  # writes may not have landed: her state in Redis says when she is due
                self._due.pop(cid, None)
            raise
        for result in results:  # their writes landed (a meeting's partners are known now)
            self._wake_partners(result, dues)
        for cid in batch.redo:
            if cid in self.loops:
                self._redo.add(cid)
                self._due[cid] = now
                dues.append(now)
        decided = sum(s.measured - m for s, m in zip(stats, measured, strict=True))
        for s, m in zip(stats, measured, strict=True):
            if decided and s.measured > m:
                s.spread_overhead(batch.write_ms * (s.measured - m) / decided, s.measured - m)

    async def _step(self, cid: str, now: datetime, dues: list[datetime]) -> StepResult | None:
        """One character's step, if this engine still drives her; her next due time joins ``dues``.
        Its result names the partners a meeting of hers took along once her write landed (at
        once, or when a batch is sent: `StateStore.batched`)."""
        loop = self.loops[cid]
        if self.leases.over_share:  # a worker joined: between two steps is a safe point
            await loop.store.send_queued()  # what the batch's steps wrote lands before leases go
            await self._give_up_extras()
        if not self.leases.holds(cid):
            return None
        due = self._due.get(cid)
        if due is not None:  # her first step here has no due time to be late for
            speed = self.clock.speed
            self.figures.lag_ms.append(
                max(0.0, (self.clock.now() - due).total_seconds() * 1000 / speed)
            )
        self.figures.steps += 1
        inputs = StepInputs(
            lease_token=self.token,  # held (checked above): her writes are fenced on it
            drives=self._drives,  # a partner driven elsewhere is never interrupted
            decisions=self.decisions,
            speed=self.clock.speed,
            randomness=self._town_randomness[loop.store.keys.prefix],
        )
        result: StepResult | None = None
        try:
            result = await loop.step(now, inputs)
            self._due[cid] = result.due
            if self._answered_meanwhile(cid):  # its wake-up was overwritten just above
                self._due[cid] = min(self._due[cid], self.clock.now())
        except CorruptState as exc:
            self._log_corrupt(f"{cid} paused", exc)
            self._due[cid] = now + CORRUPT_RETRY
        except LeaseLost as exc:
            log.error("%s", exc)
            self.leases.drop(cid)
            self._forget_decision(cid)
            return None
        except (RedisError, OSError):
            raise
        except Exception as exc:
            if self.strict:
                raise
            self._log_step_bug(cid, exc)  # the daemon: her bug does not stop the others
            self._due[cid] = now + STEP_BUG_RETRY
        dues.append(self._due[cid])
        return result

    def _wake_partners(self, result: StepResult | None, dues: list[datetime]) -> None:
        """A meeting she started took partners out of their pastimes: step each when it ends
        (not at her old due time, which may be later)."""
        for pid, ends in result.engaged.items() if result is not None else ():
            if self._drives(pid):
                self._due[pid] = min(self._due.get(pid, ends), ends)
                dues.append(self._due[pid])

    async def _tick(self, town: TownRun, now: datetime) -> None:
        """The town's world tick, fenced on its town lease."""
        try:
            await town.ticker.tick(
                now, randomness=self._town_randomness[town.prefix], lease_token=self.token
            )
        except CorruptState as exc:  # characters whose own state is fine go on
            self._log_corrupt("world tick skipped", exc)
        except LeaseLost:
            log.error(
                "lost the town lease of %s; another engine advances that world now", town.prefix
            )
            self.leases.drop_town(town.prefix)
        for corrupt in town.ticker.corrupt:
            self._log_corrupt("left out of the world tick", corrupt)

    async def run(self, *, until: datetime | None = None, max_steps: int | None = None) -> None:
        """Run until `stop()`, ``until`` (world time) or ``max_steps`` steps.

        `stop()` is prompt: a step still in flight then (a slow model call, Redis retrying) gets
        `STOP_GRACE_SECONDS` to finish and is cancelled after that. Every write is one atomic
        script and every history write an idempotent upsert, so a cancelled step leaves nothing
        half-done: the next start redoes it.
        """
        # redis-py can swallow a task's cancellation in the middle of a command (redis/redis-py#2028,
        # #2551), so the two loops also watch `halt` and end after their current command.
        self._released = self._redis_silent = False
        halt = asyncio.Event()
        keeper = asyncio.create_task(self._keep_leases(halt))
        wanted = asyncio.Event()
        flusher = asyncio.create_task(self._keep_flushing(wanted, halt))
        self._flush_wanted = None if self.flush_in_step else wanted
        main = asyncio.create_task(self._run(until=until, max_steps=max_steps, halt=halt))
        stopper = asyncio.create_task(self._stop.wait())
        loop = asyncio.get_running_loop()
        probe: asyncio.Future[Any] = loop.create_future()
        grace_ends = math.inf  # one grace for the whole stop: the step's wait and the tasks' after
        try:
            await asyncio.wait({main, stopper}, return_when=asyncio.FIRST_COMPLETED)
            grace_ends = loop.time() + STOP_GRACE_SECONDS
            if not main.done():
                # meanwhile: does Redis answer at all? A hung one is not waited on again (release)
                probe = asyncio.ensure_future(self.store.redis.ping())
                await asyncio.wait({main}, timeout=STOP_GRACE_SECONDS)
                if not main.done():
                    log.info("stopping: the step in flight is cancelled (the next start redoes it)")
                    self._redis_silent = not probe.done()
        finally:
            halt.set()
            if self.decisions is not None:  # a stop: whatever was asked is asked again next start
                self.decisions.drop_all()
            self._flush_wanted = None
            wanted.set()  # the flusher ends after the flush under way (cancelled in the middle,
            # a Redis command may leave the town's flush lock taken until its TTL)
            tasks = {keeper, main, stopper, probe}
            for task in tasks:
                task.cancel()
            grace = min(STOP_GRACE_SECONDS, grace_ends - loop.time())
            _, late = await asyncio.wait(
                {*tasks, flusher}, timeout=max(CANCEL_GRACE_SECONDS, grace)
            )
            if flusher in late:
                flusher.cancel()
                late.remove(flusher)
                log.info("stopping: the outbox flush under way is cancelled (it is redone)")
            if late:
                log.warning(
                    "%d engine task(s) still finishing a Redis command; they end by themselves",
                    len(late),
                )
        if main.done() and not main.cancelled() and (exc := main.exception()) is not None:
            raise exc

    async def _keep_leases(self, halt: asyncio.Event) -> None:
        """Check the leases in the background (`Leases.refresh`: renew, take free ones up to the
        fair share, notice lost ones), so a long sleep or a slow LLM call neither lets a lease
        expire nor delays taking over a dead worker's characters."""
        while not halt.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    halt.wait(), max(0.0, self.leases.next_check - time.monotonic())
                )
            if halt.is_set():
                return
            try:
                # the main loop steps what was taken, or gives extras up between two steps
                if await self._refresh_leases() or self.leases.over_share:
                    self._wake.set()
                if self._lease_trouble_since is not None:
                    log.info(
                        "leases checked again after %.0f s",
                        time.monotonic() - self._lease_trouble_since,
                    )
                    self._lease_trouble_since = None
            except (RedisError, OSError) as exc:
                if self._lease_trouble_since is None:
                    self._lease_trouble_since = time.monotonic()
                    log.warning(
                        "could not check the leases (%s); retrying every %.1f s",
                        exc,
                        self.leases.poll_seconds,
                    )
                self.leases.next_check = time.monotonic() + self.leases.poll_seconds

    async def _run(
        self, *, until: datetime | None, max_steps: int | None, halt: asyncio.Event
    ) -> None:
        self.strict = until is not None or max_steps is not None
        steps = 0
        backoff = 1.0
        due: datetime | None = (
            None  # world time the next step is due; None: only a lease can bring work
        )
        run_now = True
        checked = False  # this run's first lease check is here, before its first step
        while not (self._stop.is_set() or halt.is_set()):
            try:
                if not checked:
                    await self._refresh_leases()
                    checked = True
                elif (
                    self.leases.over_share
                ):  # here, between two steps, and never in the middle of one
                    await self._give_up_extras()
                if self._wake.is_set():
                    self._wake.clear()
                    run_now = True
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
            except (
                Exception
            ) as exc:  # Redis down, or a bug in one step: the daemon carries on after a pause
                bounded = (
                    until is not None or max_steps is not None
                )  # simulate, tests: report the bug
                if bounded and not isinstance(exc, RedisError | RedisClusterException | OSError):
                    raise
                self._step_failed(exc, backoff)
                await self._sleep_or_stop(None, wall_seconds=backoff)
                backoff = min(MAX_BACKOFF_SECONDS, backoff * 2)
                run_now = True
                continue
            if max_steps is not None and steps >= max_steps:
                await self.flush_outbox()  # what the steps wrote is in history when it returns
                break
            wake = due if until is None else min(until, due or until)
            await self._sleep_or_stop(wake)

    def _step_failed(self, exc: Exception, backoff: float) -> None:
        """Say what stopped the step once, then every few minutes while it lasts; not per retry."""
        wall = time.monotonic()
        unreachable = isinstance(
            exc,
            RedisConnectionError
            | RedisTimeoutError
            | ClusterDownError
            | RedisClusterException
            | OSError,
        )
        what = (
            f"Redis unreachable ({exc})"
            if unreachable
            else f"a step failed ({type(exc).__name__}: {exc})"
        )
        if self._failing_since is None:
            self._failing_since = self._failing_logged = wall
            log.error(
                "%s; retrying, at most %.0f s apart",
                what,
                MAX_BACKOFF_SECONDS,
                exc_info=not unreachable,
            )
        elif wall - self._failing_logged >= CORRUPT_LOG_EVERY_SECONDS:
            self._failing_logged = wall
            log.error(
                "still failing after %.0f s: %s; retrying in %.0f s",
                wall - self._failing_since,
                what,
                backoff,
            )

    def _log_step_bug(self, cid: str, exc: Exception) -> None:
        """A step that raised (a bug in an action or a policy), with its traceback, once per
        character every few minutes."""
        wall = time.monotonic()
        key = f"step of {cid}"
        if wall - self._corrupt_logged.get(key, -1e9) >= CORRUPT_LOG_EVERY_SECONDS:
            self._corrupt_logged[key] = wall
            log.error(
                "%s: her step failed (%s: %s); the others go on, she is stepped again in %s",
                cid,
                type(exc).__name__,
                exc,
                STEP_BUG_RETRY,
                exc_info=exc,
            )

    def _log_corrupt(self, what: str, exc: CorruptState) -> None:
        """Log a corrupt value once per key every few minutes, not on every retry."""
        wall = time.monotonic()
        if wall - self._corrupt_logged.get(exc.key, -1e9) >= CORRUPT_LOG_EVERY_SECONDS:
            self._corrupt_logged[exc.key] = wall
            log.error("%s: %s", what, exc)

    async def _sleep_or_stop(
        self, wake: datetime | None, *, wall_seconds: float | None = None
    ) -> None:
        """Sleep until world time ``wake`` or ``wall_seconds`` of real time, whichever comes first
        (either may be None), or until `stop()` or the lease keeper brings work."""
        waits: list[asyncio.Task[object]] = [
            asyncio.ensure_future(self._stop.wait()),
            asyncio.ensure_future(self._wake.wait()),
        ]
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


def step_order(character_ids: Sequence[str], now: datetime) -> list[str]:
    """The order in which characters due at ``now`` are stepped. Who goes first decides who
    starts a meeting: the same order for the same moment (a replay, a seed), and another from
    moment to moment (nobody always first)."""
    return sorted(
        character_ids, key=lambda c: hashlib.sha1(f"{now.isoformat()}|{c}".encode()).digest()
    )


def _pct(ordered: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile of sorted values, rounded for a human (None if there are none)."""
    if not ordered:
        return None
    return round(ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))], 2)
