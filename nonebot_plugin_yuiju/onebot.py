"""OneBot v11 → the core's `Entry`: the QQ adapter's mapping (platform ``qq``).

`normalize` takes the plain OneBot v11 JSON (segments as ``{"type", "data"}`` dicts), so it is
tested without nonebot; malformed pieces are skipped with a log line, never raised. People become
``qq:<number>``, the group ``Conversation.group("qq", <number>)``; ids of any size are kept as text.
"""

from __future__ import annotations

import json
import logging
import math
import re
from datetime import datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any

from yuiju.message.model import Conversation, Entry, Retraction, Segment, clean_text
from yuiju.message.ratelog import RateLimitedLog

if TYPE_CHECKING:
    from nonebot.adapters.onebot.v11 import MessageEvent

log = logging.getLogger(__name__)
REPORT = RateLimitedLog(log, burst=30)
"""Lines about bad messages: one per message, at most a burst a minute (a fuzzer fills no disk)."""

PLATFORM = "qq"
TRUNCATED_MARK = "…（后面太长，省略了）"
EARLIEST = datetime(2000, 1, 1).astimezone()
FUTURE_SLACK = timedelta(days=1)
"""A message stamped later than now plus this (a wrong clock, a fuzzer) gets its arrival time."""

SEGMENT_TYPES = {
    "text": "text",
    "at": "at",
    "face": "face",
    "mface": "sticker",
    "marketface": "sticker",
    "image": "image",
    "record": "voice",
    "video": "video",
    "file": "file",
    "json": "card",
    "xml": "card",
    "share": "card",
    "location": "card",
    "music": "card",
    "contact": "card",
    "forward": "card",
}
"""OneBot segment types as the core's `model.SegmentType`; the rest are 'other'."""


def person(user_id: object) -> str:
    """A QQ number as the core's person id."""
    return f"{PLATFORM}:{user_id}"


def _str(value: Any) -> str:
    return "" if value is None else str(value)


def _dict(value: Any) -> dict[str, Any]:
    """``value`` if it is an object, else empty: a payload's fields may be anything."""
    return value if isinstance(value, dict) else {}


def _card_text(raw: Any) -> str:
    try:
        data = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return "[卡片]"
    if not isinstance(data, dict):
        return "[卡片]"
    meta = _dict(data.get("meta"))
    detail = next((v for v in meta.values() if isinstance(v, dict)), {})
    title = data.get("prompt") or detail.get("title") or detail.get("desc") or data.get("desc")
    return f"[卡片：{_str(title)[:60]}]" if title else "[卡片]"


_HASH_NAME = re.compile(r"^\{?[0-9A-Fa-f-]{16,}\}?(\.\w+)?$")
"""A file name that is a content hash (QQ names received images ``{6F2D…}.jpg``): says nothing."""


def marker(label: str, name: object = None) -> str:
    """``[label：name]`` for what the platform names (an image's file name, a face's name), else
    ``[label]``: a URL or path by its last part, no scheme, 40 characters at most; a name that is
    only a hash is left out."""
    text = _str(name).strip().strip("[]/").strip()
    if "://" in text:
        text = "" if text.startswith("base64://") else text.split("?")[0].rstrip("/")
    text = text.rsplit("/", 1)[-1][:40]
    if _HASH_NAME.match(text):
        text = ""
    return f"[{label}：{text}]" if text else f"[{label}]"


def _face_name(data: dict[str, Any]) -> str:
    """A QQ face's name when the implementation sends one (NapCat: ``raw.faceText`` "/微笑";
    others ``name`` or ``text``)."""
    raw = _dict(data.get("raw"))
    return _str(data.get("name") or data.get("text") or raw.get("faceText"))


def segment_text(
    seg_type: str, data: dict[str, Any], *, self_id: int | str | None, names: dict[str, str]
) -> str:
    """How one segment reads; unknown types read as ``[type]``."""
    if seg_type == "text":
        return _str(data.get("text"))
    if seg_type == "at":
        qq = _str(data.get("qq"))
        if qq == "all":
            return "@全体成员"
        if self_id is not None and qq == str(self_id):
            return "@" + names.get("self", "我")
        return "@" + (_str(data.get("name")) or names.get(qq) or qq)
    if seg_type == "face":
        return marker("表情", _face_name(data))
    if seg_type in ("mface", "marketface"):
        return marker("表情包", data.get("summary"))
    if seg_type == "image":
        sub = _str(data.get("sub_type") or data.get("subType"))
        if sub == "1":
            return marker("表情包", data.get("summary"))
        return marker("图片", data.get("name") or data.get("file"))
    if seg_type == "record":
        return "[语音]"
    if seg_type == "video":
        return "[视频]"
    if seg_type == "file":
        return f"[文件：{_str(data.get('name') or data.get('file'))[:40]}]"
    if seg_type == "forward":
        return "[合并转发的聊天记录]"
    if seg_type == "json":
        return _card_text(data.get("data"))
    if seg_type == "xml":
        return "[卡片]"
    if seg_type == "share":
        return f"[分享：{_str(data.get('title'))[:40]}]"
    if seg_type == "location":
        return f"[位置：{_str(data.get('title'))[:40]}]"
    if seg_type == "music":
        return "[音乐分享]"
    if seg_type == "contact":
        return "[推荐名片]"
    if seg_type == "poke":
        return "[戳一戳]"
    if seg_type in ("dice", "rps"):
        return "[骰子]" if seg_type == "dice" else "[猜拳]"
    if seg_type == "markdown":
        return _str(data.get("content"))[:200]
    REPORT(logging.INFO, "unknown message segment type %.40r, kept as a marker", seg_type)
    return f"[{seg_type[:20]}]"


