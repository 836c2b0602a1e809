"""A harder, seeded English dialogue set for bench/recall_bench.py: long two-person chats.

Modelled on the structure of long-term conversation benchmarks (two people chatting over months;
its text is written here, bench/dialogue_bank.py): 10 conversations of 19-35 sessions, each
session a real exchange — greetings, small talk, two or three pieces of news told over several
turns, reactions, goodbyes. What makes it hard, as in real chats:

- the answer is often in a reply whose topic is only clear from the turn before ("Ooh, what's it
  of?" → "It's a sunset over the lake. I used watercolors this time.");
- every strand of a person's life comes back in several sessions with other details (a painting
  in March, another in May, an exhibition in June), and the other person talks about the same
  topics from their own life;
- the two speakers address each other by name, so a name in a question matches half the chat;
- some answers were said by the other person ("Happy birthday! I mailed you a mug.");
- some news is told weeks after it happened ("Last month I ran the city half marathon!"), and
  half the time a speaker addresses the other by their full name ("Hey Hannah!") rather than by
  the short one ("Han"), so the asked-about name is also a word of the other speaker's lines;
- questions always name the speaker, and come in six kinds:

  - ``single``: one detail of one event ("What did Hannah paint with watercolors?"), its
    evidence one turn (sometimes two: the news and the detail);
  - ``multi``: every occurrence of a strand ("Where has Hannah gone camping?"), 2-6 turns from
    different sessions;
  - ``temporal``: "When did Hannah ...?" about one event: the answer is the date of its session;
  - ``inference``: "Would Hannah likely enjoy a week-long backpacking trip?": the evidence is what
    she said about herself (and, for some, what she did), in other words than the question's;
  - ``dated``: "What did Hannah paint in March 2025?": every telling of that event whose event
    happened in that month, whenever it was told (a telling weeks later says "last month");
  - ``as_of``: "As of March 2025, what has Hannah painted?": every telling of that event that had
    happened by the end of that month.

The retold news, the full names and the dated and as-of questions draw from a second generator
(``seed`` too), so the rest of the set is the same as before they were added: ``plain=True``
leaves them out (the set as bench/README.md measured it until 2026-12-02).

Everything comes from ``random.Random(seed)``: the same seed gives the same set. Run it to print
a conversation: ``python bench/dialogue_set.py``.
"""

from __future__ import annotations

import calendar
import random
import re
import string
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from dialogue_bank import (
    CLOSE,
    CLOSE_BACK,
    DATED,
    FILLER,
    GREET,
    GREET_BACK,
    REACT,
    REACT_TOPIC,
    RETOLD,
    SMALL_TALK,
    THREADS,
    Event,
    Thread,
)
from recall_set import Conversation, Question, Turn

TZ = ZoneInfo("America/New_York")

PEOPLE = [  # name, what the other calls them, pronouns (they, them, their)
    ("Hannah", "Han", "she"),
    ("Marcus", "Marc", "he"),
    ("Olivia", "Liv", "she"),
    ("Daniel", "Dan", "he"),
    ("Sophie", "Soph", "she"),
    ("Gabriel", "Gabe", "he"),
    ("Rebecca", "Becca", "she"),
    ("Nathan", "Nate", "he"),
    ("Jasmine", "Jas", "she"),
    ("Victor", "Vic", "he"),
    ("Abigail", "Abby", "she"),
    ("Thomas", "Tom", "he"),
    ("Priya", "Pri", "she"),
    ("Samuel", "Sam", "he"),
    ("Eleanor", "Ellie", "she"),
    ("Jonathan", "Jon", "he"),
    ("Natalie", "Nat", "she"),
    ("Andrew", "Drew", "he"),
    ("Isabel", "Izzy", "she"),
    ("Patrick", "Pat", "he"),
]
PRONOUNS = {"she": ("she", "her", "her"), "he": ("he", "him", "his")}


@dataclass
class Person:
    name: str
    short: str
    pron: tuple[str, str, str]
    kids: bool


