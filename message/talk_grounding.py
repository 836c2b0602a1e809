"""What characters say when they meet, through the closed-world grounding check (issue 30).

`world.conversation.ModelTalker` asks a `world.conversation.TalkCheck` which of the model's lines
for a meeting the speakers' records cannot back; this is that check, built where the vocabulary
lives and wired at the composition root (`yuiju_cli.daemon_runtime`). Each speaker's lines are
read as the chat check reads an answer (`message.grounding.claims` over the same `ClaimLexicon`)
and matched against that speaker's record of the time they speak of (`message.grounding.read_past`
and today's doings from the same repository; `message.grounding.problems`), what they say of the
weather against the world's weather as they meet (`TalkRequest.weather`). People are read as the
diary check reads them (`message.people_grounding.people_claims` and `strangers`, over the
speaker's record: `message.diary_grounding.people_in`, `person_problem`). Lines about the other
("你昨天…") and questions claim nothing. What the request says always passes: the meeting's own
activity and place (with the other, now), the news passed on, the invitation, the kept
appointment — it stands in each speaker's record as one more episode.

The reads go to the history store; the talker calls the check only after a model call, which the
engine makes off its step for a meeting decided off it (world/behavior.py `_ask`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from yuiju.characters import CharacterCard
from yuiju.memory.episodes import DOINGS, Episode
from yuiju.message.diary_grounding import people_in, person_problem
from yuiju.message.grounding import (
    ClaimLexicon,
    DayKey,
    EpisodeRange,
    claims,
    problems,
    read_past,
)
from yuiju.message.people_grounding import PeopleClaim, Someone, people_claims, strangers
from yuiju.world.action import Action
from yuiju.world.conversation import Line, Speaker, TalkRequest

PEOPLE_READ_LIMIT = 500
"""At most this many of a speaker's newest episodes are read for whom a line names."""
PEOPLE_DAYS = 14
"""How far back a speaker's record is read for the people a line may name."""


