"""Malformed OneBot frames over a real WebSocket (issue 11 item 11): each costs one log line, not a
traceback, at most a burst of lines a minute; the connection stays up and the next real message
is answered."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.openai_stub import OpenAIStub
from tests.test_bot_e2e import (
    BOT,
    BOT_MAIN,
    GROUP,
    TOKEN,
    calls_until_quiet,
    connect,
    free_port,
    group_message,
)

LOGGED_MAIN = (
    "import logging, sys\nlogging.basicConfig(level=logging.INFO, stream=sys.stderr)\n" + BOT_MAIN
)

BAD_FRAMES: list[Any] = [
    "{not json",  # invalid JSON
    b"\xff\xfe\x00garbage",  # binary, not UTF-8
    json.dumps([1, 2, 3]),  # JSON, not an object
    json.dumps({"post_type": "message", "self_id": BOT, "message_type": "group", "broken": True}),
    json.dumps(
        {
            "post_type": "message",
            "time": "yesterday",
            "self_id": "x" * 5000,
            "message_type": "group",
            "message": {"bad": [None] * 500},
        }
    ),  # a large broken frame: its raw text is not logged
    json.dumps({"post_type": "notice", "time": 1, "self_id": BOT}),
]


def frame_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "bad OneBot frame" in line]


@pytest.mark.slow
async def test_bad_frames_cost_one_line_each_within_a_rate_limit_and_lose_nothing(
    redis_url: str, tmp_path: Path
) -> None:
    async with bot_session(redis_url, tmp_path, "在的～", "还在呢") as bot:
        for frame in BAD_FRAMES:
            await bot.ws.send(frame)
        await asyncio.sleep(1.0)
        first = bot.log()
        answered = await bot.mention(5001, " 在吗")
        for i in range(300):  # a fuzzer: far more bad frames than the burst
            await bot.ws.send(BAD_FRAMES[i % len(BAD_FRAMES)])
        answered_again = await bot.mention(5002, " 还在吗")
        log_path = bot.log_path
    log = log_path.read_text(errors="replace")
    assert "Traceback" not in log and "Failed to parse event" not in log, log[-3000:]
    assert len(frame_lines(first)) == len(BAD_FRAMES) - 1, first[
        -3000:
    ]  # the notice is a valid event
    assert "x" * 300 not in log  # a bad frame is quoted short
    lines = frame_lines(log)
    assert len(lines) <= 12, "\n".join(lines[-20:])
    assert len(log.encode()) < 20_000
    assert answered + answered_again == ["在的～", "还在呢"], log[-3000:]


@pytest.mark.parametrize(
    "mangled",
    [
        {"message_type": True},  # the adapter's model lookup joins the type names: TypeError
        {"message_id": None},  # no message model fits: a bare event claiming to be a message
        {"sub_type": ["x"]},
    ],
)
def test_a_message_event_with_a_mangled_field_is_skipped_with_one_line(
    mangled: dict[str, Any],
) -> None:
    # found by bench/faults.py: these raised inside the adapter (a traceback each), or became an
    # event without a message that nonebot's command parsing then failed on (another traceback)
    from nonebot.adapters.onebot.v11 import Adapter

    from nonebot_plugin_yuiju.frames import onebot as frames

    frames.REPORT.reset()
    reported: list[str] = []
    original = frames.report
    frames.report = lambda problem, frame: reported.append(problem)  # type: ignore[assignment]
    try:
        assert (
            frames.parse_event(
                Adapter, {**group_message(7, [{"type": "text", "data": {"text": "x"}}]), **mangled}
            )
            is None
        )
    finally:
        frames.report = original  # type: ignore[assignment]
    assert len(reported) == 1, reported


def test_a_well_formed_message_still_parses() -> None:
    from nonebot.adapters.onebot.v11 import Adapter, GroupMessageEvent

    from nonebot_plugin_yuiju.frames import onebot as frames

    event = frames.parse_event(
        Adapter, group_message(8, [{"type": "text", "data": {"text": "在吗"}}])
    )
    assert isinstance(event, GroupMessageEvent)


# -- one bot over a real WebSocket, for the tests below ---------------------------------------------


@dataclass
class Session:
    ws: Any
    stub: OpenAIStub
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def mention(self, mid: int, text: str, *extra: dict[str, Any]) -> list[str]:
        """Mention her in the group (``extra`` segments after the text); what she sent back."""
        segments = [
            {"type": "at", "data": {"qq": str(BOT)}},
            {"type": "text", "data": {"text": text}},
            *extra,
        ]
        await self.ws.send(json.dumps(group_message(mid, segments)))
        calls = await calls_until_quiet(self.ws, 3.0)
        return [
            c["params"]["message"][0]["data"]["text"] for c in calls if c["action"] == "send_msg"
        ]


@contextlib.asynccontextmanager
async def bot_session(
    redis_url: str, tmp_path: Path, *replies: str, groups: tuple[int, ...] = (GROUP,)
) -> AsyncIterator[Session]:
    """The bot in a subprocess (logging to a file), connected as a OneBot implementation, with
    ``groups`` configured; the model stub answers ``replies`` in order."""
    port = free_port()
    script = tmp_path / "bot_main.py"
    script.write_text(LOGGED_MAIN, encoding="utf-8")
    log_path = tmp_path / "bot.log"
    with OpenAIStub() as stub:
        stub.reply(*replies)
        env = {
            **os.environ,
            "E2E_PORT": str(port),
            "E2E_TOKEN": TOKEN,
            "E2E_GROUP": ",".join(map(str, groups)),
            "E2E_REDIS": redis_url,
            "E2E_STUB": stub.base_url,
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
                yield Session(ws, stub, log_path)
            finally:
                await ws.close()
        finally:
            proc.terminate()
            proc.wait(timeout=10)


DEEP = 100_000
DEEP_FRAMES = [
    "[" * DEEP + "]" * DEEP,
    '{"a":' * DEEP + "1" + "}" * DEEP,
    json.dumps(group_message(6001, []))[:-1].replace(
        '"message": []', '"message": ' + "[" * DEEP + "]" * DEEP
    )
    + "}",
]
"""Frames nested far deeper than the decoder recurses: each is one line, the connection stays."""


@pytest.mark.slow
async def test_a_frame_nested_too_deep_to_decode_is_one_line_and_the_connection_stays(
    redis_url: str, tmp_path: Path
) -> None:
    async with bot_session(redis_url, tmp_path, "在的～") as bot:
        for frame in DEEP_FRAMES:
            await bot.ws.send(frame)
        said = await bot.mention(6002, " 在吗")
        log = bot.log()
    assert said == ["在的～"], log[-3000:]
    assert "Traceback" not in log and "maximum recursion" not in log, log[-3000:]
    lines = frame_lines(log)
    assert len(lines) == len(DEEP_FRAMES) and all("RecursionError" in x for x in lines), lines
    assert "closed" not in log.lower(), log[-3000:]


BAD_SEGMENTS: list[Any] = [
    {"type": "text", "data": {}},
    {"type": "text", "data": {"text": None}},
    {"type": "text"},
    {"type": "at", "data": {}},
    {"type": "reply", "data": {"id": "not a number"}},
    {"type": 5, "data": {}},
    {"data": {"text": "无类型"}},
    "garbage",
    {"type": "image", "data": "not a dict"},
]


@pytest.mark.slow
async def test_bad_segments_are_skipped_and_the_rest_of_the_message_is_answered(
    redis_url: str, tmp_path: Path
) -> None:
    async with bot_session(redis_url, tmp_path, "在的～", "还在呢") as bot:
        said = await bot.mention(7001, " 在吗", *BAD_SEGMENTS)
        asked = json.dumps(bot.stub.requests[-1]["messages"], ensure_ascii=False)
        for i in range(300):  # a fuzzer: far more bad messages than the burst
            bad = group_message(7100 + i, [BAD_SEGMENTS[i % len(BAD_SEGMENTS)]])
            await bot.ws.send(json.dumps(bad))
        said += await bot.mention(
            7002, " 还在吗", {"type": "text", "data": {}}, {"type": "text", "data": {"text": 42}}
        )
        log = bot.log()
    assert said == ["在的～", "还在呢"], log[-3000:]
    assert "在吗" in asked
    assert "Traceback" not in log and "never retrieved" not in log, log[-3000:]
    assert "Error when getting message reply info" not in log, log[-3000:]
    lines = [line for line in log.splitlines() if "bad OneBot segment" in line]
    assert 1 <= len(lines) <= 12, "\n".join(lines[-20:])


def test_segments_are_normalised_and_bad_ones_skipped_before_the_event_is_built() -> None:
    from nonebot.adapters.onebot.v11 import Adapter, GroupMessageEvent

    from nonebot_plugin_yuiju.frames import onebot as frames

    segments = [
        {"type": "at", "data": {"qq": str(BOT)}},
        *BAD_SEGMENTS,
        {"type": "text", "data": {"text": 42}},
        {"type": "face", "data": {"id": "1"}},
    ]
    event = frames.parse_event(Adapter, group_message(9, segments))
    assert isinstance(event, GroupMessageEvent)
    assert [(s.type, dict(s.data)) for s in event.message] == [
        ("at", {"qq": str(BOT)}),
        ("image", {}),
        ("text", {"text": "42"}),
        ("face", {"id": "1"}),
    ]


def test_a_lone_surrogate_in_a_text_is_replaced_with_one_rate_limited_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from nonebot.adapters.onebot.v11 import Adapter

    from nonebot_plugin_yuiju.frames import onebot as frames

    frames.SEGMENTS.reset()
    segments = [{"type": "text", "data": {"text": "好\ud800呀"}}]
    with caplog.at_level("WARNING", logger="nonebot_plugin_yuiju.frames"):
        events = [frames.parse_event(Adapter, group_message(i, segments)) for i in range(30)]
    assert all(e is not None and e.get_plaintext() == "好\ufffd呀" for e in events)
    lines = [r.getMessage() for r in caplog.records if "surrogate" in r.getMessage()]
    assert 1 <= len(lines) <= frames.SEGMENTS.burst, lines
    assert "\ud800" not in "".join(lines)


async def test_an_api_result_for_a_call_given_up_a_moment_ago_does_not_close_the_connection() -> (
    None
):
    # found by bench/chat_burst.py --answer-all: a newer mention cancels the reply in flight; if
    # its send_msg result arrived before the cancelled call had cleaned up, the adapter's result
    # store raised InvalidStateError out of the WebSocket loop, which closed the connection
    from nonebot.adapters.onebot.v11 import Adapter

    store = Adapter._result_store
    given_up = asyncio.get_running_loop().create_future()
    waiting = asyncio.get_running_loop().create_future()
    given_up_seq, waiting_seq = store.get_seq(), store.get_seq()
    store._futures[given_up_seq] = given_up
    store._futures[waiting_seq] = waiting
    try:
        given_up.cancel()
        result = {"status": "ok", "retcode": 0, "data": {"message_id": 1}}
        assert Adapter.json_to_event({**result, "echo": str(given_up_seq)}) is None
        assert Adapter.json_to_event({**result, "echo": str(waiting_seq)}) is None
        assert waiting.result()["data"] == {"message_id": 1}  # a live call still gets its answer
    finally:
        store._futures.pop(given_up_seq, None)
        store._futures.pop(waiting_seq, None)


# -- issue 31: data:null segments, invalid UTF-8, messages missing fields nobody reads ---------------

NULL_DATA_MESSAGE = [
    {"type": "at", "data": {"qq": str(BOT)}},
    {"type": "text", "data": {"text": " 你好"}},
    {"type": "face", "data": None},
]
"""Issue 31 item 2, as an implementation sent it: the message was lost and nonebot's log line of
the event raised on the face's ``data``."""


