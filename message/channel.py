"""What the chat core needs of a platform, as Protocols: sending (`Sender`), and, where the
platform has them, group management (`GroupManager`); plus a group's conversation as proactive
posts read it (`GroupContext`, backed here by the session store).

Implementations of `Sender` and `GroupManager` live with the adapters (the NoneBot plugin's
`nonebot_plugin_yuiju.send`), or in tests as fakes; nothing here knows a platform.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, TypedDict

from yuiju.message.model import Conversation, Entry, Outgoing

if TYPE_CHECKING:
    from yuiju.message.session import SessionStore

log = logging.getLogger(__name__)


class SendFailed(Exception):
    """The message could not be delivered (no bot connected, the group refused it, network)."""


class Sender(Protocol):
    """Delivers what she says to a conversation on its platform."""

    async def send(self, message: Outgoing) -> str | None:
        """Send one message; the platform's message id when it reports one. Raises `SendFailed`."""
        ...


class GroupSender(Protocol):
    """Posts to a group as her, in natural lines (proactive posts)."""

    async def send_group(self, group: Conversation, text: str) -> None:
        """Raises `SendFailed` when the group cannot be sent to."""
        ...


class GroupManager(Protocol):
    """Group management where a platform has it (admin-only tools)."""

    async def member_info(self, conversation: Conversation, person: str) -> dict[str, str]:
        """What the platform says of a member (card, nickname, title, role). Raises `SendFailed`
        when the platform cannot tell."""
        ...

    async def mute(self, conversation: Conversation, person: str, seconds: int) -> None:
        """Mute a member for ``seconds`` (0 lifts it). Raises `SendFailed`."""
        ...


class RecentMessage(TypedDict):
    """A group message as proactive posts read it."""

    sender_id: str
    sender_name: str
    text: str
    time: datetime
    from_bot: bool


class GroupContext(Protocol):
    """A group's conversation as the chat side keeps it."""

    async def recent_messages(self, group: Conversation, limit: int) -> list[RecentMessage]:
        """The latest ``limit`` messages, oldest first."""
        ...

    async def last_human_message_at(self, group: Conversation) -> datetime | None:
        """When someone other than her last spoke in the group, or None."""
        ...

    async def record_bot_post(self, group: Conversation, text: str, *, source: str) -> None:
        """Record a message she sent on her own (``source`` e.g. 'proactive') in the group's
        session history and in the message log."""
        ...


class RecordPost(Protocol):
    async def __call__(self, conversation: Conversation, text: str, *, source: str) -> Entry: ...


class SessionGroupContext:
    """`GroupContext` over the session store, recording through the chat recorder."""

    def __init__(self, sessions: SessionStore, record: RecordPost) -> None:
        self.sessions = sessions
        self.record = record

    async def recent_messages(self, group: Conversation, limit: int) -> list[RecentMessage]:
        """The latest messages, an admin command's answer aside (stored before those answers
        were kept out of the history: a diagnostic is not her line)."""
        return [
            RecentMessage(
                sender_id=e.user_id,
                sender_name=e.sender_name,
                text=e.text,
                time=e.time,
                from_bot=e.from_bot,
            )
            for e in await self.sessions.recent(group.session_id, limit)
            if not (e.from_bot and e.source == "admin")
        ]

    async def last_human_message_at(self, group: Conversation) -> datetime | None:
        return await self.sessions.last_human_at(group.session_id)

    async def record_bot_post(self, group: Conversation, text: str, *, source: str) -> None:
        await self.record(group, text, source=source)
