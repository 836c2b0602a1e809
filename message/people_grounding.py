"""The grounding check for people: what she says about meeting someone, or about what someone
said, must be in her record.

Claims are read clause by clause around the names she knows — the other characters of her
town (their cards' names and nicknames), the people from chat she has a relation to, and whoever
her news names:

- **met**: 见到/遇到/碰到了(隔壁班的)枫, 和枫一起吃了午饭, 和千夏在神社打了个招呼, 枫昨天来找我,
  千夏请我喝了咖啡 — on the day the clause names (昨天, 上周, 周六, 9月5号, 今天…), or lately
  (the last `RECENT_DAYS`) when it names none but says it happened (了/过). True when her
  conversation episodes with that character fall in that time (`EpisodeRepo.conversations`);
  with a person from chat, when she kept an appointment with them then (or, for only chatting,
  和小林聊了好久, chatted with them then); someone she knows only from news was never met.
  "昨天没见到枫" is checked the other way round.
- **said**: 枫说…, 听枫说…, 悠酱前天告诉我…, 千夏对我说：「…」 — true when what follows (the
  quote, when there is one) matches by its words news she heard from them, a conversation with
  them (what they said in it, what they passed on), or, for a person from chat, their messages
  in her record. Said to her (跟我说, 告诉我, 听…说) needs them to have told her; plain 小林说 is
  also borne out by news 小林 started that reached her through someone else, and by news a
  person told her in chat that still waits for the world's next tick (`QueuedNews`: the tool
  queued it from their own words).

- **did**: 千夏养了一只小仓鼠, 枫昨天考了满分, …千夏来找我了，她养了… — what someone did or has,
  said as done (了/过) with them (or 她/他 after their name) as its subject: she knows it only when
  they said it (a conversation with them, their messages), or news of them reached her, or it
  happened when she was with them (the meeting's record says it).

A name two people share (two Kens of one group) stands for both: a claim about it is true when
either's record bears it out (`namesakes`).

Wishes, plans, questions, others doing something together and habits are not claims, nor are
names and times inside someone's quoted words. A mismatch goes back to the model once with her record of
that person, like the check of her day.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Literal, Protocol

from yuiju.memory.episodes import Episode, EpisodeRepo
from yuiju.memory.timeparse import time_range
from yuiju.world.commands import Command, TellNews
from yuiju.world.state import CharacterState

log = logging.getLogger(__name__)

FEW_DAYS = 7
"""前几天 (前两天, 前些天…): the days before today, this many back."""
_FEW_DAYS_AGO = re.compile(r"前几天|前两天|前些天|前些日子|前阵子|那几天")
RECENT_DAYS = 14
"""A meeting said without a day ("我见到枫了") is checked against this many days back."""
SAID_DAYS = 30
"""What someone said, without a day, is checked against this many days back."""
MATCH_SHARE = 0.5
"""The share of a claimed saying's word pairs a record must contain to back it."""
PEOPLE_UNSURE_LINE = "这个我记不太清了，不乱说啦～"
"""Said when a revised answer still claims about someone what her record does not show."""

