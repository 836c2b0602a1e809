"""The platform-neutral message layer: what the chat core sees of any platform, and what it sends.

Adapters (the NoneBot plugin's OneBot v11 mapping today; Satori, Telegram, the web chat and the
terminal next) turn their events into an `Entry` and send an `Outgoing` through a `Sender`; the
core chain (gate, context, agent, output filter, grounding, recorder, proactive) reads only these
types, never an adapter's, and never a platform's raw number.

People are platform-qualified strings, ``<platform>:<id>`` (`PersonId`): ``qq:12345``,
``tg:678``. A plain id written before platforms existed (``12345``, an ``int`` in an old config or
an old record) is QQ's: `LEGACY_PLATFORM`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from yuiju.config import ID_PLATFORMS, LEGACY_PLATFORM, qualify_id

SELF_PREFIX = "self"
"""Her own messages are recorded as ``self:<character id>``: she is the same on every platform."""

_PLATFORM = re.compile(r"^[a-z][a-z0-9_]{0,15}$")
PLATFORMS = ID_PLATFORMS
_SURROGATE = re.compile(r"[\ud800-\udfff]")

Scene = Literal["group", "private"]


class BadPersonId(ValueError):
    """An id that names no platform and is not a plain (QQ) number."""


PLATFORM_LABELS = {
    "qq": "QQ",
    "tg": "Telegram",
    "lark": "飞书",
    "discord": "Discord",
    "web": "网页",
}
"""How the model reads a platform's name (``你在 QQ 群里聊天``)."""


def platform_label(platform: str) -> str:
    return PLATFORM_LABELS.get(platform, platform)


