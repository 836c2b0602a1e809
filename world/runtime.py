"""Assembling a running world from the config: stores, actions, cards, policies, the engine.

This is the one place that reads the config sections and wires the parts together; everything
below receives plain arguments.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from yuiju.characters import CharacterCard, card_of, copy_of, load_card
from yuiju.config import TownConfig, YuijuConfig
from yuiju.llm import ChatModel, CircuitBreaker, MeteredModel, OpenAIChatModel, UsageTotals
from yuiju.llm.admission import AdmissionGate
from yuiju.memory.episodes import EpisodeRepo
from yuiju.memory.ledger import LLM_CALLS
from yuiju.storage.history import HistoryStore, open_history
from yuiju.storage.keys import Keys
from yuiju.storage.redis import RedisHandle, open_redis
from yuiju.world.behavior import BehaviorLoop, LoopStats
from yuiju.world.clock import Clock, RealClock, SimClock
from yuiju.world.conversation import ModelTalker, TalkCheck, Talker, TemplateTalker
from yuiju.world.day_record import DayRecord, day_record
from yuiju.world.decisions import DecisionLimits
from yuiju.world.engine import Engine, NamedEvolution, TownRun, WorldTicker
from yuiju.world.loader import Catalogue, load_actions, resolve
from yuiju.world.policies.llm import LLMPolicy
from yuiju.world.policies.utility import UtilityPolicy
from yuiju.world.policy import Policy
from yuiju.world.relations import DEFAULT_CLOSENESS
from yuiju.world.social import Neighbours, starting_relations, unique_names
from yuiju.world.state import CharacterState
from yuiju.world.store import StateStore, stream_maxlen
from yuiju.world.town import HAURA, Town
from yuiju.world.usage import UsageLedger

log = logging.getLogger(__name__)


def character_from_card(
    card: CharacterCard, neighbours: Neighbours | None = None
) -> CharacterState:
    """Her state as the card starts it; with ``neighbours``, her relations to those of her town
    the card names (``[relations]``)."""
    s = card.start
    state = CharacterState(
        id=card.id,
        location=s.location,
        stamina=s.stamina,
        satiety=s.satiety,
        mood=s.mood,
        money=s.money,
        inventory=dict(s.inventory),
    )
    if neighbours is not None:
        table = {
            other: neighbours.rest(card.id, other)
            for other in neighbours.others(card.id)
            if neighbours.rest(card.id, other) != DEFAULT_CLOSENESS
        }
        state.social.relations = starting_relations(card.id, table, neighbours.names)
    return state


def resolve_evolutions(names: list[str]) -> list[NamedEvolution]:
    out = []
    for name in names:
        fn = resolve(name)
        if not callable(fn):
            from yuiju.world.errors import ConfigurationError

            raise ConfigurationError(
                f"evolution {name!r} is not a function; check [world].evolutions"
            )
        out.append(NamedEvolution(name=name, fn=fn))
    return out


@dataclass
class Runtime:
    cfg: YuijuConfig
    redis: RedisHandle
    history: HistoryStore
    store: StateStore
    episodes: EpisodeRepo
    catalogue: Catalogue
    cards: dict[str, CharacterCard]
    """Every character the engine may drive, in every town."""
    engine: Engine
    stats: LoopStats
    usage: UsageTotals
    """Every LLM call of this process by purpose (also in the Redis counters and the ledger)."""
    llm_model: MeteredModel | None = None
    """The model every part of this process calls (bounds, ledger, circuit breaker), whatever
    decides her actions: decisions, chat, the diary, distillation; None without ``[llm]``
    (`configured_model`)."""
    llm_policy: LLMPolicy | None = None
    stores: dict[str, StateStore] = field(default_factory=dict)
    """Every town's store by key prefix, the default one (`store`) first."""
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def keys(self) -> Keys:
        """The default town's keys."""
        return self.store.keys

    @property
    def town_characters(self) -> list[str]:
        """The default town's characters (those the observer page, chat and memory serve)."""
        return [loop.character_id for loop in self.engine.towns[0].loops]

    async def continue_world_clock(self, *, resync: bool = False) -> str | None:
        """Anchor the engine's `RealClock` at the saved world time before running, so world time
        never goes backwards (see `RealClock.continue_from`). Logs, and returns, what the user
        must know: world time ahead of the wall clock, and what happens about it."""
        clock = self.engine.clock
        if not isinstance(clock, RealClock):
            return None
        return continue_from_saved(clock, await self.engine.saved_world_time(), resync=resync)

    async def close(self) -> None:
        """Release the leases and close every store; each step runs whatever the others did (a
        dead Redis must not keep the history file open)."""
        await self.engine.release()  # never raises, bounded in time
        steps: list[tuple[str, Any]] = [
            ("model client", self.llm_model.aclose if self.llm_model is not None else None),
            ("history store", self.history.close),
            ("Redis", self.redis.aclose),
        ]
        for what, close in steps:
            if close is None:
                continue
            try:
                await close()
            except Exception as exc:  # closing must go on: report and close the next one
                log.warning("closing the %s failed (%s); carrying on", what, exc)


