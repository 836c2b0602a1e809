"""What two characters say when they meet: a few short lines, by the model or from templates.

A meeting's conversation is written once, before the meeting is committed, and recorded on both
sides (their conversation episodes). What it must contain is decided by the world, not by the
words: the news passed on, an invitation and its answer, an appointment kept (`TalkRequest`);
the episode records those facts whatever the lines say.

`TemplateTalker` writes the lines from Chinese templates, seeded by the meeting: no model, no
cost. `ModelTalker` asks the model for them in one call (purpose ``converse``) while the
initiator's per-day budget lasts (`[social] model_talks_per_day`, checked by the behavior loop)
and the day's token budget allows; any failure, and every conversation past the budget, falls
back to the templates, so the social part adds a bounded number of calls per character-day.

A `TalkCheck` (issue 30: what she says is bound to her life) reads the model's lines against each
speaker's record: a line that claims a doing, place, food, purchase, meeting or weather the record
does not back sends the draft back to the model once with the reasons, and a second miss gives
the template lines, which say only what the world decided. The check reads the history store, so
it runs where the model call runs: off the engine's step when the meeting was decided off it
(world/decisions.py).
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from jinja2 import Environment, PackageLoader, StrictUndefined
from pydantic import BaseModel, ConfigDict, Field

from yuiju.llm import (
    ChatMessage,
    ChatModel,
    JsonSchema,
    RetryWithFeedback,
    StructuredOutputFailed,
    ask_structured,
)
from yuiju.world.relations import Appointment, NewsItem, band
from yuiju.world.town import said_at

log = logging.getLogger(__name__)

PURPOSE = "converse"
"""The purpose of every call the model talker makes (usage accounting, ``max_tokens`` bound)."""
MAX_LINES = 6
MAX_LINE_CHARS = 60

PROMPTS = Environment(
    loader=PackageLoader("yuiju.world", "prompts"),
    undefined=StrictUndefined,
    autoescape=False,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


@dataclass(frozen=True, kw_only=True)
class Speaker:
    id: str
    name: str
    persona: str = ""
    speaking_style: str = ""
    closeness: float = 10.0
    """Hers to the other speaker."""


@dataclass(frozen=True, kw_only=True)
class TalkRequest:
    """Everything the words of one meeting depend on."""

    meeting_id: str
    kind: str
    """greet, chat, together, invite (`world.action.Joint.kind`)."""
    activity: str
    """What they do, in Chinese (一起散步)."""
    place: str
    """The place's Chinese name."""
    now: datetime
    a: Speaker
    """Who started it."""
    b: Speaker
    news: tuple[tuple[str, NewsItem], ...] = ()
    """(teller id, the item as the teller knew it), in telling order."""
    proposal: Appointment | None = None
    proposal_place: str = ""
    declined: str | None = None
    kept: Appointment | None = None
    weather: tuple[str, ...] = ()
    """The world's weather as they meet (its type and temperature): what a line may say of it.
    Empty: what they say of the weather is not checked."""

    def speaker(self, speaker_id: str) -> Speaker:
        return self.a if speaker_id == self.a.id else self.b


@dataclass(frozen=True)
class Line:
    speaker: str
    """Character id."""
    name: str
    text: str


@dataclass(frozen=True)
class Conversation:
    lines: tuple[Line, ...]
    source: Literal["model", "template"]


class TalkCheck(Protocol):
    """Which of a model's lines for a meeting the speakers' records cannot back (issue 30)."""

    async def unbacked(self, request: TalkRequest, lines: Sequence[Line]) -> dict[int, str]:
        """The lines (by index) that claim what the speaker did not live, each with the reason
        in Chinese, naming the speaker and the claim (悠酱：你说今天「在图书馆」，但…); what ``request`` says (the meeting's own
        activity and place, the news passed on, the invitation, the kept appointment) passes.
        May read the history store: called only where the model call is made."""
        ...


class Talker(Protocol):
    async def converse(self, request: TalkRequest, *, use_model: bool) -> Conversation:
        """The lines of this meeting; ``use_model`` False: without the model (budget spent)."""
        ...


# -- templates ------------------------------------------------------------------------------


def _hello(now: datetime) -> str:
    hour = now.hour
    if hour < 10:
        return "早上好"
    if hour < 13:
        return "中午好"
    if hour < 18:
        return "下午好"
    return "晚上好"


