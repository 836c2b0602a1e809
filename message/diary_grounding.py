"""Her diary lines through the closed-world grounding check (issue 30).

The diary (`memory.diary`) asks a `DiaryClaimCheck` which of a draft's sentences her record of the
day cannot back; this is that check, built where the vocabulary lives. Each sentence is read as
the chat check reads an answer (`message.grounding.claims`, over the same `ClaimLexicon`: the
loaded actions, the town's places, the items, meals and the everyday doings outside her world)
and matched against the day's episodes as of the end of that day (`message.grounding.problems`:
nothing of the day is still ahead). People are read as the people check reads them
(`message.people_grounding.people_claims` and `strangers`): whom she says she met, was with or
heard from must be in that day's record — a meeting with that character, a chat, news or an
appointment with that person — and someone her record of the day does not name is nobody she
met. What she says of the weather is not checked: her record keeps no weather of the day.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, tzinfo
from typing import Literal

from yuiju.characters import CharacterCard
from yuiju.memory.episode_data import BehaviorData, ConversationData, PlanData
from yuiju.memory.episodes import Episode
from yuiju.message.grounding import ClaimLexicon, claims, problems
from yuiju.message.people_grounding import (
    PeopleClaim,
    Someone,
    backs,
    known_people,
    people_claims,
    said_in,
    strangers,
)
from yuiju.world.action import Action


@dataclass(frozen=True)
class DiaryGrounding:
    """The `memory.diary.DiaryClaimCheck` over her world's vocabulary and her town's people."""

    lexicon: ClaimLexicon
    """The chat check's lexicon (`ClaimLexicon.build` over the loaded actions)."""
    characters: Mapping[str, Sequence[str]]
    """Every character of the town: id → name and nicknames (from the cards)."""
    tz: tzinfo
    """The town's time zone: a day ends at midnight there."""

    @classmethod
    def build(
        cls, actions: Iterable[Action], cards: Mapping[str, CharacterCard], *, tz: tzinfo
    ) -> DiaryGrounding:
        """From what the process loaded: the action catalogue and the characters' cards."""
        return cls(
            lexicon=ClaimLexicon.build(actions),
            characters={cid: (card.name, *card.nicknames) for cid, card in cards.items()},
            tz=tz,
        )

    def unbacked(
        self,
        *,
        character_id: str,
        start: date,
        end: date,
        episodes: Sequence[Episode],
        sentences: Sequence[str],
    ) -> dict[int, str]:
        """The sentences her ``episodes`` of ``start`` to ``end`` do not back, with the reason."""
        now = datetime.combine(end, time.max, tzinfo=self.tz)
        first = datetime.combine(start, time.min, tzinfo=self.tz)
        record = {0: list(episodes)}
        names = self.characters.get(character_id, ())
        people = self._people(character_id, episodes)
        out: dict[int, str] = {}
        for i, text in enumerate(sentences):
            wrong = problems(claims(text, self.lexicon, day=0), record, now)
            wrong += [
                f"你写了「{clause}」，但这天的记录里没有「{name}」这个人，你没见过。"
                for name, clause in strangers(text, people, speaker=names[0] if names else "")
            ]
            wrong += [
                problem
                for claim in people_claims(text, people, now)
                if claim.end > first and (problem := person_problem(claim, episodes, first))
            ]
            if wrong:
                out[i] = "".join(dict.fromkeys(wrong))
        return out

    def _people(self, character_id: str, episodes: Sequence[Episode]) -> dict[str, Someone]:
        return people_in(self.characters, character_id, episodes)


def people_in(
    characters: Mapping[str, Sequence[str]], character_id: str, episodes: Sequence[Episode]
) -> dict[str, Someone]:
    """Whom a claim of ``character_id``'s may name: the town's other ``characters`` (id → name
    and nicknames), and everyone ``episodes`` name (people from chat she talked with, who told
    her news or gave her something, who asked her out)."""
    neighbours = {cid: names for cid, names in characters.items() if cid != character_id}
    people = known_people(neighbours, None)
    for e in episodes:
        for someone in _parties(e):
            if someone.id != character_id and someone.name not in people:
                people[someone.name] = someone
    return people


def _party(value: object) -> Someone | None:
    """A `world.relations.Party` as stored (kind, id, name)."""
    if not isinstance(value, Mapping) or not value.get("id") or not value.get("name"):
        return None
    kind: Literal["character", "person"] = (
        "person" if value.get("kind") == "person" else "character"
    )
    return Someone(kind, str(value["id"]), str(value["name"]))


def _parties(e: Episode) -> list[Someone]:
    """Everyone ``e`` says she was with, talked with, heard from or was asked out by."""
    data = e.record()
    found: list[Someone | None] = []
    if isinstance(data, ConversationData):
        found += [Someone("character", p.id, p.name) for p in data.partners or []]
        found.append(_party(data.by))
        found += [  # a chat window (`message.recorder`)
            Someone("person", c.user_id, c.name) for c in data.counterparties or [] if c.user_id
        ]
    elif isinstance(data, PlanData):
        found.append(_party(data.asked_by))
        found.append(_party((data.appointment or {}).get("other")))
    return [p for p in found if p is not None]


def _with(e: Episode, who: Someone) -> bool:
    """Whether ``e`` records her being with ``who``: a meeting or a joint action with that
    character; with a person from chat, an appointment with them she kept."""
    data = e.record()
    if who.kind == "character":
        if isinstance(data, ConversationData):  # a meeting: the other, id and name
            return any(p.id == who.id for p in data.partners or [])
        return isinstance(data, BehaviorData) and who.id in (data.partners or [])  # joint action
    if isinstance(data, PlanData) and data.status == "kept":
        other = _party((data.appointment or {}).get("other"))
        return other is not None and other.id == who.id
    return False


def _chatted(e: Episode, who: Someone) -> bool:
    """Whether ``e`` is a talk with ``who``: a meeting, a chat window they took part in, news or
    a gift from them."""
    return _with(e, who) or any(p.id == who.id for p in _parties(e) if p.kind == who.kind)


def person_problem(claim: PeopleClaim, episodes: Sequence[Episode], first: datetime) -> str:
    """Why her record of the period (from ``first``) does not bear ``claim`` out, or ''."""
    who = claim.who
    then = [e for e in episodes if max(claim.start, first) <= e.time < claim.end]
    if claim.kind == "met":
        seen = [e for e in then if (_chatted(e, who) if claim.chat else _with(e, who))]
        if claim.negated and seen:
            return f"你写了「{claim.said}」，但记录里 {seen[0].time.astimezone(first.tzinfo):%H:%M} 见过{who.name}。"
        if not claim.negated and not seen:
            return f"你写了「{claim.said}」，但这天的记录里没有和{who.name}见过面。"
        return ""
    said = [said_in(e, who) for e in then]
    if claim.kind == "did":  # what someone did: also what happened when she was with them
        said += [e.summary for e in then if _with(e, who)]
    first_part = re.split(r"[，,；;]", claim.content)[0]  # 说…，后来我…: her own words after
    if any(backs(claim.content, s) or backs(first_part, s) for s in said if s):
        return ""
    return f"你写了「{claim.said}」，但这天的记录里{who.name}没说过这件事。"
