"""The rules of a step as pure transitions: working copies in, a `Commit` out, no I/O.

`start` (a solo action), `meet` (a joint action: one transaction on both), `complete` (a running
action ends, or is cut short by a meeting) and `settle_appointments` (promises kept or missed) are
module functions of the snapshot (or the working copies read from it), the decision and an `Env`
holding the world's rules (town, catalogue, randomness, neighbours). `BehaviorLoop` (world/behavior.py)
reads, decides and hands these to `StateStore.transact`, which may run one again on fresh values;
they are unit-testable with plain values, without Redis. Solo and joint starts share `begin`: one
place builds the running record, the running episode and the event.

An action's own code runs here (its precondition, executor and completion): when it raises, the
transition raises `ActionCrashed` and nothing is written.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from yuiju.memory import event_data as ev
from yuiju.memory.episode_data import BehaviorData, PlanData
from yuiju.memory.episodes import Episode, episode_id
from yuiju.world import relations
from yuiju.world.action import Action, ActionContext
from yuiju.world.conversation import Conversation, Speaker, TalkRequest, TemplateTalker
from yuiju.world.evolutions import Event
from yuiju.world.loader import Catalogue
from yuiju.world.plans import PlanError, apply_plan_changes
from yuiju.world.policy import Decision
from yuiju.world.randomness import UNSEEDED, Randomness
from yuiju.world.relations import (
    CLOSENESS_DELTAS,
    EARLY_MINUTES,
    Appointment,
    Note,
    Relation,
    settle_notes,
)
from yuiju.world.social import (
    MeetingPlan,
    Neighbours,
    WithPartner,
    apply_meeting,
    company_of,
    conversation_episode,
    conversation_episode_id,
    meeting_id,
    plan_meeting,
    proposal_of,
)
from yuiju.world.state import CharacterState, RunningAction, ShareIntent, WorldState
from yuiju.world.store import Commit, Snapshot
from yuiju.world.town import Town

log = logging.getLogger(__name__)


class ActionCrashed(Exception):
    """An action's own executor raised; it is skipped for this decision."""

    def __init__(self, action_id: str) -> None:
        super().__init__(action_id)
        self.action_id = action_id


def outbox_entry(collection: str, doc: dict[str, Any]) -> dict[str, Any]:
    return {"collection": collection, "doc": doc}


@dataclass(frozen=True, kw_only=True)
class Env:
    """The world's rules a transition reads: everything but the state and the decision."""

    town: Town
    catalogue: Catalogue
    randomness: Randomness = UNSEEDED
    """Her town's randomness (the engine's): every draw of a character derives from it, her id
    and the moment."""
    neighbours: Neighbours | None = None
    """The town's other characters; None: she lives alone."""
    drives: Callable[[str], bool] = field(default=lambda _cid: True)
    """Whether the engine drives a character: a partner driven elsewhere is never interrupted."""
    broken: Callable[[str, str], None] = field(default=lambda _action, _stage: None)
    """Reports an action whose own code raised (`BehaviorLoop` logs it once per action)."""

    def rng(self, character_id: str, *parts: object) -> random.Random:
        return self.randomness.derive(character_id).rng(*parts)

    def ctx(
        self, now: datetime, world: WorldState, character: CharacterState, **kw: Any
    ) -> ActionContext:
        return ActionContext(
            now=now,
            world=world,
            character=character,
            town=self.town,
            rng=kw.pop("rng", None) or self.rng(character.id, now.isoformat()),
            **kw,
        )

    def name(self, character_id: str) -> str:
        """Her display name (the card's) for episodes; her id without neighbours."""
        return self.neighbours.name(character_id) if self.neighbours else character_id


@dataclass
class Completed:
    """A running action completed on a working copy: what to write and what to count."""

    episode: dict[str, Any]
    """Its outbox entry (the completed behavior episode)."""
    event: Event
    record: dict[str, Any]
    """Its timeline record (`LoopStats.timeline`)."""
    world_changed: bool


@dataclass(frozen=True)
class MeetingWords:
    """A meeting as planned when its words were written, and the words (a template's instead
    when what happens has changed by the time it starts)."""

    plan: MeetingPlan
    words: Conversation
    proposal: Appointment | None = None


@dataclass(frozen=True)
class Asked:
    """What a decision off the step returns: the policy's choice, and for a meeting its words."""

    decision: Decision
    talk: MeetingWords | None = None


