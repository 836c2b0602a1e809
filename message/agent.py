"""The agent loop (Vicky's design in Python): modes, tools with an optional immediate reply,
a run-time tool registry, an authorizer deciding every call, a step limit and a wrap-up answer.

The loop knows no platform: it gets the messages, a `RunContext` (the turn's speaker and
conversation, and the typed dependencies tools use, as pydantic-ai's ``RunContext[Deps]``) and an
async ``emit`` for what users should see, and returns the context items the turn produced.
"""

from __future__ import annotations

import inspect
import json
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from yuiju.llm import ToolChatModel, ToolChatResult
from yuiju.message.model import Conversation

log = logging.getLogger(__name__)

TOOL_RESULT_MAX_CHARS = 4000


@dataclass(frozen=True)
class Mode:
    """How the model reaches users. Subclass or build one for a custom mode."""

    name: str
    tools_enabled: bool
    """Send the tools and the tool guide."""
    emit_text: bool
    """Plain assistant text is shown to users."""
    instructions: str
    """Put under ``# 输出规则`` in the system prompt."""


SILENT = Mode(
    "SILENT",
    tools_enabled=True,
    emit_text=False,
    instructions="你直接写出的文字不会被任何人看到。想对用户说话，只能调用带回复的工具（reply）；不需要回应就什么都不输出。",
)
VERBOSE = Mode(
    "VERBOSE",
    tools_enabled=True,
    emit_text=True,
    instructions="你写出的文字会直接发到聊天里。可以直接回答，也可以先调用工具查询再回答；工具也可能自己发消息。",
)
CHAT = Mode(
    "CHAT",
    tools_enabled=False,
    emit_text=True,
    instructions="你写出的文字会直接发到聊天里。这次没有工具可用，直接聊天。",
)
MODES = {m.name: m for m in (SILENT, VERBOSE, CHAT)}


@dataclass(frozen=True)
class Refusal:
    """A tool that did not do what the model asked (news the speaker never said): what the
    model reads when a line of its answer still says it was done, and how such a line reads."""

    reason: str
    """Why it was not done, for the model (the tool's result says it too)."""
    done: re.Pattern[str]
    """A sentence that acknowledges it as done (好的，我记住啦; 谢谢你～ for a gift)."""


@dataclass(frozen=True)
class ToolResult:
    to_agent: str
    """Becomes the tool message the model reads."""
    user_reply: str | None = None
    """Sent to the user at once."""
    end_turn: bool = False
    """Finish the turn after this batch of calls, without another completion."""
    refused: Refusal | None = None
    """Set when the tool refused: a later line of the turn that acknowledges it as done is sent
    back to the model once with the reason, then left out (`Agent.run`)."""


DepsT = TypeVar("DepsT")


@dataclass(frozen=True)
class RunContext(Generic[DepsT]):
    """What a tool gets besides its arguments: the turn's speaker and conversation, and ``deps``."""

    deps: DepsT
    user_id: str
    """Who the turn answers, platform-qualified (``qq:12345``)."""
    conversation: Conversation
    is_admin: bool
    user_name: str = ""
    """How the speaker is called on their platform (the message's sender name)."""

    @property
    def session_id(self) -> str:
        return self.conversation.session_id

    @property
    def in_group(self) -> bool:
        return self.conversation.scene == "group"


ToolRun = Callable[[RunContext[DepsT], dict[str, Any]], Any]
"""``run(ctx, args)`` returns (or awaits to) a `ToolResult` or a plain text for the model; generic
over the dependencies it reads (``ToolRun[ChatDeps]``), as pydantic-ai's ``Tool[AgentDepsT]``."""


