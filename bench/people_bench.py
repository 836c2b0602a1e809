"""Benchmark relationship statements in chat answers: how many that reach users her record backs.

    python bench/people_bench.py [--seeds 1 2 3] [--days 7] [--questions 60] [--fault-rate 0.2]

For each seed: the three classmates' simulated week (`yuiju simulate`, offline policy, as
bench/social_bench.py runs it, plus an invitation and a chat turn from 小林 so that she has a person
from chat to talk about), kept on disk. Then, on that week's stores, each character in turn is
asked about the others in a group chat through the real chat pipeline (`message.bot.build_service`
with a stranger, 小明, asking): "你最近见过枫吗？", "千夏跟你说过什么？", "你和枫昨天聊了什么？",
"你听谁说过搬家的事？", and about 小林.

Her answers come from a scripted model (`FunctionChatModel`), not a real LLM: each answer is one or
two relationship statements on the question's topic, each one false with probability
``--fault-rate`` (seeded), drawn from her own record:

- true: a meeting she had (day, place, what they did), a day she did not meet someone, what
  someone said to her in a conversation, news with whoever told her;
- false (the kind of each is named in the report): ``no_meeting`` (a meeting on a day she did not
  see them, or with a person from chat she never met), ``denied_meeting`` (she says she did not see
  them on a day she did), ``wrong_day`` (a real meeting or saying moved to a day it did not
  happen), ``never_said`` (words the other never said), ``wrong_source`` (real news from someone
  who did not tell her).

When the grounding check sends an answer back, the model writes a new one from the same mix (it
errs again at the same rate). Every statement is judged by the bench's own checker, which reads
her episodes from the history store (conversation episodes: who, when, where, each line and who
said it, news with who told whom; kept appointments) and knows what each statement claims from
how it was made, never by calling the grounding code under test.

Three runs per seed and character: grounding on at ``--fault-rate``, grounding on at 0 (the
control: every statement true, so anything withheld was over-blocked), and grounding off at
``--fault-rate`` (the chat without a record to check people against: what users got before).
The first answers of the two runs at the fault rate are the same draws.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.social_bench import CHARACTERS, NEWS, XIAOLIN
from tests.chatkit import RecordingSender
from yuiju.characters import load_card
from yuiju.config import load_config
from yuiju.llm import FunctionChatModel
from yuiju.memory.episodes import Episode, EpisodeRepo
from yuiju.message.bot import build_service
from yuiju.message.grounding import UNSURE_LINE
from yuiju.message.model import Conversation, Entry
from yuiju.message.output import LOST_LINE
from yuiju.message.people_grounding import PEOPLE_UNSURE_LINE
from yuiju.storage.history import HistoryStore
from yuiju.world.clock import SimClock
from yuiju.world.runtime import open_stores
from yuiju.world.simulate import DEFAULT_START, simulate
from yuiju.world.town import HAURA

GROUP = 100
ASKER = "qq:456"
ASKER_NAME = "小明"
PEOPLE_FEEDBACK = "你的回答里关于别人的话"
DAY_FEEDBACK = "你的回答和你的生活记录"

COMMANDS: list[dict[str, Any]] = [
    NEWS,
    # 小林 talked with her in chat (she knows them: a relation) and asked her out for Saturday
    {"type": "chat_with", "character_id": "yuiju", "by": XIAOLIN, "tone": "kind"},
    {
        "type": "invite",
        "character_id": "yuiju",
        "by": XIAOLIN,
        "place": "park",
        "start": "2026-09-05T13:00:00+08:00",
        "minutes": 60,
        "activity": "一起散步",
    },
]

# -- her record, as the bench reads it ---------------------------------------------------------


@dataclass(frozen=True)
class Meeting:
    other: str
    """The other character's id."""
    start: datetime
    place: str
    """The place's name, as the episode has it."""
    action: str
    lines: tuple[str, ...]
    """What the other said in it."""


@dataclass(frozen=True)
class Told:
    teller: str
    """Who told her: a character id or a person id."""
    text: str
    at: datetime


@dataclass(frozen=True)
class Visit:
    person: str
    at: datetime
    place: str


@dataclass(frozen=True)
class Span:
    start: datetime
    end: datetime
    """Exclusive."""
    word: str
    """How the answer says it ("昨天", "周六", "" when it names no time)."""


