"""The action author API: what an action is, the context its code receives, and conditions.

An action is frozen data declared at module top in ``actions/<theme>.py``. Importing a module
registers nothing; the loader (``world/loader.py``) collects every `Action` it finds.

Executors change state only through the `ActionContext` (the step's working copy): they never
touch Redis, the history store or the LLM. The engine persists what they did in one atomic
write.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ValidationInfo

from yuiju.world.clock import in_window, is_school_day, is_weekend, minutes_until
from yuiju.world.relations import SET_OFF_MINUTES, Appointment
from yuiju.world.state import CharacterState, RunningAction, WorldState
from yuiju.world.town import Town

INTERRUPTIBLE = frozenset({"leisure", "rest", "idle", "phone"})
"""Pastimes a character breaks off when someone comes to do something with her."""
NEVER_INTERRUPTED = frozenset(
    {"sleep", "sleep_more", "wake", "work", "move", "meal", "shopping", "social"}
)
"""...unless it is also one of these: asleep, at work, on the way, eating, or already with
someone (nobody is in two conversations at once)."""
UNLIMITED = frozenset({"sleep", "school"})
"""What an appointment never cuts short or rules out (`Action.room`): it is reviewed to fall
outside the night and class time."""


@dataclass(frozen=True, kw_only=True)
class Companion:
    """Someone at her place right now, as her decision sees them (`ActionContext.company`)."""

    id: str
    """Their character id."""
    name: str
    """Their name as she says it (枫)."""
    doing: str
    """What they are doing, in Chinese (在公园散步), or '' when between two things."""
    free: bool
    """Whether they can do something with her now: between two things, or in a pastime they
    would break off for her; never while in class, at work, asleep, eating or in a conversation."""
    busy: str | None
    """Why not, when not free (在上课)."""
    closeness: float
    """Hers to them, 0–100, now."""
    state: CharacterState
    """Their state as read (read-only: joint actions change a partner through `ActionContext.partner`)."""


@dataclass(kw_only=True)
class ActionContext:
    """What an action's code sees: the moment, the world, her state (mutable), her choice."""

    now: datetime
    world: WorldState
    character: CharacterState
    """The working copy: mutate it (through its mutators) to change her state."""
    town: Town
    rng: random.Random
    """Seeded: the same seed gives the same life."""
    params: BaseModel | None = None
    """The validated parameter model, for actions that declare one."""
    duration_minute: int | None = None
    """The duration the decision asked for, if any."""
    reason: str = ""
    """Why she chose this (from the decision)."""
    running: RunningAction | None = None
    """At completion: the record of the action that is ending."""
    notes: list[str] = field(default_factory=list)
    """Extra lines for the episode (e.g. a random event), in Chinese."""
    world_changed: bool = False
    """Set when the action changed the world (e.g. took resources); only then is the world saved."""
    company: tuple[Companion, ...] = ()
    """Who else is here now (never at a private place such as home): what joint actions need."""
    partner: CharacterState | None = None
    """A joint action's start: the partner's working copy (change it through its mutators, as
    ``character``); both are written in the same atomic write. None otherwise."""

    @property
    def place_name(self) -> str:
        return self.town.place_name(self.character.location)

    def place_open(self, place_id: str) -> bool:
        state = self.world.places.get(place_id)
        return True if state is None else state.open

    def take_resources(self, place_id: str) -> dict[str, int]:
        """Collect every resource lying at ``place_id`` now (world working copy); returns them."""
        state = self.world.places.get(place_id)
        if state is None or not state.resources:
            return {}
        taken = {k: v for k, v in state.resources.items() if v > 0}
        state.resources = {}
        self.world_changed = True
        return taken

    def companion(self, key: str) -> Companion | None:
        """Whoever of ``company`` is called ``key`` (a name or an id)."""
        key = key.strip()
        return next((c for c in self.company if key == c.id), None) or next(
            (c for c in self.company if key == c.name), None
        )


Executor = Callable[[ActionContext], "str | None"]
"""Changes state through the context; returns a short Chinese summary of what happened."""

