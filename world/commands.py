"""External world commands: the only way the bot, the observer or an admin changes the world.

Commands are queued in Redis (``Keys.commands``) and applied by the engine at the next world
tick, before the evolutions. Each is validated on its own: a bad one is rejected with its
reason (kept in ``Keys.rejected_commands`` and published as an event) and the rest of the tick
goes on.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from yuiju.memory.episode_data import ConversationData, PlanData
from yuiju.memory.episodes import GIFT_PREFIX, Episode
from yuiju.storage.keys import Keys
from yuiju.storage.redis import RedisClient
from yuiju.world.forgetting import forget_in_character
from yuiju.world.relations import (
    CLOSENESS_DELTAS,
    NEWS_PER_PERSON_PER_DAY,
    Appointment,
    NewsItem,
    Note,
    NoteKind,
    Party,
    Relation,
    SocialState,
    appointment_id,
    choose_start,
    keep_news,
    news_id,
    note_id,
    prune,
    prune_notes,
    pushed_away,
    review_gift,
    review_note,
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
    """An item for her: from an admin (``/give``: anything), or a gift from a person in chat
    (``by``), reviewed (`world.relations.review_gift`: small everyday things, a few a day) and
    recorded with who gave it."""

    type: Literal["give_item"] = "give_item"
    character_id: str
    item: str = Field(min_length=1, max_length=40)
    quantity: int = Field(1, ge=1, le=99)
    by: Party | None = None
    """Who gives it (a gift from chat); None: an admin's ``/give``, applied as it is."""
    via: str = Field("", max_length=80)
    """The chat conversation it came from (``group:qq:123``)."""
    lenient: bool = False
    """An admin's gift: none of the limits apply."""


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
    via: str = Field("", max_length=80)
    """The chat conversation it came from (``group:qq:123``)."""
    lenient: bool = False
    """An admin: no limit on news a day."""


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
    earliest: AwareDatetime | None = None
    """With ``latest``: a part of a day was said (明天下午), ``start`` is its usual time and she
    may meet at any other in [earliest, latest] her calendar allows (`relations.choose_start`)."""
    latest: AwareDatetime | None = None
    via: str = Field("", max_length=80)
    """The chat conversation it was made in (``group:qq:123``)."""


class Remind(_Command):
    """A reminder for her (别忘了周五考试) or something she promised someone in chat, for a day
    or a time, maybe at a place: reviewed (`relations.review_note`), kept in her state and shown
    in her decisions from the day before; the episode names who asked."""

    type: Literal["remind"] = "remind"
    character_id: str
    by: Party
    kind: NoteKind = "reminder"
    text: str = Field(min_length=1, max_length=60)
    at: AwareDatetime
    all_day: bool = False
    place: str | None = None
    via: str = Field("", max_length=80)
    lenient: bool = False
    """An admin: no limit on notes per person or in all."""


ChatTone = Literal["kind", "neutral", "unkind"]


class ChatWith(_Command):
    """She talked with a person in chat (turns she answered): her closeness to them moves
    (`relations.Relation.talked`: a little per turn, more for kind words, less for unkind ones,
    gains capped per day)."""

    type: Literal["chat_with"] = "chat_with"
    character_id: str
    by: Party
    tone: ChatTone = "neutral"
    turns: int = Field(1, ge=1, le=20)


class ForgetPerson(_Command):
    """Erase a person (or a group) from every character's state: relations, news from or about
    them, appointments, notes, today's greetings and gifts (`world.forgetting`). The memory
    worker then erases them from the history and vector stores and writes the audit entry
    (`memory.governance`); ``request_id`` names that entry, so whoever asked can wait for it."""

    type: Literal["forget_person"] = "forget_person"
    subject: Literal["user", "group"] = "user"
    id: str = Field(min_length=1, max_length=80)
    """The person (first account of a link) or group, platform-qualified."""
    ids: list[str] = Field(min_length=1, max_length=50)
    """Every id they are stored under (linked accounts, the plain QQ number of old records)."""
    names: list[str] = Field(default_factory=list, max_length=50)
    """The names they went by: news whose words name them goes too."""
    requested_by: str = Field(min_length=1, max_length=80)
    """Who asked (``admin:cli``, ``qq:777`` themselves, an admin's account): for the audit."""
    request_id: str = Field(min_length=1, max_length=80)


