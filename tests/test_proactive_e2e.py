"""End to end: the engine, `yuiju bot` with [proactive] configured, a fake OneBot v11 client over a
real WebSocket and the local OpenAI-compatible stub. A burst of completed walks in the park with a
share intent becomes exactly one `send_msg` into the group (within the daily cap of 3: while a post
is unanswered she never posts again); a later shareable completion, still unanswered, none."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import redis.asyncio as aioredis

from tests.conftest import make_character, make_engine
from tests.openai_stub import OpenAIStub
from tests.test_bot_e2e import BOT, GROUP, calls_until_quiet, connect, free_port
from yuiju.message.proactive import consumer_group
from yuiju.storage.keys import Keys
from yuiju.storage.sqlite_history import SqliteHistory
from yuiju.world.action import always
from yuiju.world.loader import load_actions
from yuiju.world.policies.scripted import ScriptedPolicy

ROOT = Path(__file__).parents[1]
PREFIX = "e2eproactive"
POST = "刚在南风公园走了半小时，风好舒服～"


async def walk_in_the_park(redis: aioredis.Redis, data_dir: Path, walks: int = 1) -> None:
    """The real engine (scripted decisions) on the bot's Redis and history: ``walks`` walks in the
    park with a share intent, the last completed minutes ago — `action_completed` events for the bot."""
    start = datetime.now(ZoneInfo("Asia/Shanghai")).replace(second=0, microsecond=0) - timedelta(
        minutes=30 * walks + 10
    )
    walk = {
        "action": "在公园散步",
        "reason": "天气很好，想去走走",
        "durationMinute": 30,
        "proactiveShareIntent": {"shouldShare": True, "reason": "散步时风很舒服，想和大家说说"},
    }
    catalogue = load_actions()
    # the real walk, minus its daylight rule, so this test runs at any hour of the wall clock
    catalogue.actions["walk_in_park"] = replace(catalogue.actions["walk_in_park"], when=always)
    history = SqliteHistory.open(data_dir / "history.sqlite3")
    try:
        kit = await make_engine(
            redis,
            history,
            policy=ScriptedPolicy([walk] * walks + ["发呆"]),
            fallback=None,
            start=start,
            characters={"yuiju": make_character(location="park")},
            prefix=PREFIX,
            catalogue=catalogue,
        )
        await kit.engine.run(until=start + timedelta(minutes=30 * walks + 1))
        await kit.engine.flush_outbox(force=True)
        assert [r["id"] for r in kit.stats.timeline] == ["walk_in_park"] * walks
    finally:
        await history.close()


async def shareable(redis: aioredis.Redis, n: int) -> None:
    now = datetime.now(ZoneInfo("Asia/Shanghai"))
    await redis.xadd(
        Keys(PREFIX).events,
        {
            "type": "action_completed",
            "character_id": "yuiju",
            "time": now.isoformat(),
            "data": json.dumps(
                {
                    "episode_id": f"bhv_e2e{n}",
                    "action": "walk_in_park",
                    "name": "在公园散步",
                    "summary": "yuiju在南风公园散步，用了30分钟",
                    "share": True,
                },
                ensure_ascii=False,
            ),
        },
    )


@pytest.mark.slow
async def test_a_shareable_completion_becomes_one_group_post_over_the_websocket(
    redis: aioredis.Redis, redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    with OpenAIStub() as stub:
        stub.reply(
            json.dumps(
                {"shouldSend": True, "reason": "群里很安静", "message": POST}, ensure_ascii=False
            )
        )
        config = tmp_path / "yuiju.toml"
        config.write_text(
            f"""
[app]
data_dir = "{(tmp_path / "data").as_posix()}"
[redis]
url = "{redis_url}"
prefix = "{PREFIX}"
[llm]
base_url = "{stub.base_url}"
model = "stub"
[memory]
enabled = false
[onebot]
port = {port}
access_token = "proactive-secret"
[chat.groups.{GROUP}]
reply = "mention"
[proactive.groups.{GROUP}]
quiet_hours = ""
""",
            encoding="utf-8",
        )
        env = {
            k: v for k, v in os.environ.items() if not k.startswith("YUIJU_") and k != "REDIS_URL"
        }
        with (tmp_path / "bot.log").open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "yuiju.cli",
                "--config",
                str(config),
                "bot",
                cwd=ROOT,
                env=env,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=err,
            )
        try:
            ws = await connect(
                f"ws://127.0.0.1:{port}/onebot/v11/ws",
                {
                    "X-Self-ID": str(BOT),
                    "X-Client-Role": "Universal",
                    "Authorization": "Bearer proactive-secret",
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
                for _ in range(100):  # the consumer group starts at the stream's end: wait for it
                    groups: list[Any] = []
                    if await redis.exists(Keys(PREFIX).events):
                        groups = await redis.xinfo_groups(Keys(PREFIX).events)
                    if any(g["name"] == consumer_group("yuiju") for g in groups):
                        break
                    await asyncio.sleep(0.1)
                else:
                    pytest.fail("the proactive consumer group never appeared")
                await walk_in_the_park(
                    redis, tmp_path / "data", walks=3
                )  # a burst of shareable walks
                first = await calls_until_quiet(ws, 4.0)
                await shareable(redis, 4)  # nobody answered the post: nothing more
                second = await calls_until_quiet(ws, 2.0)
            finally:
                await ws.close()
            proc.send_signal(signal.SIGINT)
            await asyncio.wait_for(proc.wait(), 30)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    log = (tmp_path / "bot.log").read_text(errors="replace")
    sends = [c["params"] for c in first if c["action"] == "send_msg"]
    assert sends == [
        {
            "message_type": "group",
            "group_id": GROUP,
            "message": [{"type": "text", "data": {"text": POST}}],
        }
    ], log[-3000:]
    assert [c for c in second if c["action"] == "send_msg"] == []
    assert len(stub.requests) == 1
    assert "Traceback" not in log, log[-3000:]