Duration = int | Callable[[ActionContext], int]
"""Minutes: fixed, or computed from the context (and the decision's ``duration_minute``)."""


# -- conditions -----------------------------------------------------------------------------


class Verdict(NamedTuple):
    """One part of a precondition at a moment: whether it holds, and its own words for it."""

    holds: bool
    text: str


@dataclass(frozen=True)
class Condition:
    """A cheap, pure test of the context that can say why it does not hold (and what holds).

    Compose with ``&``, ``|`` and ``~``: ``at_least("stamina", 10) & between("06:00", "22:00")``.
    """

    test: Callable[[ActionContext], bool]
    why_not: Callable[[ActionContext], str]
    """A Chinese sentence saying why the condition fails (shown to the observer and logs)."""
    says_holds: Callable[[ActionContext], str] | None = None
    """A Chinese sentence saying that it holds (`yuiju actions why`); None: only why it fails
    is known, and a holding one is shown with that."""
    parts: tuple[Condition, ...] = ()
    """What ``&`` (`all_of`) joined, each part once (nested ``&`` flattened); empty otherwise."""

    def __call__(self, ctx: ActionContext) -> bool:
        return self.test(ctx)

    def explain(self, ctx: ActionContext) -> str | None:
        """None when it holds, else the reason it does not."""
        return None if self.test(ctx) else self.why_not(ctx)

    def holds_text(self, ctx: ActionContext) -> str:
        """What holds, in its words (call it when it holds)."""
        if self.says_holds is not None:
            return self.says_holds(ctx)
        return f"成立（不成立时会说：{self.why_not(ctx)}）"

    def verdicts(self, ctx: ActionContext) -> list[Verdict]:
        """Each part of an ``&`` (or this one condition) at ``ctx``: holds or not, in its words."""
        if self is always:
            return []
        if self.parts:
            return [v for part in self.parts for v in part.verdicts(ctx)]
        holds = self.test(ctx)
        return [Verdict(holds, self.holds_text(ctx) if holds else self.why_not(ctx))]

    def __and__(self, other: Condition) -> Condition:
        return all_of(self, other)

    def __or__(self, other: Condition) -> Condition:
        return Condition(
            lambda c: self.test(c) or other.test(c),
            lambda c: f"{self.why_not(c)}，且{other.why_not(c)}",
            lambda c: (self if self.test(c) else other).holds_text(c),
        )

    def __invert__(self) -> Condition:
        return Condition(
            lambda c: not self.test(c),
            self.says_holds or (lambda _c: "条件不满足"),
            self.why_not,
        )


def condition(
    why: str | Callable[[ActionContext], str],
    *,
    holds: str | Callable[[ActionContext], str] | None = None,
) -> Callable[[Callable[[ActionContext], bool]], Condition]:
    """Decorator: turn a predicate into a `Condition` that says why it fails (and, given
    ``holds``, what holds: `yuiju actions why` shows it)."""

    def wrap(test: Callable[[ActionContext], bool]) -> Condition:
        return Condition(test, _words(why), _words(holds) if holds is not None else None)

    return wrap


def _words(text: str | Callable[[ActionContext], str]) -> Callable[[ActionContext], str]:
    return text if callable(text) else (lambda _c: text)


def all_of(*conditions: Condition) -> Condition:
    parts = tuple(p for c in conditions for p in (c.parts or (c,)) if p is not always)

    def why(ctx: ActionContext) -> str:
        return "；".join(r for c in parts if (r := c.explain(ctx)) is not None)

    return Condition(lambda ctx: all(c.test(ctx) for c in parts), why, parts=parts)


always = Condition(lambda _c: True, lambda _c: "", lambda _c: "")


def at(place_id: str) -> Condition:
    return Condition(
        lambda c: c.character.location == place_id,
        lambda c: f"她在{c.place_name}，不在{c.town.place_name(place_id)}",
        lambda c: f"她在{c.town.place_name(place_id)}",
    )


def is_open(place_id: str) -> Condition:
    def hours(c: ActionContext) -> str:
        place = c.town.places[place_id]
        return f"（营业时间 {place.hours[0]}–{place.hours[1]}）" if place.hours else ""

    return Condition(
        lambda c: c.place_open(place_id),
        lambda c: f"{c.town.place_name(place_id)}现在不开门{hours(c)}",
        lambda c: f"{c.town.place_name(place_id)}开着{hours(c)}",
    )