def continue_from_saved(
    clock: RealClock, saved: datetime | None, *, resync: bool = False
) -> str | None:
    """Anchor ``clock`` at the saved world time (`RealClock.continue_from`); logs and returns what
    the user must know (world time ahead of the wall clock), or None."""
    note = clock.continue_from(saved, resync=resync)
    if note is not None:
        log.warning("%s", note)
    elif resync:
        log.info("resync: world time is not ahead of the wall clock; it runs with real time")
    return note


async def world_clock(cfg: YuijuConfig, store: StateStore) -> RealClock:
    """The world clock of a process that does not run the engine (a standalone `yuiju bot`):
    ``[world].speed``, continued from the saved world time as the engine's is, so after a sped-up
    demo she chats in the same time as she lives, not on the wall clock behind it."""
    clock = RealClock(cfg.app.tz, speed=cfg.world.speed)
    continue_from_saved(clock, await store.saved_world_time(list(cfg.world.characters)))
    return clock


async def open_stores(cfg: YuijuConfig) -> tuple[RedisHandle, HistoryStore]:
    data_dir = cfg.data_path()
    redis = await open_redis(
        cfg.redis.url.get_secret_value() if cfg.redis.url else None,
        data_dir,
        cluster=cfg.redis.cluster,
    )
    try:
        history = await open_history(
            cfg.mongo.url.get_secret_value() if cfg.mongo.url else None,
            cfg.mongo.database,
            data_dir,
        )
    except BaseException:
        await redis.aclose()
        raise
    return redis, history


def make_chat_model(cfg: YuijuConfig) -> ChatModel:
    """The provider's model from ``[llm]``, bare: wrap it with `metered_chat_model`. Built
    once per process at start-up (`configured_model`), so a likely wrong key is said once."""
    assert cfg.llm.base_url is not None
    if problem := cfg.llm.key_problem():
        log.warning("%s", problem)
    return OpenAIChatModel(
        base_url=cfg.llm.base_url,
        api_key=cfg.llm.api_key.get_secret_value() if cfg.llm.api_key else None,
        model=cfg.llm.model,
        output_mode=cfg.llm.resolved_output_mode,
        timeout_seconds=cfg.llm.timeout_seconds,
        min_tokens_per_second=cfg.llm.min_tokens_per_second,
        temperature=cfg.llm.temperature,
    )


