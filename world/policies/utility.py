"""The offline utility policy: needs-driven scoring, seeded, no network.

It keeps her living when no LLM is configured, when the LLM fails, and when the daily token
budget is spent. Each need (sleep, meal, school, rest, leisure...) gets a desire from her state
and the time; an action scores the desire of its tags, a movement scores the best thing she
could do where it leads (checked with the real preconditions at her arrival time). A little
seeded noise and a repetition penalty keep days from being identical.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import replace
from datetime import datetime, timedelta

from yuiju.world.action import Action, ActionContext
from yuiju.world.clock import is_school_day, minute_of_day
from yuiju.world.items import owned, sellable
from yuiju.world.policy import (
    Decision,
    DecisionRequest,
    PolicyFailed,
    RawDecision,
    validate_decision,
)
from yuiju.world.randomness import Randomness
from yuiju.world.relations import SET_OFF_MINUTES
from yuiju.world.town import Town

MEAL_WINDOWS = (
    ("breakfast", 6 * 60, 9 * 60 + 30),
    ("lunch", 11 * 60 + 30, 13 * 60 + 30),
    ("dinner", 17 * 60 + 30, 20 * 60),
)


NEED_NAMES = {
    "sleep": "睡觉",
    "wake": "起床",
    "sleep_more": "再睡一会",
    "meal": "吃饭",
    "school": "上学",
    "study": "学习",
    "rest": "休息",
    "leisure": "放松一下",
    "work": "打工",
    "shopping": "买东西",
    "idle": "发呆",
    "snack": "吃点东西",
    "phone": "看看手机",
    "social": "和朋友待一会儿",
}
"""How the offline policy names a need in the reason she records (Chinese: users read it)."""


def wake_target(now: datetime, randomness: Randomness) -> datetime:
    """When she means to get up on ``now``'s morning: early on school days, later otherwise
    (drawn from the town's ``randomness``: the same target for everyone in a town)."""
    day = now.date()
    rng = randomness.rng("wake", day.isoformat())
    if is_school_day(day):
        minutes = 6 * 60 + 40 + rng.randint(0, 20)
    else:
        minutes = 7 * 60 + 30 + rng.randint(0, 75)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight + timedelta(minutes=minutes)


def desires(ctx: ActionContext, randomness: Randomness) -> dict[str, float]:
    """How much she wants each kind of thing right now (roughly 0..3)."""
    c = ctx.character
    now = ctx.now
    m = minute_of_day(now)
    school_day = is_school_day(now.date())
    d: dict[str, float] = {}

    # Sleep: rises through the evening, overwhelming after midnight.
    if m >= 23 * 60 or m < 5 * 60:
        d["sleep"] = 3.0
    elif m >= 22 * 60:
        d["sleep"] = 1.2
    elif m >= 21 * 60:
        d["sleep"] = 0.5
    else:
        d["sleep"] = 0.0
    if c.stamina < 10:
        d["sleep"] = max(d["sleep"], 1.5)

    # Waking: on time, not before.
    d["wake"] = 3.0 if now >= wake_target(now, randomness) else 0.0
    d["sleep_more"] = 1.0

    # Meals: hunger plus a pull at mealtimes for the meal not eaten yet.
    hunger = (100 - c.satiety) / 100
    d["meal"] = hunger * 1.3 + (1.0 if c.satiety < 25 else 0.0)
    for _meal, start, end in MEAL_WINDOWS:
        if start <= m < end and c.satiety < 85:
            d["meal"] += 1.2

    # School: classes on school days are not optional.
    in_school_hours = school_day and 7 * 60 <= m < 16 * 60 + 30
    d["school"] = 3.0 if in_school_hours else 0.0
    d["study"] = (
        2.5 if in_school_hours else (0.45 if school_day and 19 * 60 <= m < 21 * 60 else 0.1)
    )

    d["rest"] = (1 - c.stamina / 100) * 1.1
    d["leisure"] = 0.35 + (1 - c.mood / 100) * 0.6 if 7 * 60 <= m < 21 * 60 else 0.1
    d["work"] = 0.2 + (0.9 if c.money < 150 else 0.0) + (0.4 if c.money < 60 else 0.0)
    ingredients = len(owned(c.inventory, "ingredient"))
    d["shopping"] = (
        0.15
        + (0.7 if ingredients < 2 and c.money >= 40 else 0.0)
        + (0.6 if sellable(c.inventory) else 0.0)
    )
    d["snack"] = hunger * 0.8
    d["phone"] = 0.3
    d["idle"] = 0.05
    # Company: wanted more the longer she has been without (Humanoid Agents' social need).
    last = c.social.last_met_at
    alone_hours = 24.0 if last is None else (now - last).total_seconds() / 3600
    d["social"] = 0.4 + min(1.0, alone_hours / 8) if 7 * 60 <= m < 21 * 60 + 30 else 0.0
    return d


APPOINTMENT_LEAD = SET_OFF_MINUTES
"""Minutes before an appointment she sets off (no link in town takes longer)."""
APPOINTMENT_PULL = 3.2
"""How much being where she has an appointment is worth: more than anything but sleep at night."""
APPOINTMENT_STAY = 1.0
"""What she adds to what she can do at an appointment's place while it lasts: she waits there."""


def appointment_places(ctx: ActionContext) -> set[str]:
    """Places she has an appointment at, or promised to be at, now or within `APPOINTMENT_LEAD`
    minutes."""
    social = ctx.character.social
    return {a.place for a in social.appointments if a.due(ctx.now, APPOINTMENT_LEAD)} | {
        n.place for n in social.notes if n.place is not None and n.due(ctx.now, APPOINTMENT_LEAD)
    }


def _safe_available(action: Action, ctx: ActionContext) -> bool:
    """Look-ahead only: an action whose precondition raises counts as unavailable (the behavior
    loop reports it when it is a real candidate)."""
    try:
        return action.available(ctx)
    except Exception:
        return False


def town_name(ctx: ActionContext, place_id: str) -> str:
    return ctx.town.place_name(place_id)


def favourites(ctx: ActionContext, randomness: Randomness) -> set[str]:
    """Two leisure actions she fancies today (drawn by the date from the town's ``randomness``
    derived for her): variety across days."""
    rng = randomness.derive(ctx.character.id).rng("fancy", ctx.now.date().isoformat())
    pool = sorted(LEISURE_POOL)
    return set(rng.sample(pool, 2))


NOISE = 0.12
"""Seeded noise added to every score: variety between equally good choices."""
MAX_BONUS = 0.55
"""The most `score` adds to a need: a favourite of the day (0.45) and novelty (0.1)."""
MAX_HOPS = 3
HOP_DISCOUNT = 0.85
HOP_COST = 0.05

REPEAT_PENALISED = frozenset({"leisure", "shopping", "snack", "phone", "rest"})

LEISURE_POOL = {
    "walk_in_park",
    "walk_on_coast",
    "fish_at_pond",
    "pray_at_shrine",
    "drink_coffee",
    "read_at_home",
    "buy_snack",
}


def score(
    action: Action, ctx: ActionContext, want: dict[str, float], fancy: Set[str] = frozenset()
) -> float:
    tags = action.tags - {"move"}
    base = max((want.get(t, 0.0) for t in tags), default=0.05)
    if action.id in fancy:
        base += 0.45
    if "leisure" in tags:
        times = ctx.character.done_today.count(action.id)
        base += 0.1 if times == 0 else -0.25 * times  # variety within a day
        if ctx.character.stamina < 30:
            base -= 0.5  # too tired for outings
    if action.utility is not None:
        base += action.utility(ctx)
    return base


class UtilityPolicy:
    name = "utility"
    wants_recent = False
    """It decides from needs alone, so the loop skips fetching recent episodes for it."""
    instant = True
    """It decides in microseconds, with no I/O (see `world.policy.Policy`)."""

    def __init__(self, *, all_actions: list[Action] | None = None) -> None:
        self.all_actions = all_actions or []
        """The whole catalogue, to look ahead at what a movement leads to."""
        self._by_place: dict[str, list[Action]] = {}
        for a in self.all_actions:
            if a.moves_to is None and a.at is not None:
                self._by_place.setdefault(a.at, []).append(a)
        self._hops: dict[tuple[str, str], str | None] = {}
        self._tags_by_place: dict[str, set[str]] = {
            place: {t for a in actions for t in a.tags - {"move"}} | {"idle"}
            for place, actions in self._by_place.items()
        }
        """What needs each place can serve (``idle`` stands for the untagged default score)."""

    def _place_values(
        self,
        ctx: ActionContext,
        want: dict[str, float],
        fancy: set[str],
        pulls: Set[str] = frozenset(),
    ) -> dict[str, float]:
        """Best score of anything she could do at each place, reached by the shortest route.

        A breadth-first walk over the town's links from where she is (at most ``MAX_HOPS``),
        checking each place's actions with the real preconditions at her arrival time; each hop
        costs a little, so nearer is better. This is what lets her walk home from the pond at night.
        """
        town = ctx.town
        here = ctx.character.location
        values: dict[str, float] = {}
        frontier = [(here, ctx.now, 0)]
        seen = {here}
        while frontier:
            place, arrival, hops = frontier.pop(0)
            if place != here:
                arrived = ctx.character.model_copy(update={"location": place})
                later = replace(ctx, character=arrived, now=arrival)
                options = self._by_place.get(place, [])
                local = max(
                    (score(a, later, want, fancy) for a in options if _safe_available(a, later)),
                    default=0.0,
                )
                if place in pulls:
                    local = max(local, APPOINTMENT_PULL)
                values[place] = local * HOP_DISCOUNT**hops - HOP_COST * hops
            if hops >= MAX_HOPS:
                continue
            for nxt in town.neighbours(place):
                if nxt not in seen:
                    seen.add(nxt)
                    link = town.link(place, nxt)
                    assert link is not None
                    frontier.append((nxt, arrival + timedelta(minutes=link.minutes), hops + 1))
        return values

    def _route_value(self, move: Action, ctx: ActionContext, values: dict[str, float]) -> float:
        """A movement is worth the best place it leads towards (first hop of a shortest route)."""
        assert move.moves_to is not None
        town = ctx.town
        best = values.get(move.moves_to, 0.0)
        # places further on whose shortest route goes through this first hop
        here = ctx.character.location
        for place, value in values.items():
            if (
                place not in (here, move.moves_to)
                and self._first_hop(town, here, place) == move.moves_to
            ):
                best = max(best, value)
        last = ctx.character.last_action
        came_from = next((a.at for a in self.all_actions if a.id == last and a.moves_to), None)
        if came_from == move.moves_to:
            best -= 0.3  # she just came from there: turning straight back needs a real reason
        return best

    def _first_hop(self, town: Town, src: str, dst: str) -> str | None:
        key = (src, dst)
        if key not in self._hops:
            parents: dict[str, str] = {}
            frontier = [src]
            seen = {src}
            while frontier:
                place = frontier.pop(0)
                for nxt in town.neighbours(place):
                    if nxt not in seen:
                        seen.add(nxt)
                        parents[nxt] = place
                        frontier.append(nxt)
            node = dst
            while node in parents and parents[node] != src:
                node = parents[node]
            self._hops[key] = node if node in parents else None
        return self._hops[key]

    async def decide(self, request: DecisionRequest) -> Decision:
        ctx = request.ctx
        if not request.candidates:
            raise PolicyFailed("no candidates")
        town = request.randomness  # the engine's, for her town
        want = desires(ctx, town)
        rng = town.derive(ctx.character.id).rng(ctx.now.isoformat())
        fancy = favourites(ctx, town)

        def repeat_penalty(action: Action) -> float:
            """Not the same pastime twice in a row."""
            return (
                0.7
                if action.id == ctx.character.last_action and action.tags & REPEAT_PENALISED
                else 0.0
            )

        pulls = appointment_places(ctx)
        here = ctx.character.location
        stay = APPOINTMENT_STAY if here in pulls else 0.0
        local = {
            a.id: score(a, ctx, want, fancy) - repeat_penalty(a) + stay
            for a in request.candidates
            if not a.moves_to
        }
        # No other place can score more than the strongest need its actions serve plus the largest
        # bonuses, discounted by one hop; when something here already beats that even with the most
        # noise, skip the walk (the result is the same, only faster).
        elsewhere = [
            want.get(t, 0.0)
            for place, tags in self._tags_by_place.items()
            if place != here
            for t in tags
        ]
        ceiling = (max(elsewhere, default=0.05) + MAX_BONUS) * HOP_DISCOUNT - HOP_COST
        if pulls - {here}:
            ceiling = max(ceiling, APPOINTMENT_PULL)
        worth_looking = max(local.values(), default=-1.0) < ceiling + NOISE
        places = (
            self._place_values(ctx, want, fancy, pulls - {here})
            if worth_looking and any(a.moves_to for a in request.candidates)
            else {}
        )
        scored: list[tuple[float, Action]] = []
        for action in request.candidates:
            if not action.moves_to:
                value = local[action.id]
            elif worth_looking:
                value = self._route_value(action, ctx, places) - repeat_penalty(action)
            else:
                value = float("-inf")
            value += rng.uniform(
                0, NOISE
            )  # drawn for every candidate, so pruning keeps the same draws
            scored.append((value, action))
        scored.sort(key=lambda pair: pair[0], reverse=True)
        best_value, best = scored[0]
        duration = None
        if best.asks_duration:
            tiers = best.duration.tiers  # type: ignore[union-attr]
            if "sleep_more" in best.tags:  # sleep on until she means to get up
                left = (wake_target(ctx.now, town) - ctx.now).total_seconds() / 60
                duration = max((t for t in tiers if t <= max(left, tiers[0])), default=tiers[0])
            else:
                duration = rng.choice(tiers[: max(1, len(tiers) - 1)] if best_value < 1 else tiers)
        needs = [t for t in best.tags if t in want and t != "move"]
        top = max(needs, key=lambda k: want[k]) if needs else ("出门" if best.moves_to else "发呆")
        params = best.offline_params(ctx) if best.offline_params else ({} if best.params else None)
        raw = RawDecision(
            action=best.name,
            params=params,
            reason=(
                ("想回家" if best.moves_to == "home" else f"想去{town_name(ctx, best.moves_to)}")
                if best.moves_to
                else f"现在想{NEED_NAMES.get(top, top)}"
            )
            + f"，所以{best.name}（离线决策，得分 {best_value:.2f}）",
            durationMinute=duration,
        )
        return validate_decision(raw, request.candidates, self.name, request.ctx)
