"""Typed events: one pydantic model per event type on the Redis event stream (``Keys.events``).

The world writes an event's ``data`` through these models (`world.evolutions.Event`), and every
consumer — the memory worker, proactive posts, the observer's live updates — reads a stream entry
once at its edge with `parse_event`, then uses attributes, so mypy checks each read.

They live here, next to the episode records, because the memory worker (memory/) reads them and
memory sits below world; storage/ below it holds connections and key names, not records.

The stored entry keeps its shape: fields ``type``, ``character_id``, ``time`` and ``data`` (a
JSON object, written by `EventData.dump` and ``json.dumps(..., default=str)`` as before), so a
consumer of an older version still reads what this one writes, and this one reads stored
streams. Every field has the value the readers assumed when a key was missing, so an entry with
fewer keys (written by hand) still reads; an entry whose values have the wrong type does not fit,
and `parse_event` gives None for it with one warning naming the entry, the field and the fix.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PlainSerializer,
    PrivateAttr,
    ValidationError,
    field_validator,
)

log = logging.getLogger(__name__)

IsoTime = Annotated[datetime, PlainSerializer(datetime.isoformat, return_type=str)]
"""A time stored as its ISO text (``2026-09-01T10:00:00+08:00``), as the engine always wrote."""
IsoDate = Annotated[date, PlainSerializer(date.isoformat, return_type=str)]


class EventData(BaseModel):
    """The ``data`` of one type of event. ``TYPE`` is the entry's ``type`` field."""

    model_config = ConfigDict(
        extra="allow", use_attribute_docstrings=True, populate_by_name=True, frozen=True
    )
    TYPE: ClassVar[str] = ""

    @property
    def event_type(self) -> str:
        """The stream entry's ``type``."""
        return self.TYPE

    def dump(self) -> dict[str, Any]:
        """The entry's ``data``: the fields the writer set, by their stored names (python
        values; the store writes them with ``json.dumps(..., default=str)``)."""
        return self.model_dump(mode="python", by_alias=True, exclude_unset=True)


# -- a character's life ------------------------------------------------------------------------


class ActionStarted(EventData):
    """She started an action (solo, or joint with ``with``)."""

    TYPE: ClassVar[str] = "action_started"
    episode_id: str = ""
    """Her behavior episode (status running)."""
    action: str = ""
    """The action's id."""
    name: str = ""
    """The action's Chinese name."""
    reason: str = ""
    ends_at: IsoTime | None = None
    partners: list[str] | None = Field(None, alias="with")
    """A joint action: the others' character ids (absent for a solo one)."""


class ActionCompleted(EventData):
    """She finished an action; ``share`` when it is worth telling her groups about."""

    TYPE: ClassVar[str] = "action_completed"
    episode_id: str = ""
    action: str = ""
    name: str = ""
    summary: str = ""
    """The completed episode's summary, one Chinese sentence."""
    share: bool = False
    """She means to share it and the action is shareable (proactive posts read only these)."""


class Conversation(EventData):
    """She talked with another character at a meeting (one event on each side)."""

    TYPE: ClassVar[str] = "conversation"
    episode_id: str = ""
    """Her conversation episode of the meeting."""
    meeting_id: str = ""
    partners: list[str] = Field(default_factory=list, alias="with")
    """The other's character id."""
    summary: str = ""
    source: str = ""
    """Who wrote the words: "model" or "template"."""


class CharacterCreated(EventData):
    """A character's state was created (her first step)."""

    TYPE: ClassVar[str] = "character_created"


# -- the world -----------------------------------------------------------------------------------


class NewDay(EventData):
    TYPE: ClassVar[str] = "new_day"
    date: IsoDate | None = None
    weekday: str = ""
    """周一 … 周日."""


class WeatherChanged(EventData):
    TYPE: ClassVar[str] = "weather_changed"
    weather: str = ""
    temperature: str = ""


class PlaceChange(EventData):
    """A place opened or closed by its hours."""

    place: str = ""
    """The place's id."""
    name: str = ""