def configured_model(
    cfg: YuijuConfig,
    *,
    redis: Any,
    keys: Keys,
    clock: Clock,
    usage: UsageTotals | None = None,
    inner: ChatModel | None = None,
) -> MeteredModel | None:
    """The model of a process from ``[llm]`` (or ``inner``), for every job that needs one:
    decisions when the LLM decides, and whatever decides, chat, the diary, distillation and
    proactive posts. None without ``[llm]``. The one place that says whether a process has a
    model: before, the daemon built it only for the LLM policy, and its memory worker then
    wrote factual diaries and distilled nothing under ``policy = "utility"``."""
    if inner is None:
        if not cfg.llm.configured:
            return None
        inner = make_chat_model(cfg)
    return metered_chat_model(cfg, inner, redis=redis, keys=keys, clock=clock, usage=usage)


def metered_chat_model(
    cfg: YuijuConfig,
    inner: ChatModel,
    *,
    redis: Any,
    keys: Keys,
    clock: Clock,
    usage: UsageTotals | None = None,
) -> MeteredModel:
    """The model every part of a process calls: ``inner`` behind the circuit breaker, with the
    ``max_tokens`` bound of each purpose, and every call counted on the day and written to the
    ledger (``usage``, when given, keeps totals in memory too).

    The breaker waits in wall time: a provider's outage lasts so many real seconds whatever the
    world's speed (at 6000x a world-time cooldown of 300 s is over in 50 ms, and every decision
    waited out another timeout). Under ``simulate``, whose clock jumps from event to event, it
    waits in simulated time instead, so a recorded outage replays identically."""
    llm = cfg.llm
    breaker = CircuitBreaker(
        AdmissionGate(inner, max_concurrent=llm.max_concurrent),
        failures=llm.breaker_failures,
        cooldown_seconds=llm.breaker_cooldown_seconds,
        max_cooldown_seconds=llm.breaker_max_cooldown_seconds,
        now=(lambda: clock.now().timestamp()) if isinstance(clock, SimClock) else time.monotonic,
    )
    ledger = UsageLedger(redis, keys, clock)
    if usage is not None:
        usage.then = ledger
    return MeteredModel(breaker, max_tokens=llm.max_tokens(), purpose="chat", sink=usage or ledger)


async def build_runtime(
    cfg: YuijuConfig,
    *,
    clock: Clock,
    policy: str | None = None,
    chat_model: ChatModel | None = None,
    scripted: Policy | None = None,
    town: Town = HAURA,
    keep_timeline: bool = False,
    tick_minutes: int | None = None,
    flush_every: int = 1,
    worker_name: str | None = None,
    talk_check: TalkCheckBuilder | None = None,
) -> Runtime:
    """Open the stores and wire the engine, for every town of the config (`YuijuConfig.towns`).
    ``policy`` overrides ``[world].policy``; ``talk_check`` (`message.talk_grounding`) checks a
    model's meeting lines where they are written off the step (it reads the history store)."""
    catalogue = load_actions("yuiju.actions", cfg.world.action_dirs)
    towns = cfg.towns()
    cards = load_cards([cid for town in towns.values() for cid in town.characters])
    evolutions = resolve_evolutions(cfg.world.evolutions)
    chosen = chosen_policy(
        cfg, policy, has_model=cfg.llm.configured or chat_model is not None, scripted=scripted
    )
    redis, history = await open_stores(cfg)
    stores = town_stores(redis, towns)
    store = stores[cfg.redis.prefix]
    episodes = await history_repos(history)
    stats = LoopStats(keep_timeline=keep_timeline)
    usage = UsageTotals()
    utility = UtilityPolicy(all_actions=list(catalogue))
    llm_model = configured_model(
        cfg, redis=redis.client, keys=store.keys, clock=clock, usage=usage, inner=chat_model
    )
    ledger = UsageLedger(redis.client, store.keys, clock)
    llm = scripted is None and chosen == "llm"  # with a model: checked before the stores opened
    llm_policy = make_llm_policy(cfg, llm_model, catalogue, ledger) if llm else None
    primary: Policy = scripted or llm_policy or utility
    in_flight = off_step(primary, clock)
    in_real_time_step = not in_flight and isinstance(clock, RealClock)  # where a meeting is worded
    check = talk_check(catalogue, cards, episodes) if talk_check and in_flight else None
    parts = TownParts(
        catalogue=catalogue,
        cards=cards,
        evolutions=evolutions,
        primary=primary,
        fallback=utility if primary is not utility else None,
        town=town,
        recent=recent_reader(episodes, catalogue, town),
        stats=stats,
        talker=make_talker(cfg, llm_model, llm_policy, check, in_step=in_real_time_step),
        model_talks_per_day=cfg.social.model_talks_per_day if llm_model is not None else 0,
    )
    engine = Engine(
        clock=clock,
        history=history,
        towns=[parts.run(spec, stores[prefix]) for prefix, spec in towns.items()],
        tick_minutes=tick_minutes or cfg.world.tick_minutes,
        flush_every=flush_every,
        lease_ttl_ms=round(cfg.world.lease_ttl_seconds * 1000),
        worker_name=worker_name,
        decisions=decision_limits(cfg) if in_flight else None,
        flush_in_step=isinstance(clock, SimClock),
        seed=cfg.world.seed,
    )
    return Runtime(
        cfg=cfg,
        redis=redis,
        history=history,
        store=store,
        episodes=episodes,
        catalogue=catalogue,
        cards=cards,
        engine=engine,
        stats=stats,
        usage=usage,
        llm_model=llm_model,
        llm_policy=llm_policy,
        stores=stores,
    )


