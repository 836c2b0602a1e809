"""A burst of OneBot frames over a real WebSocket loses no message (issue 21 item 2): malformed and
normal frames as fast as the socket takes them, into a bot whose Redis pool is capped low (as a
loaded machine's is, for the burst of a flooded group); every message is in the message log and
the mention sent after the burst is recorded and answered."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from tests.openai_stub import OpenAIStub
from tests.test_bot_e2e import BOT, GROUP, TOKEN, connect, free_port, group_message, mention
from yuiju.storage.keys import Keys

BURST_MAIN = """
import logging, os, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
import nonebot
from nonebot.adapters.onebot.v11 import Adapter
nonebot.init(driver="~fastapi", host="127.0.0.1", port=int(os.environ["E2E_PORT"]),
             onebot_access_token=os.environ["E2E_TOKEN"], nickname=["悠酱"])
nonebot.get_driver().register_adapter(Adapter)
nonebot.load_plugin("nonebot_plugin_yuiju")
from nonebot_plugin_yuiju.runtime import build_with

async def factory(edge):
    from pathlib import Path
    import redis.asyncio as aioredis
    from yuiju.config import YuijuConfig
    from yuiju.llm import OpenAIChatModel
    from yuiju.message.bot import build_service
    from yuiju.storage.sqlite_history import SqliteHistory
    from yuiju.world.clock import RealClock
    from nonebot_plugin_yuiju.send import NoneBotGroups, NoneBotSender
    cfg = YuijuConfig.model_validate({
        "app": {"data_dir": os.environ["E2E_DATA"]},
        "redis": {"prefix": "burst"},
        "memory": {"enabled": False},
        # the flood rule would keep her quiet for a minute after the burst: not what is tested
        "chat": {"mode": "CHAT", "max_pause_seconds": 0, "group_messages_per_minute": 100000,
                 "user_messages_per_minute": 100000, "group_replies_per_minute": 100000,
                 "groups": {os.environ["E2E_GROUP"]: {"reply": "mention"}}},
    })
    # a pool capped low: what 100 connections are to a burst of thousands on a loaded machine
    pool = aioredis.BlockingConnectionPool.from_url(
        os.environ["E2E_REDIS"], max_connections=2, timeout=0.2, decode_responses=True)
    redis = aioredis.Redis.from_pool(pool)
    history = SqliteHistory.open(Path(os.environ["E2E_DATA"]) / "history.sqlite3")
    edge.on_stop.append(history.close)
    return await build_service(
        cfg, sender=NoneBotSender(), groups=NoneBotGroups(), on_stop=edge.on_stop,
        redis=redis, history=history, clock=RealClock(cfg.app.tz),
        model=OpenAIChatModel(base_url=os.environ["E2E_STUB"], api_key=None, model="stub"),
    )

build_with(factory)
nonebot.run()
"""

BURST = 900
LAST = 99_999
"""The message id of the mention sent after the burst."""


def burst_frames(rng: random.Random) -> tuple[list[str | bytes], list[str]]:
    """The burst (malformed frames among normal group messages, a few of them mentions), and the
    ids of the messages in it."""
    frames: list[str | bytes] = []
    ids: list[str] = []
    for i in range(BURST):
        kind = i % 6
        if kind == 0:
            frames.append(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 32))))
        elif kind == 1:
            frames.append("{" * rng.randint(1, 4) + "not json")
        elif kind == 2:
            frames.append(
                json.dumps(
                    {"post_type": "message", "self_id": BOT, "message_type": "group", "x": 1}
                )
            )
        else:
            mid = 50_000 + i
            segments = [{"type": "text", "data": {"text": f"刷屏 {i}"}}]
            if i % 60 == 3:
                segments.insert(0, {"type": "at", "data": {"qq": str(BOT)}})
            frames.append(json.dumps(group_message(mid, segments, user=30_000 + i % 40)))
            ids.append(str(mid))
    return frames, ids


class QQSide:
    """Answers every API call as NapCat does and keeps the texts sent to the group."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.sent: list[str] = []
        self.task = asyncio.create_task(self._answer())

    async def _answer(self) -> None:
        with contextlib.suppress(Exception):
            async for raw in self.ws:
                frame = json.loads(raw)
                if frame.get("action") == "send_msg":
                    self.sent += [s["data"].get("text", "") for s in frame["params"]["message"]]
                await self.ws.send(
                    json.dumps(
                        {
                            "status": "ok",
                            "retcode": 0,
                            "data": {"message_id": 9000 + len(self.sent)},
                            "echo": frame.get("echo"),
                        }
                    )
                )