Started = tuple[datetime | None, str | None, dict[str, Any] | None]
"""A start's end (None: not started), why not (None: she was busy, or it started), and the
timeline record of the partner's pastime a meeting ended."""


def complete(
    world: WorldState,
    character: CharacterState,
    now: datetime,
    *,
    with_effects: bool,
    cut_short: str | None = None,
    env: Env,
) -> Completed:
    """Complete ``character``'s running action on the working copies (hers, the world's).

    Used for her own completion, and for a partner's whose pastime a meeting ends early
    (``cut_short`` says why: the action ends at ``now``, and effects that depend on its
    length see the shorter one). Raises `ActionCrashed` if the action's own code does.
    """
    running = character.running
    assert running is not None
    cid = character.id
    if cut_short is not None and now < running.ends_at:
        running = running.model_copy(update={"ends_at": now})
    action = env.catalogue.actions.get(running.action_id)
    ctx = env.ctx(
        now,
        world,
        character,
        rng=env.rng(cid, running.episode_id, "complete"),
        running=running,
        reason=running.reason,
    )
    ctx.duration_minute = None
    summary = running.start_summary
    if action is None:
        ctx.notes.append(f"（行为 {running.action_id} 已不在行为目录中，按原样结束）")
    else:
        if action.complete is not None and with_effects:
            try:
                summary = action.complete(ctx) or summary
            except Exception as exc:  # the action's own bug: redo without its effects
                raise ActionCrashed(action.id) from exc
        elif action.complete is not None:
            ctx.notes.append("（这件事结束时出了点意外，没有带来变化）")
        if action.moves_to is not None:
            character.location = action.moves_to
    if cut_short is not None:
        ctx.notes.append(cut_short)
    character.running = None
    character.last_action = running.action_id
    character.last_acted_at = now
    character.last_event = "；".join(ctx.notes) or None
    finished = min(now, running.ends_at) if now >= running.ends_at else now
    episode, event, record = _completed_records(
        character, running, action, finished, summary, ctx.notes, env
    )
    return Completed(outbox_entry("episodes", episode.document()), event, record, ctx.world_changed)


def _completed_records(
    character: CharacterState,
    running: RunningAction,
    action: Action | None,
    finished: datetime,
    summary: str,
    notes: list[str],
    env: Env,
) -> tuple[Episode, Event, dict[str, Any]]:
    """A completed action's episode, its event and its timeline record."""
    cid = character.id
    minutes = round((finished - running.started_at).total_seconds() / 60)
    data = BehaviorData(
        action=running.action_id,
        name=running.name,
        place=running.place,
        reason=running.reason,
        decided_by=running.decided_by,
        params=running.params,
        result=summary,
        notes=notes,
        share_intent=running.share_intent.model_dump() if running.share_intent else None,
        shareable=bool(action.share) if action else False,
        stats_before=running.stats_before,
        stats_after=character.stats(),
        duration_minutes=minutes,
    )
    if running.partners:
        joint = {"partners": running.partners, "meeting_id": running.meeting_id}
        data = data.model_copy(update=joint)
    episode = Episode(
        id=running.episode_id,
        character_id=cid,
        type="behavior",
        time=running.started_at,
        end_time=finished,
        status="completed",
        summary=f"{env.name(cid)}{env.town.at_place(running.place, running.name)}，用了{minutes}分钟"
        + (f"：{summary}" if summary else ""),
        data=data.dump(),
    )
    event = Event(
        ev.ActionCompleted(
            episode_id=running.episode_id,
            action=running.action_id,
            name=running.name,
            summary=episode.summary,
            share=bool(
                running.share_intent
                and running.share_intent.should_share
                and action
                and action.share
            ),
        ),
        cid,
    )
    record = {
        "character": cid,
        "id": running.action_id,
        "place": running.place,
        "start": running.started_at.isoformat(),
        "end": finished.isoformat(),
        "reason": running.reason,
        "decided_by": running.decided_by,
        "before": running.stats_before,
        "after": character.stats(),
        **({"with": running.partners, "meeting": running.meeting_id} if running.partners else {}),
    }
    return episode, event, record