def town_stores(redis: RedisHandle, towns: dict[str, TownConfig]) -> dict[str, StateStore]:
    """Every town's store by key prefix (its keys: one Redis Cluster slot)."""
    return {
        prefix: StateStore(
            redis.client, Keys(prefix), stream_maxlen=stream_maxlen(len(t.characters))
        )
        for prefix, t in towns.items()
    }


async def history_repos(history: HistoryStore) -> EpisodeRepo:
    """The episodes repository, with the history store's collections and indexes ensured."""
    episodes = EpisodeRepo(history)
    await episodes.ensure()
    await history.ensure(LLM_CALLS)
    return episodes


def chosen_policy(
    cfg: YuijuConfig, policy: str | None, *, has_model: bool, scripted: Policy | None
) -> str:
    """``policy`` or ``[world].policy``, with 'auto' decided by whether there is a model; the
    llm policy without one (nor a scripted stand-in) is a mistake the user must fix."""
    chosen = policy or cfg.world.policy
    if chosen == "auto":
        chosen = "llm" if has_model else "utility"
    if chosen == "llm" and scripted is None and not has_model:
        from yuiju.world.errors import ConfigurationError

        raise ConfigurationError(
            "the llm policy needs a model: set [llm].base_url (and api_key), or "
            "[world].policy = 'utility'"
        )
    return chosen


def make_llm_policy(
    cfg: YuijuConfig, model: MeteredModel | None, catalogue: Catalogue, ledger: UsageLedger
) -> LLMPolicy:
    """The LLM policy over ``model`` (None: a mistake `chosen_policy` stops before)."""
    assert model is not None, "the llm policy without a model"

    async def budget_allows(now: datetime) -> bool:
        budget = cfg.llm.daily_token_budget
        return budget is None or await ledger.tokens_on(now) < budget

    return LLMPolicy(
        model,
        actions=list(catalogue),
        schema_in_prompt=cfg.llm.resolved_output_mode == "json_object",
        schema=cfg.llm.resolved_decision_schema,
        max_attempts=cfg.llm.max_attempts,
        temperature=cfg.llm.temperature,
        budget_allows=budget_allows,
    )


def recent_reader(
    episodes: EpisodeRepo, catalogue: Catalogue, town: Town
) -> Callable[[str, datetime], Awaitable[DayRecord]]:
    """Her day so far from the history store, for the decision prompt."""

    async def recent(character_id: str, now: datetime) -> DayRecord:
        found = await episodes.between(
            character_id, now - timedelta(days=1), now + timedelta(seconds=1), type_="behavior"
        )
        return day_record(found, now, action_of=catalogue.actions.get, town=town)

    return recent