@dataclass
class Occurrence:
    """One telling of an event of a person's thread."""

    who: int
    thread: Thread
    event_index: int
    values: dict[str, str]
    session: int = -1
    tagged: dict[str, str] | None = None
    """Evidence tag -> turn id, once placed."""
    happened: datetime | None = None
    """When the event happened (the session's time unless told later or "yesterday")."""
    phrase: str = ""
    """How long ago it happened, when it is told weeks later ("last month"), or ''."""


class Extra:
    """The second generator: retold news, full names, dated questions (see the module docstring)."""

    def __init__(self, seed: int, *, retold_share: float, full_name_share: float) -> None:
        self.rng = random.Random(seed * 1_000_003 + 17)
        self.retold_share = retold_share
        self.full_name_share = full_name_share

    def address(self, person: Person) -> str:
        """What the other calls ``person`` in this line: the full name or the short one."""
        if self.full_name_share and self.rng.random() < self.full_name_share:
            return person.name
        return person.short


_TIME_WORDS = re.compile(
    r"\b(?:yesterday|last night|tonight|today|this (?:week(?:end)?|morning)|the weekend|"
    r"on (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b",
    re.IGNORECASE,
)


def retell(text: str, phrase: str) -> str:
    """The news line told ``phrase`` ("last month") after it happened: the phrase replaces its
    time words, or opens it."""
    if _TIME_WORDS.search(text):
        return _TIME_WORDS.sub(phrase, text, count=1)
    first = text if text.startswith(("I ", "I'")) else text[:1].lower() + text[1:]
    return f"{phrase[:1].upper()}{phrase[1:]}, {first}"


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def _split(value: str) -> tuple[str, str]:
    long, _, short = value.partition("|")
    return long, short or long


def _values(slots: dict[str, str], person: Person, n: str = "") -> dict[str, str]:
    """Format values: {x}, {x_} (short form), {X} (capitalised), pronouns, the addressee {N}."""
    out = {
        "they": person.pron[0],
        "them": person.pron[1],
        "their": person.pron[2],
        "S": person.name,
        "N": n,
    }
    for key, value in slots.items():
        long, short = _split(value)
        out[key] = long
        out[key + "_"] = short
        out[key.capitalize()] = long[:1].upper() + long[1:]
    # a slot value may itself name the subject's pronouns ("{their} grandma")
    return {k: v.format(**out) if "{" in v else v for k, v in out.items()}


def _say(rng: random.Random, variants: tuple[str, ...], values: dict[str, str]) -> str:
    return rng.choice(variants).format(**values)


def build(
    seed: int = 11,
    conversations: int = 10,
    threads_per_person: int = 9,
    ask_share: float = 0.85,
    temporal_share: float = 0.33,
    merge_share: float = 0.8,
    infer_share: float = 0.5,
    *,
    plain: bool = False,
    retold_share: float = 0.4,
    full_name_share: float = 0.5,
    dated_share: float = 0.8,
    as_of_share: float = 0.4,
) -> tuple[list[Conversation], list[Question]]:
    """The conversations and their questions (see the module docstring)."""
    rng = random.Random(seed)
    extra = Extra(
        seed,
        retold_share=0.0 if plain else retold_share,
        full_name_share=0.0 if plain else full_name_share,
    )
    people = PEOPLE[:]
    rng.shuffle(people)
    convs: list[Conversation] = []
    questions: list[Question] = []
    start = datetime(2025, 1, 6, tzinfo=TZ)
    for c in range(conversations):
        pair = [
            Person(n, s, PRONOUNS[p], rng.random() < 0.5) for n, s, p in people[2 * c : 2 * c + 2]
        ]
        conv, qs = _conversation(
            rng,
            f"d{c}",
            pair,
            start + timedelta(days=rng.randint(0, 200)),
            threads_per_person,
            ask_share,
            temporal_share,
            merge_share,
            infer_share,
            extra,
            0.0 if plain else dated_share,
            0.0 if plain else as_of_share,
        )
        convs.append(conv)
        questions += qs
    return convs, questions