@dataclass(frozen=True)
class Tool(Generic[DepsT]):
    """A tool typed by the dependencies its ``run`` reads (``Tool[ChatDeps]``)."""

    name: str
    description: str
    run: ToolRun[DepsT]
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    """JSON schema of the arguments."""
    admin_only: bool = False
    """Only admins may call it (the authorizer enforces this; the prompt only mentions it)."""

    def spec(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def tool(
    name: str,
    description: str,
    *,
    admin_only: bool = False,
    **properties: dict[str, Any],
) -> Callable[[ToolRun[DepsT]], Tool[DepsT]]:
    """Declare a tool from a function: ``@tool("x", "...", query={"type": "string"})``.
    Every keyword is a parameter; parameters without ``"default"`` are required."""
    required = [k for k, v in properties.items() if "default" not in v]
    schema = {
        "type": "object",
        "properties": {
            k: {kk: vv for kk, vv in v.items() if kk != "default"} for k, v in properties.items()
        },
        "required": required,
    }

    def wrap(fn: ToolRun[DepsT]) -> Tool[DepsT]:
        return Tool(
            name=name, description=description, run=fn, parameters=schema, admin_only=admin_only
        )

    return wrap


class ToolRegistry(Generic[DepsT]):
    """Tools by name; changes show up on the next turn (its `version` changes)."""

    def __init__(self, tools: Sequence[Tool[DepsT]] = ()) -> None:
        self._tools: dict[str, Tool[DepsT]] = {}
        self.version = 0
        for t in tools:
            self.register(t)

    def register(self, t: Tool[DepsT]) -> None:
        self._tools[t.name] = t
        self.version += 1

    def unregister(self, name: str) -> bool:
        found = self._tools.pop(name, None) is not None
        self.version += found
        return found

    def get(self, name: str) -> Tool[DepsT] | None:
        return self._tools.get(name)

    def snapshot(self) -> list[Tool[DepsT]]:
        return list(self._tools.values())

    def __contains__(self, name: object) -> bool:
        return name in self._tools


class Authorizer(Protocol):
    def allow(self, user_id: str, t: Tool[DepsT]) -> bool: ...


@dataclass
class AdminAuthorizer:
    """Admin-only tools for the admin list; the rest for everyone. Identity comes from the
    platform event, never from text."""

    admins: frozenset[str]
    """Platform-qualified ids (``qq:10001``)."""
    admin_tools: frozenset[str] = frozenset()
    """Extra tool names treated as admin-only."""

    def allow(self, user_id: str, t: Tool[DepsT]) -> bool:
        if t.admin_only or t.name in self.admin_tools:
            return user_id in self.admins
        return True


Emit = Callable[[str, str], Awaitable[list[str] | None]]
"""``emit(kind, text)``: kind 'reply' (the model's answer), 'tool_reply', 'debug' or 'think'.
For replies it returns the lines actually sent (None: not known, take ``text``)."""


@dataclass
class TurnResult:
    items: list[dict[str, Any]] = field(default_factory=list)
    """Context items this turn produced (assistant, tool), to persist."""
    answer: str = ""
    """The final answer after review (shown or not, depending on the mode)."""
    replies: list[str] = field(default_factory=list)
    """Everything sent to users, in order."""
    steps: int = 0
    wrapped_up: bool = False
    tool_calls: list[str] = field(default_factory=list)


WRAP_UP = (
    "已经到了这一轮的步数上限，不能再调用工具。请根据已经查到的内容直接回复对方；"
    "如果有没做完的事，就自然地说还没弄好。用对方的语言，简短。"
)


@dataclass(frozen=True)
class Review:
    """What may go out of a text the model wrote for users."""

    text: str = ""
    """What to send: the text as cleaned, or a line said instead; empty: nothing."""
    feedback: str | None = None
    """Set when nothing goes out and the model should answer again: what it reads."""


class Reviewer(Protocol):
    async def __call__(self, text: str, *, finish_reason: str | None, final: bool) -> Review:
        """Review text meant for users; with ``final`` no second answer can be asked for, so the
        review must not return feedback."""
        ...


class Agent(Generic[DepsT]):
    def __init__(
        self,
        model: ToolChatModel,
        registry: ToolRegistry[DepsT],
        authorizer: Authorizer,
        *,
        mode: Mode = VERBOSE,
        max_steps: int = 6,
        temperature: float | None = None,
    ) -> None:
        self.model = model
        self.registry = registry
        self.authorizer = authorizer
        self.mode = mode
        self.max_steps = max_steps
        self.temperature = temperature

    async def run(
        self,
        messages: list[dict[str, Any]],
        ctx: RunContext[DepsT],
        emit: Emit,
        *,
        review: Reviewer | None = None,
    ) -> TurnResult:
        """Run one turn over ``messages`` (system + context, ending with the user's message).

        Every text meant for users — the answer, a tool's reply, the wrap-up — passes ``review``
        first; an answer sent back gets another completion, a tool reply sent back tells the model
        in the tool's result that it did not go out. The items returned hold only what was sent:
        never the model's text that review replaced, nor its thinking next to tool calls."""
        result = TurnResult()
        tools = [t.spec() for t in self.registry.snapshot()] if self.mode.tools_enabled else []
        convo = list(messages)
        refusals: list[Refusal] = []
        told: list[bool] = []  # whether an acknowledgement was sent back already

        async def checked(text: str, finish_reason: str | None, *, final: bool) -> Review:
            verdict = await self._review(review, text, finish_reason, final=final)
            if not refusals or verdict.feedback or not verdict.text:
                return verdict
            return unacknowledged(verdict, refusals, final=final or bool(told), told=told)

        for step in range(1, self.max_steps + 1):
            result.steps = step
            await emit(
                "debug", f"step {step}/{self.max_steps}: completion with {len(convo)} messages"
            )
            answer = await self.model.complete_tools(
                convo, tools=tools, temperature=self.temperature
            )
            if not answer.tool_calls:
                verdict = await checked(answer.text, answer.finish_reason, final=False)
                if verdict.feedback:
                    await emit("debug", f"answer sent back: {verdict.feedback}")
                    convo += [
                        {"role": "assistant", "content": answer.text},
                        {"role": "system", "content": verdict.feedback},
                    ]
                    continue
                return await self._finish(result, verdict.text, emit)
            item = self._assistant_item(answer)
            convo.append(item)
            # Kept: the calls whose arguments are whole; one cut off mid-arguments stays in this
            # turn (the model reads why it failed) but not in her context, where a provider may
            # refuse the broken JSON on every later turn. Her thinking was never said to anyone.
            whole = [c for c in item["tool_calls"] if _whole(c["function"]["arguments"])]
            if whole:
                result.items.append({**item, "content": "", "tool_calls": whole})
            if answer.text.strip():
                await emit("think", answer.text.strip())
            end_turn = False
            for call in answer.tool_calls:
                result.tool_calls.append(call.name)
                await emit("think", f"Use Tool: {call.name}")
                out = await self._invoke(ctx, call.name, call.arguments)
                to_agent = out.to_agent
                if out.refused is not None:
                    refusals.append(out.refused)
                if out.user_reply and out.user_reply.strip():
                    verdict = await checked(out.user_reply, None, final=False)
                    if verdict.feedback:
                        await emit("debug", f"tool reply held back: {verdict.feedback}")
                        to_agent = f"{to_agent}\n（你给用户的回复没有发出：{verdict.feedback}）"
                    elif verdict.text:
                        result.replies.append(verdict.text)
                        await emit("tool_reply", verdict.text)
                tool_item = {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": to_agent[:TOOL_RESULT_MAX_CHARS],
                    "name": call.name,
                }
                convo.append(tool_item)
                if _whole(call.arguments):
                    result.items.append(tool_item)
                end_turn = end_turn or out.end_turn
            if end_turn:
                await emit("debug", "a tool ended the turn")
                return result
        # Out of steps: one more answer, without tools, shown even in SILENT mode.
        await emit("debug", "reached max steps, wrapping up")
        result.wrapped_up = True
        convo.append({"role": "system", "content": WRAP_UP})
        answer = await self.model.complete_tools(convo, tools=[], temperature=self.temperature)
        verdict = await checked(answer.text, answer.finish_reason, final=True)
        return await self._finish(result, verdict.text, emit, force_emit=True)

    @staticmethod
    async def _review(
        review: Reviewer | None, text: str, finish_reason: str | None, *, final: bool
    ) -> Review:
        if review is None:
            return Review(text.strip())
        return await review(text, finish_reason=finish_reason, final=final)

    async def _finish(
        self, result: TurnResult, text: str, emit: Emit, *, force_emit: bool = False
    ) -> TurnResult:
        result.answer = text
        if text and (self.mode.emit_text or force_emit):
            sent = await emit("reply", text)
            said = text if sent is None else "\n".join(sent)
            if said:
                result.replies.append(said)
                result.items.append({"role": "assistant", "content": said})
        return result

    @staticmethod
    def _assistant_item(answer: ToolChatResult) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": answer.text or "",
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in answer.tool_calls
            ],
        }

    async def _invoke(self, ctx: RunContext[DepsT], name: str, arguments: str) -> ToolResult:
        t = self.registry.get(name)
        if t is None:
            return ToolResult(f"Error: tool '{name}' not found.")
        if not self.authorizer.allow(ctx.user_id, t):
            log.info("tool %s denied for user %s", name, ctx.user_id)
            return ToolResult(
                f"Error: permission denied for user '{ctx.user_id}' on tool '{name}'. "
                "只有管理员能用这个工具；不要再尝试，也不要假装已经做了。"
            )
        try:
            args = json.loads(arguments or "{}")
            if not isinstance(args, dict):
                raise ValueError("arguments must be a JSON object")
        except ValueError as exc:
            return ToolResult(f"Error: invalid arguments for '{name}': {exc}")
        try:
            out = t.run(ctx, args)
            if inspect.isawaitable(out):
                out = await out
        except Exception as exc:  # the model may retry or explain; users never see the trace
            log.warning("tool %s failed: %s", name, exc, exc_info=True)
            return ToolResult(f"Error executing '{name}': {type(exc).__name__}: {exc}")
        return out if isinstance(out, ToolResult) else ToolResult(str(out))