class PlaceOpened(PlaceChange):
    TYPE: ClassVar[str] = "place_opened"


class PlaceClosed(PlaceChange):
    TYPE: ClassVar[str] = "place_closed"


class ForgetRequest(BaseModel):
    """What a consumer reads of a ``forget_person`` command (`world.commands.ForgetPerson`,
    which memory cannot import; tests/test_event_data.py checks the two agree)."""

    model_config = ConfigDict(extra="allow")
    type: Literal["forget_person"]
    subject: Literal["user", "group"] = "user"
    id: str
    ids: list[str]
    names: list[str] = Field(default_factory=list)
    requested_by: str
    request_id: str


class ForgetResult(BaseModel):
    """A ``forget_person`` command's result: what the world erased from the states."""

    model_config = ConfigDict(extra="allow")
    forgot: str = ""
    """The request id."""
    state: dict[str, int] = Field(default_factory=dict)
    """Erased items by kind (relations, news, appointments, …)."""


class CommandApplied(EventData):
    """The world applied a queued command (`world.commands`)."""

    TYPE: ClassVar[str] = "command_applied"
    command: dict[str, Any] = Field(default_factory=dict)
    """The command as its model dumps it (``type`` names its kind)."""
    result: str = ""
    """What it did, in a few words (a ``forget_person`` command: its `ForgetResult` as JSON)."""

    @field_validator("command")
    @classmethod
    def _a_forget_request_fits(cls, command: dict[str, Any]) -> dict[str, Any]:
        """A ``forget_person`` command that does not fit its request (an edited entry: the
        world validated it before applying it) makes the whole entry unfit, not its reader."""
        if command.get("type") == "forget_person":
            try:
                ForgetRequest.model_validate(command)
            except ValidationError as exc:
                wrong = ", ".join(".".join(map(str, e["loc"])) for e in exc.errors())
                raise ValueError(f"a forget_person command without a fitting {wrong}") from None
        return command

    def forget(self) -> tuple[ForgetRequest, ForgetResult] | None:
        """The request and result of a ``forget_person`` command; None for another kind."""
        if self.command.get("type") != "forget_person":
            return None
        try:
            result = ForgetResult.model_validate_json(self.result or "{}")
        except ValidationError:
            result = ForgetResult()
        return ForgetRequest.model_validate(self.command), result


class CommandRejected(EventData):
    """The world rejected a queued command, with the reason."""

    TYPE: ClassVar[str] = "command_rejected"
    command: JsonValue = None
    """The queued text as it was (it may not be JSON at all)."""
    reason: str = ""


class EvolutionFailed(EventData):
    """A configured evolution raised and was skipped this tick."""

    TYPE: ClassVar[str] = "evolution_failed"
    evolution: str = ""
    """Its ``"module:attr"`` name."""


class OtherEvent(EventData):
    """An event of a type this version has no model for: a custom evolution's, or a newer
    version's. Its data stays as it was (``model_extra``)."""

    _type: str = PrivateAttr(default="")

    @classmethod
    def of(cls, type_: str, data: Mapping[str, Any]) -> OtherEvent:
        event = cls.model_validate(dict(data))
        event._type = type_
        return event

    @property
    def event_type(self) -> str:
        return self._type


KnownEvent = (
    ActionStarted
    | ActionCompleted
    | Conversation
    | CharacterCreated
    | NewDay
    | WeatherChanged
    | PlaceOpened
    | PlaceClosed
    | CommandApplied
    | CommandRejected
    | EvolutionFailed
)
AnyEvent = KnownEvent | OtherEvent
"""What `parse_event` gives as an entry's ``data``: narrow it with ``isinstance``."""

EVENT_DATA: dict[str, type[KnownEvent]] = {
    model.TYPE: model
    for model in (
        ActionStarted,
        ActionCompleted,
        Conversation,
        CharacterCreated,
        NewDay,
        WeatherChanged,
        PlaceOpened,
        PlaceClosed,
        CommandApplied,
        CommandRejected,
        EvolutionFailed,
    )
}
"""The model of each event type this version knows."""


