"""Built-in evolutions: plain functions that move the world from one time to another.

An evolution is ``Callable[[TickContext], None]``: synchronous, no I/O, it mutates the tick's
working copy and may append events. Randomness comes from ``ctx.rng(...)``, seeded by the
configured seed and what is being drawn, so the same seed gives the same world.

Each one converges from the elapsed time in one step, so after downtime a single tick from
``last_advanced_at`` to now catches the world up. The list that runs, and its order, is
``[world].evolutions`` in config.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from yuiju.memory.event_data import (
    EventData,
    NewDay,
    PlaceClosed,
    PlaceOpened,
    WeatherChanged,
    event_data,
)
from yuiju.world.clock import (
    WEEKDAYS_ZH,
    holiday_name,
    in_window,
    is_school_day,
    period_of_day,
    season_of,
    weather_period_start,
)
from yuiju.world.randomness import UNSEEDED, Randomness
from yuiju.world.state import Calendar, CharacterState, PlaceState, Weather, WorldState
from yuiju.world.town import Town


@dataclass(frozen=True)
class Event:
    """Something that happened, published on the event stream after the save: its typed data
    (`memory.event_data`, one model per event type) and whose it is."""

    data: EventData
    character_id: str | None = None
    """None for an event of the town (weather, a new day, a command)."""

    @property
    def type(self) -> str:
        """The stream entry's ``type``."""
        return self.data.event_type


@dataclass(kw_only=True)
class TickContext:
    from_time: datetime
    to_time: datetime
    world: WorldState
    characters: dict[str, CharacterState]
    town: Town
    randomness: Randomness = UNSEEDED
    """The town's randomness, as the engine hands it to the tick."""
    events: list[Event] = field(default_factory=list)

    @property
    def elapsed_minutes(self) -> float:
        return max(0.0, (self.to_time - self.from_time).total_seconds() / 60)

    def rng(self, *parts: object) -> random.Random:
        """A generator seeded by the town's randomness and ``parts`` (e.g. "weather", period
        start)."""
        key = "|".join([self.randomness.key, *map(str, parts)]).encode()
        return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))

    def emit(self, event: EventData | str, character_id: str | None = None, **data: Any) -> None:
        """Publish ``event`` after the save: its model (``ctx.emit(NewDay(...))``), or a type
        and its data (``ctx.emit("rain_in_the_park", place="park")``) — validated by the type's
        model when it has one (a misfit raises here, where it is written), kept as it is
        (`OtherEvent`) when it has none."""
        if isinstance(event, str):
            event = event_data(event, data)
        elif data:
            raise TypeError(f"emit({type(event).__name__}(...)) takes no other data: {data!r}")
        self.events.append(Event(event, character_id))


Evolution = Callable[[TickContext], None]


# -- calendar -------------------------------------------------------------------------------


def advance_calendar(ctx: TickContext) -> None:
    """Set the world time and the calendar (weekday, part of day, school day, holiday)."""
    now = ctx.to_time
    day = now.date()
    previous = ctx.world.calendar
    ctx.world.time = now
    ctx.world.calendar = Calendar(
        date=day,
        weekday=WEEKDAYS_ZH[day.weekday()],
        period=period_of_day(now),
        season=season_of(day),
        school_day=is_school_day(day),
        holiday=holiday_name(day),
    )
    if previous is not None and previous.date != day:
        ctx.emit(NewDay(date=day, weekday=ctx.world.calendar.weekday))


# -- weather --------------------------------------------------------------------------------

WEATHER_TYPES = ("晴", "多云", "阴", "小雨", "雨", "雷雨", "雪", "雾")

SEASON_WEIGHTS: dict[str, dict[str, int]] = {
    "春": {"晴": 24, "多云": 22, "阴": 16, "小雨": 16, "雨": 10, "雷雨": 4, "雪": 0, "雾": 8},
    "夏": {"晴": 22, "多云": 18, "阴": 15, "小雨": 14, "雨": 16, "雷雨": 11, "雪": 0, "雾": 4},
    "秋": {"晴": 28, "多云": 22, "阴": 18, "小雨": 12, "雨": 8, "雷雨": 2, "雪": 0, "雾": 10},
    "冬": {"晴": 18, "多云": 12, "阴": 24, "小雨": 6, "雨": 6, "雷雨": 0, "雪": 24, "雾": 10},
}

# Weather tends to persist: the same type gets a strong bonus, neighbours a smaller one.
NEIGHBOURS: dict[str, tuple[str, ...]] = {
    "晴": ("多云",),
    "多云": ("晴", "阴"),
    "阴": ("多云", "小雨", "雾"),
    "小雨": ("阴", "雨"),
    "雨": ("小雨", "雷雨"),
    "雷雨": ("雨",),
    "雪": ("阴",),
    "雾": ("阴", "多云"),
}
SAME_BONUS = 20
NEIGHBOUR_BONUS = 8

TEMPERATURE_WEIGHTS: dict[str, dict[str, int]] = {
    "春": {"清凉": 35, "舒适": 40, "温暖": 20, "寒冷": 5},
    "夏": {"炎热": 40, "温暖": 30, "舒适": 22, "清凉": 8},
    "秋": {"清凉": 35, "舒适": 35, "温暖": 15, "寒冷": 15},
    "冬": {"寒冷": 45, "严寒": 30, "清凉": 20, "舒适": 5},
}

