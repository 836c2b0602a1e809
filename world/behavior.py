"""The behavior loop of one character: read, decide, transact.

One step, in order (the seed's flow):

    state → candidates (actions whose precondition holds) → policy decides → validate
    → executor (on a fresh snapshot) → state + running-action record + running episode + event
      in one atomic Redis write → (later) completion effects → completed episode + event

The rules themselves (`start`, `meet`, `complete`, `settle_appointments`) are the pure transitions
of world/transitions.py; the loop reads, decides (or starts a decision off the step and collects
it at a later step: world/decisions.py) and hands a transition to `StateStore.transact`.

Episodes leave through the Redis outbox written in the same transaction, so a crash between
Redis and the history store neither loses nor duplicates one (ids are deterministic).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from yuiju.characters import CharacterCard
from yuiju.llm import CassetteMismatch
from yuiju.memory.event_data import CharacterCreated
from yuiju.world.action import Action, ActionContext, Companion
from yuiju.world.day_record import DayRecord
from yuiju.world.decisions import DecisionPool
from yuiju.world.errors import InvalidDecision
from yuiju.world.evolutions import Event
from yuiju.world.loader import Catalogue
from yuiju.world.policy import Decision, DecisionRequest, Policy, PolicyFailed, revalidate
from yuiju.world.relations import Appointment, settling_with
from yuiju.world.social import (
    Neighbours,
    WithPartner,
    company_of,
    meeting_id,
    proposal_of,
)
from yuiju.world.state import CharacterState, WorldState
from yuiju.world.stats import OVERHEAD_SAMPLES as OVERHEAD_SAMPLES
from yuiju.world.stats import LoopStats as LoopStats
from yuiju.world.steps import StepInputs as StepInputs
from yuiju.world.steps import StepResult as StepResult
from yuiju.world.steps import Turn
from yuiju.world.store import Commit, Snapshot, StateStore
from yuiju.world.town import Town
from yuiju.world.transitions import (
    ActionCrashed,
    Asked,
    Env,
    MeetingWords,
    Started,
    complete,
    meet,
    plan_talk,
    start,
)
from yuiju.world.transitions import outbox_entry as outbox_entry

log = logging.getLogger(__name__)

NO_CANDIDATE_RETRY = timedelta(minutes=10)
MAX_CRASHED_PER_DECISION = 5
STALE_RETRY = timedelta(seconds=1)
PAUSED_RETRY = timedelta(minutes=1)


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
        self.initial_state = initial_state
        self.card = card
        self.recent = recent
        """async (character_id, now) -> `DayRecord`: her day so far, for the prompt."""
        self.stats = stats or LoopStats()
        self._perf = perf_counter or time.perf_counter
        self.neighbours = neighbours
        """The town's other characters (names, cards, the conversation writer); None: she lives
        alone and meets nobody."""
        self._reported: set[tuple[str, str]] = set()
        self._clock_behind_reported = False
        self.env = Env(
            town=town,
            catalogue=catalogue,
            neighbours=neighbours,
            broken=self._report_broken,
        )
        """The rules her transitions read (world/transitions.py); a step reads them with the
        engine's `StepInputs.drives` and `StepInputs.randomness`."""

    # -- helpers ----------------------------------------------------------------------------

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
            created = Event(CharacterCreated(), self.character_id)
            return Commit(characters={self.character_id: state}, events=[created]), state

        return await self.store.transact(create, characters=[self.character_id])

    async def step(self, now: datetime, inputs: StepInputs | None = None) -> StepResult:
        """Advance her by one step at ``now``: when she next needs attention, and whom the step
        took along.

        With `StepInputs.decisions` (the engine's pool) a policy that is not instant decides off
        the step (`world.decisions`): the step starts her decision and returns its deadline, and
        a later step applies the answer. Without it the step waits for the policy (simulate,
        tests)."""
        turn = Turn.of(inputs or StepInputs(), self.env, self.character_id)
        return StepResult(await self._step(now, turn), turn.engaged)

    async def _step(self, now: datetime, turn: Turn) -> datetime:
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
                if turn.decisions is not None:  # someone took her along meanwhile: moot
                    turn.decisions.drop(self.character_id)
                return character.running.ends_at
            world, character = await self._complete(now, turn)
        if world is None or world.paused:  # a world not created yet: the ticker creates it first
            return now + PAUSED_RETRY
        return await self._decide(now, world, character, turn)

    async def _complete(self, now: datetime, turn: Turn) -> tuple[WorldState, CharacterState]:
        """Apply the completion effects; returns the state as committed.

        If the action's own completion code raises, nothing is written and the completion is
        redone without its effects (reported once).
        """
        try:
            return await self._complete_once(now, turn, with_effects=True)
        except ActionCrashed as exc:
            self._report_broken(exc.action_id, "completion")
            return await self._complete_once(now, turn, with_effects=False)

    async def _complete_once(
        self, now: datetime, turn: Turn, *, with_effects: bool
    ) -> tuple[WorldState, CharacterState]:
        def apply(snap: Snapshot) -> tuple[Commit, _Completed]:
            character = snap.characters[self.character_id]
            assert snap.world is not None and character is not None
            if character.running is None:
                return Commit(), (None, snap.world, character)  # someone completed it already
            done = complete(snap.world, character, now, with_effects=with_effects, env=turn.env)
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
            apply, characters=[self.character_id], lease=turn.lease, now=now, then=completed
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

    async def _decide(
        self, now: datetime, world: WorldState, character: CharacterState, turn: Turn
    ) -> datetime:
        """Decide and start, leaving out an action whose executor raised and deciding again.
        With the engine's decisions in flight, a policy that is not instant decides off the step
        (`_off_step_once`); else the step waits for it."""
        exclude: frozenset[str] = frozenset()
        pool = turn.decisions if not self.policy.instant else None
        for _ in range(MAX_CRASHED_PER_DECISION):
            try:
                if pool is not None:
                    return await self._off_step_once(now, world, character, pool, exclude, turn)
                return await self._decide_and_start_once(now, world, character, exclude, turn)
            except ActionCrashed as exc:
                self._report_broken(exc.action_id, "executor")
                exclude = exclude | {exc.action_id}
        return now + NO_CANDIDATE_RETRY

    async def _decide_and_start_once(
        self,
        now: datetime,
        world: WorldState,
        character: CharacterState,
        exclude: frozenset[str],
        turn: Turn,
    ) -> datetime:
        t0 = self._perf()
        view, candidates = await self._moment(now, world, character, exclude, turn)
        if not candidates:
            return self._no_candidates(now, character)
        request = await self._request(view, candidates, self.policy, turn)
        engine_ms = (self._perf() - t0) * 1000
        decision = await self._choose(request)
        return await self._carry_out(now, decision, view, candidates, engine_ms, turn)

    async def _moment(
        self,
        now: datetime,
        world: WorldState,
        character: CharacterState,
        exclude: frozenset[str],
        turn: Turn,
    ) -> tuple[ActionContext, list[Action]]:
        """The moment as she sees it, and the actions possible in it."""
        company = await self._company(now, character, turn)
        view = turn.env.ctx(now, world, character, company=company)
        return view, self.candidates(view, exclude)

    def _no_candidates(self, now: datetime, character: CharacterState) -> datetime:
        self.stats.no_candidates += 1
        self.stats.note_offer(self.character_id, now, [], None)
        log.error(
            "%s has no candidate action at %s (location %s); retrying in %s",
            self.character_id,
            now.isoformat(),
            character.location,
            NO_CANDIDATE_RETRY,
        )
        return now + NO_CANDIDATE_RETRY

    async def _request(
        self, view: ActionContext, candidates: list[Action], policy: Policy, turn: Turn
    ) -> DecisionRequest:
        now, record = view.now, DayRecord()
        if self.recent and policy.wants_recent:
            try:
                record = await self.recent(self.character_id, now)
            except Exception as exc:  # a dead history store must not stop her: decide without it
                log.warning(
                    "%s: recent episodes unavailable (%s); deciding without them",
                    self.character_id,
                    exc,
                )
        return DecisionRequest(
            ctx=view,
            candidates=candidates,
            today=record.today,
            recent=record.recent,
            card=self.card,
            sociable=self.neighbours is not None and len(self.neighbours.characters) > 1,
            randomness=turn.env.randomness,
        )

    async def _carry_out(
        self,
        now: datetime,
        decision: Decision,
        view: ActionContext,
        candidates: list[Action],
        engine_ms: float,
        turn: Turn,
        talk: MeetingWords | None = None,
    ) -> datetime:
        """Start what was decided (solo or joint); count it and its engine time."""
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
            started = await self._start_joint(now, decision, view, turn, talk)
        else:
            others = await self._copies(view.character, now=now)
            started = await self._start(now, decision, turn, others)
        engine_ms += (self._perf() - t1) * 1000
        self.stats.add_overhead(engine_ms)
        return started

    # -- decisions in flight (world/decisions.py) ---------------------------------------------

    async def _off_step_once(
        self,
        now: datetime,
        world: WorldState,
        character: CharacterState,
        pool: DecisionPool[Asked],
        exclude: frozenset[str],
        turn: Turn,
    ) -> datetime:
        """Her decision as an operation off the step: start it, look again at its deadline, or
        apply its answer if it still holds now (else ask again); past the deadline, or while the
        model is away, the offline policy decides."""
        cid, speed = self.character_id, turn.speed
        flight = pool.get(cid)
        overdue = False
        if flight is not None and not flight.done():
            if not pool.overdue(flight, now):
                return pool.due(flight, now, speed)
            pool.give_up(cid)
            flight, overdue = None, True
        t0 = self._perf()
        view, candidates = await self._moment(now, world, character, exclude, turn)
        if flight is not None:
            pool.take(cid)
            asked = flight.task.result()  # the policy's own errors fell back inside it
            if character.last_acted_at is not None and flight.asked_at < character.last_acted_at:
                why: str | None = "她在这之后已经做了别的事"
            else:
                decision, why = revalidate(asked.decision, view, candidates)
            if why is None:
                engine_ms = (self._perf() - t0) * 1000
                return await self._carry_out(
                    now, decision, view, candidates, engine_ms, turn, asked.talk
                )
            pool.figures.stale += 1
            self.stats.stale_starts += 1
            # she is asked again with the reason (her prompt shows it; nothing is written)
            said = f"（刚才想「{asked.decision.action.name}」，但现在不行了：{why}）"
            view.character.last_event = "；".join(filter(None, [view.character.last_event, said]))
            asked_at = flight.asked_at.strftime("%H:%M")
            log.info("%s: her answer of %s no longer holds: %s; asked again", cid, asked_at, why)
        if not candidates:
            return self._no_candidates(now, character)
        if self.fallback is not None and (overdue or not pool.asks()):
            request = await self._request(view, candidates, self.fallback, turn)
            decision = await self.fallback.decide(request)
            self.stats.fallbacks += 1
            decision = replace(decision, decided_by=f"fallback:{self.fallback.name}")
            engine_ms = (self._perf() - t0) * 1000
            return await self._carry_out(now, decision, view, candidates, engine_ms, turn)
        started = pool.start(cid, now, speed, lambda: self._ask(now, view, candidates, turn))
        return pool.due(started, now, speed)

    async def _ask(
        self, now: datetime, view: ActionContext, candidates: list[Action], turn: Turn
    ) -> Asked:
        """The operation off the step: read her day, ask the policy, and for a meeting have
        its words written (a model call too)."""
        request = await self._request(view, candidates, self.policy, turn)
        decision = await self._choose(request)
        if decision.action.joint is None or self.neighbours is None:
            return Asked(decision)
        return Asked(decision, await self._meeting_words(now, decision, view, turn))

    async def _company(
        self, now: datetime, character: CharacterState, turn: Turn
    ) -> tuple[Companion, ...]:
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
            may_interrupt=turn.env.drives,
        )

    async def _copies(self, *who: CharacterState, now: datetime) -> dict[str, list[Appointment]]:
        """The read phase of settling: the copies of those whose appointments with ``who`` are
        over now (`relations.settling_with`), read from them; no read when none is."""
        ids = {c for w in who for c in settling_with(w.social.appointments, now)}
        ids -= {w.id for w in who}  # the transaction reads those itself
        found = await self.store.peek_characters(sorted(ids)) if ids else {}
        return {f"character:{c}": s.social.appointments for c, s in found.items() if s}

    async def _start(
        self,
        now: datetime,
        decision: Decision,
        turn: Turn,
        others: dict[str, list[Appointment]] | None = None,
    ) -> datetime:
        action = decision.action

        def apply(snap: Snapshot) -> tuple[Commit, Started]:
            return start(snap, decision, turn.env, who=self.character_id, now=now, others=others)

        def started(result: Started) -> None:
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

        ends, stale, _ = await self.store.transact(
            apply, characters=[self.character_id], lease=turn.lease, now=now, then=started
        )
        return self._after_start(now, ends, stale, action.id, logging.WARNING)

    def _after_start(
        self, now: datetime, ends: datetime | None, stale: str | None, what: str, level: int
    ) -> datetime:
        """When she next needs attention after a start: when it ends; if it did not happen,
        almost at once (the small step keeps a simulated clock moving even if a precondition
        were inconsistent between the decision and the start)."""
        if ends is not None:
            return ends
        if stale is not None:
            said = "%s: %s is no longer possible (%s); deciding again"
            log.log(level, said, self.character_id, what, stale)
        self.stats.stale_starts += stale is not None
        return now + STALE_RETRY

    # -- meetings ---------------------------------------------------------------------------

    async def _meeting_words(
        self, now: datetime, decision: Decision, view: ActionContext, turn: Turn, model: bool = True
    ) -> MeetingWords:
        """The meeting she chose, as seen at ``view``, and its words (the model's if ``model`` and
        today's budget allow, else a template's)."""
        assert self.neighbours is not None
        plan, request, use_model = plan_talk(now, decision, view, turn.env)
        words = await self.neighbours.talker.converse(request, use_model=use_model and model)
        return MeetingWords(plan, words, plan.proposal)

    async def _start_joint(
        self,
        now: datetime,
        decision: Decision,
        view: ActionContext,
        turn: Turn,
        talk: MeetingWords | None = None,
    ) -> datetime:
        """Start a joint action for her and her partner in one write on both: the partner's
        pastime (if any) ends now, both start it, each gets her behavior episode and a
        conversation episode, closeness moves on both sides and news passes on. ``talk``: the
        words written off the step (else they are written here)."""
        action, joint, town = decision.action, decision.action.joint, self.neighbours
        chosen = decision.params
        assert joint is not None and town is not None and isinstance(chosen, WithPartner)
        mid = meeting_id(self.character_id, partner_id := chosen.partner, now, action.id)
        if talk is None:
            # in the step (the offline policy decided): a step never waits on a model, templates
            talk = await self._meeting_words(now, decision, view, turn, turn.decisions is None)
        else:  # words written off the step: what is proposed is read at the start
            talk = replace(talk, proposal=proposal_of(chosen, view, town.name))
        seen = [c.state for c in view.company if c.id == partner_id]
        others = await self._copies(view.character, *seen, now=now)

        def apply(snap: Snapshot) -> tuple[Commit, Started]:
            me = self.character_id
            return meet(
                snap, decision, turn.env, who=me, now=now, talk=talk, mid=mid, others=others
            )

        def started(result: Started) -> None:
            ends, _, ended_record = result
            if ends is None:
                return
            if ended_record is not None:
                self._count_completion(ended_record)
            turn.engaged[partner_id] = ends
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

        pair = [self.character_id, partner_id]
        ends, stale, _ = await self.store.transact(
            apply, characters=pair, lease=turn.lease, now=now, then=started
        )
        return self._after_start(now, ends, stale, f"{action.id} with {partner_id}", logging.INFO)
