"""One randomness per run, owned by the engine and derived per town and per character (mesa's
``Model.random``): nothing else takes a seed, and the same seed gives the same draws."""

from __future__ import annotations

import inspect

import redis.asyncio as aioredis

from tests.conftest import at_time, make_engine, make_world
from yuiju.world.behavior import BehaviorLoop
from yuiju.world.engine import Engine, TownRun, WorldTicker
from yuiju.world.loader import load_actions
from yuiju.world.policies.scripted import ScriptedPolicy
from yuiju.world.policies.utility import UtilityPolicy
from yuiju.world.randomness import Randomness
from yuiju.world.town import HAURA
from yuiju.world.transitions import Env

IDLE = {"action": "发呆", "reason": "放空", "durationMinute": 30}


def test_a_draw_depends_on_the_seed_whose_it_is_and_what_is_drawn_only() -> None:
    run = Randomness.seeded(3)
    first = run.derive("yuiju").rng("2026-09-01T07:00").random()
    for _ in range(5):  # other draws in between change nothing
        run.derive("kaede").rng("2026-09-01T07:00").random()
    assert run.derive("yuiju").rng("2026-09-01T07:00").random() == first
    assert Randomness.seeded(3).derive("yuiju").rng("2026-09-01T07:00").random() == first
    assert run.derive("kaede").rng("2026-09-01T07:00").random() != first
    assert Randomness.seeded(4).derive("yuiju").rng("2026-09-01T07:00").random() != first
    env = Env(town=HAURA, catalogue=load_actions("actions"), randomness=run)
    assert env.rng("yuiju", "2026-09-01T07:00").random() == first  # her transitions' draws


def test_nothing_but_the_engine_takes_a_seed() -> None:
    for component in (UtilityPolicy, BehaviorLoop, WorldTicker):
        assert "seed" not in inspect.signature(component).parameters, component
    assert "seed" in inspect.signature(Engine).parameters


async def test_the_engine_hands_its_randomness_to_every_step_and_tick(
    redis: aioredis.Redis,
) -> None:
    policy = ScriptedPolicy(lambda _request: IDLE)
    kit = await make_engine(redis, None, policy=policy, seed=5)

    await kit.engine.run(max_steps=1)

    assert kit.engine.randomness == Randomness.seeded(5)
    assert [r.randomness for r in policy.requests] == [Randomness.seeded(5)]
    world = await kit.store.load_world()
    seeded = make_world(at_time("2026-09-01 06:00"), seed=5)
    assert world is not None and world.weather == seeded.weather


async def test_a_town_with_a_seed_of_its_own_draws_from_it(redis: aioredis.Redis) -> None:
    policy = ScriptedPolicy(lambda _request: IDLE)
    kit = await make_engine(redis, None, policy=policy, seed=5)
    town = TownRun(store=kit.store, ticker=kit.ticker, loops=list(kit.loops.values()), seed=9)
    engine = Engine(clock=kit.clock, history=None, towns=[town], seed=5)

    await engine.run(max_steps=1)

    assert [r.randomness for r in policy.requests] == [Randomness.seeded(9)]
