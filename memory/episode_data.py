"""Typed episode records: one pydantic model per episode kind for `Episode.data`.

The world writes an episode's ``data`` through these models (world/transitions.py,
world/commands.py, world/social.py), and a reader gets it back typed with `Episode.typed()`
instead of reading a dict by string key. ``dump()`` writes only the fields a writer set, so a
document holds what it held before these models. Records nested from the world's own models
(an appointment, a note, a plan change, a piece of news) stay JSON objects here: memory sits
below world and cannot name those models.

Each model allows extra keys, so documents written before a field was declared still read.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, JsonValue

JsonObject = dict[str, JsonValue]


class EpisodeData(BaseModel):
    model_config = ConfigDict(
        extra="allow", use_attribute_docstrings=True, populate_by_name=True, frozen=True
    )

    def dump(self) -> JsonObject:
        """The document's ``data``: the fields the writer set, by their stored names."""
        return self.model_dump(mode="python", by_alias=True, exclude_unset=True)


class BehaviorData(EpisodeData):
    """An action she did: written when it starts (status running) and again when it completes."""

    action: str
    """The action's id."""
    name: str
    """The action's Chinese name."""
    place: str
    reason: str
    decided_by: str
    """The policy that chose it ("utility", "llm", "fallback:utility", "with:<partner id>")."""
    params: JsonObject | None = None
    result: str = ""
    """What the start (running) or the whole action (completed) did, in Chinese."""
    stats_before: JsonObject = Field(default_factory=dict)
    planned_minutes: int | None = None
    """Running: how long it is meant to take."""
    stats_after_start: JsonObject | None = None
    """Running: her stats right after the start."""
    plan_changes: list[JsonObject] | None = None
    """Running, a solo start: the plan changes the decision asked for."""
    share_intent: JsonObject | None = None
    """Whether (and why) she means to tell someone about it."""
    notes: list[str] | None = None
    """Completed: what happened on the way (random events), one Chinese line each."""
    shareable: bool | None = None
    """Completed: whether the action is one worth telling about."""
    stats_after: JsonObject | None = None
    """Completed: her stats when it ended."""
    duration_minutes: int | None = None
    """Completed: how long it took."""
    partners: list[str] | None = Field(None, alias="with")
    """A joint action: the ids of the others in it."""
    meeting_id: str | None = None


class PlanData(EpisodeData):
    """Her plans and promises: a plan change, an invitation or reminder and her answer, an
    appointment or a note kept or missed."""

    change: JsonObject | None = None
    """A plan change (`world.plans.PlanChange`)."""
    behavior_episode: str | None = None
    """The behavior episode whose decision changed the plan."""
    plans_after: list[str] | None = None
    appointment: JsonObject | None = None
    """An invitation or appointment (`world.relations.Appointment`)."""
    note: JsonObject | None = None
    """A reminder or promise (`world.relations.Note`)."""
    status: str | None = None
    """An appointment's or a note's outcome: kept, missed, done."""
    source: str | None = None
    """Where it came from: "chat" (a person) or "character"."""
    asked_by: JsonObject | None = None
    """Who asked (a `world.relations.Party`)."""
    accepted: bool | None = None
    reason: str | None = None
    """Why she declined, if she did."""
    via: str | None = None
    """Where she was asked (a group, a private chat), if said."""


class Partner(EpisodeData):
    """The other character of a meeting."""

    id: str
    name: str


class Line(EpisodeData):
    """One line said at a meeting."""

    speaker: str
    """The speaker's character id."""
    name: str
    """The speaker's name."""
    text: str


class Counterparty(EpisodeData):
    """A person in a chat window she archived."""

    user_id: str
    """Platform-qualified (``qq:123``), the person's canonical id."""
    name: str


class ChatMessage(EpisodeData):
    """One message of a chat window she archived."""

    speaker: str
    """The sender's name as shown in the chat."""
    text: str
    time: datetime | None = None


class ConversationData(EpisodeData):
    """Whom she talked with: a meeting of two characters, news someone told her, a gift, a chat
    window she archived (`message.recorder`)."""

    meeting_id: str | None = None
    partners: list[Partner] | None = Field(None, alias="with")
    """A meeting: the other (id and name)."""
    participants: list[str] | None = None
    initiator: str | None = None
    place: str | None = None
    action: str | None = None
    kind: str | None = None
    """The joint action's kind of talk."""
    source: str | None = None
    """A meeting: who wrote the words ("model", "template"); news or a gift: "chat" (a person)
    or "character"."""
    lines: list[Line] | None = None
    """A meeting's words."""
    news: JsonValue = None
    """A meeting: the news passed on (a list); news told to her: the item (an object)."""
    invitation: JsonObject | None = None
    declined: str | None = None
    kept_appointment: str | None = None
    by: JsonObject | None = None
    """News or a gift: who from (a `world.relations.Party`)."""
    gift: JsonObject | None = None
    """A gift: item and quantity."""
    accepted: bool | None = None
    reason: str | None = None
    via: str | None = None
    session_id: str | None = None
    """A chat window: the conversation it is from (``group:…``, ``private:…``)."""
    counterparties: list[Counterparty] | None = None
    """A chat window: the people who spoke in it."""
    message_count: int | None = None
    messages: list[ChatMessage] | None = None
    """A chat window: its messages, oldest first."""


EPISODE_DATA: dict[str, type[BehaviorData | PlanData | ConversationData]] = {
    "behavior": BehaviorData,
    "plan": PlanData,
    "conversation": ConversationData,
}
"""The model of each episode kind that has one (weather and system episodes have none yet)."""
