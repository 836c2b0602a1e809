"""End to end (issue 19, stickers and pacing): a message recalled in QQ (撤回) leaves her context and
the conversation window that becomes her memory, and the reply she was preparing to it is never
sent. `nonebot.run` on loopback in a subprocess, a fake OneBot v11 implementation over a real
WebSocket sending the `group_recall` and `friend_recall` notices NapCat sends, the local
OpenAI-compatible stub, her sessions read back from the real Redis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.openai_stub import OpenAIStub, StubDelay
from tests.test_bot_e2e import BOT, BOT_MAIN, GROUP, TOKEN, calls_until_quiet, connect, free_port
from tests.test_bot_e2e import group_message as _group_message
from yuiju.storage.keys import Keys

USER = 20002
FRIEND = 20003


def group_message(mid: int, text: str, *, at: bool = False) -> dict[str, Any]:
    segments = [{"type": "at", "data": {"qq": str(BOT)}}] if at else []
    return _group_message(mid, [*segments, {"type": "text", "data": {"text": text}}], user=USER)


def private_message(mid: int, text: str) -> dict[str, Any]:
    return {
        "time": int(time.time()),
        "self_id": BOT,
        "post_type": "message",
        "message_type": "private",
        "sub_type": "friend",
        "message_id": mid,
        "user_id": FRIEND,
        "message": [{"type": "text", "data": {"text": text}}],
        "raw_message": text,
        "font": 0,
        "sender": {"user_id": FRIEND, "nickname": "小红"},
    }


def group_recall(mid: int, **broken: Any) -> dict[str, Any]:
    notice = {
        "time": int(time.time()),
        "self_id": BOT,
        "post_type": "notice",
        "notice_type": "group_recall",
        "group_id": GROUP,
        "user_id": USER,
        "operator_id": USER,
        "message_id": mid,
    }
    return {k: v for k, v in {**notice, **broken}.items() if v is not None}


def friend_recall(mid: int) -> dict[str, Any]:
    return {
        "time": int(time.time()),
        "self_id": BOT,
        "post_type": "notice",
        "notice_type": "friend_recall",
        "user_id": FRIEND,
        "message_id": mid,
    }


async def session_lists(redis: Any, sid: str) -> dict[str, list[str]]:
    keys = Keys("e2e")
    return {
        "context": await redis.lrange(keys.chat_context("yuiju", sid), 0, -1),
        "recent": await redis.lrange(keys.chat_recent("yuiju", sid), 0, -1),
        "window": await redis.lrange(keys.chat_window("yuiju", sid), 0, -1),
    }


@pytest.mark.slow
async def test_a_recalled_message_leaves_her_context_and_window_and_her_reply_is_never_sent(
    redis: Any, redis_url: str, tmp_path: Path
) -> None:
    """``redis``: an emptied database (other end-to-end tests use the same keys)."""
    port = free_port()
    script = tmp_path / "bot_main.py"
    script.write_text(BOT_MAIN, encoding="utf-8")
    with OpenAIStub() as stub:
        stub.reply(StubDelay(3.0, "好的，我帮你记着"), "在的～")
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
                await ws.send(json.dumps(group_message(5001, "我的银行卡密码是 314159")))
                await ws.send(json.dumps(private_message(6001, "悄悄话：271828")))
                await ws.send(json.dumps(group_message(5002, " 帮我记一下", at=True)))
                before = await calls_until_quiet(ws, 1.0)  # her answer to 5002 is being written
                await ws.send(json.dumps(group_recall(5001)))
                await ws.send(json.dumps(friend_recall(6001)))
                await ws.send(json.dumps(group_recall(5002)))
                await ws.send(json.dumps(group_recall(5003, message_id=None)))  # malformed
                recalled = await calls_until_quiet(ws, 4.0)
                await ws.send(json.dumps(group_message(5004, " 在吗", at=True)))
                after = await calls_until_quiet(ws, 3.0)
            finally:
                await ws.close()
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            log_file.close()
    err = (tmp_path / "bot.log").read_bytes().decode(errors="replace")
    assert before == [] and recalled == [], err[-2000:]
    assert [c["params"]["message"] for c in after if c["action"] == "send_msg"] == [
        [{"type": "text", "data": {"text": "在的～"}}]
    ], err[-2000:]
    assert len(stub.requests) == 2
    group = await session_lists(redis, f"group:qq:{GROUP}")
    private = await session_lists(redis, f"private:qq:{FRIEND}")
    for kind, items in {**group, **{f"private {k}": v for k, v in private.items()}}.items():
        text = "\n".join(items)
        for gone in ("314159", "帮我记一下", "271828", "好的，我帮你记着"):
            assert gone not in text, (kind, gone)
    assert sum("撤回了一条消息" in item for item in group["context"]) == 2  # in its place
    assert any("在吗" in item for item in group["window"])
    # her answer to 5004 saw neither recalled message
    last_prompt = json.dumps(stub.requests[-1]["messages"], ensure_ascii=False)
    assert "314159" not in last_prompt and "帮我记一下" not in last_prompt
    assert "Traceback" not in err


YUIJU_ON_SATORI = """
import os
import nonebot