@dataclass
class Record:
    """What her episodes show, read straight from the history store: the bench's own reading,
    sharing nothing with `message.people_grounding`."""

    me: str
    meetings: list[Meeting]
    told: list[Told]
    visits: list[Visit]

    @classmethod
    async def read(cls, history: HistoryStore, me: str, start: datetime, now: datetime) -> Record:
        found: list[Episode] = [
            e
            for e in await EpisodeRepo(history).between(me, start, now + timedelta(days=1))
            if e.time < now
        ]
        meetings, told, visits = [], [], []
        for e in found:
            at = e.time.astimezone(now.tzinfo)  # her days are local days
            talk, plan = e.conversation(), e.plan()
            if talk is not None and talk.meeting_id:
                (other,) = [w.id for w in talk.partners or ()]
                lines = tuple(x.text for x in talk.lines or () if x.speaker == other)
                meetings.append(Meeting(other, at, talk.place or "", talk.action or "", lines))
                news = talk.news if isinstance(talk.news, list) else []
                told += [
                    Told(n["teller"], n["text"], at)
                    for n in news
                    if isinstance(n, dict) and n["listener"] == me
                ]
            elif talk is not None and talk.by is not None and isinstance(talk.news, dict):
                told.append(Told(str(talk.by["id"]), str(talk.news["text"]), at))
            elif plan is not None and plan.status == "kept" and plan.appointment:
                apt = plan.appointment
                other = apt["other"]
                if isinstance(other, dict) and other["kind"] == "person":
                    visits.append(Visit(str(other["id"]), at, HAURA.place_name(str(apt["place"]))))
        return cls(me, meetings, told, visits)

    def met(self, who: str, span: Span, place: str | None, actions: frozenset[str]) -> bool:
        """Whether she met ``who`` in ``span`` (at ``place`` and doing one of ``actions``, when
        the statement names them)."""
        if any(
            m.other == who
            and span.start <= m.start < span.end
            and place in (None, m.place)
            and (not actions or m.action in actions)
            for m in self.meetings
        ):
            return True
        return any(
            v.person == who and span.start <= v.at < span.end and place in (None, v.place)
            for v in self.visits
        )

    def said(self, who: str, content: str, span: Span) -> bool:
        """Whether ``who`` said ``content`` to her in ``span``: a line of theirs in a meeting, or
        news they told her."""
        want = bare(content)
        return any(
            m.other == who and span.start <= m.start < span.end and want in bare(line)
            for m in self.meetings
            for line in m.lines
        ) or self.told_her(who, content, span)

    def told_her(self, who: str, text: str, span: Span) -> bool:
        return any(
            t.teller == who and bare(t.text) == bare(text) and span.start <= t.at < span.end
            for t in self.told
        )

    def days_with(self, who: str) -> set[date]:
        return {m.start.date() for m in self.meetings if m.other == who} | {
            v.at.date() for v in self.visits if v.person == who
        }


def bare(text: str) -> str:
    """``text`` without punctuation and spaces (how a quote is compared)."""
    return re.sub(r"[^\w]", "", text)


# -- statements ------------------------------------------------------------------------------

Kind = Literal["met", "not_met", "said", "news"]
FAULTS = ("no_meeting", "denied_meeting", "wrong_day", "never_said", "wrong_source")


@dataclass(frozen=True)
class Statement:
    text: str
    kind: Kind
    who: str
    span: Span
    fault: str | None
    """None: drawn as true; else the kind of falsehood."""
    frame: str
    """The phrasing it was written in (to see which the check misses or over-blocks)."""
    place: str | None = None
    actions: frozenset[str] = frozenset()
    content: str = ""

    def holds(self, record: Record) -> bool:
        """The bench's verdict, from the record alone."""
        if self.kind == "met":
            return record.met(self.who, self.span, self.place, self.actions)
        if self.kind == "not_met":
            return not record.met(self.who, self.span, None, frozenset())
        if self.kind == "said":
            return record.said(self.who, self.content, self.span)
        return record.told_her(self.who, self.content, self.span)


DOING: dict[str, tuple[str, str]] = {
    # action: (what they did, after 和X…; what they came for, after X来找我…)
    "greet": ("打了个招呼", "打招呼"),
    "chat": ("聊了会儿天", "聊天"),
    "lunch_together": ("一起吃了午饭", "一起吃午饭"),
    "diner_together": ("一起吃了饭", "一起吃饭"),
    "study_together": ("一起自习了", "一起自习"),
    "walk_together": ("一起散了步", "一起散步"),
    "coast_walk_together": ("一起去海边散步了", "去海边散步"),
    "invite": ("约了见面的时间", "约我出去玩"),
    "visit": ("见了面", "见面"),
}
SAME_DOING = {
    "lunch_together": frozenset({"lunch_together", "diner_together"}),
    "diner_together": frozenset({"lunch_together", "diner_together"}),
    "walk_together": frozenset({"walk_together", "coast_walk_together"}),
    "coast_walk_together": frozenset({"walk_together", "coast_walk_together"}),
}
"""Activities one phrase covers ("一起吃了饭" is lunch at school or at the diner)."""
NEVER_SAID = (
    "下个月要转学了",
    "养了一只小猫",
    "数学考了全班第一",
    "周末要去看演唱会",
    "想加入美术社",
    "的自行车坏了",
    "最近在学吉他",
    "要去东京旅行",
    "不喜欢吃香菜",
    "家里来了客人",
)
OPENERS = ("", "", "嗯～", "让我想想。", "这个嘛，")
CLOSERS = ("", "", "", "就是这样啦～", "怎么突然问这个？")
WEEKDAY = "一二三四五六日"