def logged_ids(history_file: Path) -> set[str]:
    with contextlib.closing(sqlite3.connect(history_file)) as db:
        docs = [json.loads(r[0]) for r in db.execute("SELECT _doc FROM chat_log")]
    return {str(d["id"]) for d in docs}


@pytest.mark.slow
async def test_a_burst_of_frames_loses_no_message_and_the_mention_after_it_is_answered(
    redis_url: str, redis: aioredis.Redis, tmp_path: Path
) -> None:
    port = free_port()
    script = tmp_path / "bot_main.py"
    script.write_text(BURST_MAIN, encoding="utf-8")
    log_path = tmp_path / "bot.log"
    data = tmp_path / "data"
    data.mkdir()
    frames, ids = burst_frames(random.Random(21))

    def answer(body: dict[str, Any]) -> str:
        # the last mention is in her context, not always its last line: handlers of messages
        # sent just before it may record theirs a moment later
        said = " ".join(str(m.get("content", "")) for m in body["messages"] if m["role"] == "user")
        return "最后也听到啦" if "最后一句" in said else "在的～"

    with OpenAIStub(handler=answer) as stub:
        env = {
            **os.environ,
            "E2E_PORT": str(port),
            "E2E_TOKEN": TOKEN,
            "E2E_GROUP": str(GROUP),
            "E2E_REDIS": redis_url,
            "E2E_STUB": stub.base_url,
            "E2E_DATA": str(data),
            "PYTHONPATH": str(Path.cwd()),
        }
        with log_path.open("wb") as log_file:
            proc = subprocess.Popen(  # noqa: ASYNC220
                [sys.executable, str(script)],
                env=env,
                cwd=Path.cwd(),
                stdout=log_file,
                stderr=subprocess.STDOUT,
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
            qq = QQSide(ws)
            try:
                for frame in frames:
                    await ws.send(frame)
                last = mention(LAST, " 最后一句，还在吗")
                await ws.send(json.dumps(last))
                deadline = time.monotonic() + 90
                while "最后也听到啦" not in qq.sent and time.monotonic() < deadline:  # noqa: ASYNC110
                    await asyncio.sleep(0.2)
                await asyncio.sleep(1.0)  # the log writes behind the last reply
            finally:
                await ws.close()
                qq.task.cancel()
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    log = log_path.read_text(errors="replace")
    recent = await redis.lrange(Keys("burst").chat_recent("yuiju", f"group:qq:{GROUP}"), 0, -1)
    assert any(json.loads(r)["id"] == str(LAST) for r in recent), log[-3000:]
    assert "最后也听到啦" in qq.sent, log[-3000:]
    missing = set(ids) - logged_ids(data / "history.sqlite3")
    assert not missing, f"{len(missing)} of {len(ids)} messages not in the log\n" + log[-3000:]
    assert "not handled" not in log, [x for x in log.splitlines() if "not handled" in x][:3]
    assert "Traceback" not in log, log[-3000:]


# -- too many answers at once: only answers are shed ------------------------------------------------


async def test_a_burst_of_mentions_sheds_the_oldest_waiting_answers_and_records_every_message(
    redis: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.test_message_service import make_kit
    from yuiju.config import GroupPolicy

    release = asyncio.Event()

    async def slow(messages: list[dict[str, Any]], schema: Any) -> str:
        await release.wait()  # a model that takes its time: the turns pile up
        return "在的～"

    kit = await make_kit(
        redis,
        fn=slow,
        default_group=GroupPolicy(),
        max_concurrent_answers=2,
        max_waiting_answers=3,
    )
    # ten people mention her at once, each in their own group (no reply supersedes another)
    entries = [kit.entry(f"第{i}个", group=1000 + i, user=100 + i, at=True) for i in range(10)]
    with caplog.at_level("WARNING", logger="yuiju.message.busy"):
        handling = [asyncio.create_task(kit.service.handle(e)) for e in entries]
        for _ in range(500):  # until all ten asked for a turn: two answering, three in line
            if kit.service.slots.shed_total == 5:
                break
            await asyncio.sleep(0.01)
        release.set()
        outcomes = await asyncio.gather(*handling)
    answered = [o.answered for o in outcomes]
    assert answered == [True, True, False, False, False, False, False, True, True, True], [
        o.reason for o in outcomes
    ]
    assert all("too busy" in o.reason for o in outcomes[2:7])
    for i in range(10):  # every message is recorded, answered or not
        recent = await kit.service.sessions.recent(f"group:qq:{1000 + i}", 5)
        assert [e.text for e in recent if not e.from_bot] == [f"@悠酱第{i}个"]
    lines = [r.getMessage() for r in caplog.records if r.name == "yuiju.message.busy"]
    assert len(lines) == 1 and "5 answers given up" in lines[0], lines


async def test_two_turns_compacting_one_session_at_once_lose_no_message(
    redis: aioredis.Redis,
) -> None:
    # a burst of mentions in one group: a turn compacting the session (its summary takes the
    # model seconds) and the next turn reading it meanwhile trimmed the summarised items twice,
    # and the newest message (the one being answered) was gone from her context
    from yuiju.llm import FunctionChatModel
    from yuiju.message.session import SessionStore

    sessions = SessionStore(redis, Keys("t"), "yuiju")
    sid = "group:qq:1"
    await sessions.append(sid, [{"role": "user", "content": f"第{i}句" * 20} for i in range(30)])
    summarising = asyncio.Event()
    release = asyncio.Event()

    async def summary(messages: list[dict[str, Any]], schema: Any) -> str:
        summarising.set()
        await release.wait()
        return "之前聊了很多"

    model = FunctionChatModel(summary)
    kw: dict[str, Any] = {"budget": 200, "keep": 4, "model": model, "name": "悠酱"}
    first = asyncio.create_task(sessions.compacted_context(sid, **kw))
    await summarising.wait()
    await sessions.append(sid, [{"role": "user", "content": "最新的一句"}])
    second = asyncio.create_task(sessions.compacted_context(sid, **kw))
    await asyncio.sleep(0.05)  # the second turn reads while the first is summarising
    release.set()
    await first
    summary_text, items = await second
    assert summary_text == "之前聊了很多"
    assert items[-1] == {"role": "user", "content": "最新的一句"}
    assert len(items) == 5  # the four kept, and the one said meanwhile


async def test_background_work_waits_for_the_answers_in_progress_and_no_longer_than_told() -> None:
    from yuiju.message.busy import AnswerSlots

    slots = AnswerSlots(2, 4)
    await slots.quiet(5)  # nothing in progress: at once
    release = asyncio.Event()

    async def answer() -> None:
        async with slots.turn():
            await release.wait()

    answering = asyncio.create_task(answer())
    await asyncio.sleep(0)
    archiving = asyncio.create_task(slots.quiet(60))
    await asyncio.sleep(0.05)
    assert not archiving.done()  # an archiving step waits while she prepares an answer
    release.set()
    await answering
    await asyncio.wait_for(archiving, 5)
    release.clear()
    held = asyncio.create_task(answer())  # one that never ends: the wait is bounded
    await asyncio.sleep(0)
    await asyncio.wait_for(slots.quiet(0.05), 5)
    assert not held.done()
    held.cancel()
    await asyncio.gather(held, return_exceptions=True)
    await slots.quiet(5)  # the cancelled answer gave its turn back


async def test_hundreds_of_messages_at_once_on_a_small_pool_are_all_recorded(
    redis_url: str, redis: aioredis.Redis, tmp_path: Path
) -> None:
    """What lost thousands of messages in a burst: every handler asked the pool for its own
    connections and gave up when none came in time. Each message must reach her context and the
    message log however few connections there are (one queue, one writer)."""
    from tests.test_message_service import make_kit
    from yuiju.storage.sqlite_history import SqliteHistory

    pool = aioredis.BlockingConnectionPool.from_url(
        redis_url, max_connections=2, timeout=0.05, decode_responses=True
    )
    capped = aioredis.Redis.from_pool(pool)
    history = SqliteHistory.open(tmp_path / "history.sqlite3")
    kit = await make_kit(capped, history)
    entries = [kit.entry(f"第{i}句", user=100 + i % 40) for i in range(400)]
    try:
        outcomes = await asyncio.gather(
            *(kit.service.handle(e) for e in entries), return_exceptions=True
        )
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        assert not errors, errors[:3]
        for _ in range(100):  # the writer's last batch
            if len(logged_ids(tmp_path / "history.sqlite3")) >= len(entries):
                break
            await asyncio.sleep(0.05)
    finally:
        await history.close()
        await capped.aclose()
    missing = {e.id for e in entries} - logged_ids(tmp_path / "history.sqlite3")
    assert not missing, f"{len(missing)} of {len(entries)} messages not in the message log"
