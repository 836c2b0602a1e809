"""Decisions in flight: a model's decision is an operation off the engine's step.

When a character needs a decision from a policy that is not instant (a model), her step starts it
here as an asyncio task and returns at once; the engine goes on stepping the others, ticking the
world and flushing episodes. The answer comes back as an input: `DecisionPool` calls ``on_ready``,
the engine steps her again, and her step validates the answer against the state *then* (a stale
choice is rejected with its reason and decided again, never executed).

- at most one decision in flight per character, and at most ``max_in_flight`` per worker (more
  wait here, unsent); the endpoint's own limit is the model's `AdmissionGate` (``[llm]
  max_concurrent``);
- each decision has a world-time and a wall-time deadline (``[llm] decide_deadline_minutes``,
  ``decide_deadline_seconds``): past either, the task is cancelled and the offline policy
  decides. That is logged once per outage, with counts, when the first decision goes overdue
  and when one is answered again; meanwhile a single decision is let through to the model as a
  probe and the others go to the offline policy at once, so a hung endpoint costs each of
  them nothing at all.

Wall time is injected (``wall``), as everything the engine times: tests pass a fake.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class DecisionLimits:
    """How decisions in flight are bounded (from ``[llm]``)."""

    max_in_flight: int = 64
    """Decisions started at once by this worker; more wait, unsent, until one ends."""
    deadline_seconds: float = 30.0
    """Wall time a decision may take, queueing included, before the offline policy decides."""
    deadline_minutes: float = 15.0
    """World time a decision may take (the same for every clock speed: at --speed 600 a 10 s
    answer is 100 world minutes of her standing still)."""


@dataclass(eq=False, kw_only=True)
class InFlight(Generic[T]):
    """One decision off the step."""

    character_id: str
    asked_at: datetime
    """World time her step started it."""
    world_deadline: datetime
    wall_deadline: float
    task: asyncio.Task[T]
    probe: bool = False
    """Sent while the endpoint was overdue: the one decision that finds out whether it is back."""
    admitted: bool = False
    """Past the worker's limit (asked, not waiting for a place): only such a decision's deadline
    says anything about the model."""

    def done(self) -> bool:
        return self.task.done()


@dataclass
class PoolFigures:
    started: int = 0
    answered: int = 0
    overdue: int = 0
    """Decisions whose deadline passed (then the offline policy decided)."""
    offline_at_once: int = 0
    """Decisions the offline policy took without asking, during an outage."""
    stale: int = 0
    """Answers rejected because their choice no longer held when they came back."""
    failed: int = 0
    """Answers that were errors (the policy gave up): the offline policy decided."""
    queued_past_deadline: int = 0
    """Of `overdue`, decisions that never got a place under the worker's limit (raise
    ``[world] max_decisions_in_flight`` if this grows)."""


@dataclass(eq=False)
class DecisionPool(Generic[T]):
    """The decisions in flight of one worker (one engine)."""

    limits: DecisionLimits = field(default_factory=DecisionLimits)
    wall: Callable[[], float] = time.monotonic
    on_ready: Callable[[str], None] = lambda _cid: None
    """Called with her id when her decision's task ends (the engine steps her then)."""
    figures: PoolFigures = field(default_factory=PoolFigures)
    _flights: dict[str, InFlight[T]] = field(default_factory=dict)
    _slots: asyncio.Semaphore | None = None
    _outage_since: float | None = None
    _outage_counts: tuple[int, int] = (0, 0)
    """`figures.overdue` and `offline_at_once` when the outage began."""

    def __post_init__(self) -> None:
        if self.limits.max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {self.limits.max_in_flight!r}")

    def get(self, character_id: str) -> InFlight[T] | None:
        return self._flights.get(character_id)

    @property
    def in_flight(self) -> int:
        return len(self._flights)

    @property
    def in_outage(self) -> bool:
        return self._outage_since is not None

    def asks(self) -> bool:
        """Whether a new decision goes to the model: always, except during an outage while its
        probe is still out (then the offline policy decides at once)."""
        if self._outage_since is None:
            return True
        if any(f.probe for f in self._flights.values()):
            self.figures.offline_at_once += 1
            return False
        return True

    def start(
        self, character_id: str, now: datetime, speed: float, work: Callable[[], Awaitable[T]]
    ) -> InFlight[T]:
        """Start ``work`` as her decision in flight (she has none: `take` it first)."""
        if character_id in self._flights:
            raise ValueError(f"{character_id} already has a decision in flight")
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limits.max_in_flight)
        slots = self._slots

        async def admitted() -> T:
            async with slots:
                flight.admitted = True
                return await work()

        flight = InFlight(
            character_id=character_id,
            asked_at=now,
            world_deadline=now + timedelta(minutes=self.limits.deadline_minutes),
            wall_deadline=self.wall() + self.limits.deadline_seconds,
            task=asyncio.ensure_future(admitted()),
            probe=self._outage_since is not None,
        )
        self._flights[character_id] = flight
        self.figures.started += 1
        flight.task.add_done_callback(lambda _t: self._ready(flight))
        return flight

    def _ready(self, flight: InFlight[T]) -> None:
        if self._flights.get(flight.character_id) is flight:  # not given up or dropped
            self.on_ready(flight.character_id)

    def due(self, flight: InFlight[T], now: datetime, speed: float) -> datetime:
        """World time at which her step must look again if no answer comes (its deadline)."""
        wall_left = max(0.0, flight.wall_deadline - self.wall())
        return min(flight.world_deadline, now + timedelta(seconds=wall_left * speed))

    def overdue(self, flight: InFlight[T], now: datetime) -> bool:
        return now >= flight.world_deadline or self.wall() >= flight.wall_deadline

    def take(self, character_id: str) -> InFlight[T] | None:
        """Her finished decision, out of the pool (its task is done: read its result)."""
        flight = self._flights.pop(character_id, None)
        if flight is not None and flight.done() and not flight.task.cancelled():
            if flight.task.exception() is None:
                self.figures.answered += 1
                self._answered()
            else:
                self.figures.failed += 1
        return flight

    def give_up(self, character_id: str) -> None:
        """Her decision is past its deadline: cancel it (the offline policy decides)."""
        flight = self._flights.pop(character_id, None)
        if flight is None:
            return
        flight.task.cancel()
        self.figures.overdue += 1
        if (
            not flight.admitted
        ):  # it waited for a place all along: the worker is busy, not the model
            self.figures.queued_past_deadline += 1
        elif self._outage_since is None:
            self._outage_since = self.wall()
            self._outage_counts = (self.figures.overdue - 1, self.figures.offline_at_once)
            log.warning(
                "%s: a decision asked at %s got no answer by its deadline (%s world min or "
                "%.0f s); the offline policy decides meanwhile, with one decision at a time "
                "still sent to the model as a probe (logged again when it answers)",
                character_id,
                flight.asked_at.strftime("%m-%d %H:%M"),
                f"{self.limits.deadline_minutes:g}",
                self.limits.deadline_seconds,
            )

    def drop(self, character_id: str) -> None:
        """Forget her decision (her lease went elsewhere): cancelled, never applied."""
        flight = self._flights.pop(character_id, None)
        if flight is not None:
            flight.task.cancel()

    def drop_all(self) -> None:
        for cid in list(self._flights):
            self.drop(cid)

    def _answered(self) -> None:
        if self._outage_since is None:
            return
        overdue = self.figures.overdue - self._outage_counts[0]
        at_once = self.figures.offline_at_once - self._outage_counts[1]
        log.warning(
            "the model answers decisions again after %.0f s: %d decision(s) went past their "
            "deadline and %d more were decided offline without asking",
            self.wall() - self._outage_since,
            overdue,
            at_once,
        )
        self._outage_since = None