def _conversation(
    rng: random.Random,
    cid: str,
    people: list[Person],
    start: datetime,
    threads_per_person: int,
    ask_share: float,
    temporal_share: float,
    merge_share: float,
    infer_share: float,
    extra: Extra,
    dated_share: float,
    as_of_share: float,
) -> tuple[Conversation, list[Question]]:
    n_sessions = rng.randint(19, 35)
    times: list[datetime] = []
    t = start
    for _ in range(n_sessions):
        times.append(t.replace(hour=rng.randint(8, 21), minute=rng.choice((0, 10, 20, 30, 40, 50))))
        t += timedelta(days=rng.randint(3, 16))

    # what each person's life is made of, and how often each strand comes up
    occurrences: list[Occurrence] = []
    for who, person in enumerate(people):
        threads = [th for th in THREADS if person.kids or not th.kids]
        for thread in rng.sample(threads, threads_per_person):
            pools = {
                (e, k): rng.sample(v, len(v))
                for e, ev in enumerate(thread.events)
                for k, v in ev.slots.items()
            }
            order = list(range(len(thread.events)))
            rng.shuffle(order)
            for j in range(rng.randint(2, 6)):
                e = order[j % len(order)]
                values = {}
                for k in thread.events[e].slots:
                    pool = pools[(e, k)]
                    if not pool:  # told more often than there are values: start over
                        pool += rng.sample(
                            thread.events[e].slots[k], len(thread.events[e].slots[k])
                        )
                    values[k] = pool.pop()
                occurrences.append(Occurrence(who, thread, e, values))
    rng.shuffle(occurrences)
    per_session: list[list[Occurrence]] = [[] for _ in range(n_sessions)]
    for occ in occurrences:
        open_ = [s for s in range(n_sessions) if len(per_session[s]) < 5] or list(range(n_sessions))
        occ.session = rng.choice(open_)
        per_session[occ.session].append(occ)
    for occ in occurrences:  # some news is told weeks after it happened
        occ.happened = times[occ.session]
        opens = occ.thread.events[occ.event_index].lines[0].who == "S"
        if opens and extra.retold_share and extra.rng.random() < extra.retold_share:
            phrase, days, _ = extra.rng.choices(RETOLD, weights=[w for *_, w in RETOLD])[0]
            occ.phrase = phrase
            if days is None:  # a day of the month before
                before = occ.happened.replace(day=1) - timedelta(days=1)
                occ.happened = before.replace(day=extra.rng.randint(1, before.day))
            else:
                occ.happened -= timedelta(days=days)

    # traits: said during one of the occurrences of their strand
    trait_at: dict[int, list[str]] = {}
    strands = {(o.who, o.thread.name): o.thread for o in occurrences}
    for (who, name), thread in strands.items():
        if not thread.traits or rng.random() < 0.25:
            continue
        mine = [o for o in occurrences if o.who == who and o.thread.name == name]
        for text in rng.sample(thread.traits, min(len(thread.traits), rng.randint(1, 2))):
            trait_at.setdefault(id(rng.choice(mine)), []).append(text)

    conv = Conversation(id=cid, lang="en", speakers=(people[0].name, people[1].name))
    for s, when in enumerate(times):
        rows: list[
            tuple[int, str, tuple[int, str] | None]
        ] = []  # speaker, text, (occurrence id, tag)
        first = rng.randrange(2)
        rows.append((first, rng.choice(GREET).format(N=extra.address(people[1 - first])), None))
        rows.append(
            (1 - first, rng.choice(GREET_BACK).format(N=extra.address(people[first])), None)
        )
        for occ in per_session[s]:
            if rng.random() < 0.7:  # small talk between pieces of news
                a, b = rng.choice(SMALL_TALK)
                speaker = rng.randrange(2)
                rows += [(speaker, a, None), (1 - speaker, b, None)]
            rows += _tell(rng, occ, people, trait_at.get(id(occ), []), extra)
        if rng.random() < 0.6:
            a, b = rng.choice(SMALL_TALK)
            speaker = rng.randrange(2)
            rows += [(speaker, a, None), (1 - speaker, b, None)]
        last = rng.randrange(2)
        rows.append((last, rng.choice(CLOSE).format(N=extra.address(people[1 - last])), None))
        rows.append((1 - last, rng.choice(CLOSE_BACK).format(N=extra.address(people[last])), None))
        session: list[Turn] = []
        tag_of: dict[tuple[int, str], str] = {}
        last_who = -1
        for who, text, tag in rows:
            if who == last_who and rng.random() < merge_share:  # one message saying several things
                session[-1].text += " " + text
            else:
                k = len(session)
                session.append(
                    Turn(
                        id=f"{cid}:s{s}:t{k}",
                        speaker=people[who].name,
                        text=text,
                        time=when + timedelta(minutes=k, seconds=rng.randint(0, 50)),
                    )
                )
            last_who = who
            if tag:
                tag_of[tag] = session[-1].id
        for occ in per_session[s]:
            occ.tagged = {t: i for (o, t), i in tag_of.items() if o == id(occ)}
        conv.sessions.append(session)

    now = times[-1] + timedelta(days=2)
    questions = _questions(
        rng, cid, people, occurrences, now, ask_share, temporal_share, infer_share
    )
    return conv, questions + _dated_questions(
        extra.rng, cid, people, occurrences, now, dated_share, as_of_share
    )