def test_a_segment_with_null_data_keeps_its_message_and_the_event_logs() -> None:
    from nonebot.adapters.onebot.v11 import Adapter, GroupMessageEvent

    from nonebot_plugin_yuiju.frames import onebot as frames

    event = frames.parse_event(Adapter, group_message(31, NULL_DATA_MESSAGE))
    assert isinstance(event, GroupMessageEvent)
    assert [s.type for s in event.original_message] == ["at", "text", "face"]
    assert "[face]" in event.get_log_string()  # nonebot logs every event it handles with this


@pytest.mark.parametrize(
    "missing", ["font", "raw_message", "sub_type", "sender", "time", "self_id"]
)
def test_a_message_event_missing_a_field_nobody_reads_is_kept(missing: str) -> None:
    from nonebot.adapters.onebot.v11 import (
        Adapter,
        GroupMessageEvent,
        PrivateMessageEvent,
    )

    from nonebot_plugin_yuiju.frames import onebot as frames

    group = group_message(32, [{"type": "text", "data": {"text": "在吗"}}])
    private = {k: v for k, v in group.items() if k not in ("group_id", "anonymous")}
    private.update(message_type="private", sub_type="friend")
    for data, model in ((group, GroupMessageEvent), (private, PrivateMessageEvent)):
        event = frames.parse_event(Adapter, {k: v for k, v in data.items() if k != missing})
        assert isinstance(event, model), (missing, data["message_type"])
        assert (event.user_id, event.get_plaintext()) == (20002, "在吗")
        event.get_log_string()


