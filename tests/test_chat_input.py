"""Bad input on the chat side (issue 11 item 9): lone surrogates, impossible timestamps and ids
beyond 64 bits are cleaned or refused with one log line, and the rest of the conversation is kept
and archived — on both history backends."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import datetime
from typing import Any

import pytest

from nonebot_plugin_yuiju.onebot import REPORT, normalize
from tests.conftest import TZ, at_time
from tests.test_message_service import BOT, GROUP, FakeMemory, make_kit
from yuiju.config import YuijuConfig
from yuiju.memory.diary import DiaryVoice
from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.episodes import EpisodeRepo
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.service import build_memory
from yuiju.memory.vectors import QdrantClientStore
from yuiju.message.recorder import CHAT_LOG
from yuiju.storage.keys import Keys


def payload(
    text: str = "你好",
    *,
    user: int = 5,
    nickname: str = "小明",
    stamp: Any = 1_788_000_000,
    mid: int = 1,
    at: bool = True,
) -> dict[str, Any]:
    segments = ([{"type": "at", "data": {"qq": str(BOT)}}] if at else []) + [
        {"type": "text", "data": {"text": text}}
    ]
    return {
        "message_type": "group",
        "message_id": mid,
        "user_id": user,
        "group_id": GROUP,
        "time": stamp,
        "sender": {"nickname": nickname},
        "message": segments,
    }


async def test_lone_surrogates_are_replaced_and_the_message_kept_answered_and_logged(
    redis: Any,
    history: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    kit = await make_kit(redis, history)
    caplog.set_level(logging.INFO, logger="yuiju.message")
    caplog.set_level(logging.INFO, logger="nonebot_plugin_yuiju")
    entry = normalize(
        payload("你好\ud83d，在吗\udc00", nickname="小\ud800明"),
        self_id=BOT,
        tz=TZ,
        bot_name="悠酱",
    )
    assert (
        entry is not None
        and entry.text == "@悠酱你好\ufffd，在吗\ufffd"
        and entry.sender_name == "小\ufffd明"
    )
    cleaned = [r for r in caplog.records if "surrogate" in r.getMessage()]
    assert len(cleaned) == 1  # one line per message, whatever the number of bad characters
    out = await kit.service.handle(entry)
    assert out.answered and kit.sent == [("group", GROUP, "嗯嗯，我在")]
    recent = await kit.service.sessions.recent(f"group:qq:{GROUP}", 5)
    assert recent[0].text == "@悠酱你好\ufffd，在吗\ufffd"
    await kit.service.drain()  # the message log is written in batches behind the turn
    logged = await history.find(
        CHAT_LOG.name, eq={"character_id": "yuiju", "session_id": f"group:qq:{GROUP}"}
    )
    assert len(logged) == 2 and logged[0]["sender_name"] == "小\ufffd明"


def test_a_surrogate_pair_split_across_escapes_is_joined_not_lost() -> None:
    entry = normalize(payload("好耶\ud83d\ude00"), self_id=BOT, tz=TZ)
    assert entry is not None and entry.text.endswith("好耶😀")


@pytest.mark.parametrize("stamp", [10**20, -(10**20), float("inf"), float("nan"), 1e300])
def test_a_timestamp_out_of_range_becomes_the_time_of_arrival(
    stamp: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="yuiju.message")
    caplog.set_level(logging.INFO, logger="nonebot_plugin_yuiju")
    before = datetime.now(TZ)
    entry = normalize(payload(stamp=stamp), self_id=BOT, tz=TZ)
    assert entry is not None and entry.text == "@我你好"
    assert before <= entry.time <= datetime.now(TZ)
    assert len([r for r in caplog.records if "time" in r.getMessage()]) == 1


@pytest.mark.parametrize("field", ["user_id", "group_id"])
def test_an_id_beyond_64_bits_is_kept_as_text(field: str) -> None:
    # issue 21 item 9: such a message was dropped (neither answered nor recorded)
    raw = payload()
    raw[field] = 2**64 + 5
    entry = normalize(raw, self_id=BOT, tz=TZ)
    assert entry is not None
    if field == "user_id":
        assert entry.user_id == f"qq:{2**64 + 5}"
    else:
        assert entry.conversation.id == str(2**64 + 5)
        assert entry.session_id == f"group:qq:{2**64 + 5}"


async def test_an_id_beyond_64_bits_is_recorded_and_archived_with_the_conversation(
    redis: Any, history: Any
) -> None:
    store = await QdrantClientStore.open(collection="c", dim=64, location=":memory:")
    try:
        memory = await build_memory(
            YuijuConfig(),
            history,
            SemanticMemory(store, HashingEmbedder(64)),
            character_id="yuiju",
            voice=DiaryVoice(name="悠酱", persona="你是悠酱。"),
        )
        kit = await make_kit(
            redis, history, memory=memory, window_messages=4, window_idle_minutes=30
        )
        said = [(5, "今天好热"), (2**63, "我是谁"), (6, "去游泳吧"), (5, "好啊")]
        for i, (user, text) in enumerate(said):
            entry = normalize(
                payload(
                    text,
                    user=user,
                    mid=100 + i,
                    at=False,
                    stamp=int(at_time("2026-09-01 10:00").timestamp()) + i,
                ),
                self_id=BOT,
                tz=TZ,
                bot_name="悠酱",
            )
            if entry is not None:
                await kit.service.handle(entry)
        await kit.service.recorder.flush_windows()
        await kit.service.drain()
        episodes = await EpisodeRepo(history).today(
            "yuiju", at_time("2026-09-01 12:00"), type_="conversation"
        )
        assert len(episodes) == 1
        assert [m["text"] for m in episodes[0].data["messages"]] == [
            "今天好热",
            "我是谁",
            "去游泳吧",
            "好啊",
        ]
        logged = await history.find(CHAT_LOG.name, eq={"character_id": "yuiju"})
        assert f"qq:{2**63}" in {d["user_id"] for d in logged}
    finally:
        await store.close()


async def test_a_stored_message_that_no_longer_validates_costs_only_itself(
    redis: Any, history: Any
) -> None:
    store = await QdrantClientStore.open(collection="c", dim=64, location=":memory:")
    try:
        memory = await build_memory(
            YuijuConfig(),
            history,
            SemanticMemory(store, HashingEmbedder(64)),
            character_id="yuiju",
            voice=DiaryVoice(name="悠酱", persona="你是悠酱。"),
        )
        kit = await make_kit(redis, history, memory=memory)
        await kit.say("今天好热")
        sid = f"group:qq:{GROUP}"
        old = kit.entry("旧版本存下的").model_dump(mode="json")
        old["time"] = "昨天"  # written by a version with looser rules
        for key in (Keys("t").chat_window("yuiju", sid), Keys("t").chat_recent("yuiju", sid)):
            await redis.rpush(key, json.dumps(old))
        await kit.say("去游泳吧")
        assert [e.text for e in await kit.service.sessions.recent(sid, 10)] == [
            "今天好热",
            "去游泳吧",
        ]
        await kit.service.recorder.flush_windows()
        episodes = await EpisodeRepo(history).today(
            "yuiju", at_time("2026-09-01 12:00"), type_="conversation"
        )
        assert [m["text"] for m in episodes[0].data["messages"]] == ["今天好热", "去游泳吧"]
    finally:
        await store.close()


class FlakyMemory(FakeMemory):
    """Memory whose episode store is down until ``outage`` is cleared."""

    outage = True

    @property
    def episodes(self) -> Any:
        memory = self

        class Repo:
            async def put(self, ep: Any) -> None:
                if memory.outage:
                    raise ConnectionError("history is down")
                memory.episodes_put.append(ep)

        return Repo()


async def test_a_window_that_fails_to_archive_is_kept_for_the_next_try(redis: Any) -> None:
    memory = FlakyMemory()
    kit = await make_kit(redis, memory=memory)
    await kit.say("今天好热")
    assert await kit.service.recorder.flush_windows() == 1 and memory.episodes_put == []
    memory.outage = False
    await kit.say("去游泳吧")
    assert await kit.service.recorder.flush_windows() == 1
    [archived] = memory.episodes_put
    assert [m["text"] for m in archived.data["messages"]] == ["今天好热", "去游泳吧"]


class HangingMemory(FakeMemory):
    """Memory whose episode store never answers: archiving is in flight when the process stops."""

    @property
    def episodes(self) -> Any:
        class Repo:
            async def put(self, ep: Any) -> None:
                await asyncio.Event().wait()

        return Repo()


async def test_a_window_whose_archiving_is_cut_short_by_a_stop_is_archived_after_the_restart(
    redis: Any,
) -> None:
    # archiving takes seconds (a summary by the model); a stop, or a kill, in the middle of it
    # must not cost the conversation: it stays in the window until its episode is written
    kit = await make_kit(redis, memory=HangingMemory())
    await kit.say("今天好热")
    await kit.say("去游泳吧")
    archiving = asyncio.create_task(kit.service.recorder.flush_windows())
    await asyncio.sleep(0.05)
    archiving.cancel()  # the stop gave up waiting (a kill -9 would not even get this far)
    await asyncio.gather(archiving, return_exceptions=True)

    memory = FakeMemory()
    restarted = await make_kit(redis, memory=memory)
    assert await restarted.service.recorder.flush_windows() == 1
    [archived] = memory.episodes_put
    assert [m["text"] for m in archived.data["messages"]] == ["今天好热", "去游泳吧"]


@pytest.fixture(autouse=True)
def _fresh_report_budget() -> None:
    """Each test counts its own log lines: the rate limit is per process."""
    REPORT.reset()


async def test_two_messages_that_share_a_platform_id_are_both_kept_in_the_message_log(
    redis: Any, history: Any
) -> None:
    # platform message ids are not unique forever (a reconnected implementation, a fuzzer, 32-bit
    # hashes): found by bench/faults.py, a later message overwrote an earlier one's log record
    kit = await make_kit(redis, history)
    for text, user in (("今天好热", 5), ("去游泳吧", 6)):
        entry = normalize(
            payload(text, user=user, mid=777, at=False), self_id=BOT, tz=TZ, bot_name="悠酱"
        )
        assert entry is not None
        await kit.service.handle(entry)
        await kit.service.handle(entry)  # the same event delivered twice is logged once
    await kit.service.drain()
    logged = await history.find(
        CHAT_LOG.name, eq={"character_id": "yuiju", "session_id": f"group:qq:{GROUP}"}
    )
    assert sorted(d["text"] for d in logged) == ["今天好热", "去游泳吧"]


async def test_two_windows_that_start_in_the_same_second_are_two_episodes(redis: Any) -> None:
    # platforms stamp messages to the second: in a busy group two windows can start in the same
    # second, and found by bench/faults.py, the second episode overwrote the first (one id)
    memory = FakeMemory()
    kit = await make_kit(redis, memory=memory)
    for n, text in enumerate(("今天好热", "去游泳吧")):
        entry = normalize(
            payload(text, user=5 + n, mid=100 + n, at=False), self_id=BOT, tz=TZ, bot_name="悠酱"
        )
        assert entry is not None
        await kit.service.handle(entry)
        assert (
            await kit.service.recorder.flush_windows() == 1
        )  # one window each, both started at 1_788_000_000
    assert len({ep.id for ep in memory.episodes_put}) == 2


class LockedHistory:
    """A history file another program holds locked: a write waits on it until the stop."""

    async def ensure(self, *a: Any, **kw: Any) -> None:
        return None

    async def put(self, *a: Any, **kw: Any) -> None:
        await asyncio.Event().wait()


async def test_a_message_whose_log_write_is_cut_short_by_a_stop_is_still_archived_after_the_restart(
    redis: Any,
) -> None:
    # found by bench/faults.py: messages that arrived while the history file was locked, then a
    # SIGTERM, reached neither the message log nor a conversation (the window came after the log)
    kit = await make_kit(redis, LockedHistory(), memory=FakeMemory())
    entry = normalize(payload("锁住的时候说的话", at=False), self_id=BOT, tz=TZ, bot_name="悠酱")
    assert entry is not None
    handling = asyncio.create_task(kit.service.handle(entry))
    await asyncio.sleep(0.05)
    handling.cancel()  # the bot stops: the reply, and the write still waiting, are given up
    await asyncio.gather(handling, return_exceptions=True)

    memory = FakeMemory()
    restarted = await make_kit(redis, memory=memory)
    assert await restarted.service.recorder.flush_windows() == 1
    [archived] = memory.episodes_put
    assert [m["text"] for m in archived.data["messages"]] == ["锁住的时候说的话"]


async def test_a_window_that_meets_redis_down_when_archiving_costs_one_line_and_stays(
    redis: Any, caplog: pytest.LogCaptureFixture
) -> None:
    # found by bench/faults.py: the embedded Redis killed while a window closed; the background
    # archiving task died with the ConnectionError ("Task exception was never retrieved", a traceback)
    from redis.exceptions import ConnectionError as RedisConnectionError

    memory = FakeMemory()
    kit = await make_kit(redis, memory=memory)
    await kit.say("今天好热")
    sessions = kit.service.recorder.sessions
    peek = sessions.window_peek

    async def down(*a: Any, **kw: Any) -> Any:
        raise RedisConnectionError("Error 111 connecting to redis.sock. Connection refused.")

    sessions.window_peek = down  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING):
        await kit.service.recorder.flush_windows()
    assert [r.levelno for r in caplog.records if "not archived" in r.getMessage()] == [
        logging.WARNING
    ]
    assert not any(r.exc_info for r in caplog.records)

    sessions.window_peek = peek  # type: ignore[method-assign]  # Redis is back
    assert await kit.service.recorder.flush_windows() == 1
    [archived] = memory.episodes_put
    assert [m["text"] for m in archived.data["messages"]] == ["今天好热"]


class PickyChatMemory(FakeMemory):
    """Memory whose chat store takes a window line by line only, and refuses one line."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    @property
    def chat(self) -> Any:
        memory = self

        class Chat:
            async def add_many(self, lines: list[Any]) -> list[str]:
                raise ValueError("one of these lines cannot be stored")

            async def add(self, user_id: str, text: str, *a: Any, **kw: Any) -> str:
                if "坏" in text:
                    raise ValueError("this one cannot be stored")
                memory.lines.append(text)
                return text

        return Chat()


async def test_a_window_whose_lines_cannot_be_stored_together_loses_only_the_bad_line(
    redis: Any,
) -> None:
    memory = PickyChatMemory()
    kit = await make_kit(redis, memory=memory)
    for text in ("今天好热", "坏掉的一句", "去游泳吧"):
        await kit.say(text)
    assert await kit.service.recorder.flush_windows() == 1
    assert memory.lines == ["今天好热", "去游泳吧"]
