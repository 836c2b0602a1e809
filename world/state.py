"""What lives in Redis: the world state and each character's state, as validated pydantic data.

``validate_assignment=True`` makes an out-of-range value fail on the line that wrote it, not
three ticks later. Executors change stats through the mutators below, which clamp.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from yuiju.world.plans import PlanState
from yuiju.world.relations import SocialState

WeatherType = Literal["晴", "多云", "阴", "小雨", "雨", "雷雨", "雪", "雾"]
TemperatureLevel = Literal["严寒", "寒冷", "清凉", "舒适", "温暖", "炎热"]


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, use_attribute_docstrings=True
    )


class Weather(_Model):
    type: WeatherType
    temperature: TemperatureLevel
    period_start: AwareDatetime
    """Start of the 6-hour period this weather holds for."""


class PlaceState(_Model):
    open: bool = True
    """Whether the place is open now (from the town's opening hours)."""
    changed_at: AwareDatetime | None = None
    """When ``open`` last flipped."""
    resources: dict[str, int] = Field(default_factory=dict)
    """Collectable items lying here now, by name."""
    refreshed_on: date | None = None
    """Local date of the last daily resource refresh."""


class Calendar(_Model):
    date: date
    weekday: str
    """Chinese weekday name, e.g. 星期一."""
    period: str
    """Part of the day, e.g. 上午."""
    season: str
    school_day: bool
    holiday: str | None = None


class WorldState(_Model):
    version: Literal[1] = 1
    time: AwareDatetime
    """World time this state was advanced to."""
    last_advanced_at: AwareDatetime
    """When the evolutions last ran; the next tick converges from here."""
    calendar: Calendar | None = None
    weather: Weather | None = None
    places: dict[str, PlaceState] = Field(default_factory=dict)
    paused: bool = False
    """Set by the ``pause`` command: the behavior loop starts no new action while paused."""


class ShareIntent(_Model):
    should_share: bool = Field(alias="shouldShare")
    reason: str = ""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class RunningAction(_Model):
    action_id: str
    name: str
    started_at: AwareDatetime
    ends_at: AwareDatetime
    episode_id: str
    """Deterministic id of the behavior episode recording this action."""
    place: str
    reason: str
    decided_by: str
    """Which policy chose it: llm, utility, scripted, or 'fallback:utility'."""
    params: dict[str, Any] | None = None
    start_summary: str = ""
    """What the executor reported at the start."""
    share_intent: ShareIntent | None = None
    stats_before: dict[str, Any] = Field(default_factory=dict)
    partners: list[str] = Field(default_factory=list)
    """Characters she does this with (a joint action: a meeting); empty when alone."""
    meeting_id: str | None = None
    """The meeting this is her side of (the same id on both sides)."""


Stat = Literal["stamina", "satiety", "mood"]


class CharacterState(_Model):
    version: Literal[1] = 1
    id: str
    location: str = "home"
    stamina: float = Field(80, ge=0, le=100)
    """Energy; falls while awake and with effort, recovers in sleep and rest."""
    satiety: float = Field(70, ge=0, le=100)
    """Fullness; falls over time, rises with meals."""
    mood: float = Field(60, ge=0, le=100)
    money: int = Field(0, ge=0)
    """Coins; never negative (preconditions check prices before executors pay)."""
    inventory: dict[str, int] = Field(default_factory=dict)
    phone_battery: float = Field(100, ge=0, le=100)
    asleep: bool = False
    day: date | None = None
    """Local date that ``done_today`` refers to."""
    done_today: list[str] = Field(default_factory=list)
    """Ids of actions started today (for not_done_today)."""
    running: RunningAction | None = None
    last_action: str | None = None
    last_acted_at: AwareDatetime | None = None
    """World time of her latest start or completion: she never acts earlier than this, whatever
    a clock says (a clock restarted behind the saved world time waits instead, and says so)."""
    last_event: str | None = None
    """What the last completion reported; shown to the next decision as 当前事件."""
    plans: PlanState = Field(default_factory=PlanState)
    """One long-term plan and ordered short-term plans (saved with the rest of her state)."""
    plan_feedback: str | None = None
    """Why her last plan changes were rejected; shown to her next decision, then cleared."""
    blocked_reason: str | None = None
    """Why the loop could not decide last time (e.g. no candidate), for status/observer."""
    social: SocialState = Field(default_factory=SocialState)
    """Whom she knows and how well, what she has heard and from whom, whom she is to meet."""

    # -- mutators executors use ------------------------------------------------------------

    def change(self, *, stamina: float = 0, satiety: float = 0, mood: float = 0) -> None:
        """Add deltas, clamped to [0, 100]."""
        if stamina:
            self.stamina = _clamp(self.stamina + stamina)
        if satiety:
            self.satiety = _clamp(self.satiety + satiety)
        if mood:
            self.mood = _clamp(self.mood + mood)

    def recover_mood(self, base: float) -> float:
        """Diminishing mood recovery: the fuller her mood, the less ``base`` adds. Returns the gain."""
        gain = min(100 - self.mood, round(base * (100 - self.mood) / 100, 1))
        self.mood = _clamp(self.mood + gain)
        return gain

    def pay(self, amount: int) -> None:
        if amount > self.money:
            raise ValueError(f"cannot pay {amount} with {self.money} coins")
        self.money -= amount

    def add_item(self, name: str, quantity: int = 1) -> None:
        self.inventory = {**self.inventory, name: self.inventory.get(name, 0) + quantity}

    def consume_item(self, name: str, quantity: int = 1) -> None:
        have = self.inventory.get(name, 0)
        if have < quantity:
            raise ValueError(f"has {have} × {name!r}, needs {quantity}")
        rest = {**self.inventory, name: have - quantity}
        self.inventory = {k: v for k, v in rest.items() if v > 0}

    def stats(self) -> dict[str, Any]:
        """A small snapshot for episodes and reports."""
        return {
            "location": self.location,
            "stamina": round(self.stamina, 1),
            "satiety": round(self.satiety, 1),
            "mood": round(self.mood, 1),
            "money": self.money,
            "phone_battery": round(self.phone_battery),
            "asleep": self.asleep,
        }


def _clamp(value: float) -> float:
    """Clamp to [0, 100]. No rounding: minute-sized ticks must add up like one long tick."""
    return min(100.0, max(0.0, value))
