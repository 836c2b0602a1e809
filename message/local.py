"""The platforms this process serves itself, with no protocol of their own: the web chat on the
observer page (people ``web:<name>``) and the terminal (``term:<os user>``, `yuiju chat`).

They build their `Entry`s here (`LocalChat.say`) and get her lines through one `LocalSender`,
which hands each line to whoever listens on that conversation (a browser's event stream, a
terminal) as a `ChatEvent`. Everything in between is the chat core as a group chat has it: gate,
context, agent and tools, output filter, grounding, recorder, memory.

Names. A visitor of the web chat types a name: it is their conversation and their person id, so
it is checked (`web_person`): NFKC-normalised, 1 to `NAME_MAX` letters or digits of any script
and ``_ - . ·``, no spaces; compared without case (``Alice`` and ``alice`` are one visitor, shown
as first typed); her own name and nicknames are refused. The page token is what lets people in;
the name only tells them apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import unicodedata
import uuid
from collections.abc import AsyncGenerator, Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from yuiju.config import YuijuConfig
from yuiju.message.channel import SendFailed
from yuiju.message.model import Conversation, Entry, Outgoing, Segment, clean_text, split_id
from yuiju.world.clock import Clock

if TYPE_CHECKING:
    from yuiju.characters import CharacterCard
    from yuiju.llm import ToolChatModel
    from yuiju.memory.service import MemoryService
    from yuiju.message.bot import Closer
    from yuiju.message.service import ChatService, Outcome
    from yuiju.message.stickers import StickerSet
    from yuiju.storage.history import HistoryStore
    from yuiju.storage.redis import RedisClient

log = logging.getLogger(__name__)

LOCAL_PLATFORMS = ("web", "term")
"""The platforms a `LocalSender` delivers to; a line for any other is refused (`SendFailed`)."""
NAME_MAX = 20
"""Longest visitor name of the web chat, in characters."""
_NAME_MARKS = frozenset("_-.·")

NO_MODEL = (
    "她现在不能回答：没有配置聊天模型。在 yuiju.toml 的 [llm] 里设置 base_url（和 api_key），"
    "或设环境变量 YUIJU_LLM__BASE_URL / YUIJU_LLM__API_KEY，然后重启。你说的话已经记下了。"
)
"""Why she does not answer anyone here, as the chat box and the terminal say it."""

NOTES = {
    "no chat model configured": NO_MODEL,
    "user flood": "你发得太快了，她没跟上。过一分钟再说吧。",
    "asleep": "她睡着了，没有回答。",
    "private sender not whitelisted": "她不在这里私聊（[chat] private_whitelist）。",
    "model failing (silent)": "她那边的聊天模型暂时连不上，稍后再试试。",
    "chose silence": "（她没有说话。）",
}
"""What a turn she did not answer tells the person, by the core's reason (`Outcome.reason`);
a reason not listed tells nothing (superseded by their own newer message: that one answers)."""

EventKind = Literal["typing", "line", "done"]


class BadName(ValueError):
    """A name that cannot be a visitor of the web chat; the message says what is wrong."""


def web_person(name: str, card: CharacterCard | None = None) -> tuple[str, str]:
    """A visitor's typed ``name`` → (person id ``web:<name, casefolded>``, the name as shown).
    Raises `BadName` saying what is wrong (empty, too long, a space or a sign, her own name)."""
    shown = unicodedata.normalize("NFKC", clean_text(str(name), drop=True)).strip()
    if not shown:
        raise BadName("名字不能是空的 / the name is empty")
    if len(shown) > NAME_MAX:
        raise BadName(f"名字最多 {NAME_MAX} 个字 / the name is longer than {NAME_MAX} characters")
    for char in shown:
        kind = unicodedata.category(char)[0]
        if kind not in "LNM" and char not in _NAME_MARKS:
            shown_char = "空格" if char.isspace() else char
            raise BadName(
                f"名字里不能有“{shown_char}”：只用文字、数字和 _ - . · / "
                f"the name may hold letters, digits and _ - . · only, not {char!r}"
            )
    if unicodedata.category(shown[0])[0] == "M":
        raise BadName("名字不能以附加符号开头 / the name starts with a combining mark")
    key = shown.casefold()
    if card is not None and key in {n.casefold() for n in (card.name, *card.nicknames) if n}:
        raise BadName(f"“{shown}”是她的名字，换一个吧 / that is her own name")
    return f"web:{key}", shown


def term_person(user: str) -> tuple[str, str]:
    """The terminal's person for the OS user ``user``: ``term:<user>`` (a character no id should
    hold becomes ``_``), and the user name as shown."""
    shown = clean_text(str(user), drop=True).strip() or "user"
    key = "".join(
        c if unicodedata.category(c)[0] in "LN" or c in _NAME_MARKS else "_" for c in shown
    )
    return f"term:{key}", shown


def local_config(cfg: YuijuConfig, *, web_token: bool) -> YuijuConfig:
    """``cfg`` as the in-process chat serves it: the web chat's and the terminal's private chats
    open to everyone there (whoever reaches them was let in by the page token, or is the user
    who owns the data dir), no proactive posts (her groups are the bot's to post to), and
    ``web:`` admins only behind a page token (without one, anyone who reaches the page could
    type an admin's name)."""
    chat = cfg.chat
    whitelist = [*chat.private_whitelist, *(f"{p}:*" for p in LOCAL_PLATFORMS)]
    admins = list(chat.admins)
    if not web_token:
        dropped = [a for a in admins if split_id(a)[0] == "web"]
        if dropped:
            log.warning(
                "[chat] admins %s are ignored: the observer page has no [web] token, so anyone "
                "reaching it could type that name; set [web] token to make them admins",
                dropped,
            )
            admins = [a for a in admins if a not in dropped]
    return cfg.model_copy(
        update={
            "chat": chat.model_copy(update={"private_whitelist": whitelist, "admins": admins}),
            "proactive": cfg.proactive.model_copy(update={"enabled": False}),
        }
    )


@dataclass(frozen=True)
class ChatEvent:
    """What a listener of a conversation gets: she is typing, a line of hers, a turn ended."""

    kind: EventKind
    text: str = ""
    """The line (``line``), or what the person is told about a turn she did not answer (``done``)."""
    id: str = ""
    """The line's message id (``line``)."""
    time: str = ""
    """When she said it (``line``), ISO 8601 in her town's zone."""
    ref: str = ""
    """The message the turn answers (``typing``, ``done``)."""
    answered: bool = False
    reason: str = ""
    """Why she did (not) answer (``done``): the core's `Outcome.reason`."""
    sticker: str = ""
    """The name of her sticker when the line is one (``line``): the web chat shows its image,
    the terminal ``text`` (its fallback, ``[开心]``)."""

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v}, ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str | bytes) -> ChatEvent:
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("kind") not in ("typing", "line", "done"):
            raise ValueError(f"not a chat event: {raw!r:.200}")
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class LocalSender:
    """The `Sender` of the web chat and the terminal: each line goes to the conversation's
    listeners (none listening: it is said all the same, and recorded, as in a group nobody reads)."""

    clock: Clock
    _listeners: dict[str, set[asyncio.Queue[ChatEvent]]] = field(default_factory=dict)

    async def send(self, message: Outgoing) -> str | None:
        conversation = message.conversation
        if conversation.platform not in LOCAL_PLATFORMS:
            raise SendFailed(f"{conversation} is not a web chat or terminal conversation")
        message_id = f"{conversation.platform}-{uuid.uuid4().hex[:16]}"
        sticker = next((s.name for s in message.segments if s.sticker), "")
        self.publish(
            conversation.session_id,
            ChatEvent(
                "line",
                text=message.plain,
                id=message_id,
                time=self.clock.now().isoformat(),
                sticker=sticker,
            ),
        )
        return message_id

    def publish(self, session_id: str, event: ChatEvent) -> None:
        for queue in self._listeners.get(session_id, ()):
            queue.put_nowait(event)

    @contextlib.contextmanager
    def listen(self, session_id: str) -> Iterator[asyncio.Queue[ChatEvent]]:
        """A queue of the conversation's events while the block runs."""
        queue: asyncio.Queue[ChatEvent] = asyncio.Queue()
        self._listeners.setdefault(session_id, set()).add(queue)
        try:
            yield queue
        finally:
            listeners = self._listeners.get(session_id, set())
            listeners.discard(queue)
            if not listeners:
                self._listeners.pop(session_id, None)