def _tell(
    rng: random.Random,
    occ: Occurrence,
    people: list[Person],
    traits: list[str],
    extra: Extra,
) -> list[tuple[int, str, tuple[int, str] | None]]:
    """The turns of one occurrence: its lines, a reaction, maybe a trait and the other's story."""
    event: Event = occ.thread.events[occ.event_index]
    subject, other = people[occ.who], people[1 - occ.who]
    rows: list[tuple[int, str, tuple[int, str] | None]] = []
    for k, line in enumerate(event.lines):
        if line.p < 1 and rng.random() > line.p:
            continue
        speaker = occ.who if line.who == "S" else 1 - occ.who
        n = extra.address(other if line.who == "S" else subject)
        text = _say(rng, line.say, _values(occ.values, subject, n=n))
        if k == 0 and line.who == "S":  # the news: when it happened
            if occ.phrase:
                text = retell(text, occ.phrase)
            elif occ.happened and re.search(r"\b(?:yesterday|last night)\b", text):
                occ.happened -= timedelta(days=1)
        rows.append((speaker, text, (id(occ), line.tag) if line.tag else None))
    for k, text in enumerate(traits):  # what this says about them, right after their news
        rows.append((occ.who, text, (id(occ), f"trait{k}")))
    if rng.random() < 0.3:
        rows.append(
            (
                1 - occ.who,
                rng.choice(REACT_TOPIC).format(topic=occ.thread.topic, N=extra.address(subject)),
                None,
            )
        )
    elif rng.random() < 0.3:
        rows.append((1 - occ.who, rng.choice(REACT).format(N=extra.address(subject)), None))
    if occ.thread.relate and rng.random() < 0.35:
        rows.append((1 - occ.who, rng.choice(occ.thread.relate), None))
        rows.append((occ.who, rng.choice(FILLER), None))
    return rows