def group_message_in(mid: int, group: int, segments: list[dict[str, Any]]) -> dict[str, Any]:
    return {**group_message(mid, segments), "group_id": group}


@pytest.mark.slow
async def test_a_text_frame_that_is_not_utf8_is_one_line_and_the_connection_stays(
    redis_url: str, tmp_path: Path
) -> None:
    from tests.frame_fuzz import not_utf8

    async with bot_session(redis_url, tmp_path, "在的～") as bot:
        text = [{"type": "text", "data": {"text": "坏字节"}}]
        await bot.ws.send(not_utf8(group_message(31001, text), random.Random(31)), text=True)
        said = await bot.mention(31002, " 在吗")
        open_after = bot.ws.state.name
        log = bot.log()
    assert said == ["在的～"] and open_after == "OPEN", log[-3000:]
    assert "Traceback" not in log and "Invalid UTF-8" not in log, log[-3000:]
    [line] = frame_lines(log)
    assert "UnicodeDecodeError" in line, line


OTHER_GROUP = 654321


async def recorded_ids(redis_url: str, group: int) -> set[str]:
    """The ids of the messages she recorded in ``group`` (its recent list)."""
    import redis.asyncio as aioredis

    from yuiju.message.model import Conversation
    from yuiju.storage.keys import Keys

    key = Keys("e2e").chat_recent("yuiju", Conversation.group("qq", group).session_id)
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        return {json.loads(raw)["id"] for raw in await client.lrange(key, 0, -1)}
    finally:
        await client.aclose()