TalkCheckBuilder = Callable[[Catalogue, dict[str, CharacterCard], EpisodeRepo], TalkCheck]
"""Builds the check of a meeting's lines from the loaded actions, the cards and the history
store's episodes (`message.talk_grounding.TalkGrounding.build`)."""


def make_talker(
    cfg: YuijuConfig,
    llm_model: MeteredModel | None,
    llm_policy: LLMPolicy | None,
    check: TalkCheck | None = None,
    *,
    in_step: bool = False,
) -> Talker:
    """Who writes what characters say when they meet: the model (its lines through ``check``),
    or templates without one, or where a meeting is worded inside a real-time step (an instant
    policy decides on a real clock): a step never waits on a model (issue 29)."""
    if llm_model is None or in_step:
        return TemplateTalker()
    return ModelTalker(
        llm_model,
        temperature=cfg.llm.temperature,
        budget_allows=llm_policy.budget_allows if llm_policy is not None else None,
        check=check,
    )


@dataclass(frozen=True, kw_only=True)
class TownParts:
    """What every town of a process shares, to build each town's loops and ticker from."""

    catalogue: Catalogue
    cards: dict[str, CharacterCard]
    evolutions: list[NamedEvolution]
    primary: Policy
    fallback: Policy | None
    town: Town
    recent: Callable[[str, datetime], Awaitable[DayRecord]]
    stats: LoopStats
    talker: Talker
    model_talks_per_day: int

    def run(self, spec: TownConfig, store: StateStore) -> TownRun:
        """One town's loops and world ticker (every engine ticks with all of the town's
        characters: whichever holds the town lease)."""
        cards = self.cards
        neighbours = Neighbours(
            characters=tuple(spec.characters),
            names=unique_names({cid: cards[cid].name for cid in spec.characters}),
            cards={cid: cards[cid] for cid in spec.characters},
            talker=self.talker,
            model_talks_per_day=self.model_talks_per_day,
        )
        loops = [
            BehaviorLoop(
                character_id=cid,
                store=store,
                catalogue=self.catalogue,
                policy=self.primary,
                fallback=self.fallback,
                town=self.town,
                initial_state=character_from_card(cards[cid], neighbours),
                card=cards[cid],
                recent=self.recent,
                stats=self.stats,
                neighbours=neighbours,
            )
            for cid in spec.characters
        ]
        ticker = WorldTicker(
            store=store,
            evolutions=self.evolutions,
            town=self.town,
            character_ids=list(spec.characters),
            names=neighbours.names,
        )
        return TownRun(store=store, ticker=ticker, loops=loops, seed=spec.seed)


def off_step(policy: Policy, clock: Clock) -> bool:
    """Whether decisions are asked off the engine's step (world/decisions.py): for a policy that
    is not instant, on a real clock. ``simulate`` waits for each (its clock jumps from event to
    event: an answer's arrival would land at a different world time from run to run)."""
    return not policy.instant and not isinstance(clock, SimClock)


def decision_limits(cfg: YuijuConfig) -> DecisionLimits:
    return DecisionLimits(
        max_in_flight=cfg.world.max_decisions_in_flight,
        deadline_seconds=cfg.llm.decide_deadline_seconds,
        deadline_minutes=cfg.llm.decide_deadline_minutes,
    )


def load_cards(character_ids: list[str]) -> dict[str, CharacterCard]:
    """Each character's card; a card's file is read once however many copies of it there are."""
    read: dict[str, CharacterCard] = {}
    for cid in character_ids:
        if card_of(cid) not in read:
            read[card_of(cid)] = load_card(card_of(cid))
    return {cid: copy_of(read[card_of(cid)], cid) for cid in character_ids}


def data_dir_of(cfg: YuijuConfig) -> Path:
    return cfg.app.data_dir.expanduser()
