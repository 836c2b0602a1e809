"""The grounding check: what she says about her day must be in today's record.

The claims an answer makes about today — actions (散步、钓鱼), places (南风公园、神社), items
(野莓、铜锣烧) and times (早上、下午三点) — are read clause by clause and matched against today's
episodes. A negated claim ("今天没去公园") is checked the other way round: it is false when the
record shows she did go. Plans, wishes, questions, other days and other people's doings are not
claims about her day. Whatever was asked, what she says she is doing or has just done is about
today ("我在公园散步" in answer to a question about colours), and what she is doing right now
("正在…", "…呢") must be what the record shows now; likings and habits are not claims. The words
come from the content itself (action names, the town, the items), so a new action module is
checked without touching this file.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from yuiju.world.items import ALL as ALL_ITEMS
from yuiju.world.town import HAURA, Town

log = logging.getLogger(__name__)

Kind = Literal["action", "place", "item"]

ROUTINE = frozenset(
    {
        "睡觉",
        "起床",
        "再睡一会",
        "发呆",
        "休息",
        "吃饭",
        "吃早饭",
        "吃午饭",
        "玩手机",
        "给手机充电",
        "吃背包里的东西",
        "等上课",
        "放学回家",
    }
)
"""Everyday routines: said loosely ("吃了饭" for any meal) and never the invention this check is for."""

_PLACE_NOUN = re.compile(r"^在(.{0,6}[家店园池社边校馆堂室市站岸厅场])")
"""'在公园散步' → '公园' (the longest noun ending like a place), the rest is the activity."""
_INFIX = r"(?:了|过|着|完|到)?(?:一会儿?|会儿|一下|一?[条次点杯碗个本趟])?"
"""What may stand inside a verb phrase: 散了步, 看了会儿书, 喝了杯咖啡."""
_TO_PLACE = r"(?:去|在|到|逛|从)(?:了|过)?(?:一趟|一下)?"
"""A place is claimed as somewhere she went or was."""

_SENTENCES = re.compile(r"[^。！？!?\n]+[。！？!?\n]*")
_CLAUSES = re.compile(r"[^，,；;、~～…]+")
_TODAY = re.compile(r"今天|今早|今晚|今儿|刚才|刚刚|现在|正在|早上|早晨|上午|中午|下午|傍晚|晚上")
"""Words that set the day to today (a time of day too, unless another day was named first)."""
_OTHER_DAY = re.compile(
    r"昨天|前天|昨晚|上周|上个?星期|上次|以前|之前|去年|小时候|那天|周末|明天|后天|下周|下次|改天"
)
_NOT_A_CLAIM = re.compile(r"想|要|打算|准备|计划|如果|将来|以后|待会|等会|等下")
"""Wishes, plans and what-ifs: not claims about what happened."""
_NOW_OR_JUST = re.compile(r"刚|在|着|呢|了")
"""Without a day word, what she is doing (在公园散步, 散着步呢) or has just done (刚去了, 散步了)
is about today, whatever was asked; what she has ever done (去过) is not."""
_HABIT = re.compile(
    r"喜欢|[最超好很]爱|爱[吃喝去看]|经常|常常|常去|总是|每天|每次|平时|平常|一般|有时|偶尔|通常|习惯"
    r"|好像|像是|时候"
)
"""Likings, habits and likenesses: without a day word, not a claim about today."""
_JUST_NOW = re.compile(r"刚|现在|正在|此刻|这会儿?")
"""A clause about just now: an earlier clause's time of day (早上…，刚…) no longer holds."""
_PRESENT = re.compile(r"正在|现在|此刻|这会儿?|呢$")
"""What she is doing right now: true only of what the record shows now."""
_OWN = re.compile(
    r"^(?:我|咱|刚才|刚刚|刚|正在|正|也|还|就|又|一直|才|已经|先|然后|现在|这会儿?|此刻|其实|所以"
    r"|对了|嗯|诶|欸|哎|啊|呀|哈哈|嘿嘿|\s)*$"
)
"""What may stand before her doing when she is its subject; anything else (小明在公园散步呢) names
someone else doing it."""
_DONE = re.compile(r"了|过")
_OTHERS = re.compile(r"你|他|她|大家|别人")
_NEGATION = re.compile(r"没|不|未|别")
_NOT_NEGATION = re.compile(r"不错|不少|不过|不知|不得|不好意思|差不多|没想到")
"""Words with 不/没 in them that deny nothing."""
_NUM = "零一二两三四五六七八九十"
_CLOCK = re.compile(
    rf"(早上|早晨|上午|中午|下午|傍晚|晚上)?\s*(\d{{1,2}}|[{_NUM}]{{1,3}})\s*(?:点|:|：)\s*(半|\d{{1,2}}|[一二三]刻)?"
)
_PERIODS = {
    "凌晨": (0, 5),
    "清晨": (5, 8),
    "早上": (5, 10),
    "早晨": (5, 10),
    "一早": (5, 10),
    "上午": (8, 12),
    "中午": (11, 14),
    "下午": (12, 18),
    "傍晚": (16, 20),
    "晚上": (18, 24),
    "今晚": (18, 24),
}
_PERIOD = re.compile("|".join(_PERIODS))
UNSURE_LINE = "今天做了什么我一下子说不清了，等我想想再告诉你～"
"""Said when a revised answer still claims what today's record does not show."""
CLOCK_SLACK = timedelta(minutes=60)
"""A claimed clock time matches an episode within this of its start or end."""
NOW_SLACK = timedelta(minutes=15)
"""What she says she is doing now matches an episode that ended at most this long ago."""


