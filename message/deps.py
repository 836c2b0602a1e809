"""The chat side's dependencies, typed, built once where the bot starts (`message.bot.build_service`,
or a test) and handed to the service, the tools and the admin commands: like pydantic-ai's
``RunContext[Deps]``, a tool reads ``ctx.deps``. Nothing is looked up through the service and
nothing is patched in after construction (the sender finds the connected platform bot when it
sends, not when it is built)."""

from __future__ import annotations

import html
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import TYPE_CHECKING, Any, Protocol

from yuiju.characters import CharacterCard
from yuiju.config import ChatConfig
from yuiju.llm import ToolChatModel
from yuiju.message.channel import GroupManager, Sender
from yuiju.message.model import Entry
from yuiju.message.pacing import Pacing
from yuiju.message.people import People
from yuiju.message.session import SessionStore
from yuiju.message.stickers import NO_STICKERS, StickerSet
from yuiju.storage.keys import Keys
from yuiju.storage.redis import RedisClient
from yuiju.world.clock import Clock
from yuiju.world.commands import Command, CommandRejected, enqueue_command, parse_command
from yuiju.world.state import CharacterState, WorldState
from yuiju.world.town import HAURA, Town

if TYPE_CHECKING:
    from yuiju.memory.service import MemoryService
    from yuiju.storage.history import HistoryStore

log = logging.getLogger(__name__)


class WorldView(Protocol):
    """What chat reads of the world (a `world.store.StateStore`); it never writes it."""

    async def load_character(self, character_id: str) -> CharacterState | None: ...

    async def load_world(self) -> WorldState | None: ...


class CommandQueue(Protocol):
    """Where the chat side's world commands go (admin commands, and what people propose: the
    engine applies them on its next tick)."""

    async def enqueue(self, command: dict[str, Any]) -> None:
        """Raises `world.commands.CommandRejected` for a malformed command."""
        ...

    async def pending(self) -> list[Command]:
        """The commands still waiting for the next tick, in order. Read them only: a queue may
        hand the same objects to every reader (`RedisCommands` does)."""
        ...