@pytest.mark.slow
async def test_fuzzed_frames_lose_no_complete_message_and_a_mention_elsewhere_is_answered(
    redis_url: str, tmp_path: Path
) -> None:
    from tests.frame_fuzz import fuzz_frames

    frames = fuzz_frames(31, 150, group=GROUP, bot=BOT, first_id=310_000)  # < RECENT_LIMIT kept
    complete = {str(f.complete) for f in frames if f.complete is not None}
    async with bot_session(redis_url, tmp_path, "在的～", groups=(GROUP, OTHER_GROUP)) as bot:
        for frame in frames:
            await bot.ws.send(frame.payload, text=True)
        for _ in range(300):  # every complete message recorded, however slow the machine
            if complete <= await recorded_ids(redis_url, GROUP):
                break
            await asyncio.sleep(0.1)
        lost = complete - await recorded_ids(redis_url, GROUP)
        at_her = [
            {"type": "at", "data": {"qq": str(BOT)}},
            {"type": "text", "data": {"text": " 在吗"}},
        ]
        await bot.ws.send(json.dumps(group_message_in(319_999, OTHER_GROUP, at_her)))
        calls = await calls_until_quiet(bot.ws, 3.0)
        still_open = bot.ws.state.name == "OPEN"
        log = bot.log()
    assert not lost, f"{len(lost)} of {len(complete)} complete messages lost:\n{log[-3000:]}"
    sent = [c["params"] for c in calls if c["action"] == "send_msg"]
    assert [(p["group_id"], p["message"][0]["data"]["text"]) for p in sent] == [
        (OTHER_GROUP, "在的～")
    ], log[-3000:]
    assert still_open and "closed" not in log.lower(), log[-3000:]
    assert "Traceback" not in log and "never retrieved" not in log, log[-3000:]