def apply_plans(
    character: CharacterState, decision: Decision, now: datetime, eid: str, env: Env
) -> list[dict[str, Any]]:
    """Apply the decision's plan changes to her state; returns plan-episode outbox entries.

    An invalid batch changes nothing: its reason is kept for her next decision.
    """
    character.plan_feedback = None
    if not decision.plan_changes:
        return []
    try:
        character.plans, changes = apply_plan_changes(character.plans, decision.plan_changes, now)
    except PlanError as exc:
        log.info("%s: plan changes rejected: %s", character.id, exc)
        character.plan_feedback = f"上次的计划变更没有生效：{exc}"
        return []
    entries = []
    for n, change in enumerate(changes):
        title = change.nextPlan or change.currentPlan
        verb = {
            "created": "定下了",
            "updated": "调整了",
            "completed": "完成了",
            "abandoned": "放弃了",
        }[change.changeType]
        scope = "长期计划" if change.scope == "longTerm" else "短期计划"
        episode = Episode(
            id=f"pln_{eid[4:]}_{n}",
            character_id=character.id,
            type="plan",
            time=now,
            summary=f"{env.name(character.id)}{verb}{scope}「{title}」"
            + (f"（原来是「{change.currentPlan}」）" if change.changeType == "updated" else ""),
            data=PlanData(
                change=change.model_dump(),
                behavior_episode=eid,
                plans_after=character.plans.lines(),
            ).dump(),
        )
        entries.append(outbox_entry("episodes", episode.document()))
    return entries


Copies = Mapping[str, Sequence[Appointment]]
"""The other sides' appointments, by party key, as the loop read them before the transaction
(`relations.settling_with`: only those whose appointments with her are over)."""


def settle_appointments(
    character: CharacterState, now: datetime, env: Env, others: Copies | None = None
) -> list[dict[str, Any]]:
    """Settle her appointments whose time has passed, kept or missed (`relations.
    settle_appointments`: kept when ``others``, the other side's copy, and hers say both were at
    the place at once in its window); returns a plan episode for each, in the same write as her
    next start."""
    social = character.social
    social.roll_day(now.date())
    out = _visit(character, now, env) + _settle_notes(character, now, env)
    if not any(a.status == "planned" and now > a.end for a in social.appointments):
        return out
    settled = relations.settle_appointments(
        social,
        character_id=character.id,
        name=env.name(character.id),
        now=now,
        town=env.town,
        where=env.town.place_name(character.location),
        others=others,
    )
    return out + [outbox_entry("episodes", e.document()) for e in settled]


def _visit(character: CharacterState, now: datetime, env: Env) -> list[dict[str, Any]]:
    """An appointment with a person (who lives outside the town) is kept by being there in
    time: she went, and the episode says so."""
    social = character.social
    out = []
    for a in social.appointments:
        if (
            a.status == "planned"
            and a.other.kind == "person"
            and a.place == character.location
            and a.start - timedelta(minutes=EARLY_MINUTES) <= now <= a.end
        ):
            kept = a.model_copy(update={"status": "kept", "note": f"{now:%H:%M}到了"})
            social.appointments = [kept if x.id == a.id else x for x in social.appointments]
            relation = social.relations.get(a.other.key) or Relation(party=a.other)
            social.relations = {
                **social.relations,
                a.other.key: relation.moved(now, CLOSENESS_DELTAS["appointment_kept"], met=True),
            }
            episode = Episode(
                id=f"apk_{a.id[4:]}_{character.id}",
                character_id=character.id,
                type="plan",
                time=now,
                summary=f"{env.name(character.id)}赴约：{a.line(env.town, a.start)}，"
                f"{now:%H:%M}到了{env.town.place_name(a.place)}",
                data=PlanData(
                    appointment=kept.model_dump(mode="json"),
                    status="kept",
                    source=a.source,
                    asked_by=a.asked_by.model_dump(),
                    via=a.via,
                ).dump(),
            )
            out.append(outbox_entry("episodes", episode.document()))
    return out


def _settle_notes(character: CharacterState, now: datetime, env: Env) -> list[dict[str, Any]]:
    """Her notes: a promise at a place is done when she is there in time (its episode says
    so) and missed when its hour passes elsewhere (with where she was); any other note is
    past once its day or hour is over."""
    social = character.social
    out = []
    for n in social.notes:
        if n.due(now, lead_minutes=EARLY_MINUTES) and n.place == character.location:
            done = n.model_copy(update={"status": "done", "note": f"{now:%H:%M}到了"})
            social.notes = [done if x.id == n.id else x for x in social.notes]
            out.append(_note_episode(character, done, now, "done", env))
    if any(n.status == "planned" and now >= n.end for n in social.notes):
        where = env.town.place_name(character.location)
        social.notes, missed = settle_notes(social.notes, now, where)
        out += [_note_episode(character, n, now, "missed", env) for n in missed]
    return out


