"""Fuzzed OneBot v11 frames for issue 31's bar: complete group messages (some with ``data: null``
segments, some missing a field nobody reads) between text frames that are not UTF-8 and messages
with nothing readable left. `fuzz_frames` is seeded, so a failure reruns the same frames; the test
(tests/test_bot_frames.py) sends a few hundred, bench/frame_fuzz.py as many as asked.

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


def fuzz_frames(
    seed: int, count: int, *, group: int, bot: int, first_id: int, user: int = 20002
) -> list[Frame]:
    """``count`` frames for ``group``: about half complete messages with ``data: null`` segments
    among readable text (a third of them missing one of `DROPPABLE`), a quarter text frames with
    bytes that are not UTF-8, a quarter messages of ``data: null`` segments alone."""
    rng = random.Random(seed)
    frames = []
    for i in range(count):
        mid = first_id + i
        roll = rng.random()
        nulls = [
            {"type": rng.choice(NULL_DATA_TYPES), "data": None} for _ in range(rng.randint(1, 3))
        ]
        if roll < 0.5:
            segments = [{"type": "text", "data": {"text": f"第{i}句"}}, *nulls]
            rng.shuffle(segments)
            body = message(mid, group, segments, bot=bot, user=user)
            if rng.random() < 1 / 3:
                body.pop(rng.choice(DROPPABLE))
            frames.append(Frame(json.dumps(body, ensure_ascii=False), mid))
        elif roll < 0.75:
            body = message(
                mid, group, [{"type": "text", "data": {"text": "坏字节"}}], bot=bot, user=user
            )
            raw = json.dumps(body, ensure_ascii=False).encode()
            bad = bytes([rng.choice([0xFF, 0xFE, 0xC0, 0x80, 0xED])])
            frames.append(Frame(raw.replace("坏".encode(), bad * rng.randint(1, 3), 1), None))
        else:
            body = message(
                mid, group, [n for n in nulls if n["type"] != "text"], bot=bot, user=user
            )
            frames.append(Frame(json.dumps(body, ensure_ascii=False), None))
    return frames
