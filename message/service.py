"""The chat service: plain Python between the nonebot matchers and her mind, and a thin coordinator.

`ChatService.handle(entry)` records the message (`recorder`), asks the gate whether she answers
(`gate`), builds the turn's context (`context`), runs the agent loop with her grounded tools, puts
every text meant for users through the output filter (`output`) and the grounding check
(`grounding`), and sends the lines through an ``outlet``; a newer message in the same session
cancels the reply in flight. Tested without nonebot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from yuiju.config import ProactiveConfig
from yuiju.llm import ToolChatModel
from yuiju.llm.errors import LLMError
from yuiju.memory.episodes import EpisodeRepo
from yuiju.message.admin import AdminCommands
from yuiju.message.agent import (
    MODES,
    AdminAuthorizer,
    Agent,
    Review,
    Reviewer,
    RunContext,
    Tool,
    ToolRegistry,
)
from yuiju.message.busy import AnswerSlots, Shed
from yuiju.message.channel import SessionGroupContext
from yuiju.message.context import ChatContext
from yuiju.message.deps import ChatDeps
from yuiju.message.gate import ReplyGate
from yuiju.message.grounding import UNSURE_LINE, ClaimLexicon, GroundingCheck
from yuiju.message.memory_chat import MemoryAnswer, MemoryChat, private_chat, private_text
from yuiju.message.model import Conversation, Entry, Outgoing, Retraction
from yuiju.message.output import FEEDBACK, LOST_LINE, OutputFilter
from yuiju.message.people_grounding import PEOPLE_UNSURE_LINE, PeopleCheck
from yuiju.message.prompt import SECURITY
from yuiju.message.proposals import after_turn, unproposed
from yuiju.message.recorder import Recorder, Retracted
from yuiju.message.tools import builtin_tools
from yuiju.world.state import CharacterState

if TYPE_CHECKING:
    from yuiju.message.proactive import ProactiveService

log = logging.getLogger(__name__)

Sink = Callable[[str, str, str], Awaitable[None] | None]
"""``sink(kind, session_id, text)`` for debug and thinking output; never a group."""


Opening = Literal["read", "next", "none"]
"""How long the first line of a text waits: as her first line answering the message (reading it
and typing the line), as a further line of hers, or not at all (admin answers, failure lines)."""


TAKEN_BACK = "its message was taken back"
TAKEN_BACK_KEPT = 1024
"""Messages taken back that are remembered (per service) in case their notice overtakes them."""


class Stale(Exception):
    """The reply in preparation is no longer current: a newer message arrived."""


@dataclass
class Outcome:
    answered: bool
    reason: str
    replies: list[str] = field(default_factory=list)


class ChatService:
    """The chat core over its typed dependencies (`message.deps.ChatDeps`)."""

    def __init__(
        self,
        deps: ChatDeps,
        *,
        lexicon: ClaimLexicon | None = None,
        sink: Sink | None = None,
        tools: Iterable[Tool[ChatDeps]] | None = None,
        proactive: ProactiveConfig | None = None,
    ) -> None:
        self.deps = deps
        self.cfg = deps.cfg
        """The `[chat]` section (`yuiju.config.ChatConfig`)."""
        self.card = deps.card
        self.sessions = deps.sessions
        self.sink = sink
        """Where debug and thinking output goes besides the log (`message.debug.AdminDebugSink`)."""
        self.registry = ToolRegistry(
            builtin_tools(files=deps.cfg.file_folder is not None) if tools is None else list(tools)
        )
        self.authorizer = AdminAuthorizer(deps.admins)
        self.context = ChatContext(deps, registry=self.registry, mode=MODES[deps.cfg.mode])
        """What the model reads for a turn: prompt, situation, recall, summary, context items."""
        self.slots = AnswerSlots(deps.cfg.max_concurrent_answers, deps.cfg.max_waiting_answers)
        """Answers prepared at once and waiting; past it the oldest waiting one is given up."""
        self.recorder = Recorder(deps, render=deps.render_entry, give_way=self.slots.quiet)
        """Every message seen or sent: session, message log, conversation windows into memory."""
        self.output = OutputFilter(
            name=deps.card.name,
            max_chars=deps.cfg.max_reply_chars,
            max_lines=deps.cfg.max_lines,
            secret=lambda: SECURITY + "\n" + self.context.stable_prompt(),
            stickers=deps.stickers,
        )
        """Between the model's text and what is sent (shared with proactive posts)."""
        self.grounding = GroundingCheck(lexicon, deps.memory, deps.clock, deps.world)
        """Her claims about her days against her episodes of those days, and the weather now."""
        self.people_grounding = PeopleCheck(
            EpisodeRepo(deps.history) if deps.history is not None else None,
            deps.card.id,
            deps.neighbours,
            queued=deps.commands,
        )
        """Her claims about meeting someone or what someone said, against her record."""
        self.gate = ReplyGate(deps.cfg, deps.card, deps.is_admin)
        """Whether she answers: policies, sleep, floods and rate limits."""
        self.proactive = self._proactive(proactive)
        """Her proactive posts when ``[proactive]`` names groups (admin commands drive them)."""
        self.memory_chat = MemoryChat(deps)
        """``/memory me`` / ``/memory forget`` and the same in words."""
        self.admin = AdminCommands(
            deps,
            recorder=self.recorder,
            registry=self.registry,
            mode=self.context.mode,
            proactive=self.proactive,
        )
        self._state_read: asyncio.Future[CharacterState | None] | None = None
        self._inflight: dict[str, asyncio.Task[Outcome]] = {}
        self._latest: dict[str, str] = {}
        self._failed: set[str] = set()
        self._taken_back: OrderedDict[tuple[str, str], None] = OrderedDict()
        """Messages taken back lately (session, id): one whose notice overtook it stays out."""

    def _proactive(self, cfg: ProactiveConfig | None) -> ProactiveService | None:
        deps = self.deps
        if cfg is None or not cfg.enabled or not cfg.groups or deps.history is None:
            return None
        from yuiju.message.proactive import ProactiveService

        cid = cfg.character_id or deps.card.id
        if cid != deps.card.id:
            log.warning(
                "[proactive] character_id %r is not the chat's character %r: no proactive posts",
                cid,
                deps.card.id,
            )
            return None
        return ProactiveService(
            cfg=cfg,
            character_id=cid,
            card=deps.card,
            redis=deps.redis,
            keys=deps.keys,
            history=deps.history,
            clock=deps.clock,
            chat_model=deps.model,
            memory=deps.memory,
            sender=self,
            group_context=SessionGroupContext(deps.sessions, self.recorder.record_bot_message),
            output=self.output,
            lexicon=self.grounding.lexicon,
            people=self.people_grounding,
        )

    # -- small helpers --------------------------------------------------------------------------

    @property
    def model(self) -> ToolChatModel | None:
        """Her chat model: answers, and the summaries the rooms write (context, archive)."""
        return self.deps.model

    def now(self) -> datetime:
        return self.deps.now()

    def is_admin(self, person: str) -> bool:
        return self.deps.is_admin(person)

    async def ensure(self) -> None:
        """Create the message log's indexes and declare the episodes the people check reads;
        rename sessions stored before platforms."""
        await self.sessions.migrate()
        await self.recorder.ensure()
        await self.people_grounding.ensure()

    async def drain(self) -> None:
        """Wait for background work (conversation windows being archived)."""
        await self.recorder.drain()

    # -- the entry point ------------------------------------------------------------------------

    async def handle(self, entry: Entry, *, stateless: bool = False, keep: bool = True) -> Outcome:
        """Record ``entry`` and answer it when she should. A newer message in the same session
        cancels this reply (the outcome is then 'superseded'). ``keep=False``: the sender still
        holds the text (a page that keeps it to send again), so while Redis is away this raises
        its error instead of waiting, and the message is not recorded (`Recorder.record`)."""
        entry = self._in_world_time(entry)
        if (entry.session_id, entry.id) in self._taken_back:  # its 撤回 came first
            return Outcome(False, TAKEN_BACK)
        if len(entry.text) > self.cfg.max_input_chars:
            entry = entry.model_copy(
                update={"text": entry.text[: self.cfg.max_input_chars] + "…", "truncated": True}
            )
        if (request := self.memory_chat.request(entry)) is not None:
            return await self._memory_request(entry, request)
        command = self._admin_command(entry)
        if command is not None:
            await self.recorder.record(entry, context=False)
            answer = await self.admin.run(entry, command)
            sent = await self._answer_admin(entry, answer)
            return Outcome(bool(sent), "admin command", [answer] if sent else [])
        if self.gate.addressed(entry):  # her state is read while the message is recorded
            char, _ = await asyncio.gather(
                self._character_state(), self.recorder.record(entry, keep=keep)
            )
        else:  # a burst of chatter costs no reads
            await self.recorder.record(entry, keep=keep)
            char = None
        if (entry.session_id, entry.id) in self._taken_back:  # taken back while it was recorded
            await self.recorder.retract(entry.session_id, entry.id)
            return Outcome(False, TAKEN_BACK)
        asleep = bool(char is not None and char.asleep)
        answers, reason = self.gate.decide(entry, asleep)
        if not answers:
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
            self._answer(entry, char, self.model, asleep=asleep, stateless=stateless)
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
            if (sid, entry.id) in self._taken_back:
                return Outcome(False, TAKEN_BACK)
            return Outcome(False, "superseded by a newer message")
        return task.result()

    async def _answer_admin(self, entry: Entry, text: str) -> list[str]:
        """An admin command's answer (a diagnostic such as "没有发出（llm_invalid）…") is for the
        admin: privately where the platform can, else where the command was said. It is never
        recorded as her line: in a group's history it would read as something she said (the
        context of her next posts and answers, her memory of the conversation)."""
        if entry.scene == "group":
            private = private_chat(entry)
            try:
                return await self._send_admin_lines(private, text, first_raises=True)
            except Exception as exc:  # no private chat on this platform, or not friends
                log.info("admin answer not sent privately to %s: %s", entry.user_id, exc)
        return await self._send_admin_lines(entry.conversation, text)

    async def _send_admin_lines(
        self, conversation: Conversation, text: str, *, first_raises: bool = False
    ) -> list[str]:
        """``text`` as lines to ``conversation``, recorded nowhere; stops at the first line that
        cannot be delivered (with ``first_raises``, a first line that fails raises)."""
        sent: list[str] = []
        for line in self.output.lines(text):
            try:
                await self.deps.sender.send(Outgoing.text(conversation, line))
            except Exception as exc:
                if first_raises and not sent:
                    raise
                log.warning("admin answer not sent to %s: %s", conversation.session_id, exc)
                break
            sent.append(line)
        return sent

    async def _memory_request(self, entry: Entry, request: str) -> Outcome:
        """What she remembers of the asker, or forgetting it (`message.memory_chat`): not
        recorded (not a conversation), answered privately where the platform can."""
        answer = await self.memory_chat.answer(entry, request)
        if answer.private:
            try:
                await self.deps.sender.send(private_text(entry, answer.text))
                return Outcome(True, "memory request", [answer.text])
            except Exception as exc:  # no private chat on this platform, or not friends
                log.info("memory answer not sent privately to %s: %s", entry.user_id, exc)
                answer = MemoryAnswer("私聊发不出去，加我好友后私聊问我吧。", private=False)
        try:  # one message: a list of what she keeps reads as one
            await self.deps.sender.send(Outgoing.text(entry.conversation, answer.text))
        except Exception as exc:
            log.warning("memory answer not sent to %s: %s", entry.session_id, exc)
        return Outcome(True, "memory request", [answer.text])

    async def retract(self, what: Retraction) -> Retracted:
        """A message taken back (撤回): the reply she is preparing to it is cancelled (no further
        line of it goes out), and it leaves her context, the window that becomes memory, the
        message log's words and, when archived already, her memory (`Recorder.retract`)."""
        sid = what.conversation.session_id
        if what.mine:  # nothing of hers is being answered
            return await self.recorder.retract(sid, f"bot-{what.message_id}")
        self._taken_back[(sid, what.message_id)] = None
        while len(self._taken_back) > TAKEN_BACK_KEPT:
            self._taken_back.popitem(last=False)
        cancelled = False
        if self._latest.get(sid) == what.message_id:
            self._latest[sid] = f"taken back: {what.message_id}"  # stops a reply mid-lines
            task = self._inflight.get(sid)
            if task is not None and not task.done():
                task.cancel()
                cancelled = True
        done = await self.recorder.retract(sid, what.message_id)
        done.cancelled = cancelled
        return done

    def _in_world_time(self, entry: Entry) -> Entry:
        """The platform stamps a message in wall time; her life, her replies and her timeline run
        in world time, which a `--speed` demo leaves ahead of the wall clock. Shifted by the
        clock's lead, the message sorts where it happened in her day (a conversation episode is
        never placed hours before her last action) and the gap to her reply is the real one."""
        ahead = self.deps.clock.lead()
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

    async def _character_state(self) -> CharacterState | None:
        """Her state; callers that ask while a read is under way share it (one read for a burst)."""
        reading = self._state_read
        if reading is None or reading.done():
            reading = self._state_read = asyncio.ensure_future(self.deps.character_state())
        return await asyncio.shield(reading)

    # -- one turn -------------------------------------------------------------------------------

    async def _answer(
        self,
        entry: Entry,
        char: CharacterState | None,
        model: ToolChatModel,
        *,
        asleep: bool,
        stateless: bool,
    ) -> Outcome:
        """The turn once one is free (`busy.AnswerSlots`); given up when too many wait."""
        try:
            async with self.slots.turn():
                return await self._turn(entry, char, model, asleep=asleep, stateless=stateless)
        except Shed:
            return Outcome(False, "too busy: the answer was given up (the message is recorded)")

    async def _turn(
        self,
        entry: Entry,
        char: CharacterState | None,
        model: ToolChatModel,
        *,
        asleep: bool,
        stateless: bool,
    ) -> Outcome:
        sid = entry.session_id
        token = entry.id
        sent: list[str] = []

        async def emit(kind: str, text: str) -> list[str] | None:
            if kind in ("reply", "tool_reply"):
                lines = await self._send_lines(
                    entry,
                    text,
                    token=token,
                    source="reply",
                    context=kind == "tool_reply",
                    opening="next" if sent else "read",
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
            ctx = RunContext(
                deps=self.deps,
                user_id=entry.user_id,
                conversation=entry.conversation,
                is_admin=self.is_admin(entry.user_id),
                user_name=entry.sender_name,
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
        if sent:  # she talked with them: her closeness to them moves (through the world)
            await after_turn(self.deps, entry.user_id, entry.sender_name, entry.text)
            # she said yes to what cannot be (游乐园, 昨天): she tells them why at once
            if correction := await unproposed(ctx, entry.text, sent, result.tool_calls):
                with contextlib.suppress(Stale):
                    sent += await self._send_lines(
                        entry,
                        correction,
                        token=token,
                        source="reply",
                        context=False,
                        opening="next",
                    )
        return Outcome(bool(sent), "answered" if sent else "chose silence", sent)

    def _reviewer(self, entry: Entry, char: CharacterState | None) -> Reviewer:
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
            words = self.output.words(filtered.text)  # without her sticker markers
            feedback = await self.grounding.check(words, question=entry.text, char=char)
            unsure = UNSURE_LINE
            if feedback is None:

                async def recent() -> list[tuple[str, str]]:
                    return [(e.user_id, e.text) for e in await self.sessions.recent(sid, 30)]

                feedback = await self.people_grounding.check(
                    words, char=char, now=self.now(), recent=recent, speaker=entry.sender_name
                )
                unsure = PEOPLE_UNSURE_LINE
            if feedback is None:
                return Review(filtered.text)
            await self._debug("debug", sid, f"not grounded: {filtered.text[:200]}")
            if final or "grounding" in sent_back:
                return Review(unsure)
            sent_back.add("grounding")
            return Review(feedback=feedback)

        return review

    # -- sending --------------------------------------------------------------------------------

    def _check_current(self, sid: str, token: str | None) -> None:
        if token is not None and self._latest.get(sid) != token:
            raise Stale(sid)

    async def _send_lines(
        self,
        entry: Entry,
        text: str,
        *,
        token: str | None,
        source: str,
        context: bool,
        opening: Opening = "none",
    ) -> list[str]:
        """Send ``text`` as natural lines; the lines sent (each recorded as sent), stopping at the
        first that cannot be delivered. Each further line waits as long as a person would take
        to type it (`message.pacing`); the first waits as ``opening`` says."""
        sid = entry.session_id
        pacing = self.deps.pacing
        sent: list[str] = []
        for i, line in enumerate(self.output.lines(text)):
            if pacing is not None and (i or opening != "none"):
                if i or opening == "next":
                    delay = pacing.next_delay(line)
                else:
                    elapsed = (self.now() - entry.time).total_seconds()
                    delay = pacing.first_delay(entry.text, line, elapsed=elapsed)
                await pacing.wait(delay)
            self._check_current(sid, token)
            try:
                message_id = await self.deps.sender.send(
                    self.deps.stickers.outgoing(entry.conversation, line)
                )
            except Exception as exc:  # SendFailed, or the connection went away mid-reply
                log.warning("could not send to %s: %s", sid, exc)
                break
            sent.append(line)
            await self.recorder.record_bot_message(
                entry.conversation, line, source=source, message_id=message_id, context=context
            )
        return sent

    async def send_group(self, conversation: Conversation, text: str) -> None:
        """Send ``text`` as her natural lines with human-like pauses (proactive posts); raises
        `SendFailed` when the first line cannot be delivered."""
        pacing = self.deps.pacing
        for i, line in enumerate(self.output.lines(text)):
            if i and pacing is not None:
                await pacing.wait(pacing.next_delay(line))
            await self.deps.sender.send(self.deps.stickers.outgoing(conversation, line))

    async def _debug(self, kind: str, sid: str, text: str) -> None:
        log.debug("[%s] %s: %s", kind, sid, text)
        if self.sink is not None:
            try:
                out = self.sink(kind, sid, text)
                if asyncio.iscoroutine(out):
                    await out
            except Exception as exc:  # debug output must never cost the reply
                log.debug("debug sink failed: %s", exc)