def arrival_time(stamp: Any, tz: tzinfo, mid: str) -> datetime:
    """The event's timestamp, or now when it is missing or impossible (logged)."""
    now = datetime.now(tz)
    if isinstance(stamp, datetime) and stamp.tzinfo:
        when: datetime | None = stamp
    elif isinstance(stamp, int | float) and not isinstance(stamp, bool) and math.isfinite(stamp):
        try:
            when = datetime.fromtimestamp(stamp, tz)
        except (OverflowError, OSError, ValueError):
            when = None
    else:
        when = None if stamp is not None else now
    if when is None or not EARLIEST <= when <= now + FUTURE_SLACK:
        REPORT(
            logging.INFO,
            "message %s: time %.40r is impossible; using the time it arrived",
            mid,
            stamp,
        )
        return now
    return when


def normalize(
    payload: dict[str, Any],
    *,
    self_id: int | str | None,
    tz: tzinfo,
    bot_name: str = "我",
    max_chars: int = 800,
) -> Entry | None:
    """A OneBot v11 message event (JSON) as an `Entry`; None (with a log line) when it is not a
    usable message. ``payload["reply"]``, when the adapter resolved the quoted message, is
    ``{"message_id", "sender_id", "sender_name", "text"}`` and, to read its images and faces too,
    its segments as ``"message"``."""
    mid = str(payload.get("message_id"))[:40]
    try:
        scene = payload.get("message_type")
        if scene not in ("group", "private"):
            REPORT(logging.INFO, "ignored event: message_type %.40r", scene)
            return None
        user_id = _qq_number(payload["user_id"])
        group_id = _qq_number(payload["group_id"]) if scene == "group" else None
        sender = _dict(payload.get("sender"))
        name = _str(sender.get("card")) or _str(sender.get("nickname")) or str(user_id)
        raw_segments = payload.get("message")
        if isinstance(raw_segments, str):
            raw_segments = [{"type": "text", "data": {"text": raw_segments}}]
        if not isinstance(raw_segments, list):
            REPORT(
                logging.INFO,
                "ignored event %s: message is %s, not a segment list",
                mid,
                type(raw_segments).__name__,
            )
            return None
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        REPORT(logging.INFO, "ignored malformed message event %s: %s", mid, str(exc)[:200])
        return None
    when = arrival_time(payload.get("time"), tz, mid)

    names = {"self": bot_name}
    segments: list[Segment] = []
    mentions_me = False
    reply_id: str | None = None
    for raw in raw_segments:
        if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
            REPORT(logging.INFO, "message %s: ignored malformed segment %.80r", mid, raw)
            continue
        data = _dict(raw.get("data"))
        if raw["type"] == "reply":
            reply_id = _str(data.get("id")) or None
            continue
        if raw["type"] == "at" and self_id is not None and _str(data.get("qq")) == str(self_id):
            mentions_me = True
        segments.append(
            Segment(
                type=SEGMENT_TYPES.get(raw["type"], "other"),
                text=segment_text(raw["type"], data, self_id=self_id, names=names),
                ref=_segment_ref(raw["type"], data),
            )
        )

    reply = payload.get("reply") if isinstance(payload.get("reply"), dict) else None
    reply_to_me = bool(
        reply and self_id is not None and _str(reply.get("sender_id")) == str(self_id)
    )
    text = "".join(s.text for s in segments).strip()
    if reply_id or reply:
        quoted_id = reply_id or (_str(reply.get("message_id")) if reply else "") or None
        segments.insert(0, Segment(type="reply", text="", ref=quoted_id))
    if reply:
        quoted = _quoted_text(reply, self_id=self_id, names=names).replace("\n", " ")[:40]
        who = (
            bot_name
            if reply_to_me
            else _str(reply.get("sender_name")) or _str(reply.get("sender_id"))
        )
        text = f"[回复 {who}：{quoted}] {text}".strip()
        reply_id = reply_id or _str(reply.get("message_id")) or None
    elif reply_id:
        text = f"[回复一条消息] {text}".strip()
    truncated = len(text) > max_chars
    if truncated:
        text = text[:max_chars] + TRUNCATED_MARK
    if not text:
        REPORT(logging.INFO, "ignored empty message %s", mid)
        return None
    clean, clean_name = clean_text(text), clean_text(name)
    if clean != text or clean_name != name:
        REPORT(logging.INFO, "message %s from %s: lone surrogates replaced by U+FFFD", mid, user_id)
        text, name = clean, clean_name
    conversation = (
        Conversation.group(PLATFORM, group_id)
        if group_id is not None
        else Conversation.private(person(user_id))
    )
    return Entry(
        id=_str(payload.get("message_id")) or f"{user_id}-{when.timestamp():.0f}",
        conversation=conversation,
        user_id=person(user_id),
        from_bot=self_id is not None and user_id == str(self_id),
        sender_name=name[:40],
        time=when,
        text=text,
        segments=segments,
        mentions_me=mentions_me,
        reply_to_me=reply_to_me,
        reply_to=reply_id,
        truncated=truncated,
    )