def _note_episode(
    character: CharacterState, n: Note, now: datetime, status: str, env: Env
) -> dict[str, Any]:
    line = n.line(env.town, n.at)
    verb = "做到了" if status == "done" else "没做到"
    episode = Episode(
        id=f"nt{status[0]}_{n.id[5:]}_{character.id}",
        character_id=character.id,
        type="plan",
        time=now,
        summary=f"{env.name(character.id)}{verb}：{line}，{n.note}",
        data=PlanData(
            note=n.model_dump(mode="json"),
            status=status,
            source="chat" if n.by.kind == "person" else "character",
            asked_by=n.by.model_dump(),
            via=n.via,
        ).dump(),
    )
    return outbox_entry("episodes", episode.document())


def plan_talk(
    now: datetime, decision: Decision, view: ActionContext, env: Env
) -> tuple[MeetingPlan, TalkRequest, bool]:
    """The meeting she chose as seen at ``view``, what its words are asked from, and whether the
    model may write them (while today's budget lasts)."""
    action, joint, town = decision.action, decision.action.joint, env.neighbours
    chosen = decision.params
    assert joint is not None and town is not None and isinstance(chosen, WithPartner)
    me = view.character
    seen = next(c for c in view.company if c.id == chosen.partner)
    plan = plan_meeting(
        me,
        seen.state,
        joint=joint,
        place=me.location,
        now=now,
        town=env.town,
        proposal=proposal_of(chosen, view, town.name),
    )
    budget_left = (
        me.social.day != now.date() or me.social.model_talks_today < town.model_talks_per_day
    ) and town.model_talks_per_day > 0
    mid = meeting_id(me.id, chosen.partner, now, action.id)
    request = talk_request(mid, action, me, seen.state, plan, now, env)
    weather = view.world.weather
    if weather is not None:  # what a line may say of the weather (`TalkRequest.weather`)
        request = replace(request, weather=(weather.type, weather.temperature))
    return plan, request, budget_left


def talk_request(
    mid: str,
    action: Action,
    me: CharacterState,
    partner: CharacterState,
    plan: MeetingPlan,
    now: datetime,
    env: Env,
) -> TalkRequest:
    town = env.neighbours
    assert town is not None

    def speaker(who: CharacterState, other: CharacterState) -> Speaker:
        card = town.cards.get(who.id)
        return Speaker(
            id=who.id,
            name=town.name(who.id),
            persona=card.persona if card else "",
            speaking_style=card.speaking_style if card else "",
            closeness=who.social.closeness(
                f"character:{other.id}", now, town.rest(who.id, other.id)
            ),
        )

    assert action.joint is not None
    return TalkRequest(
        meeting_id=mid,
        kind=action.joint.kind,
        activity=action.name,
        place=env.town.place_name(me.location),
        now=now,
        a=speaker(me, partner),
        b=speaker(partner, me),
        news=tuple((t.teller, t.item) for t in plan.told),
        proposal=plan.proposal,
        proposal_place=env.town.place_name(plan.proposal.place) if plan.proposal else "",
        declined=plan.declined,
        kept=plan.kept,
    )