class LocalChat:
    """The chat service as the web chat and the terminal use it: say something as a person in
    a private conversation, hear her lines, read the conversation back."""

    def __init__(self, service: ChatService, sender: LocalSender) -> None:
        self.service = service
        self.sender = sender

    @property
    def card(self) -> CharacterCard:
        return self.service.card

    @property
    def stickers(self) -> StickerSet:
        """Her stickers, as the chat service was given them (read once, at its start)."""
        return self.service.deps.stickers

    @property
    def available(self) -> bool:
        """Whether she can answer at all (a chat model is configured)."""
        return self.service.model is not None

    @property
    def why(self) -> str | None:
        """Why she cannot answer anyone here, or None."""
        return None if self.available else NO_MODEL

    @property
    def memory(self) -> bool:
        """Whether she recalls and archives into her memory here."""
        return self.service.deps.memory is not None

    def listen(
        self, conversation: Conversation
    ) -> contextlib.AbstractContextManager[asyncio.Queue[ChatEvent]]:
        return self.sender.listen(conversation.session_id)

    def _stamp(self) -> datetime:
        """When a message is said: the wall clock, as a platform stamps it (the service moves it
        into world time); a simulated clock's own time where world time follows no wall clock."""
        clock = self.service.deps.clock
        return clock.now() if clock.lead() is None else datetime.now(clock.tz)

    async def say(
        self, person: str, name: str, text: str, *, message_id: str | None = None
    ) -> Outcome:
        """``person`` (``web:…``, ``term:…``) says ``text`` to her in private; her answer reaches
        the conversation's listeners line by line, then a ``done`` event, and is returned."""
        conversation = Conversation.private(person)
        message_id = message_id or f"{conversation.platform}-{uuid.uuid4().hex[:16]}"
        entry = Entry(
            id=message_id,
            conversation=conversation,
            user_id=person,
            sender_name=name,
            time=self._stamp(),
            text=text,
            segments=[Segment(type="text", text=text)],
        )
        sid = conversation.session_id
        if self.available:
            self.sender.publish(sid, ChatEvent("typing", ref=message_id))
        answered, reason = False, "interrupted"
        try:
            # the page keeps the text while Redis is away: it is sent again, not queued twice
            outcome = await self.service.handle(entry, keep=False)
            answered, reason = outcome.answered, outcome.reason
            return outcome
        finally:
            self.sender.publish(
                sid,
                ChatEvent(
                    "done",
                    ref=message_id,
                    answered=answered,
                    reason=reason,
                    text="" if answered else NOTES.get(reason, ""),
                ),
            )

    async def turn(
        self, person: str, name: str, text: str, *, message_id: str | None = None
    ) -> AsyncGenerator[ChatEvent, None]:
        """``say``, as the events of this turn (and any line of hers in the conversation
        meanwhile), ending with its ``done``."""
        message_id = message_id or f"{split_id(person)[0]}-{uuid.uuid4().hex[:16]}"
        with self.listen(Conversation.private(person)) as queue:
            task = asyncio.create_task(self.say(person, name, text, message_id=message_id))
            try:
                while True:
                    event = await queue.get()
                    yield event
                    if event.kind == "done" and event.ref == message_id:
                        break
                await task
            finally:
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

    async def history(self, person: str, limit: int = 60) -> list[Entry]:
        """The conversation with ``person``, oldest first (her session's recent messages)."""
        return await self.service.sessions.recent(Conversation.private(person).session_id, limit)


async def build_local_chat(
    cfg: YuijuConfig,
    *,
    clock: Clock,
    web_token: bool,
    on_stop: list[Closer],
    redis: RedisClient | None = None,
    history: HistoryStore | None = None,
    memory: MemoryService | None = None,
    model: ToolChatModel | None = None,
) -> LocalChat:
    """The in-process chat (web chat and terminal) with `local_config`'s settings: on the
    caller's open stores, memory and model when given (``yuiju run`` shares its own), as
    `message.bot.build_service` builds any chat; ``web_token``: the page has a token."""
    from yuiju.message.bot import build_service

    sender = LocalSender(clock)
    service = await build_service(
        local_config(cfg, web_token=web_token),
        sender=sender,
        on_stop=on_stop,
        clock=clock,
        redis=redis,
        history=history,
        memory=memory,
        model=model,
    )
    return LocalChat(service, sender)