def _quoted_text(reply: dict[str, Any], *, self_id: int | str | None, names: dict[str, str]) -> str:
    """What the quoted message says, its images and faces as markers (``message``: its
    segments), or its plain ``text``."""
    segments = reply.get("message")
    if not isinstance(segments, list):
        return _str(reply.get("text"))
    parts = []
    for raw in segments:
        if isinstance(raw, dict) and isinstance(raw.get("type"), str) and raw["type"] != "reply":
            data = _dict(raw.get("data"))
            parts.append(segment_text(raw["type"], data, self_id=self_id, names=names))
    return "".join(parts).strip()


def retraction(
    payload: dict[str, Any], *, tz: tzinfo, self_id: int | str | None = None
) -> Retraction | None:
    """A OneBot v11 recall notice (JSON) as a `Retraction`: ``group_recall`` (the sender or a
    group admin took a group message back) or ``friend_recall`` (a private one); None, with a
    log line, for anything else or a malformed one."""
    kind = payload.get("notice_type")
    if kind not in ("group_recall", "friend_recall"):
        return None
    mid = payload.get("message_id")
    try:
        if mid is None or isinstance(mid, bool | dict | list):
            raise ValueError(f"message_id {mid!r}")
        user_id = _qq_number(payload["user_id"])
        if kind == "group_recall":
            conversation = Conversation.group(PLATFORM, _qq_number(payload["group_id"]))
            operator = payload.get("operator_id")
            operator_id = person(_qq_number(operator)) if operator is not None else None
        else:
            conversation = Conversation.private(person(user_id))
            operator_id = person(user_id)
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        REPORT(logging.INFO, "ignored malformed %s notice: %s", kind, str(exc)[:200])
        return None
    return Retraction(
        conversation=conversation,
        message_id=str(mid)[:80],
        mine=self_id is not None and user_id == str(self_id),
        user_id=person(user_id),
        operator_id=operator_id,
        time=arrival_time(payload.get("time"), tz, str(mid)[:40]),
    )


def _qq_number(value: Any) -> str:
    """A QQ number (user or group) as text: any size (a number past 2^63 is kept, not dropped),
    never a bool, a float or words."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{value!r} is not a QQ number")
    text = str(value).strip()
    if not text.lstrip("-").isdigit():
        raise ValueError(f"{text[:40]!r} is not a QQ number")
    return str(int(text))


def _segment_ref(seg_type: str, data: dict[str, Any]) -> str | None:
    if seg_type == "at":
        qq = _str(data.get("qq"))
        return person(qq) if qq.isdigit() else None
    if seg_type in ("image", "mface", "marketface", "record", "video"):
        return _str(data.get("url") or data.get("file"))[:500] or None
    if seg_type == "file":
        return _str(data.get("name") or data.get("file"))[:200] or None
    return None


def event_payload(event: MessageEvent) -> dict[str, Any]:
    """The event as plain OneBot v11 JSON, with the quoted message the adapter resolved."""
    payload: dict[str, Any] = {
        "message_type": event.message_type,
        "message_id": event.message_id,
        "user_id": event.user_id,
        "group_id": getattr(event, "group_id", None),
        "time": event.time,
        "sender": {"nickname": event.sender.nickname, "card": getattr(event.sender, "card", None)},
        "message": [{"type": seg.type, "data": dict(seg.data)} for seg in event.original_message],
    }
    if event.reply is not None:
        payload["reply"] = {
            "message_id": event.reply.message_id,
            "sender_id": event.reply.sender.user_id,
            "sender_name": event.reply.sender.card or event.reply.sender.nickname,
            "text": event.reply.message.extract_plain_text(),
            "message": [{"type": seg.type, "data": dict(seg.data)} for seg in event.reply.message],
        }
    return payload
