"""What `yuiju actions check` finds in loaded actions beyond loading them, and the moment
`yuiju actions why` checks an action's preconditions at.

Places must exist in the town. The parts of an action that only run when a decision is made —
``choices`` (what each parameter may be now) and ``menu`` (what is on offer) — are run at a few
sample moments where the action is possible, so a mistake such as ``choices`` naming a field the
parameter model does not have shows up here instead of at the first decision that offers it.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from zoneinfo import ZoneInfo

from yuiju.world.action import Action, ActionContext
from yuiju.world.decision_schema import params_schema
from yuiju.world.evolutions import (
    TickContext,
    advance_calendar,
    refresh_daily_resources,
    update_opening_hours,
    update_weather,
)
from yuiju.world.items import ALL
from yuiju.world.randomness import Randomness
from yuiju.world.state import CharacterState, WorldState
from yuiju.world.town import Town

log = logging.getLogger(__name__)

SAMPLE_TIMES = (
    "2026-09-01 06:50",
    "2026-09-01 10:00",
    "2026-09-01 12:10",
    "2026-09-05 15:00",
    "2026-09-05 22:00",
)
"""A school day's morning, class and lunch break, a Saturday afternoon, a night."""


def problems(actions: Iterable[Action], town: Town, tz: ZoneInfo) -> list[str]:
    """One line per problem, naming the action and what to fix."""
    out = []
    for action in actions:
        for place in filter(None, (action.at, action.moves_to)):
            if place not in town.places:
                out.append(
                    f"action {action.id!r}: unknown place {place!r}; use one of {sorted(town.places)}"
                )
        if action.choices is not None and action.params is None:
            out.append(
                f"action {action.id!r}: has choices but no params model; add params= or drop choices="
            )
            continue
        out += _decision_time_problems(action, town, tz)
    return out


def _decision_time_problems(action: Action, town: Town, tz: ZoneInfo) -> list[str]:
    if action.choices is None and action.menu is None:
        return []
    for ctx in sample_contexts(action, town, tz):
        if not action.available(ctx):
            continue
        moment = f"at {ctx.now:%Y-%m-%d %H:%M} with {ctx.character.money} coins"
        try:
            if action.params is not None:
                params_schema(action, ctx)
            if action.menu is not None:
                action.menu(ctx)
        except Exception as exc:  # an author's code may raise anything: report it, once
            said = str(exc)  # `params_schema` names the action and the fix itself
            if not said.startswith(f"action {action.id!r}"):
                said = (
                    f"action {action.id!r}: its choices or menu raised {type(exc).__name__}: {exc}"
                )
            return [f"{said} ({moment})"]
    return []


def sample_contexts(action: Action, town: Town, tz: ZoneInfo) -> Iterator[ActionContext]:
    """Moments at the action's place: each sample time, awake and asleep, carrying one of every
    item with 300 coins or nothing at all."""
    for text in SAMPLE_TIMES:
        now = datetime.fromisoformat(text).replace(tzinfo=tz)
        world = sample_world(now, town)
        for asleep in (False, True):
            for money, inventory in ((300, dict.fromkeys(ALL, 1)), (0, {})):
                character = CharacterState(
                    id="sample",
                    location=action.at or "home",
                    stamina=60,
                    satiety=50,
                    phone_battery=50,
                    money=money,
                    inventory=inventory,
                    asleep=asleep,
                )
                yield ActionContext(
                    now=now, world=world, character=character, town=town, rng=random.Random(0)
                )


def sample_world(now: datetime, town: Town, seed: int = 0) -> WorldState:
    """The world advanced to ``now``: calendar, weather, opening hours and today's resources."""
    world = WorldState(time=now, last_advanced_at=now)
    tick = TickContext(
        from_time=now,
        to_time=now,
        world=world,
        characters={},
        town=town,
        randomness=Randomness.seeded(seed),
    )
    for evolution in (
        advance_calendar,
        update_weather,
        update_opening_hours,
        refresh_daily_resources,
    ):
        evolution(tick)
    return world


def moment_at(
    now: datetime,
    world: WorldState | None,
    character: CharacterState,
    *,
    town: Town,
    evolutions: Sequence[tuple[str, Callable[[TickContext], None]]],
    seed: int,
) -> ActionContext:
    """Her moment at ``now`` as the engine's next step would see it: the saved world (a new one
    when none is saved) caught up to ``now`` by the configured evolutions, in memory only, as a
    world tick does after downtime. Nothing is written; an evolution that raises is skipped (and
    logged), as the engine skips it."""
    world = world or WorldState(time=now, last_advanced_at=now)
    tick = TickContext(
        from_time=world.last_advanced_at,
        to_time=max(now, world.last_advanced_at),
        world=world,
        characters={character.id: character},
        town=town,
        randomness=Randomness.seeded(seed),
    )
    for name, evolution in evolutions:
        try:
            evolution(tick)
        except Exception:  # an evolution's own bug: the engine skips it too
            log.exception("evolution %s failed and was skipped", name)
    return ActionContext(
        now=tick.to_time, world=world, character=character, town=town, rng=random.Random(seed)
    )