def between(start: str, end: str) -> Condition:
    """Local time in [start, end); may wrap midnight (``between("22:00", "06:00")``)."""
    return Condition(
        lambda c: in_window(c.now, start, end),
        lambda _c: f"只能在 {start}–{end} 之间",
        lambda _c: f"现在在 {start}–{end} 之间",
    )


def at_least(stat: str, value: float) -> Condition:
    names = {"stamina": "体力", "satiety": "饱腹", "mood": "心情", "money": "金币"}
    return Condition(
        lambda c: getattr(c.character, stat) >= value,
        lambda c: f"{names.get(stat, stat)}不足 {value}（现在 {getattr(c.character, stat):.0f}）",
        lambda c: f"{names.get(stat, stat)}至少 {value}（现在 {getattr(c.character, stat):.0f}）",
    )


def below(stat: str, value: float) -> Condition:
    names = {"stamina": "体力", "satiety": "饱腹", "mood": "心情", "money": "金币"}
    return Condition(
        lambda c: getattr(c.character, stat) < value,
        lambda c: f"{names.get(stat, stat)}已经有 {getattr(c.character, stat):.0f}，不需要",
        lambda c: f"{names.get(stat, stat)}低于 {value}（现在 {getattr(c.character, stat):.0f}）",
    )


def not_done_today(action_id: str) -> Condition:
    return Condition(
        lambda c: action_id not in c.character.done_today,
        lambda _c: "今天已经做过了",
        lambda _c: "今天还没做过",
    )


def has_item(name: str, quantity: int = 1) -> Condition:
    return Condition(
        lambda c: c.character.inventory.get(name, 0) >= quantity,
        lambda _c: f"没有{name}" if quantity == 1 else f"{name}不到 {quantity} 个",
        lambda c: f"有{name}" + (f" {c.character.inventory[name]} 个" if quantity > 1 else ""),
    )


school_day = Condition(
    lambda c: is_school_day(c.now.date()), lambda _c: "今天不上课", lambda _c: "今天上课"
)
weekend = Condition(
    lambda c: is_weekend(c.now.date()), lambda _c: "今天不是周末", lambda _c: "今天是周末"
)
awake = Condition(lambda c: not c.character.asleep, lambda _c: "她在睡觉", lambda _c: "她醒着")
asleep = Condition(lambda c: c.character.asleep, lambda _c: "她醒着", lambda _c: "她在睡觉")


def decision_ctx(info: ValidationInfo) -> ActionContext | None:
    """The moment a parameter model is validated in (``None`` outside a decision)."""
    context = info.context or {}
    ctx = context.get("ctx")
    return ctx if isinstance(ctx, ActionContext) else None


POSITIVE_EVENTS = (
    "路边的猫蹭了蹭她的腿",
    "在路上捡到了一枚漂亮的书签",
    "收到同学发来的有趣照片",
    "天边出现了一道很淡的彩虹",
    "听到街角有人在弹吉他",
    "发现常去的店出了新口味",
)
NEGATIVE_EVENTS = (
    "不小心把饮料洒在了袖子上",
    "鞋带松了差点绊倒",
    "被突然的一阵风吹乱了头发",
    "手机弹出一条扫兴的通知",
    "被路过的自行车溅了一身水",
)


def random_event(ctx: ActionContext, chance: float = 0.2) -> str | None:
    """A small seeded surprise on completion: a bounded mood change, noted for the episode."""
    if ctx.rng.random() >= chance:
        return None
    if ctx.rng.random() < 0.6:
        text, delta = ctx.rng.choice(POSITIVE_EVENTS), ctx.rng.randint(1, 4)
    else:
        text, delta = ctx.rng.choice(NEGATIVE_EVENTS), -ctx.rng.randint(2, 6)
    ctx.character.change(mood=delta)
    note = f"{text}（心情{delta:+d}）"
    ctx.notes.append(note)
    return note