@dataclass(frozen=True)
class Topic:
    kind: Literal["meet", "said", "day", "news"]
    who: str | None = None
    day: date | None = None


@dataclass
class Draft:
    text: str
    statements: list[Statement]
    sent_back: str | None = None
    """The feedback it got, when the check sent it back."""


class Mix:
    """Answers from her record at a chosen fault rate: the scripted model's way of talking."""

    def __init__(
        self,
        record: Record,
        names: dict[str, str],
        now: datetime,
        window: datetime,
        rng: random.Random,
        fault_rate: float,
        called: Sequence[str] = (),
        *,
        held_out: bool = False,
    ) -> None:
        self.record = record
        self.held_out = held_out
        """Write in the phrasings kept out of development (added after the check was fixed
        against the others, measured as they came)."""
        self.called = tuple(called)
        """Her own name and nicknames (a line that starts with one speaks to her)."""
        self.names = names
        """Everyone she may talk about: id → name (the other characters, 小林)."""
        self.now = now
        self.window = window
        """Where her record starts (the simulated week's first moment)."""
        self.rng = rng
        self.fault_rate = fault_rate
        self.redrawn = 0
        """Candidates the checker did not confirm (drawn again)."""

    # -- time words ------------------------------------------------------------------------

    def day_span(self, day: date) -> Span:
        tz = self.now.tzinfo
        start = datetime.combine(day, datetime.min.time(), tzinfo=tz)
        end = min(start + timedelta(days=1), self.now)
        return Span(max(start, self.window), end, self.day_word(day))

    def day_word(self, day: date) -> str:
        today = self.now.date()
        back = (today - day).days
        words = {0: ["今天"], 1: ["昨天"], 2: ["前天"], 3: ["大前天"]}.get(back, [])
        w = WEEKDAY[day.weekday()]
        this_monday = today - timedelta(days=today.weekday())
        if 2 <= back <= 6:
            if day >= this_monday:
                words += [f"周{w}", f"星期{'天' if w == '日' else w}"]
            else:
                words += [f"上周{w}", f"周{w}", f"上星期{'天' if w == '日' else w}"]
        if back >= 3:
            words += [f"{day.month}月{day.day}号", f"{day.month}月{day.day}日"]
        return self.rng.choice(words)

    def lately(self) -> Span:
        word = self.rng.choice(["最近", "这几天", ""])
        return Span(self.window, self.now, word)

    def days(self, back: int = 6) -> list[date]:
        today = self.now.date()
        return [
            d
            for d in (today - timedelta(days=k) for k in range(back + 1))
            if datetime.combine(d, datetime.min.time(), tzinfo=self.now.tzinfo) >= self.window
            or d == self.window.date()
        ]

    def pronoun(self, who: str) -> str:
        return "他" if who.startswith(("qq:", "tg:")) else "她"

    # -- true statements ---------------------------------------------------------------------

    def met(self, who: str, day: date | None) -> Statement | None:
        found: list[tuple[datetime, str, str]] = [
            (m.start, m.place, m.action) for m in self.record.meetings if m.other == who
        ] + [(v.at, v.place, "visit") for v in self.record.visits if v.person == who]
        if day is not None:
            found = [f for f in found if f[0].date() == day]
        if not found:
            return None
        at, place, action = self.rng.choice(found)
        span = self.day_span(at.date()) if day is not None or self.rng.random() < 0.7 else None
        return self.meeting(who, span or self.lately(), place, action, None)

    def meeting(
        self, who: str, span: Span, place: str | None, action: str | None, fault: str | None
    ) -> Statement:
        n, d = self.names[who], span.word
        if self.held_out:
            frames = ["看到", "遇见"] if action is None else ["和我", "见了一面", "遇见"]
        else:
            frames = (
                ["见到", "碰到"] if action is None else ["和在", "和", "来找我", "见到", "碰到"]
            )
            if action is not None and who in CHARACTERS and action not in ("greet", "invite"):
                frames.append("跟一起")
        frame = self.rng.choice(frames)
        where = f"在{place}" if place else ""
        did, came = DOING[action] if action else ("", "")
        text = {
            "见到": f"{d}见到{n}了。",
            "碰到": f"{d}{where}碰到了{n}。",
            "和在": f"{d}和{n}{where}{did}。",
            "和": f"{d}和{n}{did}。",
            "来找我": f"{n}{d}来找我{came}了。",
            "跟一起": f"我{d}跟{n}{did}。",
            "看到": f"{d}看到{n}了。",
            "遇见": f"{d}{where}遇见{n}了。",
            "和我": f"{n}{d}和我{did}。",
            "见了一面": f"{d}跟{n}见了一面。",
        }[frame]
        claims_place = place if frame in ("碰到", "和在", "遇见") else None
        claims_doing: frozenset[str] = frozenset()
        if action is not None and frame in ("和在", "和", "来找我", "跟一起", "和我"):
            claims_doing = SAME_DOING.get(action, frozenset({action}))
        return Statement(
            text, "met", who, span, fault, frame, place=claims_place, actions=claims_doing
        )

    def not_met(self, who: str, day: date | None) -> Statement | None:
        free = [d for d in self.days(2) if d not in self.record.days_with(who)]
        if day is not None:
            free = [d for d in free if d == day]
        if not free:
            return None
        return self.denial(who, self.day_span(self.rng.choice(free)), None)

    def denial(self, who: str, span: Span, fault: str | None) -> Statement:
        n, d = self.names[who], span.word
        frame = self.rng.choice(
            ["一直没看到", "都没遇见"] if self.held_out else ["没见到", "没碰到", "没和见面"]
        )
        text = {
            "没见到": f"{d}没见到{n}。",
            "没碰到": f"{d}没碰到{n}呢。",
            "没和见面": f"{d}没和{n}见面。",
            "一直没看到": f"{d}一直没看到{n}。",
            "都没遇见": f"{d}都没遇见{n}呀。",
        }[frame]
        return Statement(text, "not_met", who, span, fault, frame)

    def said(self, who: str, day: date | None) -> Statement | None:
        found = [
            (m.start, line)
            for m in self.record.meetings
            if m.other == who
            for line in m.lines
            if "？" not in line and "?" not in line
        ]
        if day is not None:
            found = [f for f in found if f[0].date() == day]
        if not found:
            return None
        at, line = self.rng.choice(found)
        span = self.day_span(at.date()) if day is not None or self.rng.random() < 0.4 else None
        return self.saying(who, span or self.lately(), line, None)

    def saying(self, who: str, span: Span, line: str, fault: str | None) -> Statement:
        n, d = self.names[who], span.word
        frames = ["还说：「」"] if self.held_out else ["跟我说「」", "对我说：「」"]
        if not re.search("你|说", line) and not line.startswith(self.called):
            # reported speech, for lines with no vocative or 你 to turn and nobody quoted in them
            frames += ["提到", "听讲"] if self.held_out else ["说", "告诉我"]
        frame = self.rng.choice(frames)
        said = line.replace("我", self.pronoun(who)).rstrip("。！!～~")
        text = {
            "跟我说「」": f"{n}{d}跟我说「{line}」",
            "对我说：「」": f"{d}{n}对我说：「{line}」",
            "说": f"{n}{d}说{said}。",
            "告诉我": f"{n}{d}告诉我{said}。",
            "还说：「」": f"{n}{d}还说：「{line}」",
            "提到": f"{n}{d}提到{said}。",
            "听讲": f"{d}听{n}讲{said}。",
        }[frame]
        return Statement(text, "said", who, span, fault, frame, content=line)

    def news(self, who: str | None) -> Statement | None:
        found = [t for t in self.record.told if who is None or t.teller == who]
        if not found:
            return None
        t = self.rng.choice(found)
        return self.telling(t.teller, t.text, None)

    def telling(self, teller: str, text: str, fault: str | None) -> Statement:
        n = self.names.get(teller, teller)
        content = text.replace(n, self.pronoun(teller), 1) if text.startswith(n) else text
        frame = self.rng.choice(
            ["是跟我说的", "和我提过", "跟我讲"]
            if self.held_out
            else ["告诉我", "听说", "跟我说", "是告诉我的"]
        )
        said = {
            "告诉我": f"{n}告诉我{content}。",
            "听说": f"听{n}说{content}。",
            "跟我说": f"{n}跟我说{content}。",
            "是告诉我的": f"是{n}告诉我的，{self.pronoun(teller)}说{content}。",
            "是跟我说的": f"{text}，是{n}跟我说的。",
            "和我提过": f"{n}和我提过{content}。",
            "跟我讲": f"{n}跟我讲{content}。",
        }[frame]
        return Statement(
            said, "news", teller, Span(self.window, self.now, ""), fault, frame, content=text
        )

    # -- false statements --------------------------------------------------------------------

    def no_meeting(self, who: str, day: date | None) -> Statement | None:
        free = [d for d in self.days() if d not in self.record.days_with(who)]
        if day is not None:
            free = [d for d in free if d == day]
        if not free:
            return None
        action = self.rng.choice([None, "chat", "diner_together", "walk_together"])
        span = self.day_span(self.rng.choice(free))
        return self.meeting(who, span, None, action, "no_meeting")

    def denied_meeting(self, who: str, day: date | None) -> Statement | None:
        busy = sorted(self.record.days_with(who) & set(self.days()))
        if day is not None:
            busy = [d for d in busy if d == day]
        if not busy:
            return None
        return self.denial(who, self.day_span(self.rng.choice(busy)), "denied_meeting")

    def wrong_day(self, who: str, day: date | None) -> Statement | None:
        free = [d for d in self.days() if d not in self.record.days_with(who)]
        if day is not None:
            free = [d for d in free if d == day]
        happened = [(m.place, m.action, m.lines) for m in self.record.meetings if m.other == who]
        if not free or not happened:
            return None
        place, action, lines = self.rng.choice(happened)
        span = self.day_span(self.rng.choice(free))
        spoken = [x for x in lines if "？" not in x and "?" not in x]
        if spoken and self.rng.random() < 0.4:
            return self.saying(who, span, self.rng.choice(spoken), "wrong_day")
        return self.meeting(who, span, place, action, "wrong_day")

    def never_said(self, who: str, day: date | None) -> Statement | None:
        span = self.day_span(day) if day is not None else self.lately()
        content = self.pronoun(who) + self.rng.choice(NEVER_SAID)
        n, d = self.names[who], span.word
        frame = self.rng.choice(
            ["提到", "还说：「」", "听讲"] if self.held_out else ["说", "告诉我", "跟我说「」"]
        )
        text = {
            "说": f"{n}{d}说{content}。",
            "告诉我": f"{n}{d}告诉我{content}。",
            "跟我说「」": f"{n}{d}跟我说「我{content[1:]}」",
            "提到": f"{n}{d}提到{content}。",
            "还说：「」": f"{n}{d}还说：「我{content[1:]}」",
            "听讲": f"{d}听{n}讲{content}。",
        }[frame]
        return Statement(text, "said", who, span, "never_said", frame, content=content[1:])

    def wrong_source(self, who: str | None) -> Statement | None:
        if not self.record.told:
            return None
        t = self.rng.choice(self.record.told)
        tellers = {x.teller for x in self.record.told if bare(x.text) == bare(t.text)}
        wrong = [p for p in self.names if p not in tellers and (who is None or p == who)]
        if not wrong:
            return None
        return self.telling(self.rng.choice(wrong), t.text, "wrong_source")

    # -- answers -----------------------------------------------------------------------------

    def statement(self, topic: Topic, false: bool) -> Statement | None:
        who, day = topic.who, topic.day
        if topic.kind == "news":
            makers = [lambda: self.wrong_source(None)] if false else [lambda: self.news(None)]
        elif topic.kind == "meet":
            assert who is not None
            makers = (
                [
                    lambda: self.no_meeting(who, None),
                    lambda: self.denied_meeting(who, None),
                    lambda: self.wrong_day(who, None),
                ]
                if false
                else [lambda: self.met(who, None)] * 3 + [lambda: self.not_met(who, None)]
            )
        elif topic.kind == "said":
            assert who is not None
            makers = (
                [
                    lambda: self.never_said(who, None),
                    lambda: self.wrong_day(who, None),
                    lambda: self.wrong_source(who),
                ]
                if false
                else [lambda: self.said(who, None), lambda: self.news(who)]
            )
        else:
            assert who is not None and day is not None
            makers = (
                [
                    lambda: self.no_meeting(who, day),
                    lambda: self.denied_meeting(who, day),
                    lambda: self.never_said(who, day),
                    lambda: self.wrong_day(who, day),
                ]
                if false
                else [
                    lambda: self.met(who, day),
                    lambda: self.not_met(who, day),
                    lambda: self.said(who, day),
                ]
            )
        for _ in range(12):
            made = self.rng.choice(makers)()
            if made is None:
                continue
            if made.holds(self.record) == (not false):
                return made
            self.redrawn += 1
        return None

    def draft(self, topic: Topic) -> Draft:
        statements: list[Statement] = []
        for _ in range(self.rng.choice((1, 1, 2))):
            false = self.rng.random() < self.fault_rate
            # when the record has nothing of the kind drawn, the statement is left out: the
            # fault rate is the chance of a false one, never raised by a lack of true ones
            made = self.statement(topic, false)
            if made is not None and made.text not in (s.text for s in statements):
                statements.append(made)
        if not statements:
            return Draft("这个我不太清楚呢。", [])
        opener, closer = self.rng.choice(OPENERS), self.rng.choice(CLOSERS)
        body = "".join(s.text for s in statements)
        return Draft(f"{opener}{body}{closer}", statements)


