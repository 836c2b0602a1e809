"""External world commands: the only way the bot, the observer or an admin changes the world.

Commands are queued in Redis (``Keys.commands``) and applied by the engine at the next world
tick, before the evolutions. Each is validated on its own: a bad one is rejected with its
reason (kept in ``Keys.rejected_commands`` and published as an event) and the rest of the tick
goes on.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from redis.asyncio import Redis

from yuiju.storage.keys import Keys
from yuiju.world.state import CharacterState, TemperatureLevel, Weather, WeatherType, WorldState


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


Command = Annotated[
    SetWeather | GiveItem | GiveMoney | Pause | Resume | ConsumeResource,
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
    command: Command, world: WorldState, characters: dict[str, CharacterState]
) -> str:
    """Apply one command to the tick's working copy; returns a short description."""
    match command:
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


def _character(characters: dict[str, CharacterState], cid: str) -> CharacterState:
    if cid not in characters:
        raise CommandRejected(
            f"unknown character {cid!r}; known: {sorted(characters)} (see [world].characters)"
        )
    return characters[cid]


async def enqueue_command(redis: Redis, keys: Keys, command: dict[str, Any] | Command) -> Command:
    """Validate and queue a command for the next tick. Raises `CommandRejected` if malformed."""
    parsed = parse_command(command) if isinstance(command, dict) else command
    await redis.rpush(keys.commands, json.dumps(parsed.model_dump(), ensure_ascii=False))
    return parsed