def _questions(
    rng: random.Random,
    cid: str,
    people: list[Person],
    occurrences: list[Occurrence],
    now: datetime,
    ask_share: float,
    temporal_share: float,
    infer_share: float,
) -> list[Question]:
    out: list[Question] = []
    for occ in sorted(occurrences, key=lambda o: (o.session, o.who, o.thread.name)):
        if rng.random() > ask_share:
            continue
        event = occ.thread.events[occ.event_index]
        asks = [
            a
            for a in event.asks
            if a.category == ("temporal" if rng.random() < temporal_share else "single")
        ] or list(event.asks)
        ask = rng.choice(asks)
        tagged = occ.tagged or {}
        if not all(t in tagged for t in ask.evidence):
            continue
        text = _say(rng, ask.text, _values(occ.values, people[occ.who]))
        evidence = list(dict.fromkeys(tagged[t] for t in ask.evidence))
        out.append(Question(conv=cid, text=text, evidence=evidence, category=ask.category, now=now))
    strands: dict[tuple[int, str], list[Occurrence]] = {}
    for occ in occurrences:
        strands.setdefault((occ.who, occ.thread.name), []).append(occ)
    for (who, _name), mine in sorted(strands.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        thread = mine[0].thread
        person = people[who]
        base = _values({}, person)
        multi_ev: list[str] = []
        if thread.multi:
            text, e, tag = rng.choice(thread.multi)
            multi_ev = list(
                dict.fromkeys(
                    o.tagged[tag]
                    for o in mine
                    if o.event_index == e and o.tagged and tag in o.tagged
                )
            )
            if len(multi_ev) >= 2:
                out.append(
                    Question(
                        conv=cid,
                        text=text.format(**base),
                        evidence=multi_ev,
                        category="multi",
                        now=now,
                    )
                )
        traits = _trait_ids(mine)
        if thread.infer and traits and rng.random() < infer_share:
            evidence = list(dict.fromkeys(traits + (multi_ev[:3] if thread.infer_events else [])))
            out.append(
                Question(
                    conv=cid,
                    text=rng.choice(thread.infer).format(**base),
                    evidence=evidence,
                    category="inference",
                    now=now,
                )
            )
    return out


def _month(when: datetime) -> str:
    return f"{calendar.month_name[when.month]} {when.year}"


def _dated_questions(
    rng: random.Random,
    cid: str,
    people: list[Person],
    occurrences: list[Occurrence],
    now: datetime,
    dated_share: float,
    as_of_share: float,
) -> list[Question]:
    """``dated`` and ``as_of`` questions (see the module docstring), from the second generator."""
    out: list[Question] = []
    strands: dict[tuple[int, str], list[Occurrence]] = {}
    for occ in occurrences:
        strands.setdefault((occ.who, occ.thread.name), []).append(occ)
    for (who, name), mine in sorted(strands.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        base = _values({}, people[who])

        def told(e: int, tag: str) -> list[tuple[datetime, str]]:
            return sorted(
                (o.happened, o.tagged[tag])
                for o in mine  # noqa: B023 (used at once)
                if o.event_index == e and o.happened and o.tagged and tag in o.tagged
            )

        if name in DATED and dated_share and rng.random() < dated_share:
            text, e, tag = rng.choice(DATED[name])
            events = told(e, tag)
            if events:
                month = rng.choice(events)[0]
                evidence = [i for t, i in events if (t.year, t.month) == (month.year, month.month)]
                out.append(
                    Question(
                        conv=cid,
                        text=text.format(**base, when=_month(month)),
                        evidence=list(dict.fromkeys(evidence)),
                        category="dated",
                        now=now,
                    )
                )
        thread = mine[0].thread
        if thread.multi and as_of_share and rng.random() < as_of_share:
            text, e, tag = rng.choice(thread.multi)
            events = told(e, tag)
            cuts = [
                t
                for t, _ in events[:-1]
                if any((u.year, u.month) > (t.year, t.month) for u, _ in events)
            ]
            if cuts:
                cut = rng.choice(cuts)
                evidence = [i for t, i in events if (t.year, t.month) <= (cut.year, cut.month)]
                asked = text.format(**base)
                out.append(
                    Question(
                        conv=cid,
                        text=f"As of {_month(cut)}, {asked[:1].lower()}{asked[1:]}",
                        evidence=list(dict.fromkeys(evidence)),
                        category="as_of",
                        now=now,
                    )
                )
    return out


def _trait_ids(mine: list[Occurrence]) -> list[str]:
    return [i for o in mine for t, i in (o.tagged or {}).items() if t.startswith("trait")]


if __name__ == "__main__":
    convs, qs = build()
    from collections import Counter

    print(
        sum(len(c.turns) for c in convs),
        "turns,",
        sum(len(c.sessions) for c in convs),
        "sessions,",
        len(qs),
        "questions",
        dict(Counter(q.category for q in qs)),
    )
    for turn in convs[0].sessions[3]:
        print(f"{turn.speaker}: {turn.text}")
    for q in qs[:12]:
        print(q.category, q.text, q.evidence)