_SENTENCE = re.compile(r"[^。！？!?～~\n]+[。！？!?～~\n]*")
NOT_FOLLOWED_LINE = "诶？我好像没跟上，你是说……？"
"""What she says when all her answer did was acknowledge a refused tool call as done (thanks for a
gift nobody gave): honest that she did not follow, and still an answer."""


def unacknowledged(
    verdict: Review, refusals: Sequence[Refusal], *, final: bool, told: list[bool]
) -> Review:
    """``verdict`` after tools refused ``refusals``: a text that acknowledges one as done goes
    back to the model with the reasons (once: ``told`` remembers it), or with ``final`` loses
    the sentences that acknowledge it (nothing, when that is all it said)."""
    wrong = [r for r in refusals if r.done.search(verdict.text)]
    if not wrong:
        return verdict
    if not final:
        told.append(True)
        reasons = "\n".join(dict.fromkeys(r.reason for r in wrong))
        return Review(
            feedback=f"{reasons}\n你的回答像是这件事已经办成了，但它没有办成："
            "重新回答，不要说记住了、收下了或谢谢；可以如实说没记下，或者只接着聊。"
        )
    kept = [s for s in _SENTENCE.findall(verdict.text) if not any(r.done.search(s) for r in wrong)]
    return Review("".join(kept).strip() or NOT_FOLLOWED_LINE)  # never no answer at all


def _whole(arguments: str) -> bool:
    """Whether a tool call's arguments are a whole JSON object (not cut off at the token limit)."""
    try:
        return isinstance(json.loads(arguments or "{}"), dict)
    except ValueError:
        return False
