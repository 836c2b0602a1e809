"""Characters who meet: who is here, what two of them can do together, and what a meeting changes.

- `company_of` says who else is at her place now and whether each could do something with her
  (`Companion`): the decision's context, for the LLM prompt and the offline policy alike.
- `together` builds a joint action (`Action.joint`): offered only while a partner who qualifies
  is here, its ``partner`` parameter one of them. ``actions/social.py`` is the example to copy.
- `plan_meeting` works out what a meeting changes on both sides (closeness, news passed on, an
  appointment kept, an invitation accepted or declined), as a pure function of the two states,
  and `apply_meeting` applies it. The behavior loop runs both inside one transaction on the two
  characters (world/behavior.py), so a meeting lands on both sides or on neither.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from typing import Any

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

from yuiju.characters import CharacterCard, card_of
from yuiju.memory.episode_data import ConversationData, Line, Partner
from yuiju.memory.episodes import MEETING_PREFIX, Episode
from yuiju.world.action import (
    INTERRUPTIBLE,
    NEVER_INTERRUPTED,
    Action,
    ActionContext,
    Companion,
    Condition,
    Duration,
    Executor,
    Joint,
    JointKind,
    PartnerTest,
    always,
    decision_ctx,
    one_of,
)
from yuiju.world.conversation import Conversation, Talker, TemplateTalker
from yuiju.world.relations import (
    CLOSENESS_DELTAS,
    DEFAULT_CLOSENESS,
    Appointment,
    NewsItem,
    Party,
    Relation,
    appointment_id,
    band,
    character_party,
    fresh_news,
    heard,
    keep_news,
    news_to_tell,
    prune,
    review_invitation,
)
from yuiju.world.state import CharacterState
from yuiju.world.town import Town, said_at


def meeting_id(initiator: str, partner: str, now: datetime, action_id: str) -> str:
    digest = hashlib.sha1(f"{initiator}|{partner}|{now.isoformat()}|{action_id}".encode())
    return "mtg_" + digest.hexdigest()[:16]


def conversation_episode_id(meeting: str, character_id: str) -> str:
    digest = hashlib.sha1(f"{meeting}|{character_id}".encode()).hexdigest()
    return f"{MEETING_PREFIX}{digest[:20]}"


@dataclass(frozen=True, kw_only=True)
class Neighbours:
    """A town's characters as each of its behavior loops knows them (one shared object)."""

    characters: tuple[str, ...]
    """Every character of the town (her own id included)."""
    names: Mapping[str, str] = field(default_factory=dict)
    """Display names by id (from the cards); an id without one is shown as itself."""
    cards: Mapping[str, CharacterCard] = field(default_factory=dict)
    """The cards (personas for the conversation writer)."""
    talker: Talker = field(default_factory=TemplateTalker)
    """Who writes what they say when they meet."""
    model_talks_per_day: int = 0
    """Conversations a character may start per day whose words the model writes (then the
    templates): the social part's LLM budget, ``[social] model_talks_per_day``."""

    def name(self, character_id: str) -> str:
        return self.names.get(character_id, character_id)

    def others(self, character_id: str) -> list[str]:
        return [c for c in self.characters if c != character_id]

    def rest(self, owner: str, other: str) -> float:
        """Where her closeness to ``other`` starts and rests: her card's ``[relations]`` value."""
        card = self.cards.get(owner)
        table = card.relations if card is not None else {}
        return float(table.get(other, table.get(card_of(other), DEFAULT_CLOSENESS)))


def unique_names(names: Mapping[str, str]) -> dict[str, str]:
    """Display names that tell everyone apart (the decision names a partner by name): copies of
    a card (``kaede@7``) share its name, so each is called by it and its number (枫@7)."""
    counts: dict[str, int] = {}
    for name in names.values():
        counts[name] = counts.get(name, 0) + 1
    return {
        cid: name if counts[name] == 1 else f"{name}@{cid.partition('@')[2] or cid}"
        for cid, name in names.items()
    }


# -- who is here ----------------------------------------------------------------------------