def questions(
    names: dict[str, str], now: datetime, rng: random.Random, n: int
) -> list[tuple[str, Topic]]:
    """``n`` questions about the others (and the news), seeded."""
    out = []
    people = list(names)
    for _ in range(n):
        kind = rng.choice(["meet", "meet", "said", "day", "day", "news"])
        who = rng.choice(people)
        x = names[who]
        if kind == "news":
            out.append(
                (rng.choice(["你听谁说过搬家的事？", "小林搬家的事你是听谁说的？"]), Topic("news"))
            )
        elif kind == "meet":
            q = rng.choice(
                [f"你最近见过{x}吗？", f"这几天和{x}见面了吗？", f"你和{x}最近一起做了什么？"]
            )
            out.append((q, Topic("meet", who)))
        elif kind == "said":
            q = rng.choice([f"{x}跟你说过什么？", f"{x}最近说了什么？", f"{x}有没有跟你说什么？"])
            out.append((q, Topic("said", who)))
        else:
            back = rng.choice([0, 1, 1, 2, 3])
            day = now.date() - timedelta(days=back)
            word = {0: "今天", 1: "昨天", 2: "前天", 3: "大前天"}[back]
            q = rng.choice(
                [f"你和{x}{word}聊了什么？", f"{word}见到{x}了吗？", f"{word}{x}跟你说什么了？"]
            )
            out.append((q, Topic("day", who, day)))
    return out