OPENERS = {
    "greet": (("{hello}，{b}！", "{a}！{hello}～"), ("{b}，你也在这里呀。", "嗯，好巧！")),
    "chat": (
        ("{b}，聊一会儿吧？", "好呀，正好想找人说说话。"),
        ("今天过得怎么样？", "还不错，就是有点累。"),
        ("在{place}碰到你真好。", "是啊，我们聊聊吧。"),
    ),
    "together": (
        ("{b}，{together}吧？", "好呀，走吧！"),
        ("要不要{together}？", "正想找人一起呢。"),
    ),
    "invite": (("{b}，有件事想约你。", "什么事？"),),
}
CLOSERS = {
    "greet": ("那我先忙啦，回头见！",),
    "chat": ("和你聊天真开心。", "下次再聊！"),
    "together": ("下次也一起吧。", "今天很开心！"),
    "invite": ("那就这么说定啦。",),
}


class TemplateTalker:
    """Lines from Chinese templates, the same for the same meeting (seeded by its id)."""

    async def converse(self, request: TalkRequest, *, use_model: bool = False) -> Conversation:
        return self.write(request)

    def write(self, request: TalkRequest) -> Conversation:
        rng = random.Random(request.meeting_id)
        a, b = request.a, request.b
        fill = {
            "a": a.name,
            "b": b.name,
            "hello": _hello(request.now),
            "place": request.place,
            "activity": request.activity,
            "together": together(request.activity),
        }
        lines: list[Line] = []

        def say(who: Speaker, text: str) -> None:
            lines.append(Line(who.id, who.name, text.format(**fill)))

        if request.kept is not None:
            say(a, "{b}，你来啦！")
            say(b, "说好的嘛，我可不会迟到。")
        else:
            first, reply = rng.choice(OPENERS.get(request.kind, OPENERS["chat"]))
            say(a, first)
            say(b, reply)
        for teller_id, item in request.news:
            teller = request.speaker(teller_id)
            listener = b if teller is a else a
            origin = (
                f"{item.told_by_line()}，" if item.source.key != f"character:{listener.id}" else ""
            )
            lines.append(Line(teller.id, teller.name, f"对了，{origin}{item.text}。"))
            lines.append(
                Line(
                    listener.id,
                    listener.name,
                    rng.choice(("诶，真的吗？", "原来是这样，我都不知道。", "是吗，我记住了。")),
                )
            )
        if request.proposal is not None:
            when = _when(request.proposal.start, request.now)
            what = request.proposal.activity.removeprefix("一起")
            say(a, f"{when}一起去{request.proposal_place}{what}好不好？")
            if request.declined is None:
                say(b, f"好呀，那就{when}见！")
            else:
                say(b, f"抱歉，{request.declined}。")
        closer = rng.choice(CLOSERS.get(request.kind, CLOSERS["chat"]))
        say(rng.choice((a, b)), closer)
        return Conversation(tuple(lines[: MAX_LINES + 2 * len(request.news)]), "template")


def together(activity: str) -> str:
    """一起 and what they do, said once: 吃午饭 → 一起吃午饭; 一起在食堂吃午饭 as it is."""
    return activity if activity.startswith("一起") else f"一起{activity}"


def _when(start: datetime, now: datetime) -> str:
    days = (start.date() - now.date()).days
    day = {0: "今天", 1: "明天", 2: "后天"}.get(days, f"{start.month}月{start.day}日")
    return f"{day}{start.strftime('%H:%M')}"


# -- the model ------------------------------------------------------------------------------


class _LineOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    speaker: str = Field(min_length=1, max_length=20)
    text: str = Field(min_length=1, max_length=MAX_LINE_CHARS)


class _TalkOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lines: list[_LineOut] = Field(min_length=2, max_length=MAX_LINES)


def talk_schema(names: Sequence[str]) -> JsonSchema:
    line = {
        "type": "object",
        "properties": {
            "speaker": {"enum": list(names)},
            "text": {"type": "string", "minLength": 1, "maxLength": MAX_LINE_CHARS},
        },
        "required": ["speaker", "text"],
        "additionalProperties": False,
    }
    schema = {
        "type": "object",
        "properties": {
            "lines": {"type": "array", "items": line, "minItems": 2, "maxItems": MAX_LINES}
        },
        "required": ["lines"],
        "additionalProperties": False,
    }
    return JsonSchema(name="conversation", schema=schema)