def availability(
    other: CharacterState,
    now: datetime,
    action_of: Callable[[str], Action | None],
    names: Mapping[str, str],
    may_interrupt: bool,
) -> tuple[bool, str | None]:
    """Whether ``other`` could do something with someone now, and why not."""
    running = other.running
    if other.asleep:
        return False, "在睡觉"
    if running is None or running.ends_at <= now:
        return True, None
    if running.partners:
        who = "、".join(names.get(p, p) for p in running.partners)
        return False, f"正在和{who}{_bare(running.name, running.partners, names)}"
    action = action_of(running.action_id)
    tags = action.tags if action is not None else frozenset()
    if tags & NEVER_INTERRUPTED or not tags & INTERRUPTIBLE:
        return False, f"正在{_doing(running.name)}"
    if not may_interrupt:  # another worker drives her: only between two of her steps
        return False, f"正在{_doing(running.name)}"
    return True, None


def _doing(name: str) -> str:
    return name.removeprefix("在") if name.startswith("在") and len(name) > 3 else name


def _bare(name: str, partners: Sequence[str], names: Mapping[str, str]) -> str:
    """'和枫聊天' → '聊天' (the partner is said already)."""
    for p in partners:
        name = name.removeprefix(f"和{names.get(p, p)}")
    return name


def where_now(
    other: CharacterState, now: datetime, action_of: Callable[[str], Action | None]
) -> str | None:
    """Where ``other`` is at ``now``: None while on the way somewhere (a move that has not ended);
    a move that has ended counts as arrived, though her step has not recorded it yet."""
    running = other.running
    if running is not None:
        action = action_of(running.action_id)
        if action is not None and action.moves_to is not None:
            return action.moves_to if running.ends_at <= now else None
    return other.location


def company_of(
    me: CharacterState,
    others: Iterable[CharacterState],
    *,
    now: datetime,
    town: Town,
    action_of: Callable[[str], Action | None],
    names: Mapping[str, str],
    may_interrupt: Callable[[str], bool] = lambda _cid: True,
) -> tuple[Companion, ...]:
    """Who else is where she is now, each with whether they are free for her."""
    place = town.places.get(me.location)
    if me.asleep or (place is not None and place.private):
        return ()
    out = []
    for other in others:
        if other.id == me.id or where_now(other, now, action_of) != me.location:
            continue
        if other.asleep:
            continue
        free, busy = availability(other, now, action_of, names, may_interrupt(other.id))
        running = other.running
        doing = "" if running is None or running.ends_at <= now else running.name
        out.append(
            Companion(
                id=other.id,
                name=names.get(other.id, other.id),
                doing=doing,
                free=free,
                busy=busy,
                closeness=round(me.social.closeness(f"character:{other.id}", now), 1),
                state=other,
            )
        )
    return tuple(sorted(out, key=lambda c: (-c.closeness, c.id)))


def company_line(company: Sequence[Companion]) -> str:
    """Who is here, for the decision prompt: 枫（好朋友，在公园散步）、千夏（认识，正在上课，没空）."""
    parts = []
    for c in company:
        what = [band(c.closeness)]
        if c.doing:
            what.append(c.doing)
        if not c.free:
            what.append(f"{c.busy or '忙着'}，没空" if c.busy and not c.doing else "没空")
        parts.append(f"{c.name}（{'，'.join(what)}）")
    return "、".join(parts)


def heard_from(
    state: CharacterState, *, about: str | None = None, text: str | None = None
) -> list[NewsItem]:
    """What she has heard, newest first: about someone (a party id, ``qq:123`` or ``kaede``),
    or containing ``text``. Each item names who told her and the episode where she heard it,
    so a claim such as "悠酱说你要搬家了" can be checked against a record."""
    found = [
        n
        for n in state.social.news
        if (about is None or (n.about is not None and n.about.id == about))
        and (text is None or text in n.text)
    ]
    return sorted(found, key=lambda n: n.learned_at, reverse=True)


# -- joint actions ----------------------------------------------------------------------------


