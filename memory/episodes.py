"""Episodes: the fact log of her life, in the history store (MongoDB or SQLite).

Behavior episodes have deterministic ids (character, start time, action), so writing the same
episode twice is an idempotent upsert: the engine's outbox can replay after a crash without
duplicates. The ``running`` document is replaced by the ``completed`` one under the same id.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from yuiju.memory.episode_data import EPISODE_DATA, BehaviorData, ConversationData, PlanData
from yuiju.storage.history import CollectionSpec, HistoryStore, Scalar

log = logging.getLogger(__name__)

EpisodeType = Literal["behavior", "plan", "conversation", "weather", "system"]

DOINGS: tuple[EpisodeType, ...] = ("behavior", "plan", "weather", "system")
"""Every type but ``conversation``: what she did and what happened to her, not whom she talked to
(a busy group's day holds hundreds of conversation episodes, each with its messages)."""

GIFT_PREFIX = "gft_"
"""The id of a gift's episode starts with this (a conversation episode, found without reading
every window of chat she archived)."""
MEETING_PREFIX = "cnv_"
"""... and the id of a talk with another character when they met (`world.social`)."""

EPISODES = CollectionSpec(
    name="episodes",
    fields=("character_id", "type", "time", "status"),
    indexes=(("character_id", "time"), ("character_id", "type", "time"), ("status", "time")),
)


class Episode(BaseModel):
    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True, populate_by_name=True)

    id: str = Field(alias="_id")
    character_id: str
    type: EpisodeType
    time: AwareDatetime
    """When it started (or happened)."""
    end_time: AwareDatetime | None = None
    status: Literal["running", "completed", "logged"] = "logged"
    summary: str
    """One Chinese sentence about what happened, written for her memory and the chat side."""
    data: dict[str, Any] = Field(default_factory=dict)
    """Type-specific details: action id, place, reason, params, stats before/after, ..."""

    def document(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True)

    def typed(self) -> BehaviorData | PlanData | ConversationData | None:
        """``data`` as the model of this episode's kind (`memory.episode_data`); None for a kind
        without one (weather, system). A document that does not fit raises `ValidationError`."""
        model = EPISODE_DATA.get(self.type)
        return model.model_validate(self.data) if model is not None else None

    def record(self) -> BehaviorData | PlanData | ConversationData | None:
        """`typed()` for a reader that must not fail on one bad document: a document that does
        not fit its kind's model (written by an older version, edited by hand) gives None and
        one warning naming the episode, the field and the fix. The episode itself stays: a
        reader shows its summary, or leaves it out of what it counts."""
        try:
            return self.typed()
        except ValidationError as exc:
            _warn_unfit(self, exc)
            return None

    def behavior(self) -> BehaviorData | None:
        """The record of a behavior episode that fits its model, else None (see `record`)."""
        return (
            d if self.type == "behavior" and isinstance(d := self.record(), BehaviorData) else None
        )

    def plan(self) -> PlanData | None:
        """The record of a plan episode that fits its model, else None (see `record`)."""
        return d if self.type == "plan" and isinstance(d := self.record(), PlanData) else None

    def conversation(self) -> ConversationData | None:
        """The record of a conversation episode that fits its model, else None (see `record`)."""
        if self.type != "conversation":
            return None
        return d if isinstance(d := self.record(), ConversationData) else None


_WARNED: set[tuple[str, str]] = set()
"""(episode id, error) pairs already logged: a page that re-reads a bad episode every few seconds
warns once, not every time."""
_WARNED_MAX = 4096


def _warn_unfit(episode: Episode, exc: ValidationError) -> None:
    fields = "; ".join(
        f"data.{'.'.join(str(p) for p in err['loc']) or '(whole)'}: {err['msg']}"
        for err in exc.errors()
    )
    key = (episode.id, fields)
    if key in _WARNED:
        return
    if len(_WARNED) >= _WARNED_MAX:
        _WARNED.clear()
    _WARNED.add(key)
    model = EPISODE_DATA[episode.type].__name__
    log.warning(
        "episode %s (%s) does not fit %s (%s); readers use its summary and leave its details "
        "out. Fix: correct that field of the document in the history store's episodes "
        "collection to what %s declares (memory/episode_data.py), or delete the field",
        episode.id,
        episode.type,
        model,
        fields,
        model,
    )


