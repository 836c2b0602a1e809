"""External world commands: the only way the bot, the observer or an admin changes the world.

Commands are queued in Redis (``Keys.commands``) and applied by the engine at the next world
tick, before the evolutions. Each is validated on its own: a bad one is rejected with its
reason (kept in ``Keys.rejected_commands`` and published as an event) and the rest of the tick
goes on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from yuiju.memory.episodes import Episode
from yuiju.storage.keys import Keys
from yuiju.storage.redis import RedisClient
from yuiju.world.relations import (
    Appointment,
    NewsItem,
    Party,
    appointment_id,
    keep_news,
    news_id,
    prune,
    review_invitation,
)
from yuiju.world.state import CharacterState, TemperatureLevel, Weather, WeatherType, WorldState
from yuiju.world.town import HAURA, Town


class _Command(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class SetWeather(_Command):
    type: Literal["set_weather"] = "set_weather"
    weather: WeatherType
    temperature: TemperatureLevel | None = None
    """Keep the current temperature when omitted."""


class GiveItem(_Command):
    type: Literal["give_item"] = "give_item"
    character_id: str
    item: str = Field(min_length=1, max_length=40)
    quantity: int = Field(1, ge=1, le=99)


class GiveMoney(_Command):
    type: Literal["give_money"] = "give_money"
    character_id: str
    amount: int = Field(ge=1, le=100_000)


class Pause(_Command):
    type: Literal["pause"] = "pause"


class Resume(_Command):
    type: Literal["resume"] = "resume"


class ConsumeResource(_Command):
    type: Literal["consume_resource"] = "consume_resource"
    place: str
    resource: str
    amount: int = Field(ge=1)


class TellNews(_Command):
    """Someone (a person in chat, usually) tells her something she may pass on."""

    type: Literal["tell_news"] = "tell_news"
    character_id: str
    by: Party
    """Who told her (``{"kind": "person", "id": "qq:123", "name": "小林"}``)."""
    text: str = Field(min_length=1, max_length=120)
    """What it says, as she would repeat it ("小林下周要搬家")."""
    about: Party | None = None
    """Whom it is about, if someone (she does not tell them their own news)."""


class Invite(_Command):
    """An invitation to a place and a time, reviewed against her calendar, opening hours and her
    other plans (`world.relations.review_invitation`) and applied or declined; the episode names
    who asked. The chat side proposes these for a person; characters invite each other in person
    (``actions/social.py``) through the same review."""

    type: Literal["invite"] = "invite"
    character_id: str
    by: Party
    place: str
    """Place id (``park``)."""
    start: AwareDatetime
    minutes: int = Field(60, ge=10, le=240)
    activity: str = Field("", max_length=40)
    """What they would do, in Chinese (一起散步)."""
    lenient: bool = False
    """An admin's invitation: the per-person and per-day limits do not apply."""


Command = Annotated[
    SetWeather | GiveItem | GiveMoney | Pause | Resume | ConsumeResource | TellNews | Invite,
    Field(discriminator="type"),
]
COMMAND: TypeAdapter[Command] = TypeAdapter(Command)


class CommandRejected(Exception):
    """The command is valid JSON but cannot be applied; the message says why."""


def parse_command(raw: str | dict[str, Any]) -> Command:
    """Validate a command; raises `CommandRejected` with a readable reason."""
    try:
        if isinstance(raw, str):
            return COMMAND.validate_json(raw)
        return COMMAND.validate_python(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}"
            for e in exc.errors(include_url=False)
        )
        raise CommandRejected(f"invalid command: {problems}") from None