Command = Annotated[
    SetWeather
    | GiveItem
    | GiveMoney
    | Pause
    | Resume
    | ConsumeResource
    | TellNews
    | Invite
    | Remind
    | ChatWith
    | ForgetPerson,
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


@dataclass(frozen=True)
class _Applying:
    """What a command is applied to: the tick's working copy, and where its episodes go."""

    world: WorldState
    characters: dict[str, CharacterState]
    moment: datetime
    town: Town
    names: Mapping[str, str]
    episodes: list[dict[str, Any]] | None

    def character(self, cid: str) -> CharacterState:
        return _character(self.characters, cid)

    def name(self, cid: str) -> str:
        return self.names.get(cid, cid)

    def today(self) -> date:
        return self.moment.astimezone(self.world.time.tzinfo).date()

    def record(self, episode: Episode) -> None:
        _record(self.episodes, episode)


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
    change her life (news, invitations) add their episode documents to ``episodes``.

    One function per kind of command (a `match` on the kind: each branch sees its own type)."""
    at = _Applying(world, characters, now or world.time, town, names or {}, episodes)
    match command:
        case TellNews():
            return _tell_news(command, at)
        case Invite():
            return _invite(command, at)
        case Remind():
            return _remind(command, at)
        case ChatWith():
            return _chat_with(command, at)
        case ForgetPerson():
            return _forget_person(command, at)
        case SetWeather():
            return _set_weather(command, at)
        case GiveItem(by=None):
            at.character(command.character_id).add_item(command.item, command.quantity)
            return f"gave {command.quantity} × {command.item} to {command.character_id}"
        case GiveItem():
            return _gift(command, at)
        case GiveMoney(character_id=cid, amount=amount):
            at.character(cid).money += amount
            return f"gave {amount} coins to {cid}"
        case Pause():
            world.paused = True
            return "paused"
        case Resume():
            world.paused = False
            return "resumed"
        case ConsumeResource():
            return _consume_resource(command, at)
    raise CommandRejected(f"unsupported command {command!r}")  # pragma: no cover


def _source(by: Party) -> Literal["chat", "character"]:
    return "chat" if by.kind == "person" else "character"


def _tell_news(tell: TellNews, at: _Applying) -> str:
    cid, by, text, moment = tell.character_id, tell.by, tell.text, at.moment
    character = at.character(cid)
    told = sum(
        1
        for n in character.social.news
        if n.origin.key == by.key
        and n.hops == 0
        and n.learned_at.astimezone(at.world.time.tzinfo).date() == at.today()
    )
    if by.kind == "person" and not tell.lenient and told >= NEWS_PER_PERSON_PER_DAY:
        return f"ignored: {by.name} told {cid} {told} things today already"
    if not tell.lenient and pushed_away(by, character.social.closeness(by.key, moment)):
        return f"ignored: {cid} does not listen to {by.name}"
    eid = f"nws_{news_id(by, text)[5:]}_{cid}"
    item = NewsItem(
        id=news_id(by, text),
        text=text,
        about=tell.about,
        origin=by,
        source=by,
        learned_at=moment,
        episode_id=eid,
    )
    character.social.news = keep_news(character.social.news, item)
    at.record(
        Episode(
            id=eid,
            character_id=cid,
            type="conversation",
            time=moment,
            summary=f"{by.name}告诉{at.name(cid)}：{text}",
            data=ConversationData(
                source=_source(by),
                by=by.model_dump(),
                via=tell.via,
                news=item.model_dump(mode="json"),
            ).dump(),
        )
    )
    return f"{by.name} told {cid}: {text}"


def _invite(invite: Invite, at: _Applying) -> str:
    cid, by, moment, town = invite.character_id, invite.by, at.moment, at.town
    asked = Appointment(
        id=appointment_id(by, cid, invite.start, invite.place),
        other=by,
        asked_by=by,
        source=_source(by),
        place=invite.place,
        start=invite.start,
        minutes=invite.minutes,
        activity=invite.activity,
        via=invite.via,
        created_at=moment,
    )
    social = at.character(cid).social
    proposal, why = choose_start(
        asked,
        social.appointments,
        now=moment,
        town=town,
        earliest=invite.earliest,
        latest=invite.latest,
        closeness=social.closeness(by.key, moment),
        lenient=invite.lenient,
    )
    if why is None:
        social.appointments = prune(
            [a for a in social.appointments if a.id != proposal.id] + [proposal]
        )
        if by.kind == "person":
            _relate(social, by, moment, 0.0)
    start = proposal.start.astimezone(moment.tzinfo)
    answer = "答应了" if why is None else f"没答应：{why}"
    at.record(
        Episode(
            id=f"inv_{proposal.id[4:]}_{cid}",
            character_id=cid,
            type="plan",
            time=moment,
            summary=f"{by.name}约{at.name(cid)}{start.month}月{start.day}日{start.strftime('%H:%M')}"
            f"在{town.place_name(invite.place)}{invite.activity}，{answer}",
            data=PlanData(
                source=proposal.source,
                asked_by=by.model_dump(),
                appointment=proposal.model_dump(mode="json"),
                accepted=why is None,
                reason=why,
            ).dump(),
        )
    )
    return "accepted" if why is None else f"declined: {why}"


def _remind(remind: Remind, at: _Applying) -> str:
    cid, by, moment, town = remind.character_id, remind.by, at.moment, at.town
    social = at.character(cid).social
    note = Note(
        id=note_id(by, cid, remind.at, remind.text),
        kind=remind.kind,
        text=remind.text,
        by=by,
        at=remind.at,
        all_day=remind.all_day,
        place=remind.place,
        via=remind.via,
        created_at=moment,
    )
    why = review_note(
        note,
        social.notes,
        now=moment,
        town=town,
        closeness=social.closeness(by.key, moment),
        lenient=remind.lenient,
    )
    if why is None:
        social.notes = prune_notes([n for n in social.notes if n.id != note.id] + [note])
    name = at.name(cid)
    local = remind.at.astimezone(moment.tzinfo)
    when = f"{local.month}月{local.day}日" + ("" if remind.all_day else f"{local:%H:%M}")
    where = f"在{town.place_name(remind.place)}" if remind.place else ""
    did = (
        f"{by.name}提醒{name}{when}{where}：{remind.text}"
        if remind.kind == "reminder"
        else f"{name}答应{by.name}{when}{where}：{remind.text}"
    )
    answer = "记下了" if why is None else f"没记下：{why}"
    at.record(
        Episode(
            id=f"rem_{note.id[5:]}_{cid}",
            character_id=cid,
            type="plan",
            time=moment,
            summary=f"{did}，{answer}",
            data=PlanData(
                source=_source(by),
                asked_by=by.model_dump(),
                note=note.model_dump(mode="json"),
                accepted=why is None,
                reason=why,
                via=remind.via,
            ).dump(),
        )
    )
    return "noted" if why is None else f"declined: {why}"


def _chat_with(chat: ChatWith, at: _Applying) -> str:
    tone_delta = {
        "kind": CLOSENESS_DELTAS["kind_words"],
        "unkind": CLOSENESS_DELTAS["unkind_words"],
        "neutral": 0.0,
    }[chat.tone]
    delta = CLOSENESS_DELTAS["chat_turn"] * chat.turns + tone_delta
    social = at.character(chat.character_id).social
    relation = _relation(social, chat.by).talked(at.moment, delta, chat.turns)
    social.relations = {**social.relations, chat.by.key: relation}
    return f"{chat.character_id} talked with {chat.by.name} ({chat.tone})"


def _forget_person(forget: ForgetPerson, at: _Applying) -> str:
    counts: Counter[str] = Counter()
    for character in at.characters.values():
        counts += forget_in_character(character, forget.subject, set(forget.ids), forget.names)
    return json.dumps({"forgot": forget.request_id, "state": dict(counts)}, separators=(",", ":"))


def _set_weather(command: SetWeather, at: _Applying) -> str:
    world = at.world
    if world.weather is None:
        raise CommandRejected("the world has no weather yet; retry after the first tick")
    world.weather = Weather(
        type=command.weather,
        temperature=command.temperature or world.weather.temperature,
        period_start=world.weather.period_start,
    )
    return f"weather set to {command.weather}"


def _gift(gift: GiveItem, at: _Applying) -> str:
    """A gift from someone: she reviews it, and her record says so either way."""
    cid, item, qty, by, moment = gift.character_id, gift.item, gift.quantity, gift.by, at.moment
    assert by is not None
    character = at.character(cid)
    social = character.social
    social.roll_day(at.today())
    why = review_gift(
        item,
        qty,
        by,
        social.gifts_today,
        closeness=social.closeness(by.key, moment),
        lenient=gift.lenient,
    )
    if why is None:
        character.add_item(item, qty)
        social.gifts_today = [*social.gifts_today, by.key]
        _relate(social, by, moment, CLOSENESS_DELTAS["gift"])
    answer = "收下了" if why is None else f"没收下：{why}"
    gid = hashlib.sha1(f"{by.key}|{cid}|{moment.isoformat()}|{item}".encode()).hexdigest()
    at.record(
        Episode(
            id=f"{GIFT_PREFIX}{gid[:16]}",
            character_id=cid,
            type="conversation",
            time=moment,
            summary=f"{by.name}送给{at.name(cid)}{item}×{qty}，{answer}",
            data=ConversationData(
                source=_source(by),
                by=by.model_dump(),
                gift={"item": item, "quantity": qty},
                accepted=why is None,
                reason=why,
                via=gift.via,
            ).dump(),
        )
    )
    return f"gave {qty} × {item} to {cid}" if why is None else f"declined: {why}"


def _consume_resource(command: ConsumeResource, at: _Applying) -> str:
    place, resource, amount = command.place, command.resource, command.amount
    state = at.world.places.get(place)
    available = state.resources.get(resource, 0) if state else 0
    if amount > available:
        raise CommandRejected(f"{place!r} has {available} × {resource!r}, cannot consume {amount}")
    assert state is not None
    state.resources = {**state.resources, resource: available - amount}
    return f"consumed {amount} × {resource} at {place}"


def _relation(social: SocialState, party: Party) -> Relation:
    """Her relation to ``party`` (a new one, where a stranger rests, the first time), under the
    name they go by now."""
    relation = social.relations.get(party.key) or Relation(party=party)
    if relation.party != party:
        relation = relation.model_copy(update={"party": party})
    return relation


def _relate(social: SocialState, party: Party, now: datetime, delta: float) -> None:
    social.relations = {**social.relations, party.key: _relation(social, party).moved(now, delta)}


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


async def queued_commands(redis: RedisClient, keys: Keys) -> list[Command]:
    """The commands waiting for the next tick, in order (a malformed one is left out here; the
    tick rejects it with its reason)."""
    out = []
    for raw in await redis.lrange(keys.commands, 0, -1):
        try:
            out.append(parse_command(raw.decode() if isinstance(raw, bytes) else raw))
        except CommandRejected:
            continue
    return out


Proposal = TellNews | Invite | Remind | GiveItem


def proposal_line(command: Command, names: Mapping[str, str], town: Town = HAURA) -> str | None:
    """A proposal from someone (an invitation, a reminder or promise, a gift, news) as one
    Chinese line, for a command not applied yet (`yuiju status`, the chat's context); None for
    any other command."""

    def day(moment: datetime) -> str:
        return f"{moment.month}月{moment.day}日"

    match command:
        case Invite(character_id=cid, by=by) as c:
            when = day(c.start) + (
                f"{c.earliest:%H:%M}–{c.latest:%H:%M}间"
                if c.earliest is not None and c.latest is not None
                else f"{c.start:%H:%M}"
            )
            return f"{by.name}约{names.get(cid, cid)}{when}在{town.place_name(c.place)}{c.activity}"
        case Remind(character_id=cid, by=by) as c:
            when = day(c.at) + ("" if c.all_day else f"{c.at:%H:%M}")
            where = f"在{town.place_name(c.place)}" if c.place else ""
            if c.kind == "reminder":
                return f"{by.name}提醒{names.get(cid, cid)}{when}{where}：{c.text}"
            return f"{names.get(cid, cid)}答应{by.name}{when}{where}：{c.text}"
        case GiveItem(character_id=cid, by=Party() as by) as c:
            return f"{by.name}送给{names.get(cid, cid)}{c.item}×{c.quantity}"
        case TellNews(character_id=cid, by=by, text=text):
            return f"{by.name}告诉{names.get(cid, cid)}：{text}"
    return None


def pending_view(commands: list[Command], names: Mapping[str, str]) -> list[dict[str, Any]]:
    """The proposals among queued ``commands``, as plain data: what, for whom, who asked, the
    line."""
    out = []
    for c in commands:
        line = proposal_line(c, names)
        if line is None or not isinstance(c, Proposal):
            continue
        by = c.by
        out.append(
            {
                "type": c.type,
                "character_id": c.character_id,
                "by": by.model_dump() if by is not None else None,
                "source": "chat" if by is not None and by.kind == "person" else "admin",
                "line": line,
                "status": "queued",
            }
        )
    return out