# -- parameter choices ----------------------------------------------------------------------


def one_of(values: Iterable[Any]) -> dict[str, Any]:
    """Schema keywords for a parameter that must be one of ``values`` (for `Action.choices`)."""
    return {"enum": list(values)}


def some_of(values: Iterable[Any], *, at_most: int | None = None) -> dict[str, Any]:
    """Schema keywords for a list parameter of distinct ``values``, at most ``at_most`` of them
    (for `Action.choices`)."""
    options = list(values)
    limit = len(options) if at_most is None else min(at_most, len(options))
    return {"items": {"enum": options}, "uniqueItems": True, "maxItems": limit}


# -- durations ------------------------------------------------------------------------------


def choose_minutes(*tiers: int, default: int | None = None) -> Callable[[ActionContext], int]:
    """A duration the decision picks: its ``durationMinute`` snapped up to the next tier."""
    ordered = sorted(tiers)
    fallback = default if default is not None else ordered[0]

    def duration(ctx: ActionContext) -> int:
        asked = ctx.duration_minute
        if asked is None or asked <= 0:
            return fallback
        return next((t for t in ordered if t >= asked), ordered[-1])

    duration.tiers = tuple(ordered)  # type: ignore[attr-defined]
    return duration


def until(hhmm: str, *, at_least_minutes: int = 1) -> Callable[[ActionContext], int]:
    """Last until the next local ``hhmm`` (e.g. sleep until 07:00)."""
    return lambda ctx: max(at_least_minutes, minutes_until(ctx.now, hhmm))


# -- doing something together ----------------------------------------------------------------

PartnerTest = Callable[[ActionContext, Companion], bool]
"""Whether one of those present qualifies as the partner of a joint action (hungry too, can pay)."""

JointKind = Literal["greet", "chat", "together", "invite"]
"""What a joint action is between the two (closeness and the conversation follow it)."""


@dataclass(frozen=True, kw_only=True)
class Joint:
    """What makes an action something two characters do together (a meeting).

    The decision names the partner among those present (``params.partner``); the engine starts
    it for both in one atomic write: her state and the partner's (whose pastime, if any, ends
    early), both behavior episodes, a conversation episode on each side, closeness on both sides,
    news passed on. Build one with `world.social.together`.
    """

    kind: JointKind
    """What it is between them: closeness moves by `world.relations.CLOSENESS_DELTAS`, and the
    conversation follows it."""
    invited: str
    """How the partner's record says she was asked, after the initiator's name (来打招呼,
    找我聊天, 叫我一起散步)."""
    partner_when: PartnerTest | None = None
    """Extra test a companion must pass to be the partner (beyond being here and free)."""
    partner_why: str = "在场的人现在没空"
    """Why nobody qualifies, in Chinese, when nobody does."""
    news: bool = True
    """News passes on in this conversation."""

    def qualifies(self, ctx: ActionContext, companion: Companion) -> bool:
        return companion.free and (self.partner_when is None or self.partner_when(ctx, companion))

    def why_nobody(self, ctx: ActionContext) -> str:
        """Why nobody present can do it with her: nobody here, all busy, or none qualifies."""
        if not ctx.company:
            return "这里没有别人"
        if not any(c.free for c in ctx.company):
            return (
                "在场的人都没空（"
                + "，".join(f"{c.name}{c.busy or '在忙'}" for c in ctx.company)
                + "）"
            )
        return self.partner_why

    def partners(self, ctx: ActionContext) -> list[Companion]:
        """Those present who could do it with her now, closest first."""
        return sorted(
            (c for c in ctx.company if self.qualifies(ctx, c)),
            key=lambda c: (-c.closeness, c.id),
        )


