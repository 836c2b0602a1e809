"""The two adapters other message-side services (proactive posts) need: a way to send to a group,
and a read/write view of a group's conversation.

The Protocols are what callers code against; the implementations below are backed by the
connected OneBot v11 bot and by the chat service's session store. Neither needs nonebot at import
time, so both are usable (and testable) with fakes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from yuiju.message.service import ChatService

log = logging.getLogger(__name__)


class SendFailed(Exception):
    """The message could not be delivered (no bot connected, the group refused it, network)."""


class Sender(Protocol):
    """Sends plain text to a group as the character."""

    async def send_group(self, group_id: int, text: str) -> None:
        """Send ``text`` (sanitised and split into natural lines by the implementation).

        Raises `SendFailed` when the group cannot be sent to.
        """
        ...


class GroupContext(Protocol):
    """A group's conversation as the chat side keeps it."""

    async def recent_messages(self, group_id: int, limit: int) -> list[dict[str, Any]]:
        """The latest ``limit`` messages, oldest first, each
        ``{sender_id, sender_name, text, time, from_bot}`` (``time`` an aware datetime)."""
        ...

    async def last_human_message_at(self, group_id: int) -> datetime | None:
        """When someone other than the bot last spoke in the group, or None."""
        ...

    async def record_bot_post(self, group_id: int, text: str, *, source: str) -> None:
        """Record a message the bot sent on its own (``source`` e.g. 'proactive') in the group's
        session history and in the message log."""
        ...


BotGetter = Callable[[], Any]
"""Returns the connected nonebot OneBot v11 `Bot`, or None when none is connected."""


class OneBotSender:
    """`Sender` over the connected OneBot v11 bot: ``send_msg`` with text segments only (never a
    CQ-code string), one call per line with the chat service's human-like pauses."""

    def __init__(self, get_bot: BotGetter, *, service: ChatService | None = None) -> None:
        self.get_bot = get_bot
        self.service = service
        """When given, its output policy (sanitising, line splits, delays) is applied."""

    async def send_group(self, group_id: int, text: str) -> None:
        lines = self.service.output.lines(text) if self.service else [text]
        for i, line in enumerate(lines):
            if i and self.service is not None:
                await self.service.pause_between(line)
            await send_text(self.get_bot(), "group", group_id, line)


async def send_text(bot: Any, scene: str, target: int, text: str) -> int | None:
    """One ``send_msg`` call with a single text segment; the message id when the implementation
    reports one. Raises `SendFailed`."""
    if bot is None:
        raise SendFailed(
            "no OneBot connection: is NapCat/Lagrange connected to the reverse WebSocket?"
        )
    from nonebot.adapters.onebot.v11 import Message, MessageSegment
    from nonebot.exception import ActionFailed, ApiNotAvailable, NetworkError

    params: dict[str, Any] = {"message_type": scene, "message": Message(MessageSegment.text(text))}
    params["group_id" if scene == "group" else "user_id"] = target
    try:
        result = await bot.call_api("send_msg", **params)
    except (ActionFailed, NetworkError, ApiNotAvailable) as exc:
        raise SendFailed(f"send_msg to {scene} {target} failed: {exc}") from exc
    if isinstance(result, dict) and isinstance(result.get("message_id"), int):
        return int(result["message_id"])
    return None


class ServiceGroupContext:
    """`GroupContext` over the chat service's Redis session store and message log."""

    def __init__(self, service: ChatService) -> None:
        self.service = service

    async def recent_messages(self, group_id: int, limit: int) -> list[dict[str, Any]]:
        entries = await self.service.sessions.recent(
            self.service.session_id("group", group_id), limit
        )
        return [
            {
                "sender_id": e.user_id,
                "sender_name": e.sender_name,
                "text": e.text,
                "time": e.time,
                "from_bot": e.from_bot,
            }
            for e in entries
        ]

    async def last_human_message_at(self, group_id: int) -> datetime | None:
        return await self.service.sessions.last_human_at(self.service.session_id("group", group_id))

    async def record_bot_post(self, group_id: int, text: str, *, source: str) -> None:
        await self.service.recorder.record_bot_message("group", group_id, text, source=source)
