"""A seeded fuzz of the chat side, end to end without nonebot: mangled OneBot events and a model
that answers with fragments, reasoning, JSON, surrogates and cut-off text. Nothing raises, every
event that is a message is recorded, and nothing that is not a message reaches a group."""

from __future__ import annotations

import json
import random
from typing import Any

from nonebot_plugin_yuiju.onebot import REPORT, normalize
from tests.conftest import TZ, at_time
from tests.test_message_service import BOT, GROUP, FakeMemory, episode, make_kit
from yuiju.llm import ToolCall, ToolChatResult
from yuiju.storage.keys import Keys

BAD_ANSWERS = [
    '{"action": "eat", "reason": "肚子饿',
    '", "confiden',
    "<think>想想怎么回答</think>",
    "<think>嗯……",
    "```json\n{}\n```",
    '{"shouldSend": true}',
    "好呀\ud83d",
    "今天去水音池钓鱼了！",
    "",
    "   ",
    "[CQ:at,qq=all] 大家好",
    "@全体成员 快看",
    '<tool_call>{"name": "x"}</tool_call>',
    "（笑",
    "今天没去公园",
    "嗯嗯" * 400,
]
GOOD_ANSWERS = ["在的～", "今天早上去公园散步了", "刚忙完，你呢？", "好耶！"]
TEXTS = [
    "在吗",
    "你好\ud83d",
    "\udc00",
    "今天干嘛了",
    "[CQ:face,id=1]",
    "a" * 3000,
    "",
    "悠酱",
    "\x00\x01",
]


def mangled_event(rng: random.Random, mid: int) -> dict[str, Any]:
    event: dict[str, Any] = {
        "message_type": rng.choice(["group", "group", "private", "notice", None, 5]),
        "message_id": rng.choice([mid, str(mid), None, [mid]]),
        "user_id": rng.choice([5, 2, 1, "7", 2**63, -(2**63) - 1, None, "x", 1.5]),
        "group_id": rng.choice([GROUP, GROUP, str(GROUP), 2**64, None, "g"]),
        "time": rng.choice(
            [int(at_time("2026-09-01 10:00").timestamp()), 10**20, float("nan"), "now", None, -1]
        ),
        "sender": rng.choice(
            [{"nickname": "小\ud800明"}, {"card": "明"}, None, "x", {"nickname": 5}]
        ),
        "message": rng.choice(
            [
                [
                    {"type": "at", "data": {"qq": str(BOT)}},
                    {"type": "text", "data": {"text": rng.choice(TEXTS)}},
                ],
                [{"type": "text", "data": {"text": rng.choice(TEXTS)}}],
                rng.choice(TEXTS),
                None,
                42,
                [None, "x", {"type": 5}],
                [{"type": "image", "data": None}],
            ]
        ),
    }
    if rng.random() < 0.2:
        event["reply"] = {
            "message_id": 1,
            "sender_id": rng.choice([BOT, "x", None]),
            "text": rng.choice(TEXTS),
        }
    return event


async def test_fuzzed_events_and_model_answers_never_crash_nor_reach_a_group_unfiltered(
    redis: Any,
) -> None:
    rng = random.Random(11)

    def model(messages: list[dict[str, Any]], schema: Any) -> Any:
        roll = rng.random()
        if roll < 0.1:
            return ToolCall(
                id=f"c{rng.random()}",
                name=rng.choice(["today_events", "nope", "current_state"]),
                arguments=rng.choice(["{}", "{bad", "[]"]),
            )
        if roll < 0.2:
            return ToolChatResult(
                text=rng.choice(GOOD_ANSWERS),
                model="f",
                prompt_tokens=0,
                completion_tokens=0,
                latency_ms=0,
                finish_reason="length",
            )
        return rng.choice(BAD_ANSWERS + GOOD_ANSWERS)

    kit = await make_kit(
        redis,
        fn=model,
        memory=FakeMemory(events=[episode("在公园散步了一会儿")]),
        user_messages_per_minute=1000,
        group_replies_per_minute=1000,
        group_messages_per_minute=1000,
    )
    recorded = 0
    for mid in range(300):
        entry = normalize(mangled_event(rng, mid), self_id=BOT, tz=TZ, bot_name="悠酱")
        if entry is not None:
            recorded += 1
            await kit.service.handle(entry)
    REPORT.reset()
    await kit.service.drain()
    assert recorded > 20
    lines = [t for _, _, t in kit.sent]
    assert lines, "she never answered"
    for line in lines:
        assert kit.service.output.review(line).problem is None, line
        assert not any(
            mark in line
            for mark in ('{"', '"}', "<think", "</think", "```", "CQ:", "@全体", "\ufffd")
        ), line
        assert "钓鱼" not in line, line  # today's record has no fishing
    stored = await redis.lrange(Keys("t").chat_recent("yuiju", f"group:qq:{GROUP}"), 0, -1)
    assert stored and all(json.loads(s)["text"] for s in stored)
