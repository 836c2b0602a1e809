"""End to end: `nonebot.run` on loopback in a subprocess, a fake OneBot v11 implementation over a
real WebSocket (events in, API calls answered), and the local OpenAI-compatible stub."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import websockets

from tests.openai_stub import OpenAIStub

BOT = 10001
GROUP = 123456
TOKEN = "e2e-secret"

BOT_MAIN = """
import nonebot, os
from nonebot.adapters.onebot.v11 import Adapter
nonebot.init(driver="~fastapi", host="127.0.0.1", port=int(os.environ["E2E_PORT"]),
             onebot_access_token=os.environ["E2E_TOKEN"], nickname=["悠酱"])
nonebot.get_driver().register_adapter(Adapter)
nonebot.load_plugin("nonebot_plugin_yuiju")
from nonebot_plugin_yuiju.runtime import build_with

async def factory(edge):
    from zoneinfo import ZoneInfo
    import redis.asyncio as aioredis
    from yuiju.characters import load_card
    from yuiju.llm import OpenAIChatModel
    from yuiju.message.deps import ChatDeps
    from yuiju.message.people import People
    from yuiju.message.service import ChatService
    from yuiju.message.session import SessionStore
    from yuiju.storage.keys import Keys
    from yuiju.world.clock import RealClock
    from yuiju.config import ChatConfig, GroupPolicy
    from nonebot_plugin_yuiju.send import NoneBotSender
    groups = {g: GroupPolicy() for g in os.environ["E2E_GROUP"].split(",")}
    cfg = ChatConfig(groups=groups, max_pause_seconds=0, mode="CHAT")
    redis = aioredis.Redis.from_url(os.environ["E2E_REDIS"], decode_responses=True)
    keys = Keys("e2e")
    return ChatService(ChatDeps(
        cfg=cfg, card=load_card("yuiju"), clock=RealClock(ZoneInfo("Asia/Shanghai")), redis=redis,
        keys=keys, sessions=SessionStore(redis, keys, "yuiju"), people=People(redis, keys),
        sender=NoneBotSender(),
        model=OpenAIChatModel(base_url=os.environ["E2E_STUB"], api_key=None, model="stub"),
    ))

build_with(factory)
nonebot.run()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def group_message(mid: int, segments: list[dict[str, Any]], user: int = 20002) -> dict[str, Any]:
    return {
        "time": int(time.time()),
        "self_id": BOT,
        "post_type": "message",
        "message_type": "group",
        "sub_type": "normal",
        "message_id": mid,
        "group_id": GROUP,
        "user_id": user,
        "anonymous": None,
        "message": segments,
        "raw_message": "",
        "font": 0,
        "sender": {"user_id": user, "nickname": "小明", "card": "", "role": "member"},
    }


def mention(mid: int, text: str, user: int = 20002) -> dict[str, Any]:
    """A group message from ``user`` that @s her first, then says ``text``."""
    segments = [{"type": "at", "data": {"qq": str(BOT)}}, {"type": "text", "data": {"text": text}}]
    return group_message(mid, segments, user)


async def connect(url: str, headers: dict[str, str]) -> Any:
    """Connect as soon as the bot listens: a process that imports NoneBot on a loaded machine
    can take a minute to get there (seen: more than 30 s with the suite beside other work)."""
    deadline = time.monotonic() + 120
    while True:
        try:
            return await websockets.connect(url, additional_headers=headers)
        except (OSError, websockets.InvalidStatus, websockets.InvalidHandshake):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def calls_until_quiet(ws: Any, quiet: float) -> list[dict[str, Any]]:
    """Answer every API call as NapCat would, until nothing arrives for ``quiet`` seconds."""
    calls = []
    while True:
        try:
            frame = json.loads(await asyncio.wait_for(ws.recv(), quiet))
        except TimeoutError:
            return calls
        calls.append({"action": frame["action"], "params": frame["params"]})
        await ws.send(
            json.dumps(
                {
                    "status": "ok",
                    "retcode": 0,
                    "data": {"message_id": 9000 + len(calls)},
                    "echo": frame.get("echo"),
                }
            )
        )


@pytest.mark.slow
async def test_the_bot_answers_a_mention_over_a_real_websocket(
    redis_url: str, tmp_path: Path
) -> None:
    port = free_port()
    script = tmp_path / "bot_main.py"
    script.write_text(BOT_MAIN, encoding="utf-8")
    with OpenAIStub() as stub:
        stub.reply("在的在的～\n我刚放学回家")
        env = {
            **os.environ,
            "E2E_PORT": str(port),
            "E2E_TOKEN": TOKEN,
            "E2E_GROUP": str(GROUP),
            "E2E_REDIS": redis_url,
            "E2E_STUB": stub.base_url,
            "PYTHONPATH": str(Path.cwd()),
        }
        log_file = (tmp_path / "bot.log").open("wb")
        proc = subprocess.Popen(  # noqa: ASYNC220
            [sys.executable, str(script)],
            env=env,
            cwd=Path.cwd(),
            stdout=subprocess.DEVNULL,
            stderr=log_file,
        )
        try:
            url = f"ws://127.0.0.1:{port}/onebot/v11/ws"
            headers = {"X-Self-ID": str(BOT), "X-Client-Role": "Universal"}
            ws = await connect(url, {**headers, "Authorization": f"Bearer {TOKEN}"})
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
                await ws.send(json.dumps(mention(4242, " 在吗？")))
                first = await calls_until_quiet(ws, 3.0)
                await ws.send(
                    json.dumps(
                        group_message(4243, [{"type": "text", "data": {"text": "今天吃什么"}}])
                    )
                )
                await ws.send(
                    json.dumps(
                        {
                            "post_type": "message",
                            "self_id": BOT,
                            "message_type": "group",
                            "broken": True,
                        }
                    )
                )  # malformed: ignored, never a crash
                second = await calls_until_quiet(ws, 1.0)
            finally:
                await ws.close()
            with pytest.raises(websockets.InvalidStatus):  # a wrong token is refused
                await websockets.connect(
                    url, additional_headers={**headers, "Authorization": "Bearer nope"}
                )
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            log_file.close()
    err = (tmp_path / "bot.log").read_bytes()
    sends = [c["params"] for c in first if c["action"] == "send_msg"]
    assert sends == [
        {
            "message_type": "group",
            "group_id": GROUP,
            "message": [{"type": "text", "data": {"text": "在的在的～"}}],
        },
        {
            "message_type": "group",
            "group_id": GROUP,
            "message": [{"type": "text", "data": {"text": "我刚放学回家"}}],
        },
    ], err.decode(errors="replace")[-2000:]
    assert second == []
    assert len(stub.requests) == 1
    assert '<msg from="小明" id="qq:20002"' in stub.requests[0]["messages"][-1]["content"]
