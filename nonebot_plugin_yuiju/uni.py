"""Any NoneBot adapter's message → the core's `Entry`, through nonebot-plugin-alconna's universal
segments: the mapping every platform but OneBot v11 uses (OneBot keeps its own, hardened against
malformed frames, in `onebot`).

`entry_from_event` reads an event with its adapter's edge (`platforms.AdapterEdge`: the message
as it arrived, who sent it and when, whether a quote is hers) and alconna (``get_target``: the
conversation, group or private; ``get_message_id``), then `entry_from_uni` reads the segments the
way the core keeps them: text, @ (her or someone, @all), faces, images and stickers, a quoted
message, files, voice and video; anything else as a short marker. People and conversations get
the platform's prefix (`platforms.platform_of`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING

from yuiju.message.model import Conversation, Entry, Segment, clean_text
from yuiju.message.ratelog import RateLimitedLog

if TYPE_CHECKING:
    from nonebot.adapters import Bot, Event
    from nonebot_plugin_alconna.uniseg import UniMessage

log = logging.getLogger(__name__)
REPORT = RateLimitedLog(log, burst=30)
TRUNCATED_MARK = "…（后面太长，省略了）"


def read_segments(
    uni: UniMessage,
    *,
    platform: str,
    self_id: str,
    bot_name: str,
    her_ids: Collection[str] = (),
) -> tuple[list[Segment], bool, str | None]:
    """``uni`` as the core's segments, whether it @-mentions her (``self_id``, or any of
    ``her_ids``: how the platform's @ names her), and the quoted message's id."""
    me = {self_id, *her_ids}
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

    from nonebot_plugin_yuiju.onebot import marker

    segments: list[Segment] = []
    mentions_me = False
    reply_to: str | None = None
    for seg in uni:
        if isinstance(seg, Text):
            segments.append(Segment(type="text", text=seg.text))
        elif isinstance(seg, AtAll):
            segments.append(Segment(type="at", text="@全体成员"))
        elif isinstance(seg, At):
            # an @ written without an id (Satori's ``<at id="" name="…"/>``) has none: the
            # adapter gives it True for an id
            target = seg.target if isinstance(seg.target, str) else ""
            display = seg.display if isinstance(seg.display, str) else ""
            if seg.flag == "user" and target in me:
                mentions_me = True
                segments.append(
                    Segment(type="at", text=f"@{bot_name}", ref=f"{platform}:{self_id}")
                )
            else:
                name = (display or target or "某人").lstrip("@")
                ref = f"{platform}:{target}" if seg.flag == "user" and target else None
                segments.append(Segment(type="at", text=f"@{name}", ref=ref))
        elif isinstance(seg, Emoji):
            segments.append(Segment(type="face", text=marker("表情", seg.name)))
        elif isinstance(seg, Image):
            kind = "sticker" if seg.sticker else "image"
            named = seg.name != Image.__default_name__  # alconna's when the platform said none
            text = marker("表情包" if seg.sticker else "图片", seg.name if named else None)
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
    her_ids: Collection[str] = (),
) -> Entry | None:
    """One message of any adapter as an `Entry`; None (one log line) when nothing is left of it.
    ``user_id`` is the platform's own id (``678``): it gets the ``platform`` prefix here."""
    segments, mentions_me, reply_to = read_segments(
        uni, platform=platform, self_id=self_id, bot_name=bot_name, her_ids=her_ids
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


async def entry_from_event(
    bot: Bot, event: Event, *, tz: tzinfo, bot_name: str, max_chars: int = 800
) -> Entry | None:
    """A message event of any adapter but OneBot v11 as an `Entry`; None (one log line) for her
    own messages echoed back (she records what she sends when she sends it) and for what is no
    usable message."""
    from nonebot_plugin_alconna.uniseg import UniMessage, get_target

    from nonebot_plugin_yuiju.onebot import arrival_time
    from nonebot_plugin_yuiju.platforms import edge_of, platform_of

    edge = edge_of(bot.adapter.get_name())
    platform = platform_of(bot)
    user_id, name = edge.sender(event)
    message_id = edge.message_id(bot, event)
    her_ids = edge.her_ids(bot)
    if user_id == str(bot.self_id) or user_id in her_ids:
        REPORT(logging.DEBUG, "message %s is her own, echoed back: not recorded twice", message_id)
        return None
    target = get_target(event, bot)
    conversation = (
        Conversation.private(f"{platform}:{user_id}")
        if target.private
        else Conversation.group(platform, target.id)
    )
    uni = UniMessage.of(edge.message(bot, event), bot=bot)
    if edge.may_quote(event):
        uni = await uni.attach_reply(event, bot)
    return entry_from_uni(
        uni,
        platform=platform,
        conversation=conversation,
        user_id=user_id,
        sender_name=name,
        message_id=message_id,
        time=arrival_time(edge.sent_at(event), tz, message_id[:40]),
        self_id=str(bot.self_id),
        bot_name=bot_name,
        reply_to_me=edge.reply_to_me(bot, event),
        max_chars=max_chars,
        her_ids=her_ids,
    )
