"""The plugin inside someone else's NoneBot project: a bot.py as nb-cli writes it, the plugin listed
in its pyproject.toml, yuiju's settings in its .env — over a real WebSocket with a fake OneBot v11
client and the local OpenAI-compatible stub. She answers, her proactive posts start, and Ctrl-C
stops it all cleanly."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from tests.openai_stub import OpenAIStub
from tests.test_bot_e2e import (
    BOT,
    GROUP,
    calls_until_quiet,
    connect,
    free_port,
    mention,
)
from yuiju.message.proactive import consumer_group
from yuiju.storage.keys import Keys

ROOT = Path(__file__).parents[1]
PREFIX = "e2eplugin"
TOKEN = "host-bot-secret"

BOT_PY = """
import nonebot
from nonebot.adapters.onebot.v11 import Adapter as OneBotV11Adapter

nonebot.init()
nonebot.get_driver().register_adapter(OneBotV11Adapter)
nonebot.load_from_toml("pyproject.toml")

if __name__ == "__main__":
    nonebot.run()
"""

PYPROJECT = """
[project]
name = "someones-bot"
version = "0.1.0"

[tool.nonebot]
plugin_dirs = []
builtin_plugins = []

[tool.nonebot.adapters]
nonebot-adapter-onebot = [{ name = "OneBot V11", module_name = "nonebot.adapters.onebot.v11" }]

[tool.nonebot.plugins]
yuiju = ["nonebot_plugin_yuiju"]
"""


def nonebot_project(
    root: Path, *, port: int, stub_url: str, redis_url: str, token: str | None = TOKEN
) -> Path:
    """A NoneBot project of her own: the host's settings and yuiju's in .env, the rest in yuiju.toml."""
    root.mkdir()
    (root / "bot.py").write_text(BOT_PY, encoding="utf-8")
    (root / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    (root / ".env").write_text(
        f"""
DRIVER=~fastapi
HOST=127.0.0.1
PORT={port}
{f"ONEBOT_ACCESS_TOKEN={token}" if token else ""}
NICKNAME=["小助手"]
YUIJU_CONFIG=yuiju.toml
YUIJU_CHAT__MAX_PAUSE_SECONDS=0
YUIJU_CHAT__MODE=CHAT
""",
        encoding="utf-8",
    )
    (root / "yuiju.toml").write_text(
        f"""
[app]
data_dir = "{(root / "yuiju-data").as_posix()}"
[redis]
url = "{redis_url}"
prefix = "{PREFIX}"
[llm]
base_url = "{stub_url}"
model = "stub"
[memory]
enabled = false
[chat.groups.{GROUP}]
reply = "mention"
[proactive.groups.{GROUP}]
quiet_hours = ""
""",
        encoding="utf-8",
    )
    return root


def host_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("YUIJU_") and k != "REDIS_URL"}
    # the plugin as installed, from the tree under test (src/ first: not an installed copy)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    return env


async def proactive_started(redis: aioredis.Redis) -> bool:
    for _ in range(100):  # the consumer group is created when her proactive posts start
        if await redis.exists(Keys(PREFIX).events):
            groups = await redis.xinfo_groups(Keys(PREFIX).events)
            if any(g["name"] == consumer_group("yuiju") for g in groups):
                return True
        await asyncio.sleep(0.1)
    return False


@pytest.mark.slow
async def test_the_plugin_in_another_nonebot_project_answers_and_stops_cleanly(
    redis: aioredis.Redis,
    redis_url: str,
    tmp_path: Path,
) -> None:
    port = free_port()
    with OpenAIStub() as stub:
        stub.reply("在的～刚放学")
        project = nonebot_project(
            tmp_path / "someones-bot", port=port, stub_url=stub.base_url, redis_url=redis_url
        )
        env = host_env()
        log_path = tmp_path / "bot.log"
        with log_path.open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "bot.py", cwd=project, env=env, stdout=err, stderr=err
            )
        try:
            ws = await connect(
                f"ws://127.0.0.1:{port}/onebot/v11/ws",
                {
                    "X-Self-ID": str(BOT),
                    "X-Client-Role": "Universal",
                    "Authorization": f"Bearer {TOKEN}",
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
                await ws.send(json.dumps(mention(8101, " 在吗")))
                calls: list[dict[str, Any]] = await calls_until_quiet(ws, 3.0)
                assert await proactive_started(redis), log_path.read_text(errors="replace")[-3000:]
            finally:
                await ws.close()
            proc.send_signal(signal.SIGINT)
            code = await asyncio.wait_for(proc.wait(), 30)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    log = log_path.read_text(errors="replace")
    sends = [c["params"] for c in calls if c["action"] == "send_msg"]
    assert sends == [
        {
            "message_type": "group",
            "group_id": GROUP,
            "message": [{"type": "text", "data": {"text": "在的～刚放学"}}],
        }
    ], log[-3000:]
    assert "在吗" in stub.requests[0]["messages"][-1]["content"]
    assert "yuiju chat starts with this NoneBot app (yuiju.toml)" in log, log[-3000:]
    assert code == 0 and "Traceback" not in log and "ERROR" not in log, log[-3000:]


@pytest.mark.slow
async def test_the_plugin_stops_the_start_of_an_app_without_an_access_token(
    redis_url: str, tmp_path: Path
) -> None:
    project = nonebot_project(
        tmp_path / "open-bot",
        port=free_port(),
        stub_url="http://127.0.0.1:9/v1",
        redis_url=redis_url,
        token=None,
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "bot.py",
        cwd=project,
        env=host_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    log = out.decode(errors="replace")
    assert proc.returncode != 0, log[-3000:]
    assert "ONEBOT_ACCESS_TOKEN" in log and "YUIJU_ONEBOT__ALLOW_NO_TOKEN" in log, log[-3000:]