def render_talk_prompt(request: TalkRequest) -> str:
    return PROMPTS.get_template("converse.md.j2").render(
        r=request,
        doing=said_at(request.place, request.activity),
        when=f"{request.now.month}月{request.now.day}日 {request.now.strftime('%H:%M')}",
        a_band=band(request.a.closeness),
        b_band=band(request.b.closeness),
        proposal_when=_when(request.proposal.start, request.now) if request.proposal else "",
        news=[(request.speaker(t).name, item) for t, item in request.news],
    )


BudgetCheck = Callable[[datetime], Awaitable[bool]]


TALK_FEEDBACK = (
    "这段对话里有的话和说话人的生活记录对不上：\n{reasons}\n"
    "请重写整段对话：每个人只说自己真的做过的事、眼前的事（{doing}）和上面要说的事；"
    "记录里没有的经历、地点、吃的、买的东西和人都不要说。"
    '只输出 JSON：{{"lines": [{{"speaker": 名字, "text": 说的话}}, ...]}}'
)
"""What the model reads when its lines claim what the speakers did not live."""


class ModelTalker:
    """One model call per conversation while allowed (two when its lines are sent back once by
    the check); the templates otherwise."""

    def __init__(
        self,
        model: ChatModel,
        *,
        temperature: float | None = None,
        budget_allows: BudgetCheck | None = None,
        check: TalkCheck | None = None,
    ) -> None:
        self.model = model
        self.temperature = temperature
        self.budget_allows = budget_allows
        """The day's token budget ([llm] daily_token_budget), shared with decisions."""
        self.check = check
        """What the lines may claim of the speakers' lives (`TalkCheck`); None: not checked."""
        self.templates = TemplateTalker()
        self.calls = 0
        self.failed = 0
        self.ungrounded = 0
        """Conversations whose lines the check sent back twice (the templates said them)."""

    async def converse(self, request: TalkRequest, *, use_model: bool = True) -> Conversation:
        if not use_model or (
            self.budget_allows is not None and not await self.budget_allows(request.now)
        ):
            return self.templates.write(request)
        names = {request.a.name: request.a, request.b.name: request.b}

        def parse(text: str) -> Conversation:
            out = _TalkOut.model_validate_json(text)
            lines = []
            for line in out.lines:
                who = names.get(line.speaker.strip())
                if who is None:
                    raise RetryWithFeedback(f"speaker 只能是 {'、'.join(names)}")
                lines.append(Line(who.id, who.name, line.text.strip()))
            if len({line.speaker for line in lines}) < 2:  # one side talking is no conversation
                raise RetryWithFeedback(f"{'和'.join(names)}两个人都要说话，轮流说")
            return Conversation(tuple(lines), "model")

        prompt: list[ChatMessage] = [{"role": "user", "content": render_talk_prompt(request)}]
        messages = prompt
        for attempt in (1, 2):  # a draft the check sends back is written once more
            self.calls += 1
            try:
                outcome = await ask_structured(
                    self.model,
                    messages,
                    parse,
                    json_schema=talk_schema(list(names)),
                    max_attempts=1,
                    temperature=self.temperature,
                    purpose=PURPOSE,
                )
            except (StructuredOutputFailed, json.JSONDecodeError) as exc:
                self.failed += 1
                log.info(
                    "conversation %s: the model's lines were not usable (%s); templates instead",
                    request.meeting_id,
                    exc,
                )
                return self.templates.write(request)
            said = outcome.value
            wrong = await self._unbacked(request, said)
            if wrong is None:
                break
            if not wrong:
                return said
            reasons = "\n".join(
                f"- 「{said.lines[i].text}」——{why}" for i, why in sorted(wrong.items())
            )
            if attempt == 2:
                self.ungrounded += 1
                log.info(
                    "conversation %s: the model's lines claim what the speakers did not live, "
                    "twice; templates instead:\n%s",
                    request.meeting_id,
                    reasons,
                )
                break
            draft = outcome.attempts[-1].raw or ""
            messages = [
                *prompt,
                {"role": "assistant", "content": draft},
                {
                    "role": "user",
                    "content": TALK_FEEDBACK.format(
                        reasons=reasons, doing=said_at(request.place, request.activity)
                    ),
                },
            ]
        return self.templates.write(request)

    async def _unbacked(self, request: TalkRequest, said: Conversation) -> dict[int, str] | None:
        """The check's verdict on ``said``; None: the check failed, and the templates talk (no
        record to back the lines with)."""
        if self.check is None:
            return {}
        try:
            return await self.check.unbacked(request, said.lines)
        except Exception as exc:
            log.warning(
                "conversation %s: the lines could not be checked (%s); templates instead",
                request.meeting_id,
                exc,
            )
            return None
