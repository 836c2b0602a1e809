"""One structured history entry per message, from OneBot v11 events of any shape.

`normalize` takes the plain OneBot v11 JSON (segments as ``{"type", "data"}`` dicts), so it is
tested without nonebot; malformed pieces are skipped with a log line, never raised.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

log = logging.getLogger(__name__)

TRUNCATED_MARK = "…（后面太长，省略了）"


class Segment(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: str
    """The OneBot segment type (text, at, image, ...)."""
    text: str
    """How it reads in the history."""


class Entry(BaseModel):
    """A message as the chat side keeps it (incoming, hers, or a proactive post)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    id: str
    """The platform's message id (a string), or a generated one for her own messages."""
    scene: Literal["group", "private"]
    group_id: int | None = None
    user_id: int
    """Sender's QQ id (hers for her own messages)."""
    sender_name: str
    """Group card, else nickname, else the id."""
    time: AwareDatetime
    text: str
    """The readable content: text with [图片]/[表情]/@name markers, reply quote first."""
    segments: list[Segment] = Field(default_factory=list)
    mentions_me: bool = False
    """@-mentioned her (not @all)."""
    reply_to_me: bool = False
    """Quotes one of her messages."""
    reply_to: str | None = None
    """Id of the quoted message."""
    from_bot: bool = False
    source: str = "chat"
    """'chat' for conversation, or who posted it on her behalf ('proactive', 'admin')."""
    truncated: bool = False

    @property
    def session_id(self) -> str:
        return f"group:{self.group_id}" if self.scene == "group" else f"private:{self.user_id}"

    @property
    def target(self) -> int:
        return self.group_id if self.scene == "group" and self.group_id is not None else self.user_id


def _str(value: Any) -> str:
    return "" if value is None else str(value)


def _card_text(raw: Any) -> str:
    try:
        data = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return "[卡片]"
    if not isinstance(data, dict):
        return "[卡片]"
    meta = data.get("meta") if isinstance(data.get("meta"), dict) else {}
    detail = next((v for v in meta.values() if isinstance(v, dict)), {})
    title = data.get("prompt") or detail.get("title") or detail.get("desc") or data.get("desc")
    return f"[卡片：{_str(title)[:60]}]" if title else "[卡片]"


def segment_text(seg_type: str, data: dict[str, Any], *, self_id: int | None, names: dict[str, str]) -> str:
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
        return "[表情]"
    if seg_type in ("mface", "marketface"):
        return f"[表情包{'：' + _str(data.get('summary')).strip('[]') if data.get('summary') else ''}]"
    if seg_type == "image":
        sub = _str(data.get("sub_type") or data.get("subType"))
        return "[表情包]" if sub == "1" else "[图片]"
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
    log.info("unknown message segment type %r, kept as a marker", seg_type)
    return f"[{seg_type[:20]}]"


def normalize(
    payload: dict[str, Any],
    *,
    self_id: int | None,
    tz: ZoneInfo,
    bot_name: str = "我",
    max_chars: int = 800,
) -> Entry | None:
    """A OneBot v11 message event (JSON) as an `Entry`; None (with a log line) when it is not a
    usable message. ``payload["reply"]``, when the adapter resolved the quoted message, is
    ``{"message_id", "sender_id", "sender_name", "text"}``."""
    try:
        scene = payload.get("message_type")
        if scene not in ("group", "private"):
            log.info("ignored event: message_type %r", scene)
            return None
        user_id = int(payload["user_id"])
        group_id = int(payload["group_id"]) if scene == "group" else None
        sender = payload.get("sender") if isinstance(payload.get("sender"), dict) else {}
        name = _str(sender.get("card")) or _str(sender.get("nickname")) or str(user_id)
        stamp = payload.get("time")
        when = (datetime.fromtimestamp(int(stamp), tz) if isinstance(stamp, int | float)
                else stamp if isinstance(stamp, datetime) and stamp.tzinfo else datetime.now(tz))
        raw_segments = payload.get("message")
        if isinstance(raw_segments, str):
            raw_segments = [{"type": "text", "data": {"text": raw_segments}}]
        if not isinstance(raw_segments, list):
            log.info("ignored event %r: message is %s, not a segment list", payload.get("message_id"),
                     type(raw_segments).__name__)
            return None
    except (KeyError, TypeError, ValueError) as exc:
        log.info("ignored malformed message event: %s", exc)
        return None

    names = {"self": bot_name}
    segments: list[Segment] = []
    mentions_me = False
    reply_id: str | None = None
    for raw in raw_segments:
        if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
            log.info("ignored malformed segment %r", raw)
            continue
        data = raw.get("data") if isinstance(raw.get("data"), dict) else {}
        if raw["type"] == "reply":
            reply_id = _str(data.get("id")) or None
            continue
        if raw["type"] == "at" and self_id is not None and _str(data.get("qq")) == str(self_id):
            mentions_me = True
        segments.append(Segment(type=raw["type"], text=segment_text(raw["type"], data, self_id=self_id, names=names)))

    reply = payload.get("reply") if isinstance(payload.get("reply"), dict) else None
    reply_to_me = bool(reply and self_id is not None and _str(reply.get("sender_id")) == str(self_id))
    text = "".join(s.text for s in segments).strip()
    if reply:
        quoted = _str(reply.get("text")).replace("\n", " ")[:40]
        who = bot_name if reply_to_me else _str(reply.get("sender_name")) or _str(reply.get("sender_id"))
        text = f"[回复 {who}：{quoted}] {text}".strip()
        reply_id = reply_id or _str(reply.get("message_id")) or None
    elif reply_id:
        text = f"[回复一条消息] {text}".strip()
    truncated = len(text) > max_chars
    if truncated:
        text = text[:max_chars] + TRUNCATED_MARK
    if not text:
        log.info("ignored empty message %r", payload.get("message_id"))
        return None
    return Entry(
        id=_str(payload.get("message_id")) or f"{user_id}-{when.timestamp():.0f}",
        scene=scene, group_id=group_id, user_id=user_id, sender_name=name[:40], time=when, text=text,
        segments=segments, mentions_me=mentions_me, reply_to_me=reply_to_me, reply_to=reply_id,
        truncated=truncated,
    )