class WithPartner(BaseModel):
    """The parameter every joint action has: whom she does it with."""

    partner: str = Field(description="和谁：在场的人的名字")


def partner_model(joint: Joint, base: type[WithPartner] = WithPartner) -> type[WithPartner]:
    """``base`` whose ``partner`` must name someone here who qualifies for ``joint`` now; the
    validated value is their character id."""

    class Partnered(base):  # type: ignore[valid-type,misc]
        @field_validator("partner")
        @classmethod
        def _present(cls, value: str, info: ValidationInfo) -> str:
            ctx = decision_ctx(info)
            if ctx is None:
                return value
            found = ctx.companion(value)
            if found is None:
                here = "、".join(c.name for c in ctx.company) or "没有别人"
                raise ValueError(f"「{value}」不在这里；在场的是：{here}")
            if not joint.qualifies(ctx, found):
                raise ValueError(f"{found.name}现在不行：{found.busy or joint.partner_why}")
            return found.id

    Partnered.__name__ = f"{base.__name__}ForJoint"
    return Partnered


def partner_choices(ctx: ActionContext, joint: Joint) -> dict[str, dict[str, Any]]:
    return {"partner": one_of(c.name for c in joint.partners(ctx))}


def preferred_partner(ctx: ActionContext, joint: Joint) -> Companion:
    """Whom the offline policy picks: someone she has an appointment with here now, else the
    one she is closest to."""
    partners = joint.partners(ctx)
    for c in partners:
        if any(
            a.keeps(ctx.now, ctx.character.location, f"character:{c.id}")
            for a in ctx.character.social.appointments
        ):
            return c
    return partners[0]


def social_utility(ctx: ActionContext, joint: Joint) -> float:
    """What the offline policy adds to a joint action: a lot for keeping an appointment, a
    little for closeness."""
    partners = joint.partners(ctx)
    if not partners:
        return 0.0
    best = preferred_partner(ctx, joint)
    keeping = any(
        a.keeps(ctx.now, ctx.character.location, f"character:{best.id}")
        for a in ctx.character.social.appointments
    )
    return (2.5 if keeping else 0.0) + best.closeness / 250


def met_today(key_of: Callable[[Companion], str] = lambda c: f"character:{c.id}") -> PartnerTest:
    """A partner she has not met yet today (whom to greet)."""
    return lambda ctx, c: key_of(c) not in ctx.character.social.met_on(ctx.now.date())


def together(
    *,
    id: str,
    name: str,
    description: str,
    kind: JointKind,
    invited: str,
    at: str | None = None,
    when: Condition = always,
    duration: Duration = 10,
    run: Executor | None = None,
    complete: Executor | None = None,
    tags: Iterable[str] = (),
    partner_when: PartnerTest | None = None,
    partner_why: str = "在场的人现在没空",
    news: bool = True,
    params: type[WithPartner] = WithPartner,
    offline_params: Callable[[ActionContext], dict[str, Any]] | None = None,
    choices: Callable[[ActionContext], dict[str, dict[str, Any]]] | None = None,
    utility: Callable[[ActionContext], float] | None = None,
    menu: Callable[[ActionContext], str] | None = None,
    share: bool = True,
) -> Action:
    """A joint action: something she does with one of those present (see `Joint`).

    ``name`` is what they do, said after the partner (聊天 → 和枫聊天). ``run`` sees the
    partner's working copy as ``ctx.partner`` at the start; ``complete`` runs on each side at
    its own completion (``ctx.character`` is that side; ``ctx.running.partners`` the other).
    ``params`` may extend `WithPartner` (what else the decision chooses); ``offline_params``
    and ``choices`` then fill and narrow those extra fields (the partner is handled here)."""
    joint = Joint(
        kind=kind,
        invited=invited,
        partner_when=partner_when,
        partner_why=partner_why,
        news=news,
    )

    def offline(ctx: ActionContext) -> dict[str, Any]:
        extra = offline_params(ctx) if offline_params is not None else {}
        return {"partner": preferred_partner(ctx, joint).name, **extra}

    def narrowed(ctx: ActionContext) -> dict[str, dict[str, Any]]:
        return {**partner_choices(ctx, joint), **(choices(ctx) if choices is not None else {})}

    def utility_of(ctx: ActionContext) -> float:
        return social_utility(ctx, joint) + (utility(ctx) if utility is not None else 0.0)

    return Action(
        id=id,
        name=name,
        description=description,
        at=at,
        when=when,
        run=run,
        complete=complete,
        duration=duration,
        tags=frozenset({"social", *tags}),
        params=partner_model(joint, params),
        offline_params=offline,
        choices=narrowed,
        utility=utility_of,
        menu=menu,
        share=share,
        joint=joint,
    )