def clean_text(text: str, *, drop: bool = False) -> str:
    """``text`` with lone UTF-16 surrogates (which no store or JSON encoder accepts) replaced by
    U+FFFD, or dropped; a pair split into two escapes is joined into its character."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode(
        "utf-16-le", "ignore" if drop else "replace"
    )


def qualify(value: object, *, platform: str = LEGACY_PLATFORM) -> str:
    """``value`` as a platform-qualified id: ``qq:12345`` stays, a plain number (int or digits,
    e.g. an old config's ``admins = [10001]``) gets ``platform``; anything else raises
    `BadPersonId` saying how to write it."""
    try:
        return qualify_id(value, platform=platform)
    except ValueError as exc:
        raise BadPersonId(str(exc)) from None


def split_id(person: str) -> tuple[str, str]:
    """``"qq:12345"`` → ``("qq", "12345")``; a plain legacy id is QQ's."""
    prefix, sep, rest = person.partition(":")
    if sep and _PLATFORM.match(prefix):
        return prefix, rest
    return LEGACY_PLATFORM, person


def legacy_forms(person: str) -> list[str]:
    """How ``person`` may have been stored before ids were qualified: itself, and for QQ the plain
    number (old chat memories, facts and Qdrant payloads say ``12345``)."""
    platform, raw = split_id(person)
    return [person, raw] if platform == LEGACY_PLATFORM and raw != person else [person]


def _qualified(value: object) -> object:
    return qualify(value) if isinstance(value, int | str) and not isinstance(value, bool) else value


PersonId = Annotated[str, BeforeValidator(_qualified)]
"""``<platform>:<id>``; a plain number (old data, old config) is read as QQ's."""


class Conversation(BaseModel):
    """Where a message was said: a group (or channel) on a platform, or a private chat there."""

    model_config = ConfigDict(frozen=True)

    platform: str
    scene: Scene
    id: str
    """The group's (channel's) id on the platform, or the other person's id in a private chat."""

    @classmethod
    def group(cls, platform: str, group_id: object) -> Conversation:
        return cls(platform=platform, scene="group", id=str(group_id))

    @classmethod
    def private(cls, person: str) -> Conversation:
        platform, raw = split_id(person)
        return cls(platform=platform, scene="private", id=raw)

    @classmethod
    def from_key(cls, key: object, scene: Scene = "group") -> Conversation:
        """``"qq:67890"`` (or a plain legacy ``67890``) as a conversation of ``scene``."""
        platform, raw = split_id(qualify(key))
        return cls(platform=platform, scene=scene, id=raw)

    @classmethod
    def from_session(cls, session_id: str) -> Conversation:
        """A session id back to its conversation; an old ``group:123`` is QQ's group 123."""
        scene, _, rest = session_id.partition(":")
        if scene not in ("group", "private") or not rest:
            raise ValueError(f"{session_id!r} is not a session id like 'group:qq:123'")
        platform, raw = split_id(rest)
        return cls(platform=platform, scene=scene, id=raw)  # type: ignore[arg-type]

    @property
    def key(self) -> str:
        """``<platform>:<id>``: the conversation in memory scopes, config keys and outbox records."""
        return f"{self.platform}:{self.id}"

    @property
    def session_id(self) -> str:
        """``<scene>:<platform>:<id>``, e.g. ``group:qq:67890``: the chat session's name."""
        return f"{self.scene}:{self.platform}:{self.id}"

    @property
    def legacy_session_id(self) -> str | None:
        """The session id written before platforms (QQ only): ``group:67890``."""
        return f"{self.scene}:{self.id}" if self.platform == LEGACY_PLATFORM else None

    def __str__(self) -> str:
        return self.session_id


SegmentType = Literal[
    "text", "at", "image", "sticker", "face", "reply", "file", "voice", "video", "card", "other"
]


class Segment(BaseModel):
    """One piece of a message as the core keeps it: its kind, how it reads, and a reference."""

    model_config = ConfigDict(frozen=True)

    type: str
    """A `SegmentType`; older records kept the platform's own type names (``mface``, ``json``)."""
    text: str
    """How it reads in the history (``[图片]``, ``@小明``, the text itself)."""
    ref: str | None = None
    """What it points at: the person @-ed (`PersonId`), the quoted message id, the image's
    URL or file, the file's name."""

    @field_validator("type", "text", mode="after")
    @classmethod
    def _no_lone_surrogates(cls, value: str) -> str:
        return clean_text(value)


def _legacy_entry(data: Any) -> Any:
    """An entry stored before platforms (``scene``, ``group_id``, ``user_id`` as numbers) as QQ's."""
    if not isinstance(data, dict) or "conversation" in data:
        return data
    data = dict(data)
    scene = data.pop("scene", None)
    group_id = data.pop("group_id", None)
    user = data.get("user_id")
    from_bot = bool(data.get("from_bot"))
    if scene == "group" and group_id is not None:
        data["conversation"] = Conversation.group(LEGACY_PLATFORM, group_id)
    elif scene == "private" and user is not None:
        # her own lines in a private chat were stored with her QQ id (or 0): the chat is with the
        # person the session is named after, which only the session knows; those records name
        # the peer in ``session_id`` (message log) or are read within their session (Redis)
        peer = data.get("session_id", f"private:{user}").partition(":")[2] or user
        data["conversation"] = Conversation.private(qualify(peer))
    if from_bot and user is not None:
        data["user_id"] = f"{SELF_PREFIX}:{data.get('character_id', 'legacy')}"
    return data


class Entry(BaseModel):
    """A message as the chat core keeps it (incoming, hers, or a proactive post)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    id: str
    """The platform's message id (a string), or a generated one for her own messages."""
    conversation: Conversation
    user_id: PersonId
    """Who said it, platform-qualified (``qq:12345``); hers: ``self:<character id>``."""
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

    _legacy = model_validator(mode="before")(_legacy_entry)

    @field_validator("id", "sender_name", "text", mode="after")
    @classmethod
    def _no_lone_surrogates(cls, value: str) -> str:
        return clean_text(value)

    @property
    def platform(self) -> str:
        return self.conversation.platform

    @property
    def scene(self) -> Scene:
        return self.conversation.scene

    @property
    def session_id(self) -> str:
        return self.conversation.session_id

    @property
    def group_key(self) -> str | None:
        """The group's `Conversation.key` (``qq:67890``), None in a private chat."""
        return self.conversation.key if self.scene == "group" else None


class Retraction(BaseModel):
    """A message taken back after it was sent: QQ's 撤回 (OneBot v11 ``group_recall`` /
    ``friend_recall``), Satori's ``message-deleted``, any platform's deletion. Her answer to it
    is cancelled and it leaves her context and memory (`message.service.ChatService.retract`)."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    conversation: Conversation
    message_id: str
    """The platform's id of the message taken back."""
    mine: bool = False
    """It was one of her own messages (a group admin took it back): kept as ``bot-<id>``."""
    user_id: PersonId | None = None
    """Who had said it, when the platform says."""
    operator_id: PersonId | None = None
    """Who took it back (a group admin may take back someone else's message)."""
    time: AwareDatetime | None = None


class OutSegment(BaseModel):
    """One piece of what she sends."""

    model_config = ConfigDict(frozen=True)

    type: Literal["text", "image", "at", "reply"]
    text: str = ""
    """The text (``text``), or what a platform without images shows instead (``image``)."""
    ref: str | None = None
    """The image's path or URL (``image``), the person to @ (`PersonId`, ``at``), the message
    to reply to (``reply``)."""
    sticker: bool = False
    """An image sent as a sticker where the platform tells them apart."""
    name: str = ""
    """The sticker's name (an image with ``sticker``): how a platform that serves the image
    itself (the web chat) names it, never by its path."""


class Outgoing(BaseModel):
    """A message she sends to one conversation, built the same way for every platform."""

    model_config = ConfigDict(frozen=True)

    conversation: Conversation
    segments: tuple[OutSegment, ...]

    @classmethod
    def text(cls, conversation: Conversation, text: str) -> Outgoing:
        return cls(conversation=conversation, segments=(OutSegment(type="text", text=text),))

    @property
    def plain(self) -> str:
        """How it reads as text (images as their fallback text)."""
        return "".join(s.text for s in self.segments if s.type in ("text", "image"))


def unique(values: Iterable[str]) -> list[str]:
    """``values`` without repeats, in order."""
    return list(dict.fromkeys(values))
