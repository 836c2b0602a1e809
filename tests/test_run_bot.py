"""`yuiju run` with [onebot].enabled serves the QQ bot inside the daemon, on the daemon's stores
and its one embedded vector store; `yuiju bot` next to it refuses that store; Ctrl-C stops both."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.openai_stub import OpenAIStub
from tests.test_bot_e2e import (
    BOT,
    GROUP,
    calls_until_quiet,
    connect,
    free_port,
    mention,
)

ROOT = Path(__file__).parents[1]


@pytest.mark.slow
async def test_yuiju_run_serves_the_bot_and_a_second_bot_process_is_refused(tmp_path: Path) -> None:
    port, web_port = free_port(), free_port()
    with OpenAIStub() as stub:
        stub.answer_by_line({"还醒着吗": "醒着呢～"})  # not in order: the daemon asks too
        config = tmp_path / "yuiju.toml"
        config.write_text(
            f"""
[app]
data_dir = "{(tmp_path / "data").as_posix()}"
[llm]
base_url = "{stub.base_url}"
model = "stub"
[world]
policy = "utility"
[web]
port = {web_port}
[embeddings]
provider = "hashing"
[onebot]
enabled = true
port = {port}
access_token = "run-secret"
[chat]
mode = "CHAT"
max_pause_seconds = 0
[chat.groups.{GROUP}]
reply = "mention"
""",
            encoding="utf-8",
        )
        env = {
            k: v for k, v in os.environ.items() if not k.startswith("YUIJU_") and k != "REDIS_URL"
        }
        err_path = tmp_path / "run.log"
        with err_path.open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "yuiju.cli",
                "--config",
                str(config),
                "run",
                "--no-panel",
                cwd=ROOT,
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
            )
        try:
            assert proc.stdout is not None
            lines = [
                (await asyncio.wait_for(proc.stdout.readline(), 60)).decode() for _ in range(2)
            ]
            url = f"ws://127.0.0.1:{port}/onebot/v11/ws"
            assert f"http://127.0.0.1:{web_port}/" in lines[0] and url in lines[1], (
                "".join(lines) + err_path.read_text(errors="replace")[-3000:]
            )
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{web_port}", timeout=10
            ) as client:
                assert (await client.get("/")).status_code == 200  # the page next to the bot

            ws = await connect(
                url,
                {
                    "X-Self-ID": str(BOT),
                    "X-Client-Role": "Universal",
                    "Authorization": "Bearer run-secret",
                },
            )
            try:
                await ws.send(
                    json.dumps(
                        {
                            "time": int(time.time()),
                            "self_id": BOT,
                            "post_type": "meta_event",
                            "meta_event_type": "lifecycle",
                            "sub_type": "connect",
                        }
                    )
                )
                await ws.send(json.dumps(mention(7001, " 还醒着吗")))
                calls = await calls_until_quiet(ws, 3.0)
            finally:
                await ws.close()
            sends = [c["params"] for c in calls if c["action"] == "send_msg"]
            assert sends == [
                {
                    "message_type": "group",
                    "group_id": GROUP,
                    "message": [{"type": "text", "data": {"text": "醒着呢～"}}],
                }
            ], err_path.read_text(errors="replace")[-3000:]

            # a second process would need the embedded vector store the daemon holds
            other = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "yuiju.cli",
                "--config",
                str(config),
                "bot",
                cwd=ROOT,
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            _, other_err = await asyncio.wait_for(other.communicate(), 60)
            assert other.returncode == 2
            assert "[qdrant].url" in other_err.decode() and "yuiju run" in other_err.decode()

            proc.send_signal(signal.SIGINT)
            assert await asyncio.wait_for(proc.wait(), 30) == 0
        finally:
            if (
                proc.returncode is None
            ):  # a failed check: stop it as a user would (its Redis with it)
                proc.send_signal(signal.SIGINT)
                try:
                    await asyncio.wait_for(proc.wait(), 30)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
    log = err_path.read_text(errors="replace")
    assert "yuiju stopped" in log
    assert "Traceback" not in log, log[-3000:]


@pytest.mark.slow
async def test_sigterm_stops_a_standalone_bot_with_exit_status_zero(tmp_path: Path) -> None:
    # uvicorn re-raises the signal it caught once the app has stopped: `yuiju bot` died of it
    # (status -15, a crash to a supervisor) where `yuiju run` ends with 0; found by bench/faults.py
    port = free_port()
    config = tmp_path / "yuiju.toml"
    config.write_text(
        f"""
[app]
data_dir = "{(tmp_path / "data").as_posix()}"
[memory]
enabled = false
[onebot]
enabled = true
port = {port}
access_token = "t"
""",
        encoding="utf-8",
    )
    from tests.test_daemon_faults import start_yuiju

    err_path = tmp_path / "bot.log"
    proc = await start_yuiju(config, "bot", log=err_path, stdout=None)
    try:
        ws = await connect(
            f"ws://127.0.0.1:{port}/onebot/v11/ws",
            {"X-Self-ID": str(BOT), "X-Client-Role": "Universal", "Authorization": "Bearer t"},
        )
        await ws.close()
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    log = err_path.read_text(errors="replace")
    assert code == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