@dataclass(frozen=True)
class TalkGrounding:
    """The `world.conversation.TalkCheck` over her world's vocabulary and her town's people."""

    lexicon: ClaimLexicon
    """The chat check's lexicon (`ClaimLexicon.build` over the loaded actions)."""
    characters: Mapping[str, Sequence[str]]
    """Every character of the town: id → name and nicknames (from the cards)."""
    episodes: EpisodeRange
    """Where the speakers' records are read (`memory.episodes.EpisodeRepo`)."""

    @classmethod
    def build(
        cls, actions: Iterable[Action], cards: Mapping[str, CharacterCard], episodes: EpisodeRange
    ) -> TalkGrounding:
        """From what the process loaded: the action catalogue, the cards, the history store."""
        return cls(
            lexicon=ClaimLexicon.build(actions),
            characters={cid: (card.name, *card.nicknames) for cid, card in cards.items()},
            episodes=episodes,
        )

    async def unbacked(self, request: TalkRequest, lines: Sequence[Line]) -> dict[int, str]:
        """The lines the speaker's record does not back, with why (naming the claim)."""
        out: dict[int, str] = {}
        for speaker, other in ((request.a, request.b), (request.b, request.a)):
            mine = {i: line.text for i, line in enumerate(lines) if line.speaker == speaker.id}
            if mine:
                out |= await self._unbacked(request, speaker, other, mine)
        return out

    async def _unbacked(
        self, request: TalkRequest, speaker: Speaker, other: Speaker, mine: Mapping[int, str]
    ) -> dict[int, str]:
        now = request.now
        said = _what_is_said(request, speaker, other)
        found = {i: claims(text, self.lexicon) for i, text in mine.items()}
        days = {c.day for cs in found.values() for c in cs if c.term.kind != "weather"}
        record = await self._record(speaker.id, now, days) if days else {}
        for day in record:  # what the request says stands in every part read
            record[day] = [*record[day], *(said if day == 0 else said[1:])]
        people = self._people(request, speaker, [])
        named = {
            i: (people_claims(text, people, now), strangers(text, people, speaker=speaker.name))
            for i, text in mine.items()
        }
        episodes: list[Episode] = []
        first = now
        if any(met or unknown for met, unknown in named.values()):
            first = now - timedelta(days=PEOPLE_DAYS)
            episodes = [*await self._around(speaker.id, first, now), said[0]]
            people = self._people(request, speaker, episodes)
            named = {
                i: (people_claims(text, people, now), strangers(text, people, speaker=speaker.name))
                for i, text in mine.items()
            }
        out: dict[int, str] = {}
        for i in mine:
            wrong = problems(found[i], record, now, weather=request.weather)
            met, unknown = named[i]
            wrong += [f"你说「{clause}」，但你不认识「{name}」这个人。" for name, clause in unknown]
            wrong += [p for claim in met if (p := _person(claim, episodes, first))]
            if wrong:  # 你 is the speaker: the model writes the line as them
                out[i] = f"{speaker.name}：" + "".join(dict.fromkeys(wrong))
        return out

    async def _record(
        self, character_id: str, now: datetime, days: set[DayKey]
    ) -> dict[DayKey, list[Episode]]:
        """Her episodes of each of ``days``: `read_past`, and today's doings besides."""
        record = await read_past(self.episodes, character_id, now, days)
        if 0 in days:
            midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
            today = await self.episodes.between(
                character_id, midnight, now + timedelta(seconds=1), type_=DOINGS, limit=200
            )
            record[0] = sorted([*today, *record.get(0, [])], key=lambda e: e.time)
        return record

    async def _around(self, character_id: str, start: datetime, now: datetime) -> list[Episode]:
        found = await self.episodes.between(
            character_id,
            start,
            now + timedelta(seconds=1),
            limit=PEOPLE_READ_LIMIT,
            newest_first=True,
        )
        return sorted(found, key=lambda e: e.time)

    def _people(
        self, request: TalkRequest, speaker: Speaker, episodes: Sequence[Episode]
    ) -> dict[str, Someone]:
        """Whom a line may name: the town's characters, whoever her record names, and whoever
        the request's news names (who said it first, who passed it on, whom it is about)."""
        people = people_in(self.characters, speaker.id, episodes)
        for _, item in request.news:
            for party in (item.origin, item.source, item.about):
                if party is not None and party.id != speaker.id and party.name not in people:
                    people[party.name] = Someone(party.kind, party.id, party.name)
        return people


def _person(claim: PeopleClaim, episodes: Sequence[Episode], first: datetime) -> str:
    return person_problem(claim, episodes, first) if claim.end > first else ""


def _what_is_said(request: TalkRequest, speaker: Speaker, other: Speaker) -> list[Episode]:
    """What ``request`` says, as episodes of ``speaker``'s: the meeting itself (with ``other``,
    its activity and place, the invitation, the kept appointment), then the news passed on."""
    now = request.now
    news = [
        {"text": item.text, "teller": party.id}
        for teller, item in request.news
        for party in (item.origin, item.source, request.speaker(teller))
    ]
    meeting = f"{request.a.name}和{request.b.name}在{request.place}{request.activity}"
    if request.proposal is not None:
        meeting += f"，约好去{request.proposal_place}{request.proposal.activity}"
    if request.kept is not None:
        meeting += f"，这是约好的{request.kept.activity}"
    said = [
        Episode.model_validate(
            {
                "_id": f"{request.meeting_id}-said-{speaker.id}",
                "character_id": speaker.id,
                "type": "conversation",
                "time": now - timedelta(seconds=1),
                "end_time": now + timedelta(hours=1),
                "summary": meeting,
                "data": {
                    "meeting_id": request.meeting_id,
                    "with": [{"id": other.id, "name": other.name}],
                    "news": news,
                },
            }
        )
    ]
    if request.news:
        said.append(
            Episode.model_validate(
                {
                    "_id": f"{request.meeting_id}-news-{speaker.id}",
                    "character_id": speaker.id,
                    "type": "system",
                    "time": now - timedelta(seconds=1),
                    "summary": "；".join(item.text for _, item in request.news),
                }
            )
        )
    return said