@dataclass(frozen=True)
class RedisCommands:
    """`CommandQueue` on the world's Redis command list."""

    redis: RedisClient
    keys: Keys

    async def enqueue(self, command: dict[str, Any]) -> None:
        await enqueue_command(self.redis, self.keys, command)

    _parsed: dict[str | bytes, Command | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    """Each queued command's validation, by its raw JSON: what the speaker's context reads at
    every message (`proposals.person_context`), while up to `proposals.MAX_QUEUED` wait for a
    world that may not be running; only what is still queued is kept."""

    async def pending(self) -> list[Command]:
        # The same as `queued_commands`, validating only what was queued since the last read.
        # The commands are shared between reads: the chat side only reads them.
        known = self._parsed
        seen: dict[str | bytes, Command | None] = {}
        out = []
        for raw in await self.redis.lrange(self.keys.commands, 0, -1):
            if raw in seen:
                command = seen[raw]
            elif raw in known:
                command = seen[raw] = known[raw]
            else:
                try:
                    command = parse_command(raw.decode() if isinstance(raw, bytes) else raw)
                except CommandRejected:
                    command = None  # left out, as `queued_commands` does
                seen[raw] = command
            if command is not None:
                out.append(command)
        known.clear()
        known.update(seen)
        return out


def _feel(value: float, low: str, high: str) -> str:
    return low if value < 35 else high if value > 70 else "还好"


@dataclass(frozen=True, kw_only=True)
class ChatDeps:
    """Everything the chat parts use, and the few readings of it they share."""

    cfg: ChatConfig
    """The ``[chat]`` section."""
    card: CharacterCard
    clock: Clock
    redis: RedisClient
    """The world store's Redis: her event stream (proactive posts), world commands, sessions."""
    keys: Keys
    sessions: SessionStore
    people: People
    sender: Sender
    """Delivers her lines on whichever platform a conversation is on."""
    commands: CommandQueue = None  # type: ignore[assignment]  # set in __post_init__
    """Where admin commands go; default: the world's Redis command list."""
    world: WorldView | None = None
    memory: MemoryService | None = None
    """None: life tools say they cannot look, nothing is recalled or archived."""
    history: HistoryStore | None = None
    """The message log; None: Redis sessions only."""
    model: ToolChatModel | None = None
    """Her chat model (answers, and the summaries of context and archive); None: she records
    messages and answers none."""
    groups: GroupManager | None = None
    """Group management where the platform has it (admin tools)."""
    town: Town = HAURA
    place_words: Mapping[str, str] = field(default_factory=dict)
    """The words that name her town's places in chat, place id by word, longest first
    (`Town.place_words` with the actions done at each: 图书馆 is at school); empty: the town's
    own words alone."""
    neighbours: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """The other characters of her town and those her card names in ``[relations]``, id → name
    and nicknames (their cards'): what she says about meeting them, or what they said, is
    checked against her record (someone of her card not in this town she has never met)."""
    stickers: StickerSet = NO_STICKERS
    """The stickers she may send (`message.stickers`); none unless given."""
    pacing: Pacing | None = None
    """How long she takes before each line (`message.pacing`); None: every line at once (tests,
    benchmarks), unless they ask for it."""
    admins: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "admins", frozenset(self.cfg.admins))
        if self.commands is None:
            object.__setattr__(self, "commands", RedisCommands(self.redis, self.keys))
        if not self.place_words:
            object.__setattr__(self, "place_words", self.town.place_words())

    def now(self) -> datetime:
        return self.clock.now()

    @property
    def tz(self) -> tzinfo:
        """Her town's time zone (the clock's)."""
        return self.clock.now().tzinfo or UTC

    def is_admin(self, person: str) -> bool:
        return person in self.admins

    async def character_state(self) -> CharacterState | None:
        if self.world is None:
            return None
        try:
            return await self.world.load_character(self.card.id)
        except Exception as exc:  # a corrupt or missing state must not stop chatting
            log.warning("character state unavailable: %s", exc)
            return None

    async def situation_text(self, char: CharacterState | None = None) -> str:
        """Time, weather, where she is and how she feels, as the model reads it."""
        now = self.now()
        weekday = "一二三四五六日"[now.weekday()]
        lines = [f"现在是 {now:%Y-%m-%d %H:%M} 星期{weekday}。"]
        world = None
        if self.world is not None:
            try:
                world = await self.world.load_world()
            except Exception as exc:
                log.warning("world state unavailable: %s", exc)
        if world is not None and world.weather is not None:
            lines.append(f"天气：{world.weather.type}，{world.weather.temperature}。")
        char = char or await self.character_state()
        if char is not None:
            if char.asleep:
                lines.append("你正在睡觉。")
            elif char.running is not None:
                lines.append(
                    f"你正在{self.town.place_name(char.running.place)}：{char.running.name}"
                    f"（{char.running.started_at.astimezone(self.tz):%H:%M} 开始）。"
                )
            else:
                lines.append(f"你在{self.town.place_name(char.location)}。")
            lines.append(
                f"感觉：体力{_feel(char.stamina, '很累', '充沛')}，肚子{_feel(char.satiety, '饿了', '饱饱的')}，"
                f"心情{_feel(char.mood, '有点低落', '不错')}。"
            )
        return "\n".join(lines)

    def render_entry(self, entry: Entry) -> str:
        """A message as the model reads it: identity in attributes set by us, content escaped so
        it cannot close the element or forge another."""
        when = entry.time.astimezone(self.tz)
        if entry.from_bot:
            return f"{self.card.name}（{when:%H:%M}）：{entry.text}"
        admin = ' admin="true"' if self.is_admin(entry.user_id) else ""
        name = html.escape(entry.sender_name, quote=True)
        who = html.escape(entry.user_id, quote=True)
        return f'<msg from="{name}" id="{who}" time="{when:%m-%d %H:%M}"{admin}>{html.escape(entry.text, quote=True)}</msg>'