# -- the action itself ----------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Action:
    """One thing a character can do."""

    id: str
    """Stable snake_case id, unique across all loaded modules."""
    name: str
    """Chinese display name; the model answers with it (or the id, or the label)."""
    label: str | None = None
    """A shorter name the decision offers while the action is possible, e.g. '去超市' for the
    move from wherever she is (`travel` sets one): the moment's options and schema show it, so
    every decision prompt is shorter, and the model may answer with it. Unique among the actions
    of one place and never another action's name; episodes and the timeline keep ``name``."""
    description: str
    """What the model reads: what it does, effects and duration, in Chinese."""
    at: str | None = None
    """Place id where it can be done; None = anywhere. A closed place offers none of its actions
    except the ways out."""
    when: Condition = always
    """Extra precondition, beyond place, opening hours and being awake."""
    run: Executor | None = None
    """Start effects (applied when she starts); returns a summary."""
    complete: Executor | None = None
    """Completion effects (applied when the duration has passed); returns a summary."""
    duration: Duration = 10
    tags: frozenset[str] = frozenset()
    """Kinds: meal, sleep, school, study, work, move, leisure, rest, shopping, ..."""
    moves_to: str | None = None
    """For movement: the place she arrives at on completion."""
    share: bool = True
    """May the completion become a proactive life update?"""
    params: type[BaseModel] | None = None
    """Parameter model the decision fills (what to eat, how long...)."""
    while_asleep: bool = False
    """Offered only while she sleeps (wake up, sleep a little more) instead of while awake."""
    utility: Callable[[ActionContext], float] | None = None
    """Optional hint for the offline utility policy; it adds to the needs-driven score."""
    offline_params: Callable[[ActionContext], dict[str, Any]] | None = None
    """How the offline utility policy fills ``params`` (the LLM fills them in its decision)."""
    choices: Callable[[ActionContext], dict[str, dict[str, Any]]] | None = None
    """What each parameter may be at this moment, as JSON-schema keywords by field name (build
    them with `one_of` and `some_of`): what she owns, what the shop sells that she can afford.
    The decision schema offers only these, so a model that follows it picks something possible;
    the parameter model still validates the answer against the moment afterwards."""
    menu: Callable[[ActionContext], str] | None = None
    """What is on offer at this moment with its prices, one Chinese line (build it with
    `world.items.price_list`): what she can afford, what the shop pays for what she carries.
    The decision prompt shows it only while the action is a candidate, so long price lists are
    not in every prompt; the description gives the range ("18~35金币")."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form data for the action's own code."""
    joint: Joint | None = None
    """Set for something done with someone present (`world.social.together` builds these):
    offered only while someone who qualifies is here, and started for both at once."""

    def __post_init__(self) -> None:
        if not self.id.replace("_", "").isalnum() or not self.id.isascii():
            raise ValueError(f"action id {self.id!r} must be ASCII snake_case, e.g. 'walk_in_park'")
        if not self.name or not self.description:
            raise ValueError(f"action {self.id!r} needs a Chinese name and a description")

    @cached_property
    def precondition(self) -> Condition:
        """Everything that must hold: awake (or asleep), at the place, the place open, ``when``."""
        parts = [asleep if self.while_asleep else awake]
        if self.at is not None:
            parts.append(at(self.at))
            if self.moves_to is None:  # leaving a place that has just closed is always allowed
                parts.append(is_open(self.at))
        if self.joint is not None:
            joint = self.joint
            parts.append(Condition(lambda c: bool(joint.partners(c)), joint.why_nobody))
        parts.append(self.when)
        parts.append(Condition(self.fits, self.clash, lambda _c: "不耽误约好的事"))
        return all_of(*parts)

    def available(self, ctx: ActionContext) -> bool:
        return self.precondition.test(ctx)

    def why_not(self, ctx: ActionContext) -> str | None:
        return self.precondition.explain(ctx)

    def minutes(self, ctx: ActionContext) -> int:
        """Her duration: as the action says, ended in time for her next appointment (a duration
        she chooses: `room`)."""
        value = max(1, int(self.duration(ctx) if callable(self.duration) else self.duration))
        room = self.room(ctx)
        return value if room is None or not self.asks_duration else max(1, min(value, room[0]))

    def room(self, ctx: ActionContext) -> tuple[int, Appointment] | None:
        """The minutes she has for this action before she must be free for her next planned
        appointment, and that appointment; None: no appointment limits it.

        Free means: at the appointment's place by its start, so she decides again within its
        window and meets whoever is there; elsewhere `SET_OFF_MINUTES` before the start, to get
        there. A movement is how she gets there, and a joint action at the place may keep it
        (nothing limits either); a pastime at the place once the window is open (from
        `EARLY_MINUTES` before the start) is waiting for the other, who breaks it off
        (`INTERRUPTIBLE`). Sleep and class are never limited: appointments are reviewed to fall
        outside both."""
        if self.moves_to is not None or ctx.character.asleep or self.tags & UNLIMITED:
            return None
        here = self.at or ctx.character.location
        now = ctx.now
        tightest: tuple[int, Appointment] | None = None
        for a in ctx.character.social.appointments:
            if a.status != "planned" or a.end <= now:
                continue
            if a.place == here:
                if self.joint is not None:
                    continue
                pastime = self.tags & INTERRUPTIBLE and not self.tags & NEVER_INTERRUPTED
                if pastime and now >= a.opens:
                    continue
                free_by = a.start
            else:
                free_by = a.start - timedelta(minutes=SET_OFF_MINUTES)
            minutes = int((free_by - now).total_seconds() // 60)
            if tightest is None or minutes < tightest[0]:
                tightest = (minutes, a)
        return tightest

    def fits(self, ctx: ActionContext) -> bool:
        """Whether she can do it (at its shortest, for a duration she chooses) and still be free
        for her next appointment (`room`)."""
        room = self.room(ctx)
        return room is None or self._shortest(ctx) <= room[0]

    def clash(self, ctx: ActionContext) -> str:
        """Why it would run into her next appointment (Chinese; call it when it does not fit)."""
        room = self.room(ctx)
        if room is None:
            return "不耽误约好的事"
        a = room[1]
        return (
            f"快到约好的时间了（{a.start.astimezone(ctx.now.tzinfo):%H:%M} 和{a.other.name}"
            f"在{ctx.town.place_name(a.place)}）"
        )

    def _shortest(self, ctx: ActionContext) -> int:
        tiers: tuple[int, ...] = getattr(self.duration, "tiers", ())
        if tiers:
            return max(1, min(tiers))
        return max(1, int(self.duration(ctx) if callable(self.duration) else self.duration))

    @property
    def offered_as(self) -> str:
        """What the decision prompt calls it: the label, or the name."""
        return self.label or self.name

    @property
    def asks_duration(self) -> bool:
        return callable(self.duration) and hasattr(self.duration, "tiers")


def travel(
    *,
    id: str,
    name: str,
    src: str,
    dst: str,
    town: Town,
    when: Condition = always,
    label: str | None = None,
) -> Action:
    """A movement along a town link: costs (and any fare) come from the link; she arrives on
    completion. The decision offers it as ``label`` (default '去<destination>')."""
    link = town.link(src, dst)
    if link is None:
        raise ValueError(
            f"{town.name} has no link between {src!r} and {dst!r}; add one in world/town.py"
        )
    fare = f"[金币-{link.fare}]" if link.fare else ""

    def go(ctx: ActionContext) -> str:
        ctx.character.change(stamina=-link.stamina, satiety=-link.satiety)
        if link.fare:
            ctx.character.pay(link.fare)
        return f"从{town.place_name(src)}出发去{town.place_name(dst)}"

    # No stamina or opening-hours requirement: however tired and late, she can always walk on,
    # through the streets past closed shops, towards home (costs clamp at 0). A closed place
    # offers none of its own actions when she gets there.
    condition = when
    if link.fare:
        condition = condition & at_least("money", link.fare)
    hours = town.places[dst].hours
    return Action(
        id=id,
        name=name,
        label=label or f"去{town.place_name(dst)}",
        description=(
            f"从{town.place_name(src)}{'坐电车' if link.fare else '走'}到{town.place_name(dst)}"
            + (f"（营业 {hours[0]}–{hours[1]}）" if hours else "")
            + "。"
            f"[体力-{link.stamina}][饱腹-{link.satiety}]{fare}[耗时{link.minutes}分钟]"
        ),
        at=src,
        when=condition,
        run=go,
        duration=link.minutes,
        moves_to=dst,
        tags=frozenset({"move"}),
        share=False,
    )