def event_data(type_: str, data: Mapping[str, Any]) -> AnyEvent:
    """``data`` as the model of ``type_`` (`OtherEvent` for a type without one). Raises
    `ValidationError` when it does not fit."""
    model = EVENT_DATA.get(type_)
    return model.model_validate(dict(data)) if model is not None else OtherEvent.of(type_, data)


# -- reading the stream ------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamEvent:
    """One entry of the event stream, read: where and when it happened, and its typed data."""

    id: str
    """The stream entry id."""
    type: str
    character_id: str | None
    """None for an event of the town (weather, a new day, a command)."""
    time: datetime | None
    """The world time it was published at (None when the entry has none)."""
    data: AnyEvent


class _Unfit(Exception):
    """An entry's envelope field does not fit: its message names the field and the problem."""


_Key = TypeVar("_Key", bound=str | bytes)
"""A stream entry's field names: text, or bytes from a client that does not decode."""


def text_fields(fields: Mapping[_Key, str | bytes]) -> dict[str, str]:
    """A stream entry's fields as text (a client without ``decode_responses`` gives bytes)."""
    return {_text(k): _text(v) for k, v in fields.items()}


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def parse_event(entry_id: str | bytes, fields: Mapping[_Key, str | bytes]) -> StreamEvent | None:
    """A stream entry, read once at a consumer's edge; None for one that does not fit (hand-
    written, edited, or from a version that wrote other types), after one warning naming the
    entry, the field and the fix. The consumer then skips it as it skips an event it does not
    handle (acknowledged), and goes on with the next."""
    eid = _text(entry_id)
    text = text_fields(fields)
    type_ = text.get("type", "")
    try:
        return _parse(eid, type_, text)
    except _Unfit as unfit:
        _warn_unfit(eid, type_, str(unfit))
    except ValidationError as exc:
        problems = "; ".join(
            f"data.{'.'.join(str(p) for p in err['loc']) or '(whole)'}: {err['msg']}"
            for err in exc.errors()
        )
        _warn_unfit(eid, type_, problems, model=EVENT_DATA[type_].__name__)
    return None


def _parse(eid: str, type_: str, text: dict[str, str]) -> StreamEvent:
    if not type_:
        raise _Unfit("type: missing or empty")
    raw_time = text.get("time", "")
    try:
        time = datetime.fromisoformat(raw_time) if raw_time else None
    except ValueError:
        raise _Unfit(f"time: {raw_time[:40]!r} is not an ISO time") from None
    try:
        data = json.loads(text.get("data") or "{}")
    except ValueError:
        raise _Unfit("data: not JSON") from None
    if not isinstance(data, dict):
        raise _Unfit(f"data: a JSON {type(data).__name__}, not an object")
    return StreamEvent(
        id=eid,
        type=type_,
        character_id=text.get("character_id") or None,
        time=time,
        data=event_data(type_, data),
    )


_WARNED: set[str] = set()
"""Entry ids already warned about: every consumer of a process, and a page re-reading the
stream, warn once per entry."""
_WARNED_MAX = 4096


def _warn_unfit(eid: str, type_: str, problems: str, *, model: str = "") -> None:
    if eid in _WARNED:
        return
    if len(_WARNED) >= _WARNED_MAX:
        _WARNED.clear()
    _WARNED.add(eid)
    wanted = (
        f"what {model} declares (memory/event_data.py)"
        if model
        else "type (not empty), time (ISO, or empty) and data (a JSON object of the fields "
        "memory/event_data.py declares for the type)"
    )
    log.warning(
        "event stream entry %s (%s) does not fit%s (%s); consumers skip it (acknowledged, "
        "the next entries go on). Fix: correct that field of the entry to %s, or delete it "
        "(XDEL on the event stream)",
        eid,
        type_ or "no type",
        f" {model}" if model else "",
        problems,
        wanted,
    )
