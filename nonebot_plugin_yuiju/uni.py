"""Any NoneBot adapter's message → the core's `Entry`, through nonebot-plugin-alconna's universal
segments: the mapping a new platform uses (OneBot v11 keeps its own, hardened against malformed
frames, in `onebot`).

An adapter's matcher turns its event into ``UniMessage.of(event.get_message(), bot=bot)`` plus
who, where and when (alconna's ``get_target(event, bot)`` gives the conversation, the event the
sender), and `entry_from_uni` reads the segments the way the core keeps them: text, @ (her or
someone, @all), faces, images and stickers, a quoted message, files, voice and video; anything else
as a short marker. People and conversations get the platform's prefix (`send.platform_of`).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING

from yuiju.message.model import Conversation, Entry, Segment, clean_text
from yuiju.message.ratelog import RateLimitedLog

if TYPE_CHECKING:
    from nonebot_plugin_alconna.uniseg import UniMessage

log = logging.getLogger(__name__)
REPORT = RateLimitedLog(log, burst=30)
TRUNCATED_MARK = "…（后面太长，省略了）"


def read_segments(
    uni: UniMessage, *, platform: str, self_id: str, bot_name: str
) -> tuple[list[Segment], bool, str | None]:
    """``uni`` as the core's segments, whether it @-mentions her, and the quoted message's id."""
    from nonebot_plugin_alconna.uniseg import (
        At,
        AtAll,
        Emoji,
        File,
        Hyper,
        Image,
        Reference,
        Reply,
        Text,
        Video,
        Voice,
    )

    segments: list[Segment] = []
    mentions_me = False
    reply_to: str | None = None
    for seg in uni:
        if isinstance(seg, Text):
            segments.append(Segment(type="text", text=seg.text))
        elif isinstance(seg, AtAll):
            segments.append(Segment(type="at", text="@全体成员"))
        elif isinstance(seg, At):
            if seg.flag == "user" and seg.target == self_id:
                mentions_me = True
                segments.append(
                    Segment(type="at", text=f"@{bot_name}", ref=f"{platform}:{self_id}")
                )
            else:
                name = (seg.display or seg.target).lstrip("@")
                ref = f"{platform}:{seg.target}" if seg.flag == "user" else None
                segments.append(Segment(type="at", text=f"@{name}", ref=ref))
        elif isinstance(seg, Emoji):
            segments.append(
                Segment(type="face", text=f"[表情{'：' + seg.name if seg.name else ''}]")
            )
        elif isinstance(seg, Image):
            kind = "sticker" if seg.sticker else "image"
            text = "[表情包]" if seg.sticker else "[图片]"
            segments.append(Segment(type=kind, text=text, ref=seg.url or seg.id))
        elif isinstance(seg, Reply):
            reply_to = str(seg.id)
            segments.insert(0, Segment(type="reply", text="", ref=reply_to))
        elif isinstance(seg, Voice):
            segments.append(Segment(type="voice", text="[语音]", ref=seg.url or seg.id))
        elif isinstance(seg, Video):
            segments.append(Segment(type="video", text="[视频]", ref=seg.url or seg.id))
        elif isinstance(seg, File):
            segments.append(Segment(type="file", text=f"[文件：{seg.name[:40]}]", ref=seg.name))
        elif isinstance(seg, Hyper):
            segments.append(Segment(type="card", text="[卡片]"))
        elif isinstance(seg, Reference):
            segments.append(Segment(type="card", text="[合并转发的聊天记录]"))
        else:
            kind = type(seg).__name__.lower()[:20]
            REPORT(logging.INFO, "message segment %s kept as a marker", kind)
            segments.append(Segment(type="other", text=f"[{kind}]"))
    return segments, mentions_me, reply_to


def entry_from_uni(
    uni: UniMessage,
    *,
    platform: str,
    conversation: Conversation,
    user_id: str,
    sender_name: str,
    message_id: str,
    time: datetime,
    self_id: str,
    bot_name: str = "我",
    reply_to_me: bool = False,
    max_chars: int = 800,
) -> Entry | None:
    """One message of any adapter as an `Entry`; None (one log line) when nothing is left of it.
    ``user_id`` is the platform's own id (``678``): it gets the ``platform`` prefix here."""
    segments, mentions_me, reply_to = read_segments(
        uni, platform=platform, self_id=self_id, bot_name=bot_name
    )
    text = "".join(s.text for s in segments).strip()
    if reply_to is not None:
        text = f"[回复{' ' + bot_name if reply_to_me else '一条消息'}] {text}".strip()
    truncated = len(text) > max_chars
    if truncated:
        text = text[:max_chars] + TRUNCATED_MARK
    if not text:
        REPORT(logging.INFO, "ignored empty message %s", message_id[:40])
        return None
    return Entry(
        id=message_id,
        conversation=conversation,
        user_id=f"{platform}:{user_id}",
        sender_name=clean_text(sender_name or user_id)[:40],
        time=time,
        text=clean_text(text),
        segments=segments,
        mentions_me=mentions_me,
        reply_to_me=reply_to_me,
        reply_to=reply_to,
        from_bot=user_id == self_id,
        truncated=truncated,
    )