_QUOTE = r"「[^」\n]*」|“[^”\n]*”|『[^』\n]*』"
_SENTENCES = re.compile(rf"(?:{_QUOTE}|[^。！？!?\n])+[。！？!?\n]*")
"""Sentences, a quote kept whole ("她说「好呀！」" is one)."""
_QUOTED = re.compile(_QUOTE)
_WEEKDAYS = "一二三四五六日天"
_WHEN = (
    r"(?:今天|今早|今晚|昨天|昨晚|大前天|前天|前几天|这几天|最近|刚才|刚刚|之前|那天|"
    rf"(?:上|这)?(?:个)?(?:周|星期|礼拜)[{_WEEKDAYS}]?|\d{{1,2}}月\d{{1,2}}[日号]|"
    r"一大早|一早|早上|上午|中午|下午|傍晚|晚上)"
)
"""A time said between a name and what they did or said (枫昨天来找我, 千夏周六跟我说)."""
_ADVERB = r"(?:也|还|就|都|又|曾经)"
_MEET_BEFORE = re.compile(
    r"(?:见到|见着|遇到|碰到|碰见|碰上|遇见|见了|见过|遇上|撞见|撞到|偶遇)了?\s*"
    r"(?:[^，,；;。！？!?「“『]{1,6}?的)?\s*$"
)
"""Met, the name right after the verb or after who they are (碰到了隔壁班的小林)."""
_WITH_BEFORE = re.compile(r"(?:和|跟|与|同)\s*$")
_WITH_AFTER = re.compile(
    r"^(?:一起|一块儿?|[^，,。！？!?]{0,10}?"
    r"(?:聊|吃|散步|散了|学习|自习|玩|逛|见面|见了|喝|钓|走|去|待|坐|打(?:了个?)?招呼))"
)
"""With someone: together (一起…, whatever they did), or doing something that needs them there."""
_CHAT_AFTER = re.compile(rf"^(?:一起|一块儿?)?(?:{_WHEN})*(?:聊|说话|发消息)")
"""With someone, only chatting (not in a place, not doing anything together)."""
_COMES = re.compile(rf"^(?:{_ADVERB}|{_WHEN})*(?:(?:来|过来)?找|请|陪|带)(?:了)?我")
"""Came to her, treated her, kept her company, took her along: they were there."""
_SAY_AFTER = re.compile(
    rf"^(?:{_ADVERB}|{_WHEN})*(?P<to_me>跟我|和我|对我)?"
    r"(?:说(?![得的])|(?P<told>告诉我)|讲)(?:过|了)?[：:，,\s]*"
)
_AND = r"(?:和|跟|与|及|以及|还有|、)"
"""What joins the names of a list (碰到小林和千夏, 跟小林、千夏还有枫一起…): each is claimed."""
_ONE_CHAR_NAME_END = re.compile(
    r"^(?:$|[了啦呀吧呢啊，,。！!？?~～\s、]|一起|一块|来|说|告诉|和|跟|与|及|以及|还有|对|在|聊|吃|玩|散|学|去|找|见"
    rf"|打(?:了个?)?招呼|{_ADVERB}|没|{_WHEN})"
)
"""What may follow a one-character name (枫) for it to be her and not a word (枫叶, 枫树)."""
_HEARD_BEFORE = re.compile(r"听\s*$")
_TO_THEM = re.compile(r"(?:跟|和|对|给|向)\s*$")
"""Before a name and 说: she is the one speaking (我跟枫说了…)."""
_WEEKDAY = re.compile(
    rf"(?P<which>上|这|下)?(?:个)?(?:周|星期|礼拜)(?P<day>[{_WEEKDAYS}])(?![起直样些定])"
)
_WISH = re.compile(
    r"想|要|打算|准备|计划|如果|将来|以后|待会|等会|等下|下次|改天|希望|明天|后天|下周"
)
_HABIT = re.compile(r"经常|常常|总是|每天|每次|平时|平常|一般|有时|偶尔|通常")
_TODAY = re.compile(r"今天|今早|今晚|刚才|刚刚|早上|上午|中午|下午|傍晚|晚上")
_DONE = re.compile(r"了|过|啦|咯|喽")
"""Said as happened: 啦 (了+啊), 咯 and 喽 carry 了 (和千夏一起去海边啦)."""
_OTHERS = re.compile(r"你|他|她|大家|别人|他们|她们")
_NEGATION = re.compile(r"没|不|未")
_FILLER = re.compile(r"[你我他她它们的了啦呢吧哦呀啊嘛哈诶欸也都还就又要会说过着]")
_CJK = re.compile(r"[\u4e00-\u9fff]")