# -- what a meeting changes -------------------------------------------------------------------


@dataclass(frozen=True)
class Told:
    """One piece of news passed on in a meeting."""

    item: NewsItem
    """As the teller knew it."""
    teller: str
    listener: str


@dataclass
class MeetingPlan:
    """What a meeting changes, worked out from the two states (`plan_meeting`)."""

    told: list[Told] = field(default_factory=list)
    kept: Appointment | None = None
    """The initiator's appointment with the partner that this meeting keeps."""
    proposal: Appointment | None = None
    """An invitation made in this meeting (the initiator's proposal)."""
    declined: str | None = None
    """Why the partner declined it (None: accepted, or no invitation)."""

    def key(
        self,
    ) -> tuple[list[tuple[str, str]], str | None, str | None, str | None]:
        """What the conversation's words depend on: equal keys, the same conversation."""
        return (
            [(t.item.id, t.teller) for t in self.told],
            self.kept.id if self.kept else None,
            self.proposal.id if self.proposal else None,
            self.declined,
        )


def plan_meeting(
    a: CharacterState,
    b: CharacterState,
    *,
    joint: Joint,
    place: str,
    now: datetime,
    town: Town,
    proposal: Appointment | None = None,
) -> MeetingPlan:
    """What a meeting of ``a`` (who started it) and ``b`` at ``place`` changes; pure."""
    plan = MeetingPlan()
    if joint.news:
        for teller, listener in ((a, b), (b, a)):
            for item in news_to_tell(
                teller.social.news, listener.social.news, f"character:{listener.id}", now
            ):
                plan.told.append(Told(item, teller.id, listener.id))
    plan.kept = next(
        (x for x in a.social.appointments if x.keeps(now, place, f"character:{b.id}")), None
    )
    if proposal is not None:
        plan.proposal = proposal
        plan.declined = review_invitation(
            proposal.model_copy(update={"other": proposal.asked_by}),
            b.social.appointments,
            now=now,
            town=town,
            closeness=b.social.closeness(f"character:{a.id}", now),
        )
    return plan


def apply_meeting(
    a: CharacterState,
    b: CharacterState,
    plan: MeetingPlan,
    *,
    joint: Joint,
    names: Mapping[str, str],
    now: datetime,
    episodes: Mapping[str, str],
    rest: Callable[[str, str], float],
) -> None:
    """Apply ``plan`` to both working copies: closeness, who met whom today, news heard (with
    the listener's conversation episode in ``episodes``), the appointment kept on both sides, an
    invitation's appointment on both sides when accepted. ``rest(owner, other)`` is where a
    relation starts and rests (the card's value)."""
    delta = CLOSENESS_DELTAS[joint.kind]
    if plan.kept is not None:
        delta += CLOSENESS_DELTAS["appointment_kept"]
    if plan.proposal is not None:
        delta += CLOSENESS_DELTAS["invite_declined" if plan.declined else "invite_accepted"]
    by_id = {a.id: a, b.id: b}
    for me, other in ((a, b), (b, a)):
        social = me.social.model_copy(deep=True)
        social.roll_day(now.date())
        key = f"character:{other.id}"
        party = character_party(other.id, names.get(other.id, other.id))
        relation = social.relations.get(key) or Relation(
            party=party, closeness=rest(me.id, other.id), rest=rest(me.id, other.id)
        )
        social.relations = {**social.relations, key: relation.moved(now, delta, met=True)}
        if key not in social.met_today:
            social.met_today = [*social.met_today, key]
        social.last_met_at = now
        heard_now = [
            heard(
                t.item,
                character_party(t.teller, names.get(t.teller, t.teller)),
                now,
                episodes[me.id],
            )
            for t in plan.told
            if t.listener == me.id
        ]
        social.news = keep_news(social.news, *heard_now)
        if plan.kept is not None:
            social.appointments = [
                x.model_copy(update={"status": "kept", "note": f"见面：{episodes[me.id]}"})
                if x.id == plan.kept.id
                else x
                for x in social.appointments
            ]
        if plan.proposal is not None and plan.declined is None:
            mine = plan.proposal.model_copy(
                update={
                    "other": party,
                    "source": "character",
                    "created_at": now,
                }
            )
            social.appointments = prune(
                [x for x in social.appointments if x.id != mine.id] + [mine]
            )
        by_id[me.id].social = social