@dataclass(frozen=True)
class Term:
    """A word that makes a claim, and what in the record makes it true."""

    word: str
    kind: Kind
    keys: frozenset[str]
    """Action ids (actions), place ids (places) or the item name (items) that satisfy it."""
    pattern: str
    """How it is said (a regex)."""


@dataclass(frozen=True)
class Claim:
    term: Term
    said: str
    """The words as they stand in the answer."""
    negated: bool
    span: tuple[float, float] | None = None
    """The claimed time of day in hours (from, to), when the sentence gives one."""
    clock: str = ""
    """How that time reads (e.g. '15:00'), for the feedback."""
    past: bool = False
    """Said as done (了/过): a time still ahead does not make it a plan."""
    present: bool = False
    """Said as going on right now (正在, 现在, …呢) without another time."""


@dataclass
class ClaimLexicon:
    """Every word that makes a checkable claim about her day."""

    terms: list[Term] = field(default_factory=list)

    def __post_init__(self) -> None:
        ordered = sorted(self.terms, key=lambda t: len(t.word), reverse=True)  # longest first
        self._by_group = {f"t{i}": t for i, t in enumerate(ordered)}
        alternatives = "|".join(f"(?P<t{i}>{t.pattern})" for i, t in enumerate(ordered))
        self._regex = re.compile(alternatives) if ordered else None

    @classmethod
    def build(
        cls, actions: Iterable[Any], *, town: Town = HAURA, items: Iterable[str] = ALL_ITEMS
    ) -> ClaimLexicon:
        """From the action catalogue ("在<地方><做什么>" names), the town's places and the items."""
        activities: dict[str, set[str]] = {}
        places: dict[str, set[str]] = {
            pid: {p.name} for pid, p in town.places.items() if pid != "home"
        }
        for action in actions:
            name = action.name
            if action.moves_to is not None or name.startswith("从"):
                continue  # a walk from A to B: its place is the claim
            if m := _PLACE_NOUN.match(name):
                noun, name = m.group(1), name[m.end() :]
                if action.at and action.at != "home" and noun != "家":
                    places.setdefault(action.at, set()).add(noun)
            if len(name) >= 3 and name.endswith("吃"):
                name = name[:-1]  # 做饭吃 → 做饭
            if len(name) >= 2 and name not in ROUTINE:
                activities.setdefault(name, set()).add(action.id)
        terms = [
            Term(word, "action", frozenset(ids), re.escape(word[0]) + _INFIX + re.escape(word[1:]))
            for word, ids in activities.items()
        ]
        by_word: dict[str, set[str]] = {}
        for pid, words in places.items():
            for word in words:
                by_word.setdefault(word, set()).add(pid)
        terms += [
            Term(word, "place", frozenset(pids), _TO_PLACE + re.escape(word))
            for word, pids in by_word.items()
        ]
        terms += [Term(name, "item", frozenset({name}), re.escape(name)) for name in items]
        return cls(terms)

    def find(self, clause: str) -> list[tuple[Term, re.Match[str]]]:
        if self._regex is None:
            return []
        return [
            (self._by_group[m.lastgroup], m) for m in self._regex.finditer(clause) if m.lastgroup
        ]


