"""Building the chat core in tests: its typed dependencies with a recording sender, as
`message.bot.build_service` builds them with the NoneBot plugin's."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from yuiju.characters import load_card
from yuiju.config import ChatConfig, ProactiveConfig
from yuiju.message.agent import Tool
from yuiju.message.channel import SendFailed
from yuiju.message.deps import ChatDeps
from yuiju.message.grounding import ClaimLexicon
from yuiju.message.model import Conversation, Outgoing
from yuiju.message.people import People
from yuiju.message.service import ChatService
from yuiju.message.session import SessionStore
from yuiju.storage.keys import Keys
from yuiju.world.loader import load_actions
from yuiju.world.town import HAURA

PLACE_WORDS = HAURA.place_words((a.at, a.name) for a in load_actions("actions"))
"""How people name her town's places, as `message.bot.build_service` gives them to her chat."""


def _target(conversation: Conversation) -> int | str:
    return int(conversation.id) if conversation.id.lstrip("-").isdigit() else conversation.id


@dataclass
class RecordingSender:
    """A `Sender` that keeps ``(scene, target, text)`` per message (targets that are numbers as
    ints), and the `Outgoing` messages themselves."""

    sent: list[tuple[str, int | str, str]] = field(default_factory=list)
    messages: list[Outgoing] = field(default_factory=list)
    fail: bool = False

    async def send(self, message: Outgoing) -> str | None:
        if self.fail:
            raise SendFailed("the test's sender refuses")
        self.messages.append(message)
        self.sent.append((message.conversation.scene, _target(message.conversation), message.plain))
        return str(len(self.sent))


def make_deps(
    redis: Redis,
    *,
    cfg: ChatConfig,
    sender: Any = None,
    keys: Keys | None = None,
    clock: Any,
    character_id: str = "yuiju",
    **parts: Any,
) -> ChatDeps:
    keys = keys or Keys("t")
    parts.setdefault("place_words", PLACE_WORDS)
    return ChatDeps(
        cfg=cfg,
        card=load_card(character_id),
        clock=clock,
        redis=redis,
        keys=keys,
        sessions=SessionStore(redis, keys, character_id),
        people=People(redis, keys),
        sender=sender if sender is not None else RecordingSender(),
        **parts,
    )


def make_service(
    redis: Redis,
    *,
    cfg: ChatConfig,
    clock: Any,
    sender: Any = None,
    keys: Keys | None = None,
    lexicon: ClaimLexicon | None = None,
    tools: Iterable[Tool] | None = None,
    sink: Any = None,
    proactive: ProactiveConfig | None = None,
    **parts: Any,
) -> ChatService:
    deps = make_deps(redis, cfg=cfg, clock=clock, sender=sender, keys=keys, **parts)
    return ChatService(deps, lexicon=lexicon, tools=tools, sink=sink, proactive=proactive)


@dataclass
class RecordingGroups:
    """A `GroupManager` keeping ``(action, group key, person, detail)`` per call."""

    calls: list[tuple[str, str, str, object]] = field(default_factory=list)

    async def member_info(self, conversation: Conversation, person: str) -> dict[str, str]:
        self.calls.append(("member_info", conversation.key, person, None))
        return {"user_id": person, "card": "小明", "role": "member"}

    async def mute(self, conversation: Conversation, person: str, seconds: int) -> None:
        self.calls.append(("mute", conversation.key, person, seconds))


def group_context(service: ChatService) -> Any:
    """The proactive posts' view of the service's groups, as `ChatService` builds it."""
    from yuiju.message.channel import SessionGroupContext

    return SessionGroupContext(service.sessions, service.recorder.record_bot_message)


def qq_group(group_id: int | str) -> Conversation:
    return Conversation.group("qq", group_id)