def starting_relations(
    owner: str, table: Mapping[str, float], names: Mapping[str, str], now: datetime | None = None
) -> dict[str, Relation]:
    """Her relations as the card starts them: one per character it names that lives in her town."""
    out = {}
    for other, value in table.items():
        if other == owner or other not in names:
            continue
        party = Party(id=other, name=names[other])
        out[party.key] = Relation(party=party, closeness=value, rest=value, as_of=now)
    return out


def day_after(now: datetime, days: int, hhmm: str) -> datetime:
    """``hhmm`` on the day ``days`` after ``now``'s (local)."""
    hour, minute = map(int, hhmm.split(":"))
    day = now + timedelta(days=days)
    return day.replace(hour=hour, minute=minute, second=0, microsecond=0)


# -- invitations ----------------------------------------------------------------------------

MEETING_PLACES: dict[str, str] = {
    "park": "一起散步",
    "coast": "一起看海",
    "cafe": "喝咖啡聊天",
    "diner": "一起吃饭",
    "pond": "一起钓鱼",
    "shrine": "一起参拜",
}
"""Where she may invite someone, and what they would do there."""
INVITE_DAYS = ("今天", "明天", "后天")
INVITE_TIMES = ("10:00", "13:00", "15:00", "17:00", "19:00")
INVITE_MINUTES = 60


class InviteParams(WithPartner):
    """An invitation: whom, where and when (the partner answers at once: yes, or why not)."""

    place: str = Field(description="约在哪里（地点名）")
    when: str = Field(description="什么时候见面，例如「明天 15:00」")

    @field_validator("place")
    @classmethod
    def _place(cls, value: str, info: ValidationInfo) -> str:
        ctx = decision_ctx(info)
        town = ctx.town if ctx is not None else None
        for place_id in MEETING_PLACES:
            if value in (place_id, town.place_name(place_id) if town else place_id):
                return place_id
        names = "、".join(town.place_name(p) for p in MEETING_PLACES) if town else ""
        raise ValueError(f"「{value}」不能约；能约的地方：{names or '、'.join(MEETING_PLACES)}")

    @field_validator("when")
    @classmethod
    def _when(cls, value: str) -> str:
        day, _, time = value.strip().partition(" ")
        if day not in INVITE_DAYS or time not in INVITE_TIMES:
            raise ValueError(
                f"when 写成「明天 15:00」：{'、'.join(INVITE_DAYS)}之一，空格，"
                f"{'、'.join(INVITE_TIMES)}之一"
            )
        return f"{day} {time}"

    @model_validator(mode="after")
    def _she_can_go(self, info: ValidationInfo) -> InviteParams:
        ctx = decision_ctx(info)
        if ctx is not None and (why := own_review(ctx, self.place, self.when)):
            raise ValueError(f"约在{self.when}去{ctx.town.place_name(self.place)}不行：{why}")
        return self

    def start(self, now: datetime) -> datetime:
        return self.start_of(now, self.when)

    @staticmethod
    def start_of(now: datetime, when: str) -> datetime:
        """When ``when`` (明天 15:00) is, seen from ``now``."""
        day, _, time = when.partition(" ")
        return day_after(now, INVITE_DAYS.index(day), time)


