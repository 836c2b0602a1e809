"""The chat service: plain Python between the nonebot matchers and her mind, and a thin coordinator.

`ChatService.handle(entry)` records the message (`recorder`), asks the gate whether she answers
(`gate`), builds the turn's context (`context`), runs the agent loop with her grounded tools, puts
every text meant for users through the output filter (`output`) and the grounding check
(`grounding`), and sends the lines through an ``outlet``; a newer message in the same session
cancels the reply in flight. Tested without nonebot.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from redis.asyncio import Redis

from yuiju.characters import CharacterCard
from yuiju.llm import ToolChatModel
from yuiju.llm.errors import LLMError
from yuiju.message.agent import (
    MODES,
    AdminAuthorizer,
    Agent,
    Review,
    Reviewer,
    Tool,
    ToolContext,
    ToolRegistry,
)
from yuiju.message.context import ChatContext
from yuiju.message.entry import Entry
from yuiju.message.gate import ReplyGate
from yuiju.message.grounding import UNSURE_LINE, ClaimLexicon, GroundingCheck
from yuiju.message.output import FEEDBACK, LOST_LINE, OutputFilter
from yuiju.message.prompt import SECURITY
from yuiju.message.recorder import Recorder
from yuiju.message.session import SessionStore
from yuiju.message.tools import builtin_tools
from yuiju.storage.history import HistoryStore
from yuiju.storage.keys import Keys

log = logging.getLogger(__name__)

Outlet = Callable[[str, int, str], Awaitable[int | None]]
"""``send(scene, target, text)`` → the platform message id if known; raises `SendFailed`."""
Api = Callable[..., Awaitable[Any]]
"""``api(action, **params)``: a OneBot v11 API call (``bot.call_api``)."""
Sink = Callable[[str, str, str], Awaitable[None] | None]
"""``sink(kind, session_id, text)`` for debug and thinking output; never a group."""


class Stale(Exception):
    """The reply in preparation is no longer current: a newer message arrived."""


@dataclass
class Outcome:
    answered: bool
    reason: str
    replies: list[str] = field(default_factory=list)


class ChatService:
    def __init__(
        self,
        *,
        cfg: Any,
        card: CharacterCard,
        redis: Redis,
        keys: Keys,
        clock: Any,
        model: ToolChatModel | None = None,
        history: HistoryStore | None = None,
        memory: Any = None,
        world: Any = None,
        outlet: Outlet | None = None,
        api: Api | None = None,
        self_id: int | None = None,
        lexicon: ClaimLexicon | None = None,
        sink: Sink | None = None,
        tools: Sequence[Tool] | None = None,
        proactive: Any = None,
        redis_for_commands: Redis | None = None,
    ) -> None:
        self.cfg = cfg
        """The `[chat]` section (`yuiju.config.ChatConfig`)."""
        self.card = card
        self.redis = redis
        self.keys = keys
        self.clock = clock
        self.history = history
        self.memory = memory
        """A `memory.service.MemoryService`, or None (then life tools say they cannot look)."""
        self.outlet = outlet
        self.api = api
        self.sink = sink
        """Where debug and thinking output goes besides the log (`message.debug.AdminDebugSink`)."""
        self.proactive = proactive
        """A `message.proactive.ProactiveService` when configured (admin commands drive it)."""
        self.command_redis = redis_for_commands or redis
        self.sessions = SessionStore(redis, keys, card.id)
        self.registry = ToolRegistry(
            builtin_tools(files=cfg.file_folder is not None) if tools is None else tools
        )
        self.authorizer = AdminAuthorizer(frozenset(cfg.admins))
        self.context = ChatContext(
            cfg=cfg,
            card=card,
            clock=clock,
            sessions=self.sessions,
            registry=self.registry,
            mode=MODES[cfg.mode],
            is_admin=self.is_admin,
            world=world,
            memory=memory,
            model=model,
        )
        """What the model reads for a turn: prompt, situation, recall, summary, context items."""
        self.recorder = Recorder(
            cfg=cfg,
            card=card,
            clock=clock,
            sessions=self.sessions,
            render=self.context.render_entry,
            history=history,
            memory=memory,
            model=model,
        )
        """Every message seen or sent: session, message log, conversation windows into memory."""
        self.recorder.self_id = self_id
        self.output = OutputFilter(
            name=card.name,
            max_chars=cfg.max_reply_chars,
            max_lines=cfg.max_lines,
            secret=lambda: SECURITY + "\n" + self.context.stable_prompt(),
        )
        """Between the model's text and what is sent (shared with proactive posts)."""
        self.grounding = GroundingCheck(lexicon, memory, clock)
        """Her claims about today against today's episodes."""
        self.gate = ReplyGate(cfg, card, self.is_admin)
        """Whether she answers: policies, sleep, floods and rate limits."""
        self._inflight: dict[str, asyncio.Task[Outcome]] = {}
        self._latest: dict[str, str] = {}
        self._failed: set[str] = set()

    # -- small helpers --------------------------------------------------------------------------

    @property
    def tz(self) -> Any:
        return self.clock.now().tzinfo

    def now(self) -> datetime:
        return self.clock.now()

    @property
    def self_id(self) -> int | None:
        return self.recorder.self_id

    @self_id.setter
    def self_id(self, value: int | None) -> None:
        self.recorder.self_id = value

    @property
    def model(self) -> ToolChatModel | None:
        """Her chat model: answers, and the summaries the rooms write (context, archive)."""
        return self.context.model

    @model.setter
    def model(self, value: ToolChatModel | None) -> None:
        self.context.model = self.recorder.model = value

    @staticmethod
    def session_id(scene: str, target: int) -> str:
        return f"{scene}:{target}"

    def is_admin(self, user_id: int) -> bool:
        return user_id in self.authorizer.admins

    async def ensure(self) -> None:
        await self.recorder.ensure()

    async def drain(self) -> None:
        """Wait for background work (conversation windows being archived)."""
        await self.recorder.drain()

    # -- the entry point ------------------------------------------------------------------------

    async def handle(self, entry: Entry, *, stateless: bool = False) -> Outcome:
        """Record ``entry`` and answer it when she should. A newer message in the same session
        cancels this reply (the outcome is then 'superseded')."""
        if self.self_id is not None and entry.user_id == self.self_id:
            entry = entry.model_copy(update={"from_bot": True})
        entry = self._in_world_time(entry)
        if len(entry.text) > self.cfg.max_input_chars:
            entry = entry.model_copy(
                update={"text": entry.text[: self.cfg.max_input_chars] + "…", "truncated": True}
            )
        command = self._admin_command(entry)
        if command is not None:
            from yuiju.message.admin import run_admin

            await self.recorder.record(entry, context=False)
            reply = await run_admin(self, entry, command)
            await self._send_lines(entry, reply, token=None, source="admin", context=False)
            return Outcome(True, "admin command", [reply])
        await self.recorder.record(entry)
        char = await self.context.character_state()
        asleep = bool(char is not None and char.asleep)
        answer, reason = self.gate.decide(entry, asleep)
        if not answer:
            log.debug("not answering %s in %s: %s", entry.id, entry.session_id, reason)
            return Outcome(False, reason)
        if self.model is None:
            return Outcome(False, "no chat model configured")
        sid = entry.session_id
        previous = self._inflight.get(sid)
        if previous is not None and not previous.done():
            previous.cancel()
        self._latest[sid] = entry.id
        task = asyncio.create_task(
            self._turn(entry, char, self.model, asleep=asleep, stateless=stateless)
        )
        self._inflight[sid] = task
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:  # the caller gave up (the bot is stopping): so does the turn
            task.cancel()
            raise
        if self._inflight.get(sid) is task:
            del self._inflight[sid]
        if task.cancelled():
            return Outcome(False, "superseded by a newer message")
        return task.result()

    def _in_world_time(self, entry: Entry) -> Entry:
        """The platform stamps a message in wall time; her life, her replies and her timeline run
        in world time, which a `--speed` demo leaves ahead of the wall clock. Shifted by the
        clock's lead, the message sorts where it happened in her day (a conversation episode is
        never placed hours before her last action) and the gap to her reply is the real one."""
        ahead = self.clock.lead()
        if ahead is None:  # a simulated clock: the caller stamps in world time
            return entry
        if abs(ahead) < timedelta(seconds=1):
            return entry
        return entry.model_copy(update={"time": entry.time + ahead})

    def _admin_command(self, entry: Entry) -> str | None:
        if not self.is_admin(entry.user_id) or entry.from_bot:
            return None
        text = entry.text
        for name in (self.card.name, *self.card.nicknames):
            text = re.sub(rf"^\s*@{re.escape(name)}\s*", "", text)
        text = text.strip()
        if not text.startswith("/") or (entry.scene == "group" and not entry.mentions_me):
            return None
        return text[1:]

    # -- one turn -------------------------------------------------------------------------------

    async def _turn(
        self, entry: Entry, char: Any, model: ToolChatModel, *, asleep: bool, stateless: bool
    ) -> Outcome:
        sid = entry.session_id
        token = entry.id
        sent: list[str] = []

        async def emit(kind: str, text: str) -> list[str] | None:
            if kind in ("reply", "tool_reply"):
                lines = await self._send_lines(
                    entry, text, token=token, source="reply", context=kind == "tool_reply"
                )
                sent.extend(lines)
                return lines
            await self._debug(kind, sid, text)
            return None

        try:
            messages = await self.context.messages(entry, char, asleep=asleep)
            agent = Agent(
                model,
                self.registry,
                self.authorizer,
                mode=self.context.mode,
                max_steps=self.cfg.max_steps,
            )
            ctx = ToolContext(
                user_id=entry.user_id,
                session_id=sid,
                scene=entry.scene,
                group_id=entry.group_id,
                is_admin=self.is_admin(entry.user_id),
                service=self,
            )
            result = await agent.run(messages, ctx, emit, review=self._reviewer(entry, char))
        except Stale:
            return Outcome(False, "superseded by a newer message", sent)
        except LLMError as exc:
            log.warning("chat model failed in %s: %s", sid, exc)
            if sid in self._failed:
                return Outcome(False, "model failing (silent)")
            self._failed.add(sid)
            try:
                lines = await self._send_lines(
                    entry, self.cfg.failure_line, token=token, source="failure", context=False
                )
            except Stale:
                lines = []
            return Outcome(bool(lines), "model failed", lines)
        self._failed.discard(sid)
        if not stateless:
            await self.sessions.append(sid, result.items)
        return Outcome(bool(sent), "answered" if sent else "chose silence", sent)

    def _reviewer(self, entry: Entry, char: Any) -> Reviewer:
        """The turn's review of every text meant for users: the output filter, then the grounding
        check; each kind of problem is sent back to the model once, then a short line is said."""
        sid = entry.session_id
        sent_back: set[str] = set()

        async def review(text: str, *, finish_reason: str | None, final: bool) -> Review:
            filtered = self.output.review(text, finish_reason=finish_reason)
            if filtered.problem is not None:
                await self._debug("debug", sid, f"not a message ({filtered.problem}): {text[:200]}")
                if final or filtered.problem in sent_back:
                    return Review(LOST_LINE)
                sent_back.add(filtered.problem)
                return Review(feedback=FEEDBACK[filtered.problem])
            if filtered.leaked:
                log.warning("reply withheld in %s: it quotes the system prompt", sid)
            if filtered.leaked or not filtered.text:
                return Review(filtered.text)
            feedback = await self.grounding.check(filtered.text, question=entry.text, char=char)
            if feedback is None:
                return Review(filtered.text)
            await self._debug("debug", sid, f"not grounded: {filtered.text[:200]}")
            if final or "grounding" in sent_back:
                return Review(UNSURE_LINE)
            sent_back.add("grounding")
            return Review(feedback=feedback)

        return review

    # -- sending --------------------------------------------------------------------------------

    async def pause_between(self, line: str) -> None:
        pause = min(self.cfg.max_pause_seconds, len(line) / self.cfg.chars_per_second)
        if pause > 0:
            await asyncio.sleep(pause)

    def _check_current(self, sid: str, token: str | None) -> None:
        if token is not None and self._latest.get(sid) != token:
            raise Stale(sid)

    async def _send_lines(
        self, entry: Entry, text: str, *, token: str | None, source: str, context: bool
    ) -> list[str]:
        """Send ``text`` as natural lines; the lines sent (each recorded as sent), stopping at the
        first that cannot be delivered."""
        sid = entry.session_id
        sent: list[str] = []
        for i, line in enumerate(self.output.lines(text)):
            if i:
                await self.pause_between(line)
            self._check_current(sid, token)
            try:
                message_id = (
                    await self.outlet(entry.scene, entry.target, line) if self.outlet else None
                )
            except Exception as exc:  # SendFailed, or the connection went away mid-reply
                log.warning("could not send to %s: %s", sid, exc)
                break
            sent.append(line)
            await self.recorder.record_bot_message(
                entry.scene,
                entry.target,
                line,
                source=source,
                message_id=message_id,
                context=context,
            )
        return sent

    async def _debug(self, kind: str, sid: str, text: str) -> None:
        log.debug("[%s] %s: %s", kind, sid, text)
        if self.sink is not None:
            try:
                out = self.sink(kind, sid, text)
                if asyncio.iscoroutine(out):
                    await out
            except Exception as exc:  # debug output must never cost the reply
                log.debug("debug sink failed: %s", exc)