nonebot.require("nonebot_plugin_yuiju")
from nonebot_plugin_yuiju.runtime import build_with


async def factory(edge):
    from zoneinfo import ZoneInfo
    import redis.asyncio as aioredis
    from yuiju.characters import load_card
    from yuiju.config import ChatConfig
    from yuiju.message.deps import ChatDeps
    from yuiju.message.people import People
    from yuiju.message.service import ChatService
    from yuiju.message.session import SessionStore
    from yuiju.storage.keys import Keys
    from yuiju.world.clock import RealClock
    from nonebot_plugin_yuiju.send import NoneBotSender

    redis = aioredis.Redis.from_url(os.environ["E2E_REDIS"], decode_responses=True)
    keys = Keys("e2e-satori")
    return ChatService(ChatDeps(
        cfg=ChatConfig(max_pause_seconds=0), card=load_card("yuiju"),
        clock=RealClock(ZoneInfo("Asia/Shanghai")), redis=redis, keys=keys,
        sessions=SessionStore(redis, keys, "yuiju"), people=People(redis, keys),
        sender=NoneBotSender(),
    ))

build_with(factory)
"""


@pytest.mark.slow
async def test_a_satori_message_deleted_event_over_a_real_socket_takes_the_message_back(
    redis: Any, redis_url: str, tmp_path: Path
) -> None:
    import asyncio

    from tests.fakes import NoneBotApp, SatoriFake
    from yuiju.message.model import Conversation
    from yuiju.message.session import SessionStore

    sessions = SessionStore(redis, Keys("e2e-satori"), "yuiju")
    group = Conversation.group("qq", "123456")
    async with (
        SatoriFake() as fake,
        NoneBotApp(tmp_path, fake, YUIJU_ON_SATORI, env={"E2E_REDIS": redis_url}) as app,
    ):
        await fake.wait_connected(30)
        mid = await fake.send_group_message("我的银行卡密码是 314159")
        for _ in range(100):  # her Satori matcher records it
            if await sessions.recent(group.session_id, 10):
                break
            await asyncio.sleep(0.1)
        assert await sessions.recent(group.session_id, 10), app.log()[-3000:]
        await fake.send_recall(mid)
        for _ in range(100):
            if not await sessions.recent(group.session_id, 10):
                break
            await asyncio.sleep(0.1)
        log = app.log()
    assert await sessions.recent(group.session_id, 10) == [], log[-3000:]
    _, items = await sessions.context(group.session_id)
    assert len(items) == 1 and items[0]["content"].startswith('<msg from="小明" id="qq:20002"')
    assert items[0]["content"].endswith(">（撤回了一条消息）</msg>")
    assert "Traceback" not in log
