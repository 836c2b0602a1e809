"""Fuzzed OneBot v11 frames for issue 31's bar: complete group messages with ``data: null``
segments among their readable ones (some missing a field nobody reads), text frames with bytes
that are not UTF-8, and messages with nothing readable left. Seeded, so a failure reruns the same
frames: the test (tests/test_bot_frames.py) sends a few hundred; bench/chat_burst.py
``--issue31`` mixes the same kinds into 10,000 frames at 200/s.

A *complete* message is one whose sender, group and text can be read: each must be recorded. (A
message of ``data: null`` segments alone may be recorded too: a face without its id still reads
as ``[表情]``.)"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from typing import Any

NULL_DATA_TYPES = ("face", "image", "mface", "record", "reply", "at", "text", "json", "forward")
DROPPABLE = ("font", "raw_message", "sub_type", "sender", "time", "self_id", "anonymous")
"""Fields of a message event that an implementation may leave out: the message is still kept."""


@dataclass(frozen=True)
class Frame:
    payload: bytes | str
    """What goes on the socket, always as a text frame (bytes: not UTF-8)."""
    complete: int | None
    """The message id when this is a complete message, else None."""


def message(mid: int, group: int, segments: list[Any], *, bot: int, user: int) -> dict[str, Any]:
    return {
        "time": int(time.time()),
        "self_id": bot,
        "post_type": "message",
        "message_type": "group",
        "sub_type": "normal",
        "message_id": mid,
        "group_id": group,
        "user_id": user,
        "anonymous": None,
        "message": segments,
        "raw_message": "",
        "font": 0,
        "sender": {"user_id": user, "nickname": "小明", "card": "", "role": "member"},
    }


def null_segments(rng: random.Random) -> list[dict[str, Any]]:
    """One to three segments of any type with ``data: null``."""
    return [{"type": rng.choice(NULL_DATA_TYPES), "data": None} for _ in range(rng.randint(1, 3))]


def with_nulls(event: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """``event`` (a complete message) with `null_segments` among its segments, and one time in
    three without one of `DROPPABLE`."""
    segments = [*event["message"], *null_segments(rng)]
    rng.shuffle(segments)
    out = {**event, "message": segments}
    if rng.random() < 1 / 3:
        out.pop(rng.choice(DROPPABLE))
    return out


def not_utf8(event: dict[str, Any], rng: random.Random) -> bytes:
    """``event`` as JSON with one to three bytes that are not UTF-8 in place of a character of
    its first text (it must have one)."""
    raw = json.dumps(event, ensure_ascii=False).encode()
    text = next(s["data"]["text"] for s in event["message"] if s.get("type") == "text")
    bad = bytes([rng.choice([0xFF, 0xFE, 0xC0, 0x80, 0xED])]) * rng.randint(1, 3)
    return raw.replace(text[0].encode(), bad, 1)


def fuzz_frames(
    seed: int, count: int, *, group: int, bot: int, first_id: int, user: int = 20002
) -> list[Frame]:
    """``count`` frames for ``group``: about half complete messages (`with_nulls`), a quarter
    text frames that are not UTF-8 (`not_utf8`), a quarter messages of ``data: null`` segments
    alone."""
    rng = random.Random(seed)
    frames = []
    for i in range(count):
        mid = first_id + i
        roll = rng.random()
        if roll < 0.5:
            text = [{"type": "text", "data": {"text": f"第{i}句"}}]
            body = with_nulls(message(mid, group, text, bot=bot, user=user), rng)
            frames.append(Frame(json.dumps(body, ensure_ascii=False), mid))
        elif roll < 0.75:
            text = [{"type": "text", "data": {"text": "坏字节"}}]
            frames.append(Frame(not_utf8(message(mid, group, text, bot=bot, user=user), rng), None))
        else:
            nulls = [n for n in null_segments(rng) if n["type"] != "text"]
            body = message(mid, group, nulls, bot=bot, user=user)
            frames.append(Frame(json.dumps(body, ensure_ascii=False), None))
    return frames