RUNS: tuple[tuple[str, bool, float | None, bool], ...] = (
    # label, grounding on, fault rate (None: --fault-rate), held-out phrasings
    ("grounded", True, None, False),
    ("control", True, 0.0, False),
    ("ungrounded", False, None, False),
    ("held_out", True, None, True),
    ("held_out_control", True, 0.0, True),
)
"""The runs for each seed and character. The held-out phrasings were written after the check
was fixed against the others and are measured as they came: how the check does on wordings it
was not tuned to."""

# -- one run -------------------------------------------------------------------------------


@dataclass
class Tally:
    questions: int = 0
    drafts: int = 0
    drafted_true: int = 0
    drafted_false: int = 0
    first_true: int = 0
    first_false: int = 0
    sent_true: int = 0
    sent_false: int = 0
    over_blocked: int = 0
    """True statements withheld from an answer that had no false one."""
    over_blocked_answers: int = 0
    collateral: int = 0
    """True statements withheld with a false one in the same answer."""
    caught_false: int = 0
    sent_back: Counter[str] = field(default_factory=Counter)
    """Answers the review sent back to the model, by check."""
    replaced: Counter[str] = field(default_factory=Counter)
    """Answers replaced by a short line, by line."""
    faults_drafted: Counter[str] = field(default_factory=Counter)
    faults_sent: Counter[str] = field(default_factory=Counter)
    frames_over_blocked: Counter[str] = field(default_factory=Counter)
    slipped: list[str] = field(default_factory=list)
    over_blocked_examples: list[dict[str, str]] = field(default_factory=list)
    redrawn: int = 0

    def add(self, other: Tally) -> None:
        for name, value in vars(other).items():
            mine = getattr(self, name)
            if isinstance(value, Counter):
                mine.update(value)
            elif isinstance(value, list):
                mine.extend(value)
            else:
                setattr(self, name, mine + value)

    def row(self) -> dict[str, Any]:
        sent = self.sent_true + self.sent_false
        first = self.first_true + self.first_false
        return {
            "questions": self.questions,
            "drafts": self.drafts,
            "statements_drafted": {"true": self.drafted_true, "false": self.drafted_false},
            "first_answers_backed": round(self.first_true / first, 4) if first else None,
            "statements_sent": sent,
            "sent_backed": self.sent_true,
            "sent_backed_share": round(self.sent_true / sent, 4) if sent else None,
            "false_sent": self.sent_false,
            "false_sent_share_of_drafted": round(self.sent_false / self.drafted_false, 4)
            if self.drafted_false
            else None,
            "false_caught": self.caught_false,
            "true_withheld_over_blocked": self.over_blocked,
            "answers_over_blocked": self.over_blocked_answers,
            "true_withheld_beside_a_false_one": self.collateral,
            "sent_back": dict(self.sent_back),
            "replaced_by_a_short_line": dict(self.replaced),
            "faults_drafted": dict(self.faults_drafted),
            "faults_sent": dict(self.faults_sent),
            "frames_over_blocked": dict(self.frames_over_blocked),
            "slipped_examples": self.slipped[:12],
            "over_blocked_examples": self.over_blocked_examples[:12],
            "candidates_redrawn": self.redrawn,
        }


