"""The behavior loop of one character: complete what is due, then decide and start the next.

One step, in order (the seed's flow):

    state → candidates (actions whose precondition holds) → policy decides → validate
    → executor (on a fresh snapshot) → state + running-action record + running episode + event
      in one atomic Redis write → (later) completion effects → completed episode + event

Episodes leave through the Redis outbox written in the same transaction, so a crash between
Redis and the history store neither loses nor duplicates one (ids are deterministic).
"""

from __future__ import annotations

import logging
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from yuiju.characters import CharacterCard
from yuiju.llm import CassetteMismatch
from yuiju.memory.episodes import Episode, episode_id
from yuiju.world.action import Action, ActionContext, Companion
from yuiju.world.conversation import Speaker, TalkRequest, TemplateTalker
from yuiju.world.day_record import DayRecord
from yuiju.world.errors import InvalidDecision
from yuiju.world.evolutions import Event
from yuiju.world.loader import Catalogue
from yuiju.world.plans import PlanError, apply_plan_changes
from yuiju.world.policy import Decision, DecisionRequest, Policy, PolicyFailed
from yuiju.world.relations import (
    CLOSENESS_DELTAS,
    EARLY_MINUTES,
    Appointment,
    Note,
    Relation,
    settle_appointments,
    settle_notes,
    settling_with,
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
from yuiju.world.state import CharacterState, RunningAction, WorldState
from yuiju.world.store import Commit, Snapshot, StateStore
from yuiju.world.town import Town

log = logging.getLogger(__name__)

NO_CANDIDATE_RETRY = timedelta(minutes=10)
MAX_CRASHED_PER_DECISION = 5
STALE_RETRY = timedelta(seconds=1)


class ActionCrashed(Exception):
    """An action's own executor raised; it is skipped for this decision."""

    def __init__(self, action_id: str) -> None:
        super().__init__(action_id)
        self.action_id = action_id


PAUSED_RETRY = timedelta(minutes=1)


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


@dataclass
class Completed:
    """A running action completed on a working copy: what to write and what to count."""

    episode: dict[str, Any]
    """Its outbox entry (the completed behavior episode)."""
    event: Event
    record: dict[str, Any]
    """Its timeline record (`LoopStats.timeline`)."""
    world_changed: bool


def outbox_entry(collection: str, doc: dict[str, Any]) -> dict[str, Any]:
    return {"collection": collection, "doc": doc}


_JointStart = tuple[datetime | None, str | None, dict[str, Any] | None]
"""A joint start's end (None: not started), why not, and the record of the partner's pastime it
ended."""

_Completed = tuple[dict[str, Any] | None, WorldState, CharacterState]
"""A completion's timeline record (None: there was nothing to complete) and her state as committed."""


class BehaviorLoop:
    def __init__(
        self,
        *,
        character_id: str,
        store: StateStore,
        catalogue: Catalogue,
        policy: Policy,
        fallback: Policy | None,
        town: Town,
        seed: int,
        initial_state: CharacterState,
        card: CharacterCard | None = None,
        recent: Any = None,
        stats: LoopStats | None = None,
        perf_counter: Any = None,
        neighbours: Neighbours | None = None,
    ) -> None:
        self.character_id = character_id
        self.store = store
        self.catalogue = catalogue
        self.policy = policy
        self.fallback = fallback
        self.town = town
        self.seed = seed
        self.initial_state = initial_state
        self.card = card
        self.recent = recent
        """async (character_id, now) -> `DayRecord`: her day so far, for the prompt."""
        self.stats = stats or LoopStats()
        self._perf = perf_counter or time.perf_counter
        self.lease_token: str | None = None
        self.neighbours = neighbours
        """The town's other characters (names, cards, the conversation writer); None: she lives
        alone and meets nobody."""
        self.drives: Callable[[str], bool] = lambda _cid: True
        """Whether this loop's engine drives a character (the engine sets it): a partner driven
        elsewhere is joined only between two of her steps, never taken out of a pastime."""
        self.engaged: dict[str, datetime] = {}
        """Partners this loop started a meeting with, and when it ends: their engine steps them
        then (`Engine` reads and clears it after each step)."""
        self._reported: set[tuple[str, str]] = set()
        self._clock_behind_reported = False

    # -- helpers ----------------------------------------------------------------------------

    def _rng(self, *parts: object) -> random.Random:
        return self._rng_of(self.character_id, *parts)

    def _rng_of(self, character_id: str, *parts: object) -> random.Random:
        return random.Random("|".join([str(self.seed), character_id, *map(str, parts)]))

    def _ctx(
        self, now: datetime, world: WorldState, character: CharacterState, **kw: Any
    ) -> ActionContext:
        return ActionContext(
            now=now,
            world=world,
            character=character,
            town=self.town,
            rng=kw.pop("rng", self._rng(now.isoformat())),
            **kw,
        )

    def candidates(self, ctx: ActionContext, exclude: frozenset[str] = frozenset()) -> list[Action]:
        """Actions whose precondition holds; one whose precondition raises is skipped and reported."""
        out = []
        for action in self.catalogue:
            if action.id in exclude:
                continue
            try:
                if action.available(ctx):
                    out.append(action)
            except Exception:
                self._report_broken(action.id, "precondition")
        return out

    def _report_broken(self, action_id: str, stage: str) -> None:
        """Log an action's own bug once per action and stage, not on every decision."""
        self.stats.broken_actions[action_id] = stage
        if (action_id, stage) not in self._reported:
            self._reported.add((action_id, stage))
            log.exception(
                "action %r: its %s raised; it is skipped (this is reported once)", action_id, stage
            )

    def _report_clock_behind(self, now: datetime, latest: datetime) -> None:
        """Once per episode of it: an episode earlier than her last one would rewrite her past."""
        if not self._clock_behind_reported:
            self._clock_behind_reported = True
            log.error(
                "%s: world time %s is behind her last action (%s); she waits until then rather than "
                "act in her past (was this engine's clock started behind the saved world time?)",
                self.character_id,
                now.isoformat(timespec="minutes"),
                latest.isoformat(timespec="minutes"),
            )

    def _lease(self) -> tuple[str, str] | None:
        return (self.character_id, self.lease_token) if self.lease_token else None

    # -- one step ---------------------------------------------------------------------------

    async def ensure_character(self) -> CharacterState:
        """Create her state from the card on first run."""
        existing = await self.store.load_character(self.character_id)
        if existing is not None:
            return existing

        def create(snap: Snapshot) -> tuple[Commit, CharacterState]:
            current = snap.characters[self.character_id]
            if current is not None:
                return Commit(), current
            state = self.initial_state.model_copy(deep=True)
            return Commit(
                characters={self.character_id: state},
                events=[Event("character_created", {}, self.character_id)],
            ), state

        return await self.store.transact(create, characters=[self.character_id])

    async def step(self, now: datetime) -> datetime:
        """Advance her by one step at ``now``; returns when she next needs attention."""
        world, character = await self.store.load(self.character_id)
        if character is None:
            character = await self.ensure_character()
        acted = [character.last_acted_at]
        if character.running is not None:
            acted.append(character.running.started_at)
        latest = max((t for t in acted if t is not None), default=None)
        if latest is not None and now < latest:
            self._report_clock_behind(now, latest)
            return latest
        self._clock_behind_reported = False
        if character.running is not None:
            if now < character.running.ends_at:
                return character.running.ends_at
            world, character = await self._complete(now)
        if world is None:
            return now + PAUSED_RETRY  # the world ticker creates it first
        if world.paused:
            return now + PAUSED_RETRY
        return await self._decide_and_start(now, world, character)

    async def _complete(self, now: datetime) -> tuple[WorldState, CharacterState]:
        """Apply the completion effects; returns the state as committed.

        If the action's own completion code raises, nothing is written and the completion is
        redone without its effects (reported once).
        """
        try:
            return await self._complete_once(now, with_effects=True)
        except ActionCrashed as exc:
            self._report_broken(exc.action_id, "completion")
            return await self._complete_once(now, with_effects=False)

    def _completion(
        self,
        world: WorldState,
        character: CharacterState,
        now: datetime,
        *,
        with_effects: bool,
        cut_short: str | None = None,
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
        action = self.catalogue.actions.get(running.action_id)
        ctx = self._ctx(
            now,
            world,
            character,
            rng=self._rng_of(cid, running.episode_id, "complete"),
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
        minutes = round((finished - running.started_at).total_seconds() / 60)
        episode = Episode(
            id=running.episode_id,
            character_id=cid,
            type="behavior",
            time=running.started_at,
            end_time=finished,
            status="completed",
            summary=f"{self._name(character.id)}{self.town.at_place(running.place, running.name)}"
            f"，用了{minutes}分钟" + (f"：{summary}" if summary else ""),
            data={
                "action": running.action_id,
                "name": running.name,
                "place": running.place,
                "reason": running.reason,
                "decided_by": running.decided_by,
                "params": running.params,
                "result": summary,
                "notes": ctx.notes,
                "share_intent": running.share_intent.model_dump() if running.share_intent else None,
                "shareable": bool(action.share) if action else False,
                "stats_before": running.stats_before,
                "stats_after": character.stats(),
                "duration_minutes": minutes,
                **(
                    {"with": running.partners, "meeting_id": running.meeting_id}
                    if running.partners
                    else {}
                ),
            },
        )
        event = Event(
            "action_completed",
            {
                "episode_id": running.episode_id,
                "action": running.action_id,
                "name": running.name,
                "summary": episode.summary,
                "share": bool(
                    running.share_intent
                    and running.share_intent.should_share
                    and action
                    and action.share
                ),
            },
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
            **(
                {"with": running.partners, "meeting": running.meeting_id}
                if running.partners
                else {}
            ),
        }
        return Completed(
            outbox_entry("episodes", episode.document()), event, record, ctx.world_changed
        )

    async def _complete_once(
        self, now: datetime, *, with_effects: bool
    ) -> tuple[WorldState, CharacterState]:
        def complete(snap: Snapshot) -> tuple[Commit, _Completed]:
            character = snap.characters[self.character_id]
            assert snap.world is not None and character is not None
            if character.running is None:
                return Commit(), (None, snap.world, character)  # someone completed it already
            done = self._completion(snap.world, character, now, with_effects=with_effects)
            return (
                Commit(
                    world=snap.world if done.world_changed else None,
                    characters={self.character_id: character},
                    events=[done.event],
                    outbox=[done.episode],
                ),
                (done.record, snap.world, character),
            )

        def completed(result: _Completed) -> None:
            record = result[0]
            if record is not None:
                self._count_completion(record)

        _, world, character = await self.store.transact(
            complete, characters=[self.character_id], lease=self._lease(), now=now, then=completed
        )
        return world, character

    def _count_completion(self, record: dict[str, Any]) -> None:
        self.stats.completions += 1
        if self.stats.keep_timeline:
            self.stats.timeline.append(record)

    async def _choose(self, request: DecisionRequest) -> Decision:
        try:
            return await self.policy.decide(request)
        except CassetteMismatch:
            raise  # a replay that diverged is over: the fallback must not hide it
        except Exception as exc:  # whatever the policy does, she goes on living
            if self.fallback is None:
                raise
            self.stats.fallbacks += 1
            if isinstance(exc, PolicyFailed | InvalidDecision):
                log.warning(
                    "%s: policy %s gave no usable decision (%s); falling back to %s",
                    self.character_id,
                    self.policy.name,
                    exc,
                    self.fallback.name,
                )
            else:
                log.exception(
                    "%s: policy %s crashed; falling back to %s",
                    self.character_id,
                    self.policy.name,
                    self.fallback.name,
                )
            decision = await self.fallback.decide(request)
            return Decision(**{**decision.__dict__, "decided_by": f"fallback:{self.fallback.name}"})

    async def _decide_and_start(
        self, now: datetime, world: WorldState, character: CharacterState
    ) -> datetime:
        exclude: frozenset[str] = frozenset()
        for _ in range(MAX_CRASHED_PER_DECISION):
            try:
                return await self._decide_and_start_once(now, world, character, exclude)
            except ActionCrashed as exc:
                self._report_broken(exc.action_id, "executor")
                exclude = exclude | {exc.action_id}
        return now + NO_CANDIDATE_RETRY

    async def _decide_and_start_once(
        self, now: datetime, world: WorldState, character: CharacterState, exclude: frozenset[str]
    ) -> datetime:
        t0 = self._perf()
        view = self._ctx(now, world, character, company=await self._company(now, character))
        candidates = self.candidates(view, exclude)
        if not candidates:
            self.stats.no_candidates += 1
            self.stats.note_offer(self.character_id, now, candidates, None)
            log.error(
                "%s has no candidate action at %s (location %s); retrying in %s",
                self.character_id,
                now.isoformat(),
                character.location,
                NO_CANDIDATE_RETRY,
            )
            return now + NO_CANDIDATE_RETRY
        record = DayRecord()
        if self.recent and self.policy.wants_recent:
            try:
                record = await self.recent(self.character_id, now)
            except Exception as exc:  # a dead history store must not stop her: decide without it
                log.warning(
                    "%s: recent episodes unavailable (%s); deciding without them",
                    self.character_id,
                    exc,
                )
        request = DecisionRequest(
            ctx=view,
            candidates=candidates,
            today=record.today,
            recent=record.recent,
            card=self.card,
            sociable=self.neighbours is not None and len(self.neighbours.characters) > 1,
        )
        engine_ms = (self._perf() - t0) * 1000
        decision = await self._choose(request)
        t1 = self._perf()
        self.stats.decisions += 1
        self.stats.note_offer(self.character_id, now, candidates, decision)
        if decision.action not in candidates:
            # A policy that bypassed validation: never run a non-candidate (counted for the report).
            self.stats.non_candidate_refused += 1
            log.error(
                "%s: policy %s chose %r, which was not a candidate; refused",
                self.character_id,
                decision.decided_by,
                decision.action.id,
            )
            return now + NO_CANDIDATE_RETRY
        if decision.action.joint is not None:
            started = await self._start_joint(now, decision, view)
        else:
            started = await self._start(now, decision, await self._copies(character, now=now))
        engine_ms += (self._perf() - t1) * 1000
        self.stats.add_overhead(engine_ms)
        return started

    async def _company(self, now: datetime, character: CharacterState) -> tuple[Companion, ...]:
        """Who else is at her place now (`world.social.company_of`); nobody at home, and no
        read at all in a town of one."""
        town = self.neighbours
        if town is None or len(town.characters) < 2 or character.asleep:
            return ()
        place = self.town.places.get(character.location)
        if place is not None and place.private:
            return ()
        others = await self.store.peek_characters(town.others(self.character_id))
        return company_of(
            character,
            [o for o in others.values() if o is not None],
            now=now,
            town=self.town,
            action_of=self.catalogue.actions.get,
            names=town.names,
            may_interrupt=self.drives,
        )

    def _apply_plans(
        self, character: CharacterState, decision: Decision, now: datetime, eid: str
    ) -> list[dict[str, Any]]:
        """Apply the decision's plan changes to her state; returns plan-episode outbox entries.

        An invalid batch changes nothing: its reason is kept for her next decision.
        """
        character.plan_feedback = None
        if not decision.plan_changes:
            return []
        try:
            character.plans, changes = apply_plan_changes(
                character.plans, decision.plan_changes, now
            )
        except PlanError as exc:
            log.info("%s: plan changes rejected: %s", self.character_id, exc)
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
                character_id=self.character_id,
                type="plan",
                time=now,
                summary=f"{self._name(character.id)}{verb}{scope}「{title}」"
                + (f"（原来是「{change.currentPlan}」）" if change.changeType == "updated" else ""),
                data={
                    "change": change.model_dump(),
                    "behavior_episode": eid,
                    "plans_after": character.plans.lines(),
                },
            )
            entries.append(outbox_entry("episodes", episode.document()))
        return entries

    async def _start(
        self,
        now: datetime,
        decision: Decision,
        others: dict[str, list[Appointment]] | None = None,
    ) -> datetime:
        action = decision.action

        def start(snap: Snapshot) -> tuple[Commit, tuple[datetime | None, str | None]]:
            """Returns when the action ends (None: not started) and, if it was no longer possible,
            why not (said once, after the transaction)."""
            character = snap.characters[self.character_id]
            assert snap.world is not None and character is not None
            if character.running is not None:
                return Commit(), (None, None)
            if character.day != now.date():
                character.day = now.date()
                character.done_today = []
            missed = self._settle_appointments(character, now, others)
            ctx = self._ctx(
                now,
                snap.world,
                character,
                rng=self._rng(now.isoformat(), action.id, "start"),
                params=decision.params,
                duration_minute=decision.duration_minute,
                reason=decision.reason,
            )
            why_not = action.why_not(ctx)
            if why_not is not None:
                # The world changed between the decision and now (or a policy bug): never run it.
                return Commit(), (None, why_not)
            before = character.stats()
            try:
                summary = (action.run(ctx) if action.run else None) or ""
                minutes = action.minutes(ctx)
            except Exception as exc:  # the action's own bug: nothing is written, she re-decides
                raise ActionCrashed(action.id) from exc
            eid = episode_id(self.character_id, now, action.id)
            plan_docs = self._apply_plans(character, decision, now, eid)
            ends = now + timedelta(minutes=minutes)
            character.done_today = [*character.done_today, action.id]
            character.running = RunningAction(
                action_id=action.id,
                name=action.name,
                started_at=now,
                ends_at=ends,
                episode_id=eid,
                place=character.location
                if action.moves_to is None
                else (action.at or character.location),
                reason=decision.reason,
                decided_by=decision.decided_by,
                params=decision.params.model_dump() if decision.params else None,
                start_summary=summary,
                share_intent=decision.share_intent,
                stats_before=before,
            )
            character.social.note_presence(
                character.running.place, now, ends, self.town, action.moves_to
            )
            character.blocked_reason = None
            character.last_acted_at = now
            episode = Episode(
                id=eid,
                character_id=self.character_id,
                type="behavior",
                time=now,
                end_time=ends,
                status="running",
                summary=self._name(character.id)
                + self.town.at_place(character.running.place, f"开始{action.name}"),
                data={
                    "action": action.id,
                    "name": action.name,
                    "place": character.running.place,
                    "reason": decision.reason,
                    "decided_by": decision.decided_by,
                    "params": character.running.params,
                    "result": summary,
                    "planned_minutes": minutes,
                    "plan_changes": decision.plan_changes,
                    "share_intent": decision.share_intent.model_dump()
                    if decision.share_intent
                    else None,
                    "stats_before": before,
                    "stats_after_start": character.stats(),
                },
            )
            event = Event(
                "action_started",
                {
                    "episode_id": eid,
                    "action": action.id,
                    "name": action.name,
                    "reason": decision.reason,
                    "ends_at": ends.isoformat(),
                },
                self.character_id,
            )
            return (
                Commit(
                    world=snap.world if ctx.world_changed else None,
                    characters={self.character_id: character},
                    events=[event],
                    outbox=[outbox_entry("episodes", episode.document()), *plan_docs, *missed],
                ),
                (ends, None),
            )

        def started(result: tuple[datetime | None, str | None]) -> None:
            ends = result[0]
            if ends is not None:
                log.info(
                    "%s %s 开始「%s」到 %s（%s：%s）",
                    now.strftime("%m-%d %H:%M"),
                    self.character_id,
                    action.name,
                    ends.strftime("%H:%M"),
                    decision.decided_by,
                    decision.reason,
                )

        ends, stale = await self.store.transact(
            start, characters=[self.character_id], lease=self._lease(), now=now, then=started
        )
        if ends is None:
            if stale is not None:
                log.warning(
                    "%s: %s is no longer possible (%s); deciding again",
                    self.character_id,
                    action.id,
                    stale,
                )
            self.stats.stale_starts += stale is not None
            # decide again almost at once; the small step keeps a simulated clock moving even if a
            # precondition were inconsistent between the decision and the start
            return now + STALE_RETRY
        return ends

    # -- meetings ---------------------------------------------------------------------------

    def _settle_appointments(
        self,
        character: CharacterState,
        now: datetime,
        others: dict[str, list[Appointment]] | None = None,
    ) -> list[dict[str, Any]]:
        """Settle her appointments whose time has passed, kept or missed (`relations.
        settle_appointments`, with ``others``: the other side's copies); returns a plan episode
        for each, in the same write as her next start."""
        social = character.social
        social.roll_day(now.date())
        out = self._visit(character, now) + self._settle_notes(character, now)
        if not any(a.status == "planned" and now > a.end for a in social.appointments):
            return out
        settled = settle_appointments(
            social,
            character_id=character.id,
            name=self._name(character.id),
            now=now,
            town=self.town,
            where=self.town.place_name(character.location),
            others=others,
        )
        return out + [outbox_entry("episodes", e.document()) for e in settled]

    async def _copies(self, *who: CharacterState, now: datetime) -> dict[str, list[Appointment]]:
        """The appointments of those whose appointments with ``who`` are over now, as read from
        them (`relations.settle_over`: were both there?); no read when none is."""
        ids = sorted({c for w in who for c in settling_with(w.social.appointments, now)})
        found = await self.store.peek_characters(ids) if ids else {}
        return {f"character:{c}": s.social.appointments for c, s in found.items() if s}

    def _visit(self, character: CharacterState, now: datetime) -> list[dict[str, Any]]:
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
                    a.other.key: relation.moved(
                        now, CLOSENESS_DELTAS["appointment_kept"], met=True
                    ),
                }
                episode = Episode(
                    id=f"apk_{a.id[4:]}_{character.id}",
                    character_id=character.id,
                    type="plan",
                    time=now,
                    summary=f"{self._name(character.id)}赴约：{a.line(self.town, a.start)}，"
                    f"{now:%H:%M}到了{self.town.place_name(a.place)}",
                    data={
                        "appointment": kept.model_dump(mode="json"),
                        "status": "kept",
                        "source": a.source,
                        "asked_by": a.asked_by.model_dump(),
                        "via": a.via,
                    },
                )
                out.append(outbox_entry("episodes", episode.document()))
        return out

    def _settle_notes(self, character: CharacterState, now: datetime) -> list[dict[str, Any]]:
        """Her notes: a promise at a place is done when she is there in time (its episode says
        so) and missed when its hour passes elsewhere (with where she was); any other note is
        past once its day or hour is over."""
        social = character.social
        out = []
        for n in social.notes:
            if n.due(now, lead_minutes=EARLY_MINUTES) and n.place == character.location:
                done = n.model_copy(update={"status": "done", "note": f"{now:%H:%M}到了"})
                social.notes = [done if x.id == n.id else x for x in social.notes]
                out.append(self._note_episode(character, done, now, "done"))
        if any(n.status == "planned" and now >= n.end for n in social.notes):
            where = self.town.place_name(character.location)
            social.notes, missed = settle_notes(social.notes, now, where)
            out += [self._note_episode(character, n, now, "missed") for n in missed]
        return out

    def _note_episode(
        self, character: CharacterState, n: Note, now: datetime, status: str
    ) -> dict[str, Any]:
        line = n.line(self.town, n.at)
        verb = "做到了" if status == "done" else "没做到"
        episode = Episode(
            id=f"nt{status[0]}_{n.id[5:]}_{character.id}",
            character_id=character.id,
            type="plan",
            time=now,
            summary=f"{self._name(character.id)}{verb}：{line}，{n.note}",
            data={
                "note": n.model_dump(mode="json"),
                "status": status,
                "source": "chat" if n.by.kind == "person" else "character",
                "asked_by": n.by.model_dump(),
                "via": n.via,
            },
        )
        return outbox_entry("episodes", episode.document())

    def _name(self, character_id: str) -> str:
        """Her display name (the card's) for episodes; her id without neighbours."""
        return self.neighbours.name(character_id) if self.neighbours else character_id

    def _talk_request(
        self,
        mid: str,
        action: Action,
        me: CharacterState,
        partner: CharacterState,
        plan: MeetingPlan,
        now: datetime,
    ) -> TalkRequest:
        town = self.neighbours
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
            place=self.town.place_name(me.location),
            now=now,
            a=speaker(me, partner),
            b=speaker(partner, me),
            news=tuple((t.teller, t.item) for t in plan.told),
            proposal=plan.proposal,
            proposal_place=self.town.place_name(plan.proposal.place) if plan.proposal else "",
            declined=plan.declined,
            kept=plan.kept,
        )

    async def _start_joint(
        self, now: datetime, decision: Decision, view: ActionContext
    ) -> datetime:
        """Start a joint action for her and her partner in one write on both: the partner's
        pastime (if any) ends now, both start it, each gets her behavior episode and a
        conversation episode, closeness moves on both sides and news passes on."""
        action, joint, town = decision.action, decision.action.joint, self.neighbours
        chosen = decision.params
        assert joint is not None and town is not None and isinstance(chosen, WithPartner)
        partner_id = chosen.partner
        seen = next(c for c in view.company if c.id == partner_id)
        proposal = proposal_of(chosen, view, town.name)
        others = await self._copies(view.character, seen.state, now=now)
        mid = meeting_id(self.character_id, partner_id, now, action.id)
        plan = plan_meeting(
            view.character,
            seen.state,
            joint=joint,
            place=view.character.location,
            now=now,
            town=self.town,
            proposal=proposal,
        )
        budget_left = (
            view.character.social.day != now.date()
            or view.character.social.model_talks_today < town.model_talks_per_day
        ) and town.model_talks_per_day > 0
        request = self._talk_request(mid, action, view.character, seen.state, plan, now)
        words = await town.talker.converse(request, use_model=budget_left)

        def start(snap: Snapshot) -> tuple[Commit, _JointStart]:
            """Returns when it ends (None: not started), why not if it was no longer possible,
            and the timeline record of the partner's pastime it ended."""
            me, partner = snap.characters[self.character_id], snap.characters[partner_id]
            assert snap.world is not None and me is not None
            if me.running is not None:
                return Commit(), (None, None, None)
            if partner is None:
                return Commit(), (None, f"{town.name(partner_id)}不在了", None)
            for who in (me, partner):
                if who.day != now.date():
                    who.day = now.date()
                    who.done_today = []
            copies = {**others, f"character:{me.id}": me.social.appointments}
            copies[f"character:{partner.id}"] = partner.social.appointments
            missed = self._settle_appointments(me, now, copies)
            company = company_of(
                me,
                [partner],
                now=now,
                town=self.town,
                action_of=self.catalogue.actions.get,
                names=town.names,
                may_interrupt=self.drives,
            )
            ctx = self._ctx(
                now,
                snap.world,
                me,
                rng=self._rng(now.isoformat(), action.id, "start"),
                params=decision.params,
                duration_minute=decision.duration_minute,
                reason=decision.reason,
                company=company,
            )
            why_not = action.why_not(ctx)
            if why_not is None and not any(
                c.id == partner_id and joint.qualifies(ctx, c) for c in company
            ):
                why_not = f"{town.name(partner_id)}现在没空"
            if why_not is not None:  # the world changed since she decided: decide again
                return Commit(), (None, why_not, None)
            events: list[Event] = []
            outbox: list[dict[str, Any]] = [*missed]
            world_changed = False
            ended_record: dict[str, Any] | None = None
            if partner.running is not None:  # her pastime ends here (or was due to end now)
                cut = f"（{town.name(self.character_id)}{joint.invited}，就先停下了）"
                try:
                    ended = self._completion(
                        snap.world, partner, now, with_effects=True, cut_short=cut
                    )
                except ActionCrashed as exc:
                    self._report_broken(exc.action_id, "completion")
                    ended = self._completion(
                        snap.world, partner, now, with_effects=False, cut_short=cut
                    )
                outbox.append(ended.episode)
                events.append(ended.event)
                ended_record = ended.record
                world_changed = ended.world_changed
            outbox += self._settle_appointments(partner, now, copies)
            ctx.partner = partner
            before, partner_before = me.stats(), partner.stats()
            try:
                summary = (action.run(ctx) if action.run else None) or ""
                minutes = action.minutes(ctx)
            except Exception as exc:  # the action's own bug: nothing is written, she re-decides
                raise ActionCrashed(action.id) from exc
            fresh = plan_meeting(
                me,
                partner,
                joint=joint,
                place=me.location,
                now=now,
                town=self.town,
                proposal=proposal,
            )
            said = words
            if fresh.key() != plan.key():  # what happens changed since the words were written
                said = TemplateTalker().write(
                    self._talk_request(mid, action, me, partner, fresh, now)
                )
            eid = episode_id(self.character_id, now, action.id)
            peid = episode_id(partner_id, now, action.id)
            conversations = {
                self.character_id: conversation_episode_id(mid, self.character_id),
                partner_id: conversation_episode_id(mid, partner_id),
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
            plan_docs = self._apply_plans(me, decision, now, eid)
            ends = now + timedelta(minutes=minutes)
            place = me.location
            for who, other, ep, reason, decided_by, share in (
                (me, partner, eid, decision.reason, decision.decided_by, decision.share_intent),
                (
                    partner,
                    me,
                    peid,
                    f"{town.name(self.character_id)}{joint.invited}",
                    f"with:{self.character_id}",
                    None,
                ),
            ):
                params = {**chosen.model_dump(), "partner": other.id}
                who.done_today = [*who.done_today, action.id]
                who.running = RunningAction(
                    action_id=action.id,
                    name=f"和{town.name(other.id)}{action.name}",
                    started_at=now,
                    ends_at=ends,
                    episode_id=ep,
                    place=place,
                    reason=reason,
                    decided_by=decided_by,
                    params=params,
                    start_summary=summary,
                    share_intent=share,
                    stats_before=before if who is me else partner_before,
                    partners=[other.id],
                    meeting_id=mid,
                )
                who.social.note_presence(place, now, ends, self.town, None)
                who.blocked_reason = None
                who.last_acted_at = now
                episode = Episode(
                    id=ep,
                    character_id=who.id,
                    type="behavior",
                    time=now,
                    end_time=ends,
                    status="running",
                    summary=self._name(who.id)
                    + self.town.at_place(place, f"开始{who.running.name}"),
                    data={
                        "action": action.id,
                        "name": who.running.name,
                        "place": place,
                        "reason": reason,
                        "decided_by": decided_by,
                        "params": params,
                        "result": summary,
                        "planned_minutes": minutes,
                        "with": [other.id],
                        "meeting_id": mid,
                        "stats_before": who.running.stats_before,
                        "stats_after_start": who.stats(),
                    },
                )
                talk = conversation_episode(
                    conversations[who.id],
                    who,
                    other,
                    said,
                    fresh,
                    mid=mid,
                    now=now,
                    ends=ends,
                    place=self.town.place_name(place),
                    action=action,
                    names=town.names,
                    initiator=self.character_id,
                    proposal_place=self.town.place_name(fresh.proposal.place)
                    if fresh.proposal
                    else "",
                )
                outbox += [
                    outbox_entry("episodes", episode.document()),
                    outbox_entry("episodes", talk.document()),
                ]
                events += [
                    Event(
                        "action_started",
                        {
                            "episode_id": ep,
                            "action": action.id,
                            "name": who.running.name,
                            "reason": reason,
                            "ends_at": ends.isoformat(),
                            "with": [other.id],
                        },
                        who.id,
                    ),
                    Event(
                        "conversation",
                        {
                            "episode_id": talk.id,
                            "meeting_id": mid,
                            "with": [other.id],
                            "summary": talk.summary,
                            "source": said.source,
                        },
                        who.id,
                    ),
                ]
            return (
                Commit(
                    world=snap.world if (ctx.world_changed or world_changed) else None,
                    characters={self.character_id: me, partner_id: partner},
                    events=events,
                    outbox=[*outbox, *plan_docs],
                ),
                (ends, None, ended_record),
            )

        def started(result: _JointStart) -> None:
            ends, _, ended_record = result
            if ends is None:
                return
            if ended_record is not None:
                self._count_completion(ended_record)
            self.engaged[partner_id] = ends
            log.info(
                "%s %s 和 %s 开始「%s」到 %s（%s：%s）",
                now.strftime("%m-%d %H:%M"),
                self.character_id,
                partner_id,
                action.name,
                ends.strftime("%H:%M"),
                decision.decided_by,
                decision.reason,
            )

        ends, stale, _ = await self.store.transact(
            start,
            characters=[self.character_id, partner_id],
            lease=self._lease(),
            now=now,
            then=started,
        )
        if ends is None:
            if stale is not None:
                log.info(
                    "%s: %s with %s is no longer possible (%s); deciding again",
                    self.character_id,
                    action.id,
                    partner_id,
                    stale,
                )
            self.stats.stale_starts += stale is not None
            return now + STALE_RETRY
        return ends