def begin(
    who: CharacterState,
    action: Action,
    *,
    now: datetime,
    ends: datetime,
    eid: str,
    name: str,
    place: str,
    reason: str,
    decided_by: str,
    params: dict[str, Any] | None,
    summary: str,
    minutes: int,
    share: ShareIntent | None,
    before: dict[str, Any],
    extra: dict[str, Any],
    env: Env,
    partners: list[str] | None = None,
    meeting: str | None = None,
) -> tuple[dict[str, Any], Event]:
    """She starts ``action`` (alone, or with ``partners`` in ``meeting``): her running record,
    and the running episode (``extra``: what only this kind of start records) and the event."""
    who.done_today = [*who.done_today, action.id]
    who.running = RunningAction(
        action_id=action.id,
        name=name,
        started_at=now,
        ends_at=ends,
        episode_id=eid,
        place=place,
        reason=reason,
        decided_by=decided_by,
        params=params,
        start_summary=summary,
        share_intent=share,
        stats_before=before,
        partners=partners or [],
        meeting_id=meeting,
    )
    # where she is from now on, for her appointments (a joint action moves nobody)
    moving_to = action.moves_to if partners is None else None
    who.social.note_presence(place, now, ends, env.town, moving_to)
    who.blocked_reason = None
    who.last_acted_at = now
    episode = Episode(
        id=eid,
        character_id=who.id,
        type="behavior",
        time=now,
        end_time=ends,
        status="running",
        summary=env.name(who.id) + env.town.at_place(place, f"开始{name}"),
        data=BehaviorData(
            action=action.id,
            name=name,
            place=place,
            reason=reason,
            decided_by=decided_by,
            params=params,
            result=summary,
            planned_minutes=minutes,
            **extra,
            stats_before=before,
            stats_after_start=who.stats(),
        ).dump(),
    )
    started = ev.ActionStarted(
        episode_id=eid, action=action.id, name=name, reason=reason, ends_at=ends
    )
    if partners:  # a solo start's entry has no "with" at all, as before
        started = started.model_copy(update={"partners": list(partners)})
    event = Event(started, who.id)
    return outbox_entry("episodes", episode.document()), event


def _new_day(who: CharacterState, now: datetime) -> None:
    if who.day != now.date():
        who.day = now.date()
        who.done_today = []


def _run(action: Action, ctx: ActionContext) -> tuple[str, int]:
    """The action's executor and its length; `ActionCrashed` if its own code raises."""
    try:
        return (action.run(ctx) if action.run else None) or "", action.minutes(ctx)
    except Exception as exc:  # the action's own bug: nothing is written, she re-decides
        raise ActionCrashed(action.id) from exc


def start(
    snap: Snapshot,
    decision: Decision,
    env: Env,
    *,
    who: str,
    now: datetime,
    others: Copies | None = None,
) -> tuple[Commit, Started]:
    """``who`` starts a solo action at ``now``: unless she is busy already, or its precondition
    no longer holds on these values (then why not, and nothing is written). ``others``: the
    other sides' copies of her appointments that are over (`settle_appointments`)."""
    action = decision.action
    character = snap.characters[who]
    assert snap.world is not None and character is not None
    if character.running is not None:
        return Commit(), (None, None, None)
    _new_day(character, now)
    missed = settle_appointments(character, now, env, others)
    ctx = env.ctx(
        now,
        snap.world,
        character,
        rng=env.rng(who, now.isoformat(), action.id, "start"),
        params=decision.params,
        duration_minute=decision.duration_minute,
        reason=decision.reason,
    )
    why_not = action.why_not(ctx)
    if why_not is not None:
        # The world changed between the decision and now (or a policy bug): never run it.
        return Commit(), (None, why_not, None)
    before = character.stats()
    summary, minutes = _run(action, ctx)
    eid = episode_id(who, now, action.id)
    plan_docs = apply_plans(character, decision, now, eid, env)
    ends = now + timedelta(minutes=minutes)
    entry, event = begin(
        character,
        action,
        now=now,
        ends=ends,
        eid=eid,
        name=action.name,
        place=character.location if action.moves_to is None else (action.at or character.location),
        reason=decision.reason,
        decided_by=decision.decided_by,
        params=decision.params.model_dump() if decision.params else None,
        summary=summary,
        minutes=minutes,
        share=decision.share_intent,
        before=before,
        extra={
            "plan_changes": decision.plan_changes,
            "share_intent": decision.share_intent.model_dump() if decision.share_intent else None,
        },
        env=env,
    )
    return (
        Commit(
            world=snap.world if ctx.world_changed else None,
            characters={who: character},
            events=[event],
            outbox=[entry, *plan_docs, *missed],
        ),
        (ends, None, None),
    )


def _cut_short(
    world: WorldState, partner: CharacterState, now: datetime, cut: str, env: Env
) -> Completed:
    """Her partner's pastime ends now for the meeting (without its effects if they crash)."""
    try:
        return complete(world, partner, now, with_effects=True, cut_short=cut, env=env)
    except ActionCrashed as exc:
        env.broken(exc.action_id, "completion")
        return complete(world, partner, now, with_effects=False, cut_short=cut, env=env)