@dataclass
class Script:
    """The scripted model: a new answer for the question in hand, a new draw when sent back."""

    first: Mix
    again: Mix
    topic: Topic = field(default_factory=lambda: Topic("news"))
    drafts: list[Draft] = field(default_factory=list)

    def __call__(self, messages: list[dict[str, Any]], schema: Any) -> str:
        if messages[0]["role"] != "system":  # the recorder summing up the chat for her record
            return f"{ASKER_NAME}问了她和同学们的事。"
        last = messages[-1]
        if self.drafts and last["role"] == "system" and messages[-2]["role"] == "assistant":
            self.drafts[-1].sent_back = str(last["content"])
            draft = self.again.draft(self.topic)
        else:
            if self.drafts:
                raise RuntimeError(f"a second answer to one question: {messages[-1]}")
            draft = self.first.draft(self.topic)
        self.drafts.append(draft)
        return draft.text


def check_name(feedback: str) -> str:
    if feedback.startswith(PEOPLE_FEEDBACK):
        return "people"
    if feedback.startswith(DAY_FEEDBACK):
        return "day"
    return "output"


def tally_turn(drafts: Sequence[Draft], replies: Sequence[str], record: Record) -> Tally:
    t = Tally(questions=1, drafts=len(drafts))
    sent = bare("".join(replies))
    for i, d in enumerate(drafts):
        verdicts = [(s, s.holds(record)) for s in d.statements]
        went = i == len(drafts) - 1 and bool(sent) and bare(d.text) == sent
        if d.sent_back is not None:
            t.sent_back[check_name(d.sent_back)] += 1
        for s, true in verdicts:
            t.drafted_true += true
            t.drafted_false += not true
            if i == 0:
                t.first_true += true
                t.first_false += not true
            if s.fault:
                t.faults_drafted[s.fault] += 1
            if went:
                t.sent_true += true
                t.sent_false += not true
                if not true:
                    t.faults_sent[s.fault or "drawn_true"] += 1
                    t.slipped.append(f"[{s.fault}/{s.frame}] {s.text} (in: {d.text})")
            elif not true:
                t.caught_false += 1
        if not went and verdicts:
            if all(true for _, true in verdicts):
                t.over_blocked += len(verdicts)
                t.over_blocked_answers += 1
                t.frames_over_blocked.update(f"{s.kind}/{s.frame}" for s, _ in verdicts)
                t.over_blocked_examples.append(
                    {
                        "answer": d.text,
                        "feedback": (
                            d.sent_back or "(not sent back; sent instead: " + "".join(replies) + ")"
                        )[:300],
                    }
                )
            else:
                t.collateral += sum(true for _, true in verdicts)
    last = drafts[-1] if drafts else None
    if last is not None and bare(last.text) != sent:
        line = "".join(replies)
        t.replaced[
            {PEOPLE_UNSURE_LINE: "people", UNSURE_LINE: "day", LOST_LINE: "lost"}.get(line, line)
        ] += 1
    return t


