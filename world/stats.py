"""What the behavior loops count, for the engine's figures and ``simulate``'s report."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from yuiju.world.action import Action
from yuiju.world.policy import Decision

OVERHEAD_SAMPLES = 100_000
"""Decisions whose engine overhead `LoopStats` keeps: a simulated year of nine characters; a
daemon's stats are shared by all its characters and live as long as it does."""


@dataclass
class LoopStats:
    """Counters the engine and ``simulate`` report."""

    decisions: int = 0
    completions: int = 0
    fallbacks: int = 0
    invalid_decisions: int = 0
    no_candidates: int = 0
    non_candidate_refused: int = 0
    """Decisions naming an action that was not offered (a policy bypassing validation); refused."""
    broken_actions: dict[str, str] = field(default_factory=dict)
    """Actions whose own code raised, and where (precondition, executor, completion)."""
    stale_starts: int = 0
    """Starts refused because the precondition no longer held on fresh state (then she re-decides)."""
    decision_overhead_ms: deque[float] = field(
        default_factory=lambda: deque(maxlen=OVERHEAD_SAMPLES)
    )
    """Engine time per decision, excluding the policy's own time (the latest `OVERHEAD_SAMPLES`).
    Of the writes sent together for characters due together, each decision carries an equal share
    (`spread_overhead`)."""
    measured: int = 0
    """Decisions whose overhead was measured, ever."""
    timeline: list[dict[str, Any]] = field(default_factory=list)
    offered: list[dict[str, Any]] = field(default_factory=list)
    """Per decision (with ``keep_timeline``): when, whose, the candidates offered, the choice."""
    keep_timeline: bool = False

    def note_offer(
        self, character_id: str, now: datetime, candidates: list[Action], chosen: Decision | None
    ) -> None:
        if self.keep_timeline:
            self.offered.append(
                {
                    "character": character_id,
                    "time": now.isoformat(),
                    "candidates": [a.id for a in candidates],
                    "chosen": chosen.action.id if chosen else None,
                    "decided_by": chosen.decided_by if chosen else None,
                }
            )

    def add_overhead(self, ms: float) -> None:
        self.decision_overhead_ms.append(ms)
        self.measured += 1

    def spread_overhead(self, ms: float, last: int) -> None:
        """Add ``ms`` / ``last`` to each of the ``last`` latest decisions: the time spent sending
        their writes together (a `StateStore.batched` block)."""
        last = min(last, len(self.decision_overhead_ms))
        samples = self.decision_overhead_ms
        samples.extend(
            reversed([samples.pop() + ms / last for _ in range(last)])
        )  # O(last): no deque indexing