def day_of(text: str) -> Literal["today", "other"] | None:
    """Which day ``text`` talks about, by its first day word."""
    today, other = _TODAY.search(text), _OTHER_DAY.search(text)
    if today and (not other or today.start() < other.start()):
        return "today"
    return "other" if other else None


def _number(text: str) -> int:
    if text.isdigit():
        return int(text)
    digits = {c: i for i, c in enumerate("零一二三四五六七八九")} | {"两": 2}
    if "十" in text:
        tens, _, ones = text.partition("十")
        return (digits.get(tens, 1) if tens else 1) * 10 + (digits.get(ones, 0) if ones else 0)
    return digits.get(text, 0)


def time_of(sentence: str) -> tuple[tuple[float, float], str] | None:
    """The time of day a sentence names: a clock time (±0) or a period, as hours (from, to)."""
    if m := _CLOCK.search(sentence):
        period, hour = m.group(1) or "", _number(m.group(2))
        minute = {"半": 30, "一刻": 15, "三刻": 45}.get(m.group(3) or "")
        if minute is None:
            minute = int(m.group(3)) if (m.group(3) or "").isdigit() else 0
        if (period in ("下午", "傍晚", "晚上") and hour < 12) or (period == "中午" and hour < 6):
            hour += 12
        spoken = not m.group(2).isdigit() and not period and not m.group(3)
        if spoken and not sentence[m.end() :].startswith("钟"):
            pass  # "吃了一点" is a little, not one o'clock
        elif 0 <= hour < 24 and minute < 60:
            at = hour + minute / 60
            return (at, at), f"{hour:02d}:{minute:02d}"
    if m := _PERIOD.search(sentence):
        return (float(_PERIODS[m.group(0)][0]), float(_PERIODS[m.group(0)][1])), m.group(0)
    return None


def claims(
    answer: str, lexicon: ClaimLexicon, *, day: Literal["today", "other"] | None = None
) -> list[Claim]:
    """The claims ``answer`` makes about today; ``day`` is the day the conversation is about.
    Where neither names a day, what she says she is doing or has just done is about today."""
    out: list[Claim] = []
    for sentence in _SENTENCES.findall(answer):
        if "？" in sentence or "?" in sentence or sentence.rstrip("。！!…~～ \n").endswith("吗"):
            continue
        when = None  # a time of day holds for the rest of its sentence
        for clause in _CLAUSES.findall(sentence):
            day = day_of(clause) or day
            when = time_of(clause) or (None if _JUST_NOW.search(clause) else when)
            found = lexicon.find(clause)
            if not found:
                continue
            about = day or (
                "today"
                if _NOW_OR_JUST.search(clause)
                and not _HABIT.search(clause)
                and ("我" in clause or _OWN.match(clause[: found[0][1].start()]))
                else None
            )
            if (
                about != "today"
                or _NOT_A_CLAIM.search(clause)
                or (_OTHERS.search(clause) and "我" not in clause)
            ):
                continue
            done = _DONE.search(clause) is not None
            if day is None:  # naming an item (我超爱铜锣烧了) claims nothing without a day
                found = [(term, m) for term, m in found if term.kind != "item"]
            for term, m in found:
                before = _NOT_NEGATION.sub("", clause[: m.start()])[-6:]
                out.append(
                    Claim(
                        term,
                        m.group(0),
                        bool(_NEGATION.search(before)),
                        when[0] if when else None,
                        when[1] if when else "",
                        done,
                        present=when is None and not done and bool(_PRESENT.search(clause)),
                    )
                )
    return out


def _hours(moment: datetime, tz: Any) -> float:
    local = moment.astimezone(tz)
    return local.hour + local.minute / 60


def _matches(claim: Claim, episode: Any) -> bool:
    data = episode.data or {}
    if claim.term.kind == "action" and data.get("action") in claim.term.keys:
        return True
    if claim.term.kind == "place" and data.get("place") in claim.term.keys:
        return True
    record = episode.summary + json.dumps(data, ensure_ascii=False, default=str)
    if claim.term.kind == "action":
        return re.search(claim.term.pattern, record) is not None
    return claim.term.word in record