async def ask(
    cfg: Any,
    *,
    character: str,
    redis: Any,
    history: HistoryStore,
    grounded: bool,
    record: Record,
    names: dict[str, str],
    now: datetime,
    window: datetime,
    seed: int,
    fault_rate: float,
    n: int,
    held_out: bool = False,
) -> Tally:
    """Ask ``character`` ``n`` questions through the chat pipeline on the week's stores."""
    base = f"{seed}:{character}:{fault_rate}:{held_out}"
    card = load_card(character)
    called = (card.name, *card.nicknames)

    def mix(stream: str) -> Mix:
        rng = random.Random(f"{stream}:{base}")
        return Mix(record, names, now, window, rng, fault_rate, called, held_out=held_out)

    script = Script(mix("first"), mix(f"again:{grounded}"))
    on_stop: list[Any] = []
    service = await build_service(
        cfg.model_copy(update={"chat": cfg.chat.model_copy(update={"character_id": character})}),
        sender=RecordingSender(),
        on_stop=on_stop,
        redis=redis,
        # no history: the people check has no record to read (the chat before issue 22)
        history=history if grounded else None,
        model=FunctionChatModel(script),
        clock=SimClock(now),
    )
    total = Tally()
    try:
        for i, (text, topic) in enumerate(questions(names, now, random.Random(f"q:{base}"), n)):
            script.topic, script.drafts = topic, []
            conversation = Conversation.group("qq", GROUP)
            entry = Entry(
                id=f"{character}-{fault_rate}-{grounded}-{i}",
                conversation=conversation,
                user_id=ASKER,
                sender_name=ASKER_NAME,
                time=now,
                text=f"@{card.name} {text}",
                mentions_me=True,
            )
            await service.sessions.clear(
                entry.session_id
            )  # each question a conversation of its own
            out = await service.handle(entry, stateless=True)
            if not out.answered:
                raise RuntimeError(f"she did not answer {text!r}: {out.reason}")
            total.add(tally_turn(script.drafts, out.replies, record))
    finally:
        for close in reversed(on_stop):
            await close()
    total.redrawn = script.first.redrawn + script.again.redrawn
    return total


def chat_config(data_dir: Path) -> Any:
    return load_config(
        environ={},
        overrides={
            "app": {"data_dir": str(data_dir), "log_level": "WARNING"},
            "world": {"characters": CHARACTERS},
            "memory": {"enabled": False},
            "chat": {
                "groups": {str(GROUP): {"reply": "mention"}},
                "max_pause_seconds": 0,
                "user_messages_per_minute": 100_000,
                "group_replies_per_minute": 100_000,
                "group_messages_per_minute": 100_000,
            },
        },
    )