_NAME = r"[\u4e00-\u9fff]{1,6}?"
_LEAD = rf"(?:{_WHEN}|今儿|昨儿个?|那会儿|这会儿|[\d一二两三四五六七八九十]+点(?:多|半|钟)?|其实|我|刚|也|还|就)*"
_STRANGER = re.compile(
    rf"(?:和|跟|与|同)(?P<a>{_NAME}(?:{_AND}{_NAME})*?)(?:{_WHEN})*(?:都|也)?一(?:起|块儿?)"
    rf"|(?:见到|遇到|碰到|碰见|遇见|遇上|撞见)(?:了)?(?P<b>[\u4e00-\u9fff、]{{1,16}}?)(?=$|[了啦呀呢，,。！!~～])"
    rf"|^{_LEAD}(?P<c>{_NAME})(?:{_WHEN})*(?:{_ADVERB})?(?:来|过来)?(?:找|约|请|叫|陪|送|带)(?:了)?我"
    rf"|^{_LEAD}(?P<d>{_NAME})(?:{_WHEN})*(?:{_ADVERB})?刚?(?:跟我说|和我说|对我说|告诉我|跟我讲)"
    rf"|^{_LEAD}听(?P<e>{_NAME})(?:说|讲)"
    rf"|^{_LEAD}(?P<f>[\u4e00-\u9fff]{{2,4}}?)(?:{_WHEN})*(?:{_ADVERB})?刚?(?:说|讲)(?![得的话])"
)
"""Someone said to have been with her, come to her or told her something: the name's place,
at the start of a clause (after 我 for 和…一起)."""
_NOT_A_NAME = re.compile(
    r"^(?:[我你他她它咱]们?|大家|别人|人家|谁|自己|那个|这个|一个|有人|所有人|我们俩|你们俩|一?个?人)$"
    r"|^(?:什么|任何|哪|谁|几|一些|有些|某|别的|其他|其它|陌生)"
    r"|^[听据再话虽就都也会能想要可还只是怎所比或不总照按难俗老简换跟和对给向问]|[我你他她]"
)
"""Words in a name's place that name no one (什么人, 任何人, or the speaker: 你)."""
_SUBJECT_LEAD = re.compile(rf"(?:{_WHEN}|其实|对了|而且|然后|还有|听说|嗯|哈哈|诶|欸|\s)*")
"""What may stand before someone as the subject of their doing (昨天千夏…, 听说枫…)."""
_DID = re.compile(
    rf"^(?:{_WHEN}|{_ADVERB}|已经|刚刚?)*(?![和跟与同及、]|[说讲]|告诉|对我)"
    r"[\u4e00-\u9fff]{1,8}?(?:了|过)(?![吗吧])"
)
"""Someone's doing said as done (养了一只小仓鼠, 昨天考了满分): not with someone (和…), not a saying."""
_PRONOUN = re.compile(r"(?:^|(?<=[，,；;~～…\s]))(?P<lead>[^，,；;~～…\s]{0,6}?)(?:她|他)(?!们)")
_NAME_PREFIX = re.compile(rf"^(?:{_WHEN}|也|还|就|都|又|我|刚|今天)+")


_FAMILY = re.compile(
    r"(?<![你您他她的们员居壁])(?P<f>爸妈|父母|妈妈|爸爸|老妈|老爸|哥哥|姐姐|弟弟|妹妹|爷爷|奶奶|外公|外婆"
    r"|姥姥|姥爷|家人)"
)
"""Her family, said as someone in her life (妈妈做的早饭): a card with none names no one so
(not 你妈妈, nor 店员姐姐 or 千夏的妹妹: someone's, not hers)."""


def strangers(
    answer: str, people: Mapping[str, Someone], *, speaker: str = ""
) -> list[tuple[str, str]]:
    """Who ``answer`` says she met, was with or heard from that she does not know (neither a
    character of her town, nor someone she has a relation to, nor the speaker), as (name, the
    clause)."""
    out: list[tuple[str, str]] = []
    for sentence in _SENTENCES.findall(answer):
        if _asks(sentence):
            continue
        for clause in re.split(r"[，,；;。！!~～…\n]", _QUOTED.sub("", sentence)):
            clause = clause.strip()
            for m in _STRANGER.finditer(clause):
                if _WISH.search(clause[: m.start()]) or _HABIT.search(clause[: m.start()]):
                    continue
                if m["a"] and _WISH.search(clause):
                    continue  # 想和小美一起去
                for name in _names_of(next(g for g in m.groups() if g), people):
                    name = _NAME_PREFIX.sub("", name)
                    known = name in people or any(n in name for n in people) or name == speaker
                    if name and not known and not _NOT_A_NAME.match(name):
                        out.append((name, clause))
            for m in _FAMILY.finditer(clause):
                before = clause[: m.start()]
                if _WISH.search(before) or _NEGATION.search(before) or m["f"] in people:
                    continue  # 如果有个姐姐就好了, 没有家人
                if not any(n == m["f"] for n, _ in out):
                    out.append((m["f"], clause))
    return out