def meet(
    snap: Snapshot,
    decision: Decision,
    env: Env,
    *,
    who: str,
    now: datetime,
    talk: MeetingWords,
    mid: str,
    others: Copies | None = None,
) -> tuple[Commit, Started]:
    """``who`` and her partner start a joint action in one write on both: the partner's pastime
    (if any) ends now, both start it, each gets her behavior episode and a conversation episode,
    closeness moves on both sides and news passes on. ``talk``: the meeting as planned when its
    words were written (a template's words instead if it has changed since). ``others``: third
    sides' copies of their appointments that are over (each other's are read here)."""
    action, joint, town = decision.action, decision.action.joint, env.neighbours
    chosen = decision.params
    assert joint is not None and town is not None and isinstance(chosen, WithPartner)
    partner_id = chosen.partner
    me, partner = snap.characters[who], snap.characters[partner_id]
    assert snap.world is not None and me is not None
    if me.running is not None:
        return Commit(), (None, None, None)
    if partner is None:
        return Commit(), (None, f"{town.name(partner_id)}不在了", None)
    pair = {f"character:{c.id}": c.social.appointments for c in (me, partner)}
    copies = {**(others or {}), **pair}  # each other's copies as they are before settling
    moment = _joint_moment(snap.world, me, partner, decision, env, now=now, copies=copies)
    if isinstance(moment, str):  # the world changed since she decided: decide again
        return Commit(), (None, moment, None)
    ctx, missed = moment
    events: list[Event] = []
    outbox: list[dict[str, Any]] = [*missed]
    world_changed = False
    ended_record: dict[str, Any] | None = None
    if partner.running is not None:  # her pastime ends here (or was due to end now)
        cut = f"（{town.name(who)}{joint.invited}，就先停下了）"
        ended = _cut_short(snap.world, partner, now, cut, env)
        outbox.append(ended.episode)
        events.append(ended.event)
        ended_record = ended.record
        world_changed = ended.world_changed
    outbox += settle_appointments(partner, now, env, copies)
    ctx.partner = partner
    before, partner_before = me.stats(), partner.stats()
    summary, minutes = _run(action, ctx)
    fresh, said, conversations = _the_meeting(me, partner, decision, talk, env, now=now, mid=mid)
    eid = episode_id(who, now, action.id)
    peid = episode_id(partner_id, now, action.id)
    plan_docs = apply_plans(me, decision, now, eid, env)
    ends = now + timedelta(minutes=minutes)
    entries, started = _begin_together(
        (me, partner),
        decision,
        env,
        who=who,
        now=now,
        ends=ends,
        mid=mid,
        said=said,
        fresh=fresh,
        run=(summary, minutes),
        stats_before=(before, partner_before),
        ids=(eid, peid),
        conversations=conversations,
    )
    outbox += entries
    events += started
    return (
        Commit(
            world=snap.world if (ctx.world_changed or world_changed) else None,
            characters={who: me, partner_id: partner},
            events=events,
            outbox=[*outbox, *plan_docs],
        ),
        (ends, None, ended_record),
    )


def _begin_together(
    pair: tuple[CharacterState, CharacterState],
    decision: Decision,
    env: Env,
    *,
    who: str,
    now: datetime,
    ends: datetime,
    mid: str,
    said: Conversation,
    fresh: MeetingPlan,
    run: tuple[str, int],
    stats_before: tuple[dict[str, Any], dict[str, Any]],
    ids: tuple[str, str],
    conversations: dict[str, str],
) -> tuple[list[dict[str, Any]], list[Event]]:
    """Both start the joint action: each her running record, behavior and conversation
    episodes, and events."""
    action, joint, town = decision.action, decision.action.joint, env.neighbours
    chosen = decision.params
    assert joint is not None and town is not None and isinstance(chosen, WithPartner)
    me, partner = pair
    summary, minutes = run
    before, partner_before = stats_before
    eid, peid = ids
    place = me.location
    outbox: list[dict[str, Any]] = []
    events: list[Event] = []
    for one, other, ep, reason, decided_by, share, stats in (
        (me, partner, eid, decision.reason, decision.decided_by, decision.share_intent, before),
        (
            partner,
            me,
            peid,
            f"{town.name(who)}{joint.invited}",
            f"with:{who}",
            None,
            partner_before,
        ),
    ):
        entry, event = begin(
            one,
            action,
            now=now,
            ends=ends,
            eid=ep,
            name=f"和{town.name(other.id)}{action.name}",
            place=place,
            reason=reason,
            decided_by=decided_by,
            params={**chosen.model_dump(), "partner": other.id},
            summary=summary,
            minutes=minutes,
            share=share,
            before=stats,
            extra={"partners": [other.id], "meeting_id": mid},
            env=env,
            partners=[other.id],
            meeting=mid,
        )
        talk, said_event = _conversation(
            one,
            other,
            said,
            fresh,
            conversations[one.id],
            place=place,
            who=who,
            now=now,
            ends=ends,
            env=env,
            action=action,
            mid=mid,
        )
        outbox += [entry, talk]
        events += [event, said_event]
    return outbox, events