def proposal_of(
    params: BaseModel, ctx: ActionContext, name_of: Callable[[str], str]
) -> Appointment | None:
    """The appointment an invitation proposes (None for any other joint action)."""
    if not isinstance(params, InviteParams):
        return None
    me = ctx.character
    inviter = character_party(me.id, name_of(me.id))
    start = params.start(ctx.now)
    return Appointment(
        id=appointment_id(inviter, params.partner, start, params.place),
        other=character_party(params.partner, name_of(params.partner)),
        asked_by=inviter,
        place=params.place,
        start=start,
        minutes=INVITE_MINUTES,
        activity=MEETING_PLACES[params.place],
        created_at=ctx.now,
    )


def own_review(
    ctx: ActionContext, place: str, when: str, who: CharacterState | None = None
) -> str | None:
    """Why ``ctx``'s character (or ``who``) could not go to ``place`` at ``when`` (None: she
    could)."""
    who = who or ctx.character
    me = character_party(who.id, who.id)
    probe = Appointment(
        id="probe",
        other=me,
        asked_by=me,
        place=place,
        start=InviteParams.start_of(ctx.now, when),
        minutes=INVITE_MINUTES,
        created_at=ctx.now,
    )
    return review_invitation(probe, who.social.appointments, now=ctx.now, town=ctx.town)


def free_times(
    ctx: ActionContext, place: str = "park", also: CharacterState | None = None
) -> list[str]:
    """When (明天 15:00) she (and ``also``, as far as she can tell) could meet at ``place``,
    soonest first."""
    return [
        f"{day} {time}"
        for day in INVITE_DAYS
        for time in INVITE_TIMES
        if own_review(ctx, place, f"{day} {time}") is None
        and (also is None or own_review(ctx, place, f"{day} {time}", also) is None)
    ]


# -- the conversation episode ---------------------------------------------------------------


def conversation_episode(
    eid: str,
    who: CharacterState,
    other: CharacterState,
    said: Conversation,
    plan: MeetingPlan,
    *,
    mid: str,
    now: datetime,
    ends: datetime,
    place: str,
    action: Action,
    names: Mapping[str, str],
    initiator: str,
    proposal_place: str = "",
) -> Episode:
    """Her record of a meeting's conversation: with whom, where, what was said in short, the news
    passed on (who told whom, from whom they had it) and any invitation and its answer."""

    def name(cid: str) -> str:
        return names.get(cid, cid)

    me, you = name(who.id), name(other.id)
    first, second = (me, you) if who.id == initiator else (you, me)
    doing = said_at(place, action.name)
    parts = [f"{first}和{second}{doing}" + ("（之前约好的）" if plan.kept else "")]
    for t in plan.told:
        origin = (
            "" if t.item.origin.key == f"character:{t.teller}" else f"（{t.item.origin.name}说的）"
        )
        parts.append(f"{name(t.teller)}告诉{name(t.listener)}：{t.item.text}{origin}")
    if plan.proposal is not None:
        p = plan.proposal
        answer = "答应了" if plan.declined is None else f"没答应（{plan.declined}）"
        parts.append(
            f"{first}约{second}{p.start.month}月{p.start.day}日{p.start.strftime('%H:%M')}"
            f"在{proposal_place}{p.activity}，{second}{answer}"
        )
    quoted = "；".join(f"{line.name}说「{line.text}」" for line in said.lines[:2])
    summary = "；".join(parts) + (f"。{quoted}" if quoted else "")
    return Episode(
        id=eid,
        character_id=who.id,
        type="conversation",
        time=now,
        end_time=ends,
        status="logged",
        summary=summary,
        data=ConversationData(
            meeting_id=mid,
            partners=[Partner(id=other.id, name=you)],
            participants=[initiator, other.id if who.id == initiator else who.id],
            initiator=initiator,
            place=place,
            action=action.id,
            kind=action.joint.kind if action.joint else "",
            source=said.source,
            lines=[Line(speaker=x.speaker, name=x.name, text=x.text) for x in said.lines],
            news=[
                {
                    "id": t.item.id,
                    "text": t.item.text,
                    "teller": t.teller,
                    "listener": t.listener,
                    "origin": t.item.origin.model_dump(),
                    "teller_heard_from": t.item.source.model_dump(),
                }
                for t in plan.told
            ],
            invitation=plan.proposal.model_dump(mode="json") if plan.proposal else None,
            declined=plan.declined,
            kept_appointment=plan.kept.id if plan.kept else None,
        ).dump(),
    )