def _in_time(claim: Claim, episode: Any, tz: Any) -> bool:
    if claim.span is None:
        return True
    start = _hours(episode.time, tz)
    end = _hours(episode.end_time, tz) if episode.end_time else start + 0.5
    end = end if end >= start else 24.0
    slack = (NOW_SLACK if claim.present else CLOCK_SLACK).total_seconds() / 3600
    lo, hi = claim.span
    return lo - slack <= end and start <= hi + slack


def problems(found: Sequence[Claim], today: Sequence[Any], now: datetime) -> list[str]:
    """What in ``found`` today's episodes contradict, as lines for the model. A claim about a
    time of day still ahead ("下午去打工" in the morning) is a plan, not checked."""
    tz = now.tzinfo
    out: list[str] = []
    for claim in found:
        if claim.present:
            claim = replace(claim, span=(_hours(now, tz),) * 2, clock="现在")
        if claim.span is not None and claim.span[0] > _hours(now, tz) + 0.25 and not claim.past:
            continue
        matching = [e for e in today if _matches(claim, e)]
        if claim.negated and matching:
            first = matching[0].time.astimezone(tz)
            out.append(f"你说今天没「{claim.said}」，但记录里 {first:%H:%M} 有这件事。")
        elif not claim.negated and not matching:
            out.append(f"你说今天「{claim.said}」，但今天的生活记录里没有。")
        elif not claim.negated and not any(_in_time(claim, e, tz) for e in matching):
            times = "、".join(f"{e.time.astimezone(tz):%H:%M}" for e in matching)
            when = "现在" if claim.present else f"「{claim.clock}」时"
            out.append(f"你说{when}「{claim.said}」，但记录里是 {times}。")
    return list(dict.fromkeys(out))


def _episode_of(running: Any) -> Any:
    """Her running action as the episode the engine writes for it."""
    from yuiju.memory.episodes import Episode

    return Episode.model_validate(
        {
            "_id": running.episode_id,
            "character_id": "",
            "type": "behavior",
            "time": running.started_at,
            "end_time": running.ends_at,
            "status": "running",
            "summary": running.name,
            "data": {"action": running.action_id, "name": running.name, "place": running.place},
        }
    )


class GroundingCheck:
    """Checks every answer that will be sent against today's episodes (``memory.today_events``)."""

    def __init__(self, lexicon: ClaimLexicon | None, memory: Any, clock: Any) -> None:
        self.lexicon = lexicon
        self.memory = memory
        """A `memory.service.MemoryService` (or anything with ``today_events``), or None: no check."""
        self.clock = clock

    async def check(self, text: str, *, question: str = "", char: Any = None) -> str | None:
        """Feedback for the model when ``text`` claims about today what the record does not show.
        ``char`` (her live state) adds what she is doing right now, which the record may not have
        caught up with yet."""
        if self.memory is None or self.lexicon is None:
            return None
        found = claims(text, self.lexicon, day=day_of(question))
        if not found:
            return None
        now = self.clock.now()
        try:
            today = await self.memory.today_events(now, limit=100)
        except Exception as exc:  # no record to check against: let the answer through
            log.warning("grounding check skipped: today's episodes unavailable (%s)", exc)
            return None
        running = getattr(char, "running", None)
        if running is not None and not any(e.id == running.episode_id for e in today):
            today = [*today, _episode_of(running)]
        return feedback(found, today, now)


def feedback(found: Sequence[Claim], today: Sequence[Any], now: datetime) -> str | None:
    """What the model reads when ``found`` claims what ``today`` (her episodes) does not show;
    None when the record bears every claim out."""
    wrong = problems(found, today, now)
    if not wrong:
        return None
    record = (
        "\n".join(f"- {e.time.astimezone(now.tzinfo):%H:%M} {e.summary}" for e in today)
        or "- （没有记录）"
    )
    return (
        "你的回答和今天的生活记录对不上：\n"
        + "\n".join(f"- {w}" for w in wrong)
        + f"\n今天的生活记录：\n{record}\n请只根据记录重新回答；记录里没有的事就说没做或不记得，不要编造。"
    )