def _joint_moment(
    world: WorldState,
    me: CharacterState,
    partner: CharacterState,
    decision: Decision,
    env: Env,
    *,
    now: datetime,
    copies: Copies,
) -> tuple[ActionContext, list[dict[str, Any]]] | str:
    """The moment of a joint start on these values, and her settled appointments' episodes
    (``copies``: the other sides'); or why it is no longer possible."""
    action, joint, town = decision.action, decision.action.joint, env.neighbours
    assert joint is not None and town is not None and isinstance(decision.params, WithPartner)
    partner_id = decision.params.partner
    for one in (me, partner):
        _new_day(one, now)
    missed = settle_appointments(me, now, env, copies)
    company = company_of(
        me,
        [partner],
        now=now,
        town=env.town,
        action_of=env.catalogue.actions.get,
        names=town.names,
        may_interrupt=env.drives,
    )
    ctx = env.ctx(
        now,
        world,
        me,
        rng=env.rng(me.id, now.isoformat(), action.id, "start"),
        params=decision.params,
        duration_minute=decision.duration_minute,
        reason=decision.reason,
        company=company,
    )
    why_not = action.why_not(ctx)
    if why_not is None and not any(c.id == partner_id and joint.qualifies(ctx, c) for c in company):
        why_not = f"{town.name(partner_id)}现在没空"
    return (ctx, missed) if why_not is None else why_not


def _conversation(
    one: CharacterState,
    other: CharacterState,
    said: Conversation,
    fresh: MeetingPlan,
    episode: str,
    *,
    place: str,
    who: str,
    now: datetime,
    ends: datetime,
    env: Env,
    action: Action,
    mid: str,
) -> tuple[dict[str, Any], Event]:
    """One side's conversation episode of a meeting, and its event."""
    assert env.neighbours is not None
    words = conversation_episode(
        episode,
        one,
        other,
        said,
        fresh,
        mid=mid,
        now=now,
        ends=ends,
        place=env.town.place_name(place),
        action=action,
        names=env.neighbours.names,
        initiator=who,
        proposal_place=env.town.place_name(fresh.proposal.place) if fresh.proposal else "",
    )
    event = Event(
        ev.Conversation(
            episode_id=words.id,
            meeting_id=mid,
            partners=[other.id],
            summary=words.summary,
            source=said.source,
        ),
        one.id,
    )
    return outbox_entry("episodes", words.document()), event


def _the_meeting(
    me: CharacterState,
    partner: CharacterState,
    decision: Decision,
    talk: MeetingWords,
    env: Env,
    *,
    now: datetime,
    mid: str,
) -> tuple[MeetingPlan, Conversation, dict[str, str]]:
    """What happens at the meeting on these values (closeness, news, a proposal: applied to
    both), what is said, and each side's conversation episode id."""
    action, joint, town = decision.action, decision.action.joint, env.neighbours
    assert joint is not None and town is not None
    fresh = plan_meeting(
        me, partner, joint=joint, place=me.location, now=now, town=env.town, proposal=talk.proposal
    )
    said = talk.words
    if fresh.key() != talk.plan.key():  # what happens changed since the words were written
        said = TemplateTalker().write(talk_request(mid, action, me, partner, fresh, now, env))
    conversations = {
        me.id: conversation_episode_id(mid, me.id),
        partner.id: conversation_episode_id(mid, partner.id),
    }
    apply_meeting(
        me,
        partner,
        fresh,
        joint=joint,
        names=town.names,
        now=now,
        episodes=conversations,
        rest=town.rest,
    )
    if said.source == "model":
        me.social.model_talks_today += 1
    return fresh, said, conversations