def _names_of(listed: str, people: Mapping[str, Someone]) -> list[str]:
    """The names of a list (枫和小美, 小林、千夏还有枫): a name she knows stays whole (美和), the
    rest is split where a list joins."""
    if listed in people:
        return [listed]
    known = sorted((n for n in people if n in listed), key=len, reverse=True)
    marked = listed
    for i, name in enumerate(known):
        marked = marked.replace(name, f"\x00{i}\x00")
    parts = [p for p in re.split(_AND, marked) if p]
    return [re.sub(r"\x00(\d+)\x00", lambda g: known[int(g[1])], p) for p in parts]


@dataclass(frozen=True)
class Someone:
    """Someone she may claim to have met or heard from."""

    kind: Literal["character", "person"]
    id: str
    """A character id (``kaede``) or a person id (``qq:123``)."""
    name: str
    """Their display name (what the record calls them)."""

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.id}"


@dataclass(frozen=True)
class PeopleClaim:
    who: Someone
    kind: Literal["met", "said", "did"]
    said: str
    """The words as they stand in the answer."""
    content: str
    """For ``said``: what they are claimed to have said; for ``did``: what they did."""
    start: datetime
    end: datetime
    day: str
    """How the time reads for the feedback (昨天, 最近)."""
    negated: bool = False
    to_me: bool = False
    """For ``said``: she says they told her (跟我说, 告诉我, 听…说), not only that they said it:
    news she had through someone else does not back it."""
    chat: bool = False
    """For ``met``: only that she chatted with them (和小林聊了好久), which a chat with a person
    from chat bears out as well as a meeting."""


def known_people(
    neighbours: Mapping[str, Sequence[str]], char: CharacterState | None
) -> dict[str, Someone]:
    """Every name that makes a claim about someone: the town's characters (``neighbours``: id →
    name and nicknames), whoever she has a relation to (characters and people from chat) and
    whoever her news names (who said it first, who told her, whom it is about). A name several
    bear stands for the first of `namesakes` (a character before a person)."""
    return {name: bearers[0] for name, bearers in namesakes(neighbours, char).items()}


def namesakes(
    neighbours: Mapping[str, Sequence[str]], char: CharacterState | None
) -> dict[str, list[Someone]]:
    """Everyone each name of `known_people` may stand for: two people from chat may share a
    display name (two Kens of one group), and what she says of "Ken" is true when it is true of
    either. The town's characters come first."""
    out: dict[str, list[Someone]] = {}
    for cid, names in neighbours.items():
        if not names:
            continue
        for name in names:
            if name:
                _add(out, name, Someone("character", cid, names[0]))
    if char is not None:
        parties = [r.party for r in char.social.relations.values()]
        for n in char.social.news:
            parties += [p for p in (n.origin, n.source, n.about) if p is not None]
        for party in parties:
            if party.id != char.id and (len(party.name) >= 2 or party.kind == "character"):
                _add(out, party.name, Someone(party.kind, party.id, party.name))
    return out


def _add(bearers: dict[str, list[Someone]], name: str, who: Someone) -> None:
    """``who`` as one more bearer of ``name`` (once per person: by kind and id)."""
    found = bearers.setdefault(name, [])
    if all(b.key != who.key for b in found):
        found.append(who)


def words(text: str) -> set[str]:
    """The pairs of Chinese characters ``text`` is made of, fillers left out."""
    core = "".join(_CJK.findall(_FILLER.sub("", text)))
    return {core[i : i + 2] for i in range(len(core) - 1)} or ({core} if core else set())


def backs(content: str, record: str) -> bool:
    """Whether ``record`` says what ``content`` claims (most of its word pairs are in it)."""
    claimed = words(content)
    if not claimed:
        return True
    found = words(record)
    return len(claimed & found) / len(claimed) >= MATCH_SHARE