async def one_seed(seed: int, days: int, n: int, fault_rate: float, tmp: Path) -> dict[str, Any]:
    data_dir = tmp / f"s{seed}"
    cfg = chat_config(data_dir)
    await simulate(cfg, days=days, seed=seed, progress=False, data_dir=data_dir, commands=COMMANDS)
    tz = ZoneInfo(cfg.app.timezone)
    window = datetime.fromisoformat(DEFAULT_START).replace(tzinfo=tz)
    now = window + timedelta(days=days)
    handle, history = await open_stores(cfg)
    runs: dict[str, dict[str, Tally]] = {}
    try:
        await EpisodeRepo(history).ensure()  # the bench's own reading of the record
        for character in CHARACTERS:
            record = await Record.read(history, character, window, now)
            names = {c: load_card(c).name for c in CHARACTERS if c != character}
            names[XIAOLIN["id"]] = XIAOLIN["name"]
            for label, grounded, rate, held_out in RUNS:
                runs.setdefault(label, {})[character] = await ask(
                    cfg,
                    character=character,
                    redis=handle.client,
                    history=history,
                    grounded=grounded,
                    record=record,
                    names=names,
                    now=now,
                    window=window,
                    seed=seed,
                    fault_rate=fault_rate if rate is None else rate,
                    n=n,
                    held_out=held_out,
                )
    finally:
        await handle.aclose()
        await history.close()
    return {
        label: {c: t.row() for c, t in by.items()} | {"all": _sum(by.values()).row()}
        for label, by in runs.items()
    } | {"_tallies": runs}


def _sum(tallies: Any) -> Tally:
    total = Tally()
    for t in tallies:
        total.add(t)
    return total


def pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"


def table(rows: dict[str, dict[str, Any]], fault_rate: float) -> str:
    lines = [
        "| run | questions | statements drafted (false) | first answers backed | sent to users "
        "| backed by episodes | false sent / drafted | true withheld: over-blocked (answers) "
        "| true withheld beside a false one | sent back to the model | short lines |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    names = {
        "grounded": f"grounding on, {fault_rate:.0%} false",
        "control": "grounding on, 0% false (control)",
        "ungrounded": f"grounding off, {fault_rate:.0%} false",
        "held_out": f"held-out phrasings, grounding on, {fault_rate:.0%} false",
        "held_out_control": "held-out phrasings, grounding on, 0% false",
    }
    for label, r in rows.items():
        d = r["statements_drafted"]
        lines.append(
            f"| {names[label]} | {r['questions']} | {d['true'] + d['false']} ({d['false']}) | "
            f"{pct(r['first_answers_backed'])} | {r['statements_sent']} | "
            f"{r['sent_backed']} ({pct(r['sent_backed_share'])}) | "
            f"{r['false_sent']} / {d['false']} ({pct(r['false_sent_share_of_drafted'])}) | "
            f"{r['true_withheld_over_blocked']} ({r['answers_over_blocked']}) | "
            f"{r['true_withheld_beside_a_false_one']} | {sum(r['sent_back'].values())} | "
            f"{sum(r['replaced_by_a_short_line'].values())} |"
        )
    return "\n".join(lines)


def fault_table(rows: dict[str, dict[str, Any]]) -> str:
    on, off, held = rows["grounded"], rows["ungrounded"], rows["held_out"]
    lines = [
        "| false kind | drafted | sent, grounding on | sent, grounding off "
        "| held-out phrasings: drafted | sent |",
        "|---|---|---|---|---|---|",
    ]
    for kind in FAULTS:
        lines.append(
            f"| {kind} | {on['faults_drafted'].get(kind, 0)} | {on['faults_sent'].get(kind, 0)} | "
            f"{off['faults_sent'].get(kind, 0)} | {held['faults_drafted'].get(kind, 0)} | "
            f"{held['faults_sent'].get(kind, 0)} |"
        )
    return "\n".join(lines)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--questions", type=int, default=60, help="per character and run")
    parser.add_argument("--fault-rate", type=float, default=0.2)
    parser.add_argument("--out", default="bench/out/people_bench.json")
    args = parser.parse_args()
    started = time.perf_counter()
    per_seed: dict[int, dict[str, Any]] = {}
    totals: dict[str, Tally] = {}
    with tempfile.TemporaryDirectory(prefix="yuiju-people-bench-") as tmp:
        for seed in args.seeds:
            result = await one_seed(seed, args.days, args.questions, args.fault_rate, Path(tmp))
            for label, by in result.pop("_tallies").items():
                totals.setdefault(label, Tally())
                for t in by.values():
                    totals[label].add(t)
            per_seed[seed] = result
            print(
                json.dumps(
                    {"seed": seed} | {k: v["all"]["sent_backed_share"] for k, v in result.items()}
                ),
                flush=True,
            )
    rows = {label: t.row() for label, t in totals.items()}
    print(table(rows, args.fault_rate))
    print()
    print(fault_table(rows))
    for label in ("grounded", "control", "held_out", "held_out_control"):
        for example in rows[label]["slipped_examples"]:
            print(f"slipped ({label}): {example}")
        for example in rows[label]["over_blocked_examples"]:
            print(f"over-blocked ({label}): {example['answer']} <- {example['feedback'][:120]!r}")
    out = Path(args.out)
    text = json.dumps(
        {
            "args": vars(args),
            "all": rows,
            "per_seed": per_seed,
            "wall_seconds": round(time.perf_counter() - started, 1),
            "cpu_count": os.cpu_count(),
        },
        ensure_ascii=False,
        indent=1,
    )
    await asyncio.to_thread(out.parent.mkdir, parents=True, exist_ok=True)
    await asyncio.to_thread(out.write_text, text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