def episode_id(character_id: str, started_at: datetime, action_id: str) -> str:
    digest = hashlib.sha1(
        f"{character_id}|{started_at.isoformat()}|{action_id}".encode()
    ).hexdigest()
    return f"bhv_{digest[:20]}"


class EpisodeRepo:
    """The small query API over episodes: by id, a time range, today, by type."""

    def __init__(self, store: HistoryStore) -> None:
        self.store = store

    async def ensure(self) -> None:
        await self.store.ensure(EPISODES)

    async def put(self, episode: Episode | dict[str, Any]) -> None:
        doc = episode.document() if isinstance(episode, Episode) else episode
        await self.store.put(EPISODES.name, doc)

    async def get(self, episode_id_: str) -> Episode | None:
        doc = await self.store.get(EPISODES.name, episode_id_)
        return Episode.model_validate(doc) if doc else None

    async def between(
        self,
        character_id: str,
        start: datetime,
        end: datetime,
        *,
        type_: EpisodeType | Sequence[EpisodeType] | None = None,
        id_prefix: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[Episode]:
        """Her episodes from ``start`` (inclusive) to ``end``, of ``type_`` (one or several),
        with ids starting ``id_prefix`` (`GIFT_PREFIX`: the gifts among her conversations)."""
        eq: dict[str, Any] = {"character_id": character_id}
        if type_ is not None:
            eq["type"] = type_ if isinstance(type_, str) else list(type_)
        ranges: dict[str, tuple[Scalar, Scalar]] = {"time": (start, end)}
        if id_prefix:
            ranges["_id"] = (id_prefix, id_prefix[:-1] + chr(ord(id_prefix[-1]) + 1))
        docs = await self.store.find(
            EPISODES.name,
            eq=eq,
            ranges=ranges,
            sort="time",
            descending=newest_first,
            limit=limit,
        )
        return [Episode.model_validate(d) for d in docs]

    async def today(
        self,
        character_id: str,
        now: datetime,
        *,
        type_: EpisodeType | Sequence[EpisodeType] | None = None,
    ) -> list[Episode]:
        start = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return await self.between(character_id, start, start + timedelta(days=1), type_=type_)

    async def recent(self, character_id: str, now: datetime, limit: int = 10) -> list[Episode]:
        """Her latest behavior episodes of the last day, oldest first."""
        found = await self.between(
            character_id,
            now - timedelta(days=1),
            now + timedelta(seconds=1),
            type_="behavior",
            limit=limit,
            newest_first=True,
        )
        return list(reversed(found))

    async def conversations(
        self,
        character_id: str,
        start: datetime,
        end: datetime,
        *,
        with_: str | None = None,
        newest_first: bool = True,
    ) -> list[Episode]:
        """Her conversations in [start, end): meetings with other characters (``data.with``,
        ``data.news``, ``data.lines``) and news told from chat; with ``with_`` only those with that
        character (an id). What a claim about meeting someone, or about what someone said, is
        checked against."""
        found = await self.between(
            character_id,
            start,
            end,
            type_="conversation",
            id_prefix=MEETING_PREFIX if with_ is not None else None,  # not her chat windows
            newest_first=newest_first,
        )
        if with_ is None:
            return found
        return [
            e
            for e in found
            if (d := e.conversation()) is not None and any(w.id == with_ for w in d.partners or ())
        ]

    async def running(self) -> list[Episode]:
        docs = await self.store.find(EPISODES.name, eq={"status": "running"}, sort="time")
        return [Episode.model_validate(d) for d in docs]

    async def search(
        self, character_id: str, keyword: str, start: datetime, end: datetime, *, limit: int = 20
    ) -> list[Episode]:
        """Episodes in [start, end) whose summary or action name contains ``keyword``, newest first.

        The range query is indexed; the substring match runs here (neither backend indexes text).
        """
        needle = keyword.casefold()
        found = await self.between(character_id, start, end, newest_first=True)
        hits = [
            e
            for e in found
            if needle in e.summary.casefold()
            or ((b := e.behavior()) is not None and needle in b.name.casefold())
        ]
        return hits[:limit]