def people_claims(answer: str, people: Mapping[str, Someone], now: datetime) -> list[PeopleClaim]:
    """The claims ``answer`` makes about meeting someone or what someone said."""
    if not people:
        return []
    names = sorted(people, key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(n) for n in names))
    out: list[PeopleClaim] = []
    for sentence in _SENTENCES.findall(answer):
        quotes = [q.span() for q in _QUOTED.finditer(sentence)]
        out += _pronoun_deeds(sentence, pattern, people, quotes, now)
        for m in pattern.finditer(sentence):
            if any(a < m.start() < b for a, b in quotes):
                continue  # a name in someone's words: their claim, not hers
            who = people[m.group(0)]
            before, after = sentence[: m.start()], sentence[m.end() :]
            if len(m.group(0)) == 1 and not _ONE_CHAR_NAME_END.match(after):
                continue
            # a clause ends at a comma, and where someone's quoted words end
            clause_before = re.split(r"[，,；;~～…」”』]", before)[-1]
            # a name in a list (碰到小林和千夏): read as if it stood alone where the list stands
            listed = re.compile(rf"(?:{pattern.pattern})\s*{_AND}\s*$")
            alone = True  # no one else named with them (千夏和枫一起…: theirs together)
            while (mate := listed.search(clause_before)) is not None:
                clause_before, alone = clause_before[: mate.start()], False
            mates = re.compile(rf"^\s*{_AND}\s*(?:{pattern.pattern})")
            while (mate := mates.search(after)) is not None:
                after, alone = after[mate.end() :], False
            if _asks(clause_before + m.group(0) + _rest_of_clause(after)):
                continue
            if _WISH.search(clause_before) or _HABIT.search(clause_before):
                continue
            if (_OTHERS.search(clause_before) or pattern.search(clause_before)) and (
                "我" not in clause_before
            ):
                continue  # someone else's meeting (千夏和枫…, 他见到枫…)
            said = _SAY_AFTER.match(after)
            heard = _HEARD_BEFORE.search(before) is not None
            if said is not None or heard:
                if said is not None and _TO_THEM.search(clause_before):
                    continue  # 我跟枫说…: what she said to them
                content = after[said.end() :] if said is not None else after
                quoted = _QUOTED.match(content)
                content = quoted.group(0)[1:-1] if quoted else content.strip(" ：:，,。！!~～")
                if not words(content):
                    continue  # 枫说得对, 小林说呢: no saying to check
                when = _QUOTED.sub("", clause_before + after[: said.end() if said else 0])
                span = _span(when, now, SAID_DAYS)
                to_me = heard or (said is not None and bool(said["to_me"] or said["told"]))
                if span is not None and not _NEGATION.search(clause_before[-3:]):
                    out.append(
                        PeopleClaim(who, "said", sentence.strip(), content, *span, to_me=to_me)
                    )
                continue
            met = (
                _MEET_BEFORE.search(clause_before)
                or (_WITH_BEFORE.search(clause_before) and _WITH_AFTER.search(after))
                or _COMES.search(after)
            )
            if not met:
                if alone and _SUBJECT_LEAD.fullmatch(clause_before):
                    out += _deed(who, clause_before + m.group(0), after, now)
                continue
            clause = clause_before + m.group(0) + re.split(r"[，,；;。！!]", after)[0]
            if _WISH.search(clause):
                continue
            when = _QUOTED.sub("", clause)  # a time in someone's words is not when it happened
            span = _span(when, now, RECENT_DAYS, need_done=not _TODAY.search(when))
            if span is None:
                continue
            negated = bool(_NEGATION.search(clause_before))
            chat = bool(_WITH_BEFORE.search(clause_before) and _CHAT_AFTER.match(after))
            out.append(
                PeopleClaim(who, "met", clause.strip(), "", *span, negated=negated, chat=chat)
            )
    return out


def _deed(who: Someone, subject: str, after: str, now: datetime) -> list[PeopleClaim]:
    """A ``did`` claim when ``after`` (what follows ``who`` as the subject) says they did
    something (了/过), not as a wish, a habit, a denial or a question."""
    rest = re.split(r"[，,；;。！!？?~～…]", _QUOTED.sub("", after))[0]
    if not _DID.match(rest) or _WISH.search(rest) or _HABIT.search(rest):
        return []
    if _NEGATION.search(rest) or _asks(after) or "我" in rest:
        return []  # 千夏没来; what they did to her is a meeting (请我, 来找我)
    span = _span(subject + rest, now, SAID_DAYS)
    if span is None:
        return []
    what = re.sub(rf"^(?:{_WHEN}|{_ADVERB})+", "", rest)
    if len(words(what)) < 2:
        return []  # 她也来了, 枫笑了: too thin to say anything she could not have seen
    return [PeopleClaim(who, "did", (subject + rest).strip(), what, *span)]