def apply_command(
    command: Command,
    world: WorldState,
    characters: dict[str, CharacterState],
    *,
    now: datetime | None = None,
    town: Town = HAURA,
    names: Mapping[str, str] | None = None,
    episodes: list[dict[str, Any]] | None = None,
) -> str:
    """Apply one command to the tick's working copy; returns a short description. Commands that
    change her life (news, invitations) add their episode documents to ``episodes``."""
    moment = now or world.time
    match command:
        case TellNews(character_id=cid, by=by, text=text, about=about):
            character = _character(characters, cid)
            eid = f"nws_{news_id(by, text)[5:]}_{cid}"
            item = NewsItem(
                id=news_id(by, text),
                text=text,
                about=about,
                origin=by,
                source=by,
                learned_at=moment,
                episode_id=eid,
            )
            character.social.news = keep_news(character.social.news, item)
            name = (names or {}).get(cid, cid)
            _record(
                episodes,
                Episode(
                    id=eid,
                    character_id=cid,
                    type="conversation",
                    time=moment,
                    summary=f"{by.name}告诉{name}：{text}",
                    data={
                        "source": "chat" if by.kind == "person" else "character",
                        "by": by.model_dump(),
                        "news": item.model_dump(mode="json"),
                    },
                ),
            )
            return f"{by.name} told {cid}: {text}"
        case Invite(character_id=cid, by=by) as invite:
            character = _character(characters, cid)
            proposal = Appointment(
                id=appointment_id(by, cid, invite.start, invite.place),
                other=by,
                asked_by=by,
                source="chat" if by.kind == "person" else "character",
                place=invite.place,
                start=invite.start,
                minutes=invite.minutes,
                activity=invite.activity,
                created_at=moment,
            )
            social = character.social
            closeness = social.closeness(by.key, moment) if by.kind == "character" else None
            why = review_invitation(
                proposal,
                social.appointments,
                now=moment,
                town=town,
                closeness=closeness,
                lenient=invite.lenient,
            )
            if why is None:
                social.appointments = prune(
                    [a for a in social.appointments if a.id != proposal.id] + [proposal]
                )
            name = (names or {}).get(cid, cid)
            start = invite.start.astimezone(moment.tzinfo)
            answer = "答应了" if why is None else f"没答应：{why}"
            _record(
                episodes,
                Episode(
                    id=f"inv_{proposal.id[4:]}_{cid}",
                    character_id=cid,
                    type="plan",
                    time=moment,
                    summary=f"{by.name}约{name}{start.month}月{start.day}日{start.strftime('%H:%M')}"
                    f"在{town.place_name(invite.place)}{invite.activity}，{answer}",
                    data={
                        "source": proposal.source,
                        "asked_by": by.model_dump(),
                        "appointment": proposal.model_dump(mode="json"),
                        "accepted": why is None,
                        "reason": why,
                    },
                ),
            )
            return "accepted" if why is None else f"declined: {why}"
        case SetWeather(weather=kind, temperature=temp):
            if world.weather is None:
                raise CommandRejected("the world has no weather yet; retry after the first tick")
            world.weather = Weather(
                type=kind,
                temperature=temp or world.weather.temperature,
                period_start=world.weather.period_start,
            )
            return f"weather set to {kind}"
        case GiveItem(character_id=cid, item=item, quantity=qty):
            _character(characters, cid).add_item(item, qty)
            return f"gave {qty} × {item} to {cid}"
        case GiveMoney(character_id=cid, amount=amount):
            character = _character(characters, cid)
            character.money += amount
            return f"gave {amount} coins to {cid}"
        case Pause():
            world.paused = True
            return "paused"
        case Resume():
            world.paused = False
            return "resumed"
        case ConsumeResource(place=place, resource=resource, amount=amount):
            state = world.places.get(place)
            available = state.resources.get(resource, 0) if state else 0
            if amount > available:
                raise CommandRejected(
                    f"{place!r} has {available} × {resource!r}, cannot consume {amount}"
                )
            assert state is not None
            state.resources = {**state.resources, resource: available - amount}
            return f"consumed {amount} × {resource} at {place}"
    raise CommandRejected(f"unsupported command {command!r}")  # pragma: no cover


def _record(episodes: list[dict[str, Any]] | None, episode: Episode) -> None:
    if episodes is not None:
        episodes.append({"collection": "episodes", "doc": episode.document()})


def _character(characters: dict[str, CharacterState], cid: str) -> CharacterState:
    if cid not in characters:
        raise CommandRejected(
            f"unknown character {cid!r}; known: {sorted(characters)} (see [world].characters)"
        )
    return characters[cid]


async def enqueue_command(
    redis: RedisClient, keys: Keys, command: dict[str, Any] | Command
) -> Command:
    """Validate and queue a command for the next tick. Raises `CommandRejected` if malformed."""
    parsed = parse_command(command) if isinstance(command, dict) else command
    await redis.rpush(keys.commands, json.dumps(parsed.model_dump(mode="json"), ensure_ascii=False))
    return parsed
