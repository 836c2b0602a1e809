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
- questions always name the speaker, and come in four kinds:

  - ``single``: one detail of one event ("What did Hannah paint with watercolors?"), its
    evidence one turn (sometimes two: the news and the detail);
  - ``multi``: every occurrence of a strand ("Where has Hannah gone camping?"), 2-6 turns from
    different sessions;
  - ``temporal``: "When did Hannah ...?" about one event: the answer is the date of its session;
  - ``inference``: "Would Hannah likely enjoy a week-long backpacking trip?": the evidence is what
    she said about herself (and, for some, what she did), in other words than the question's.

Everything comes from ``random.Random(seed)``: the same seed gives the same set. Run it to print
a conversation: ``python bench/dialogue_set.py``.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from dialogue_bank import (
    CLOSE,
    CLOSE_BACK,
    FILLER,
    GREET,
    GREET_BACK,
    REACT,
    REACT_TOPIC,
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
) -> tuple[list[Conversation], list[Question]]:
    """The conversations and their questions (see the module docstring)."""
    rng = random.Random(seed)
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
        rows.append((first, rng.choice(GREET).format(N=people[1 - first].short), None))
        rows.append((1 - first, rng.choice(GREET_BACK).format(N=people[first].short), None))
        for occ in per_session[s]:
            if rng.random() < 0.7:  # small talk between pieces of news
                a, b = rng.choice(SMALL_TALK)
                speaker = rng.randrange(2)
                rows += [(speaker, a, None), (1 - speaker, b, None)]
            rows += _tell(rng, occ, people, trait_at.get(id(occ), []))
        if rng.random() < 0.6:
            a, b = rng.choice(SMALL_TALK)
            speaker = rng.randrange(2)
            rows += [(speaker, a, None), (1 - speaker, b, None)]
        last = rng.randrange(2)
        rows.append((last, rng.choice(CLOSE).format(N=people[1 - last].short), None))
        rows.append((1 - last, rng.choice(CLOSE_BACK).format(N=people[last].short), None))
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
    return conv, _questions(
        rng, cid, people, occurrences, now, ask_share, temporal_share, infer_share
    )


def _tell(
    rng: random.Random, occ: Occurrence, people: list[Person], traits: list[str]
) -> list[tuple[int, str, tuple[int, str] | None]]:
    """The turns of one occurrence: its lines, a reaction, maybe a trait and the other's story."""
    event: Event = occ.thread.events[occ.event_index]
    subject, other = people[occ.who], people[1 - occ.who]
    rows: list[tuple[int, str, tuple[int, str] | None]] = []
    for line in event.lines:
        if line.p < 1 and rng.random() > line.p:
            continue
        speaker = occ.who if line.who == "S" else 1 - occ.who
        values = _values(occ.values, subject, n=(other if line.who == "S" else subject).short)
        text = _say(rng, line.say, values)
        rows.append((speaker, text, (id(occ), line.tag) if line.tag else None))
    for k, text in enumerate(traits):  # what this says about them, right after their news
        rows.append((occ.who, text, (id(occ), f"trait{k}")))
    if rng.random() < 0.3:
        rows.append(
            (
                1 - occ.who,
                rng.choice(REACT_TOPIC).format(topic=occ.thread.topic, N=subject.short),
                None,
            )
        )
    elif rng.random() < 0.3:
        rows.append((1 - occ.who, rng.choice(REACT).format(N=subject.short), None))
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