def _pronoun_deeds(
    sentence: str,
    pattern: re.Pattern[str],
    people: Mapping[str, Someone],
    quotes: Sequence[tuple[int, int]],
    now: datetime,
) -> list[PeopleClaim]:
    """``did`` claims of a clause whose subject is 她/他 after someone's name in the same
    sentence (…千夏来找我了，她养了一只小仓鼠): the last name before it."""
    out: list[PeopleClaim] = []
    for p in _PRONOUN.finditer(sentence):
        if any(a < p.start() < b for a, b in quotes) or not _SUBJECT_LEAD.fullmatch(p["lead"]):
            continue
        named = list(pattern.finditer(sentence, 0, p.start()))
        if not named:
            continue
        out += _deed(
            people[named[-1].group(0)], sentence[p.start() : p.end()], sentence[p.end() :], now
        )
    return out


def _rest_of_clause(after: str) -> str:
    """What follows a name up to the end of its clause: the next comma, or the end of a quote
    opened before it (她说「好呀，走吧！」 is one clause)."""
    quote = _QUOTED.search(after)
    comma = re.search(r"[，,；;]", after)
    end = comma.start() if comma else len(after)
    if quote is not None and quote.start() < end:
        end = quote.end()
    return after[:end]


def _asks(clause: str) -> bool:
    """Whether ``clause`` is a question (words quoted in it aside): "你昨天见到枫了吗？" asks,
    "我昨天见到枫了，你呢？" says, and asks after."""
    bare = _QUOTED.sub("", clause)
    return "？" in bare or "?" in bare or bare.rstrip("。！!…~～ \n").endswith("吗")


def _span(
    text: str, now: datetime, days: int, *, need_done: bool = False
) -> tuple[datetime, datetime, str] | None:
    """The time ``text`` names as (start, end, how it reads), or the last ``days`` days; None when
    it names a time ahead, or (``need_done``) says nothing happened yet."""
    if _FEW_DAYS_AGO.search(text):  # a few days ago: not today
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return midnight - timedelta(days=FEW_DAYS), midnight, "前几天"
    weekday = _WEEKDAY.search(text)
    if weekday is not None:  # before `time_range`, which reads 上周六 as the whole of last week
        return _weekday_span(weekday, now)
    found = time_range(text, now)
    if found is not None:
        # "截至3月" reads as up to the end of March (no start): the usual window back from then
        start = found.start or found.end - timedelta(days=days)
        if start > now:
            return None
        word = re.search(r"大前天|前天|昨天|昨晚|上周|上个?星期|今天|今晚|\d+天前", text)
        return (
            start,
            min(found.end, now + timedelta(seconds=1)),
            word.group(0) if word else "那时",
        )
    if _TODAY.search(text):
        start = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return start, now + timedelta(seconds=1), "今天"
    if need_done and not _DONE.search(text):
        return None
    return now - timedelta(days=days), now + timedelta(seconds=1), "最近"


def _weekday_span(m: re.Match[str], now: datetime) -> tuple[datetime, datetime, str] | None:
    """The day 周六 / 上周六 / 这周六 names: the latest such day up to today (上: in last week's
    Monday-to-Sunday, 这: in this week's); None for 下周六, which is ahead."""
    if m["which"] == "下":
        return None
    today = now.date()
    monday = today - timedelta(days=today.weekday())
    day = monday + timedelta(days=_WEEKDAYS.index(m["day"]) if m["day"] in "一二三四五六" else 6)
    if m["which"] == "上" or (m["which"] is None and day > today):
        day -= timedelta(days=7)
    if day > today:
        return None
    start = datetime.combine(day, datetime.min.time(), tzinfo=now.tzinfo)
    return start, min(start + timedelta(days=1), now + timedelta(seconds=1)), m.group(0)


class QueuedNews(Protocol):
    """The world commands still waiting for its next tick (`message.deps.CommandQueue`): news a
    person told her in chat is there, queued from their own words, until the world applies it."""

    async def pending(self) -> list[Command]: ...