# -- what the observer and `yuiju status` show ------------------------------------------------


def social_view(
    characters: Mapping[str, CharacterState | None],
    *,
    now: datetime,
    town: Town,
    names: Mapping[str, str],
) -> dict[str, Any]:
    """Who is with whom now (one entry per meeting in progress), each character's relations
    (closest first; people from chat among them, ``kind`` person), planned appointments,
    reminders and promises, and what she has heard, as plain data."""

    def name(cid: str) -> str:
        return names.get(cid, cid)

    together: dict[str, dict[str, Any]] = {}
    relations: dict[str, list[dict[str, Any]]] = {}
    appointments: dict[str, list[str]] = {}
    notes: dict[str, list[str]] = {}
    news: dict[str, list[dict[str, Any]]] = {}
    for cid, state in characters.items():
        if state is None:
            continue
        running = state.running
        if (
            running is not None
            and running.partners
            and running.meeting_id
            and now < running.ends_at
        ):
            entry = together.setdefault(
                running.meeting_id,
                {
                    "meeting_id": running.meeting_id,
                    "with": [],
                    "doing": _bare(running.name, running.partners, names),
                    "place": town.place_name(running.place),
                    "since": running.started_at.isoformat(),
                    "until": running.ends_at.isoformat(),
                },
            )
            entry["with"] += [c for c in (cid, *running.partners) if c not in entry["with"]]
        relations[cid] = sorted(
            (
                {
                    "id": r.party.id,
                    "kind": r.party.kind,
                    "name": r.party.name,
                    "closeness": round(r.closeness_at(now), 1),
                    "band": band(r.closeness_at(now)),
                    "meetings": r.meetings,
                    "talks": r.talks,
                    "last_met": r.last_met.isoformat() if r.last_met else None,
                }
                for r in state.social.relations.values()
            ),
            key=lambda r: (-r["closeness"], r["id"]),
        )
        appointments[cid] = [a.line(town, now) for a in state.social.planned()]
        notes[cid] = [n.line(town, now) for n in state.social.notes if n.status == "planned"]
        news[cid] = [
            {
                "text": n.text,
                "from": n.source.name,
                "origin": n.origin.name,
                "at": n.learned_at.isoformat(),
                "episode_id": n.episode_id,
            }
            for n in fresh_news(state.social.news, now)
        ]
    return {
        "together": list(together.values()),
        "relations": relations,
        "appointments": appointments,
        "notes": notes,
        "news": news,
    }


def social_lines(view: Mapping[str, Any], names: Mapping[str, str], tz: tzinfo) -> list[str]:
    """The panel's lines for `social_view`: who is together now, then each one's relations."""

    def name(cid: str) -> str:
        return names.get(cid, cid)

    lines = []
    for meeting in view["together"]:
        who = "和".join(name(c) for c in meeting["with"])
        until = datetime.fromisoformat(meeting["until"]).astimezone(tz)
        lines.append(f"  在一起：{who}在{meeting['place']}{meeting['doing']}（到 {until:%H:%M}）")
    for cid, relations in view["relations"].items():
        if relations:
            lines.append(
                f"  {name(cid)} → "
                + "，".join(
                    f"{r['name']}{'（聊天）' if r['kind'] == 'person' else ''} {r['band']}"
                    f"（{r['closeness']:.0f}）"
                    for r in relations[:6]
                )
            )
        for line in view["appointments"].get(cid, []):
            lines.append(f"    约定：{line}")
        for line in view.get("notes", {}).get(cid, []):
            lines.append(f"    记着：{line}")
    return lines
