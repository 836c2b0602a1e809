"""`yuiju bot` alone writes the episode outbox to history (issue 21 item 7): the ledger of its
model calls goes through the outbox, and with no world engine running nobody else flushes it."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

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
from tests.test_daemon_faults import start_yuiju
from tests.test_outbox import episode
from yuiju.config import load_config
from yuiju.memory.episodes import EpisodeRepo
from yuiju.memory.ledger import LLM_CALLS
from yuiju.storage.keys import Keys
from yuiju.world.runtime import open_stores


async def outbox_and_history(config: Path) -> tuple[int, bool, int]:
    """(entries queued, the episode queued before the bot started is in history, ledger documents)."""
    cfg = load_config(config)
    handle, history = await open_stores(cfg)
    try:
        queued = int(await handle.client.llen(Keys(cfg.redis.prefix).episode_outbox))
        await EpisodeRepo(history).ensure()
        await history.ensure(LLM_CALLS)
        written = await history.get("episodes", "bhv_7") is not None
        return queued, written, await history.count(LLM_CALLS.name)
    finally:
        await history.close()
        await handle.aclose()


@pytest.mark.slow
async def test_a_bot_process_alone_flushes_the_outbox_it_writes_to(tmp_path: Path) -> None:
    port = free_port()
    with OpenAIStub() as stub:
        stub.reply("在的～")
        config = tmp_path / "yuiju.toml"
        config.write_text(
            f"""
[app]
data_dir = "{(tmp_path / "data").as_posix()}"
[llm]
base_url = "{stub.base_url}"
model = "stub"
[memory]
enabled = false
[onebot]
enabled = true
port = {port}
access_token = "t"
[chat]
mode = "CHAT"
max_pause_seconds = 0
[chat.groups.{GROUP}]
reply = "mention"
""",
            encoding="utf-8",
        )
        # an episode the world engine queued before it stopped: the bot's flush writes it too
        cfg = load_config(config)
        handle, history = await open_stores(cfg)
        await handle.client.rpush(Keys(cfg.redis.prefix).episode_outbox, episode(7))
        await history.close()
        await handle.aclose()

        log_path = tmp_path / "bot.log"
        proc = await start_yuiju(config, "bot", log=log_path, stdout=None)
        try:
            ws = await connect(
                f"ws://127.0.0.1:{port}/onebot/v11/ws",
                {"X-Self-ID": str(BOT), "X-Client-Role": "Universal", "Authorization": "Bearer t"},
            )
            try:
                await ws.send(json.dumps(mention(8101, " 在吗")))
                calls = await calls_until_quiet(ws, 3.0)
                assert any(c["action"] == "send_msg" for c in calls), log_path.read_text()[-3000:]
                # while the bot runs, with no engine anywhere: what was queued reaches history
                deadline = time.monotonic() + 30
                while not (await outbox_and_history(config))[1]:
                    assert time.monotonic() < deadline, (
                        "the queued episode was never written\n" + log_path.read_text()[-3000:]
                    )
                    await asyncio.sleep(0.5)
            finally:
                await ws.close()
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), 30) == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    queued, written, calls = await outbox_and_history(config)
    log = log_path.read_text(errors="replace")
    # the chat call's ledger entry is written by the stop at the latest
    assert (queued, written) == (0, True), log[-3000:]
    assert calls >= 1, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