@dataclass
class PeopleCheck:
    """Checks her claims about people against her record."""

    episodes: EpisodeRepo | None
    """Her episodes (conversations, kept appointments); None: no check."""
    character_id: str
    neighbours: Mapping[str, Sequence[str]]
    """The other characters of her town, and those her card names: id → name and nicknames."""
    queued: QueuedNews | None = None
    """News told her in chat that the world has not applied yet; None: not read."""

    async def ensure(self) -> None:
        """Declare the episodes where it reads them: a chat process may be the only one on its
        history store (`yuiju bot` without memory), and a check that cannot read lets all
        through."""
        if self.episodes is not None:
            await self.episodes.ensure()

    async def check(
        self,
        text: str,
        *,
        char: CharacterState | None,
        now: datetime,
        recent: Callable[[], Awaitable[Iterable[tuple[str, str]]]] | None = None,
        speaker: str = "",
    ) -> str | None:
        """Feedback for the model when ``text`` claims about someone what her record does not
        show; None when it bears every claim out. ``recent()`` gives the conversation's latest
        messages as (person id, text), for what a person from chat said just now (read only
        when there is a claim to check). Someone she does not know (not a character of her
        town, nor anyone she has a relation to, nor ``speaker``) is never claimed."""
        if self.episodes is None:
            return None
        bearers = namesakes(self.neighbours, char)
        people = {name: found[0] for name, found in bearers.items()}
        unknown = strangers(text, people, speaker=speaker)
        found = people_claims(text, people, now)
        if not found and not unknown:
            return None
        queued = await self._queued()
        if queued:  # who told her news still on its way is someone she knows
            for news in queued:
                for party in (news.by, news.about):
                    if party is not None and party.id != self.character_id:
                        _add(bearers, party.name, Someone(party.kind, party.id, party.name))
            people = {name: found[0] for name, found in bearers.items()}
            unknown = strangers(text, people, speaker=speaker)
            found = people_claims(text, people, now)
        problems: list[str] = [
            f"你说「{clause}」，但你不认识「{name}」，记录里没有这个人。"
            for name, clause in unknown
        ]
        records: dict[str, list[str]] = {}
        heard = list(await recent()) if recent is not None else []
        try:
            for claim in found:
                problem, record = await self._check_namesakes(
                    claim, bearers, char, now, heard, queued
                )
                if problem:
                    problems.append(problem)
                    records.setdefault(claim.who.name, record)
        except Exception as exc:  # no record to check against: let the answer through
            log.warning("people grounding skipped: episodes unavailable (%s)", exc)
            return None
        if not problems:
            return None
        lines = ["你的回答里关于别人的话和记录对不上："]
        lines += [f"- {p}" for p in dict.fromkeys(problems)]
        for name, record in records.items():
            lines.append(f"你和{name}的记录：")
            lines += [f"- {r}" for r in record] or ["- （没有记录）"]
        lines.append("请只根据记录重新回答：没见过就说没见过，没听谁说过就别说是谁说的，不要编造。")
        return "\n".join(lines)

    async def _check_namesakes(
        self,
        claim: PeopleClaim,
        bearers: Mapping[str, Sequence[Someone]],
        char: CharacterState | None,
        now: datetime,
        recent: Sequence[tuple[str, str]],
        queued: Sequence[TellNews] = (),
    ) -> tuple[str | None, list[str]]:
        """`_check` of ``claim`` for whoever its name may stand for: borne out when the record
        of any of them bears it out (the Ken who told her, not the other Ken); otherwise the
        problem and record of the one the name was read as."""
        first = await self._check(claim, char, now, recent, queued)
        if first[0] is None:
            return first
        others = [
            b
            for found in bearers.values()
            if any(f.key == claim.who.key for f in found)
            for b in found
            if b.key != claim.who.key
        ]
        for other in dict.fromkeys(others):
            problem, _ = await self._check(replace(claim, who=other), char, now, recent, queued)
            if problem is None:
                return None, []
        return first

    async def _check(
        self,
        claim: PeopleClaim,
        char: CharacterState | None,
        now: datetime,
        recent: Sequence[tuple[str, str]],
        queued: Sequence[TellNews] = (),
    ) -> tuple[str | None, list[str]]:
        who = claim.who
        tz = now.tzinfo
        talks = await self._talks(who, claim.start, claim.end)
        problem = None
        if claim.kind == "met":
            met = [e.time for e in talks] if who.kind == "character" or claim.chat else []
            met += self._kept(char, who, claim) if who.kind == "person" else []
            if claim.negated and met:
                problem = (
                    f"你说{claim.day}没见到{who.name}，"
                    f"但记录里 {met[0].astimezone(tz):%m-%d %H:%M} 见过。"
                )
            elif not claim.negated and not met:
                problem = f"你说「{claim.said}」，但记录里{claim.day}没有和{who.name}见过面。"
        else:
            sources = self._heard(char, who, told_her=claim.to_me)
            sources += [said_in(e, who) for e in talks]
            sources += [text for person, text in recent if person == who.id]
            if claim.kind == "did":  # news of them, and what happened when she was with them
                sources += self._about(char, who) + [e.summary for e in talks]
                sources += [
                    n.text for n in queued if n.about is not None and n.about.key == who.key
                ]
            sources += [n.text for n in queued if n.by.key == who.key]
            first = re.split(r"[，,；;]", claim.content)[0]  # 说…，现在在学校呢: her own words
            if not any(backs(claim.content, s) or backs(first, s) for s in sources if s):
                problem = f"你说「{claim.said}」，但记录里{who.name}没说过这件事。"
                if claim.kind == "did":
                    problem += "你也没听别人说过，也没亲眼见到。"
        if problem is None:
            return None, []
        lately = await self._talks(who, now - timedelta(days=RECENT_DAYS), now)
        record = [f"{e.time.astimezone(tz):%m-%d %H:%M} {e.summary}" for e in lately[:4]]
        record += [f"听{who.name}说的：{h}" for h in self._heard(char, who)[:3]]
        return problem, record

    async def _queued(self) -> list[TellNews]:
        """News told her in chat that waits for the world's next tick (none when not read)."""
        if self.queued is None:
            return []
        try:
            pending = await self.queued.pending()
        except Exception as exc:  # the queue unreadable: what it would back stays unbacked
            log.warning("people grounding: queued news unavailable (%s)", exc)
            return []
        return [
            c for c in pending if isinstance(c, TellNews) and c.character_id == self.character_id
        ]

    async def _talks(self, who: Someone, start: datetime, end: datetime) -> list[Episode]:
        """Her conversations with ``who`` in [start, end), newest first."""
        assert self.episodes is not None
        if who.kind == "character":
            return await self.episodes.conversations(self.character_id, start, end, with_=who.id)
        return await self._chats(who, start, end)

    def _heard(
        self, char: CharacterState | None, who: Someone, *, told_her: bool = False
    ) -> list[str]:
        """News she has from ``who``, and (unless ``told_her``: only what they told her
        themselves) news they started that reached her through someone else."""
        if char is None:
            return []
        return [
            n.text
            for n in char.social.news
            if n.source.key == who.key or (not told_her and n.origin.key == who.key)
        ]

    def _about(self, char: CharacterState | None, who: Someone) -> list[str]:
        """News about ``who`` she heard from anyone."""
        if char is None:
            return []
        return [n.text for n in char.social.news if n.about is not None and n.about.key == who.key]

    def _kept(
        self, char: CharacterState | None, who: Someone, claim: PeopleClaim
    ) -> list[datetime]:
        """When she kept an appointment with a person from chat in the claim's time."""
        if char is None:
            return []
        return [
            a.start
            for a in char.social.appointments
            if a.status == "kept" and a.other.key == who.key and claim.start <= a.start < claim.end
        ]

    async def _chats(self, who: Someone, start: datetime, end: datetime) -> list[Episode]:
        """Her archived chat conversations in which ``who`` (a person) took part."""
        assert self.episodes is not None
        found = await self.episodes.conversations(self.character_id, start, end)
        return [e for e in found if _with_person(e, who)]


def _with_person(episode: Episode, who: Someone) -> bool:
    """Whether a conversation episode is a chat window ``who`` spoke in, or news or a gift from them."""
    data = episode.conversation()
    if data is None:
        return False
    return any(c.user_id == who.id for c in data.counterparties or []) or (
        (data.by or {}).get("id") == who.id
    )


def said_in(episode: Episode, who: Someone) -> str:
    """What ``who`` said or passed on in a conversation episode, as one text (never what she
    told them: the summary names both)."""
    data = episode.conversation()
    if data is None:  # not a conversation, or a document that does not fit (warned once)
        return ""
    parts = [line.text for line in data.lines or [] if line.speaker == who.id]
    if isinstance(data.news, list):
        parts += [
            str(n.get("text", ""))
            for n in data.news
            if isinstance(n, dict) and n.get("teller") == who.id
        ]
    elif isinstance(data.news, dict) and (data.by or {}).get("id") == who.id:
        parts.append(str(data.news.get("text", "")))
    parts += [m.text for m in data.messages or [] if m.speaker == who.name]
    return "\n".join(p for p in parts if p)
