"""What the engine and one step of a character's behavior loop hand each other.

The engine builds `StepInputs` for every step (its lease, whom it drives, its decisions in
flight, the clock's speed, the town's randomness) and reads a `StepResult` back; the loop keeps
none of it between steps (world/behavior.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from yuiju.world.decisions import DecisionPool
from yuiju.world.randomness import UNSEEDED, Randomness
from yuiju.world.transitions import Asked, Env


def _everyone(_character_id: str) -> bool:
    return True


@dataclass(frozen=True, kw_only=True)
class StepInputs:
    """What the engine hands one step of hers."""

    lease_token: str | None = None
    """The engine's lease on her: every write of the step is fenced on it (None: unfenced, as
    when a test or a tool steps her by hand)."""
    drives: Callable[[str], bool] = _everyone
    """Whether the engine drives a character: a partner driven elsewhere is joined only between
    two of her steps, never taken out of a pastime."""
    decisions: DecisionPool[Asked] | None = None
    """The engine's decisions in flight: a policy that is not instant decides off the step
    (world/decisions.py). None: the step waits for the policy (simulate, tests)."""
    speed: float = 1.0
    """The clock's speed, to turn a wall-time deadline into world time."""
    randomness: Randomness = UNSEEDED
    """Her town's randomness (the engine's): her transitions and her policy derive her draws
    from it."""


@dataclass(frozen=True)
class StepResult:
    """What one step of hers tells the engine."""

    due: datetime
    """When she next needs attention."""
    engaged: Mapping[str, datetime] = field(default_factory=dict)
    """Partners the step started a meeting with, and when it ends: their engine steps them then
    (not at their old due time, which may be later). Filled once her write landed: at once for
    a step alone, when the batch is sent for a step in `StateStore.batched`."""


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One step's inputs as the loop's methods use them, and what the step engaged."""

    env: Env
    """The rules, with the engine's `StepInputs.drives` and `StepInputs.randomness`."""
    lease: tuple[str, str] | None
    """(her id, the lease token) her writes are fenced on; None: unfenced."""
    decisions: DecisionPool[Asked] | None
    speed: float
    engaged: dict[str, datetime] = field(default_factory=dict)
    """Filled by her meeting's write once it landed (`StepResult.engaged`)."""

    @classmethod
    def of(cls, inputs: StepInputs, env: Env, character_id: str) -> Turn:
        token = inputs.lease_token
        return cls(
            env=replace(env, drives=inputs.drives, randomness=inputs.randomness),
            lease=(character_id, token) if token else None,
            decisions=inputs.decisions,
            speed=inputs.speed,
        )