MAX_CATCH_UP_PERIODS = 8
"""After long downtime, only the last periods are generated: older weather is not observable."""


def _draw(rng: random.Random, weights: dict[str, int]) -> str:
    items = [(k, w) for k, w in weights.items() if w > 0]
    total = sum(w for _, w in items)
    pick = rng.uniform(0, total)
    for key, weight in items:
        pick -= weight
        if pick <= 0:
            return key
    return items[-1][0]


def next_weather(ctx: TickContext, period_start: datetime, previous: Weather | None) -> Weather:
    """The weather of one 6-hour period: seasonal weights, inertia, deterministic for a seed."""
    season = season_of(period_start.date())
    weights = dict(SEASON_WEIGHTS[season])
    if previous is not None:
        weights[previous.type] += SAME_BONUS
        for other in NEIGHBOURS[previous.type]:
            weights[other] += NEIGHBOUR_BONUS
    if season != "冬":
        weights["雪"] = 0
    else:
        weights["雷雨"] = 0
    rng = ctx.rng("weather", period_start.isoformat(), previous.type if previous else "-")
    kind = _draw(rng, weights)
    temps = dict(TEMPERATURE_WEIGHTS[season])
    if kind in ("雨", "雷雨", "小雨"):
        temps.pop("炎热", None)
        temps["清凉"] = temps.get("清凉", 0) + 15
    if kind == "雪":
        temps = {"严寒": 55, "寒冷": 45}
    if kind == "晴" and season == "夏":
        temps["炎热"] = temps.get("炎热", 0) + 15
    return Weather(type=kind, temperature=_draw(rng, temps), period_start=period_start)  # type: ignore[arg-type]


def update_weather(ctx: TickContext) -> None:
    """Weather changes every 6-hour period (00/06/12/18 local); missed periods are chained."""
    current_start = weather_period_start(ctx.to_time)
    previous = ctx.world.weather
    if previous is not None and previous.period_start == current_start:
        return
    if previous is None or previous.period_start > current_start:
        starts = [current_start]
    else:
        starts = []
        cursor = current_start
        while cursor > previous.period_start and len(starts) < MAX_CATCH_UP_PERIODS:
            starts.append(cursor)
            cursor = weather_period_start(cursor - timedelta(hours=6))
        starts.reverse()
    weather = previous
    for start in starts:
        weather = next_weather(ctx, start, weather)
    assert weather is not None
    ctx.world.weather = weather
    if previous is None or (previous.type, previous.temperature) != (
        weather.type,
        weather.temperature,
    ):
        ctx.emit(WeatherChanged(weather=weather.type, temperature=weather.temperature))


# -- places ---------------------------------------------------------------------------------


def update_opening_hours(ctx: TickContext) -> None:
    """Open and close places by their hours; ``changed_at`` moves only when the state flips."""
    for place in ctx.town.places.values():
        state = ctx.world.places.setdefault(place.id, PlaceState())
        is_open = place.hours is None or in_window(ctx.to_time, *place.hours)
        if state.open != is_open:
            state.open = is_open
            state.changed_at = ctx.to_time
            change = PlaceOpened if is_open else PlaceClosed
            ctx.emit(change(place=place.id, name=place.name))


def refresh_daily_resources(ctx: TickContext) -> None:
    """Once per local day, fruit grows in the park and the sea leaves treasures on the coast."""
    today = ctx.to_time.date()
    for place in ctx.town.places.values():
        if not place.resources:
            continue
        state = ctx.world.places.setdefault(place.id, PlaceState())
        if state.refreshed_on == today:
            continue
        rng = ctx.rng("resources", place.id, today.isoformat())
        low, high = place.daily_resource_total
        amounts = dict.fromkeys(place.resources, 0)
        for _ in range(rng.randint(low, high)):
            amounts[rng.choice(place.resources)] += 1
        state.resources = {k: v for k, v in amounts.items() if v > 0}
        state.refreshed_on = today


# -- needs ----------------------------------------------------------------------------------

# Per hour. Awake: a day without food empties satiety; staying up drains stamina.
# Asleep: a night of sleep restores most stamina and costs a little satiety.
AWAKE_RATES = {"stamina": -2.0, "satiety": -4.5}
ASLEEP_RATES = {"stamina": +9.0, "satiety": -1.5}
MOOD_BASELINE = 60.0
MOOD_PULL_PER_HOUR = 0.03
"""Mood relaxes towards its baseline: 3% of the gap per hour."""


def drift_needs(ctx: TickContext) -> None:
    """Satiety and stamina fall while awake and recover in sleep; mood relaxes to baseline.

    Linear in the elapsed time (then clamped), so one step after downtime equals many small ones
    until a bound is hit.
    """
    hours = ctx.elapsed_minutes / 60
    if hours <= 0:
        return
    for character in ctx.characters.values():
        rates = ASLEEP_RATES if character.asleep else AWAKE_RATES
        # compounding, so one long step equals many short ones
        pull = (MOOD_BASELINE - character.mood) * (1 - (1 - MOOD_PULL_PER_HOUR) ** hours)
        character.change(
            stamina=rates["stamina"] * hours, satiety=rates["satiety"] * hours, mood=pull
        )
