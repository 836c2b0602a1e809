"""Who she knows and what she knows about them: parties, closeness, news and appointments.

Plain validated data that lives inside each character's state (`CharacterState.social`), so a
meeting changes both sides in the one atomic write that starts it, and pure functions over it:

- `Party`: someone she can know, a character of her town (``character:kaede``) or a person from
  chat (``person:qq:123``); relations, news sources and appointments all name one.
- `Relation`: her closeness to one party, 0–100, moved by what happens between them and decaying
  slowly back to where it rests (`Relation.closeness_at`: a pure function of time, so nothing has
  to rewrite it every tick).
- `NewsItem`: something she was told, with who said it first (``origin``), who told her
  (``source``), when, and the episode where she heard it: 枫 can say "悠酱说你要搬家了" because
  her conversation episode with 悠酱 records it.
- `Appointment`: a meeting planned for a place and a time, with who asked. An invitation from
  another character and one from a person in chat are the same thing, reviewed by the same
  `review_invitation` (her calendar, opening hours, school, the night, her other plans, limits
  per inviter and per day) before the world applies it.
- `Note`: a reminder someone gave her (别忘了周五考试) or something she promised, for a day or a
  time, maybe at a place; she sees it in her decisions from the day before (`review_note`).
- Gifts from chat (`review_gift`): small everyday things, a few a day.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from yuiju.memory.episode_data import PlanData
from yuiju.memory.episodes import Episode
from yuiju.world.clock import in_window, is_school_day
from yuiju.world.town import Town


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, use_attribute_docstrings=True
    )


PartyKind = Literal["character", "person"]


class Party(_Model):
    kind: PartyKind = "character"
    id: str = Field(min_length=1, max_length=80)
    """A character id (``kaede``), or a platform-qualified person id (``qq:123``)."""
    name: str = Field(min_length=1, max_length=40)
    """How she calls them (枫, 小林)."""

    @property
    def key(self) -> str:
        """The key of her relation to them: ``character:kaede``, ``person:qq:123``."""
        return f"{self.kind}:{self.id}"


def character_party(character_id: str, name: str) -> Party:
    return Party(kind="character", id=character_id, name=name)


# -- closeness ------------------------------------------------------------------------------

DEFAULT_CLOSENESS = 10.0
"""Where a relation to someone of her town starts and rests when the card names no other value:
they know each other by sight."""
HALF_LIFE_DAYS = 14.0
"""Closeness above (or below) where it rests halves its distance to it in this many days."""

CLOSENESS_DELTAS: dict[str, float] = {
    "greet": 0.5,
    "chat": 2.0,
    "together": 2.5,
    "invite": 1.0,
    "invite_accepted": 1.0,
    "invite_declined": -1.0,
    "appointment_kept": 3.0,
    "appointment_missed": -4.0,
    "chat_turn": 0.5,
    "kind_words": 1.0,
    "unkind_words": -2.0,
    "gift": 1.0,
}
"""How much each kind of thing that happens between two of them moves closeness (both sides);
a gain shrinks as closeness nears 100 (`Relation.moved`). With a person in chat: each turn she
answers (``chat_turn``), kind or unkind words in it, a gift, an appointment kept or missed."""
CHAT_GAIN_PER_DAY = 3.0
"""What talking in chat can add to her closeness to one person in a day, at most: a stranger
becomes someone she knows (20) in a few days of talking, not in an hour of flattery. Losses are
not capped."""

BANDS = ((20, "不太熟"), (40, "认识"), (60, "朋友"), (80, "好朋友"), (101, "最好的朋友"))
"""Closeness as the model and the observer read it."""


def band(closeness: float) -> str:
    return next(name for limit, name in BANDS if closeness < limit)


class Relation(_Model):
    party: Party
    closeness: float = Field(DEFAULT_CLOSENESS, ge=0, le=100)
    """As of ``as_of``; read it through `closeness_at` (it decays after)."""
    rest: float = Field(DEFAULT_CLOSENESS, ge=0, le=100)
    """Where closeness decays to: the card's value for someone she knew from the start."""
    as_of: AwareDatetime | None = None
    meetings: int = Field(0, ge=0)
    """Meetings with them, ever."""
    last_met: AwareDatetime | None = None
    chat_day: date | None = None
    """The local day ``chat_gain`` counts (a person in chat)."""
    chat_gain: float = Field(0, ge=0)
    """What chat added on ``chat_day`` (at most `CHAT_GAIN_PER_DAY`)."""
    talks: int = Field(0, ge=0)
    """Chat turns with them she answered, ever (a person in chat)."""

    def closeness_at(self, now: datetime) -> float:
        """Closeness at ``now``: its distance to ``rest`` halves every `HALF_LIFE_DAYS`."""
        if self.as_of is None or now <= self.as_of:
            return self.closeness
        days = (now - self.as_of).total_seconds() / 86400
        return self.rest + (self.closeness - self.rest) * math.pow(0.5, days / HALF_LIFE_DAYS)

    def moved(self, now: datetime, delta: float, *, met: bool = False) -> Relation:
        """This relation after ``delta`` at ``now`` (decayed up to now first; clamped to 0–100).
        A gain is full up to 50 and shrinks above it (half at 75): good friends are not made
        in a week of lunches."""
        current = self.closeness_at(now)
        if delta > 0:
            delta *= min(1.0, (100 - current) / 50)
        value = min(100.0, max(0.0, current + delta))
        return self.model_copy(
            update={
                "closeness": round(value, 3),
                "as_of": now,
                "meetings": self.meetings + (1 if met else 0),
                "last_met": now if met else self.last_met,
            }
        )

    def talked(self, now: datetime, delta: float, turns: int = 1) -> Relation:
        """This relation after ``turns`` chat turns worth ``delta`` at ``now``: a gain counts up
        to what is left of today's `CHAT_GAIN_PER_DAY`."""
        today = now.date()
        used = self.chat_gain if self.chat_day == today else 0.0
        if delta > 0:
            delta = min(delta, max(0.0, CHAT_GAIN_PER_DAY - used))
        moved = self.moved(now, delta)
        return moved.model_copy(
            update={
                "chat_day": today,
                "chat_gain": round(used + max(0.0, delta), 3),
                "talks": self.talks + turns,
            }
        )


# -- news -----------------------------------------------------------------------------------

NEWS_FRESH_DAYS = 14
"""News older than this (since she heard it) is no longer passed on."""
NEWS_KEPT = 20
"""News items a character keeps; the oldest goes first."""
NEWS_PER_CONVERSATION = 1
"""Items each side tells in one conversation at most (the freshest the other does not know)."""
NEWS_PER_PERSON_PER_DAY = 3
"""News one person in chat can tell her in a day (what she passes on is hers to choose, and a
chat cannot fill her town with rumours)."""


def news_id(origin: Party, text: str) -> str:
    """Stable per origin and text, so the same news told along two paths is one item."""
    return "news_" + hashlib.sha1(f"{origin.key}|{text}".encode()).hexdigest()[:12]


class NewsItem(_Model):
    id: str
    text: str = Field(min_length=1, max_length=120)
    """What it says, as she would repeat it, in Chinese ("小林下周要搬家")."""
    about: Party | None = None
    """Whom it is about, if someone (she does not tell someone news about themselves)."""
    origin: Party
    """Who said it first (a person in chat, a character)."""
    source: Party
    """Who told her (the origin, or whoever passed it on)."""
    learned_at: AwareDatetime
    episode_id: str | None = None
    """Her episode in which she heard it (a conversation; None when told through a command)."""
    hops: int = Field(0, ge=0)
    """How many tellings from the origin to her (0: the origin told her)."""

    def told_by_line(self) -> str:
        """How she says where she has it from (听悠酱说 / 小林说)."""
        return f"{self.source.name}说" if self.hops == 0 else f"听{self.source.name}说"


def fresh_news(news: Sequence[NewsItem], now: datetime) -> list[NewsItem]:
    """The items she would still pass on, freshest first."""
    limit = now - timedelta(days=NEWS_FRESH_DAYS)
    return sorted(
        (n for n in news if n.learned_at >= limit), key=lambda n: n.learned_at, reverse=True
    )


def news_to_tell(
    teller: Sequence[NewsItem], listener: Sequence[NewsItem], listener_key: str, now: datetime
) -> list[NewsItem]:
    """What the teller passes on to the listener in one conversation: the freshest items the
    listener does not know yet, none about the listener, none the listener told her."""
    known = {n.id for n in listener}
    return [
        n
        for n in fresh_news(teller, now)
        if n.id not in known
        and (n.about is None or n.about.key != listener_key)
        and n.source.key != listener_key
    ][:NEWS_PER_CONVERSATION]


def heard(item: NewsItem, teller: Party, now: datetime, episode_id: str | None) -> NewsItem:
    """The listener's copy of ``item`` told by ``teller``."""
    return item.model_copy(
        update={
            "source": teller,
            "learned_at": now,
            "episode_id": episode_id,
            "hops": item.hops + 1,
        }
    )


def keep_news(news: Sequence[NewsItem], *new: NewsItem) -> list[NewsItem]:
    """Her news with ``new`` added (an item she already has stays as she first heard it)."""
    known = {n.id for n in news}
    out = [*news, *(n for n in new if n.id not in known)]
    return out[-NEWS_KEPT:]


# -- appointments ---------------------------------------------------------------------------


def day_word(day: date, today: date) -> str:
    """今天 / 明天 / 后天, or 9月12日."""
    return {0: "今天", 1: "明天", 2: "后天"}.get((day - today).days, f"{day.month}月{day.day}日")


AppointmentStatus = Literal["planned", "kept", "missed", "cancelled"]

EARLY_MINUTES = 30
"""A meeting this long before an appointment's start still keeps it."""
SET_OFF_MINUTES = 45
"""Minutes before an appointment elsewhere she must be free to set off (no link in town takes
longer): nothing she starts elsewhere runs past it (`world.action.Action.room`)."""
MIN_LEAD_MINUTES = 30
"""An invitation must leave her this long to get there."""
MAX_AHEAD_DAYS = 7
MAX_PLANNED = 5
"""Appointments she keeps planned at most."""
MAX_PER_INVITER = 2
"""Planned appointments one inviter may have with her at once (a stranger cannot fill her week)."""
MAX_PER_DAY = 2
"""Appointments on one day at most."""
CLEARANCE_MINUTES = 90
"""Two appointments must start this far apart."""
AWAKE_WINDOW = ("08:00", "21:00")
"""Appointments start within this window (she sleeps, gets ready, eats breakfast outside it)."""
NIGHT_WINDOW = ("22:00", "06:00")
"""She is asleep then: an invitation for the night is declined for that reason."""
SCHOOL_WINDOW = ("07:30", "16:30")
"""Class time on school days: no appointments then."""
MIN_CLOSENESS_TO_ACCEPT = 20.0
"""A character accepts another's invitation only from someone she knows at least this well."""
MIN_CLOSENESS_PERSON = 5.0
"""A person in chat starts as a stranger (`DEFAULT_CLOSENESS`, 10) whose invitation she may
accept, within the per-person limits; below this (unkind words, appointments gone wrong) she
declines whatever they ask."""
FRIEND_CLOSENESS = 40.0
"""From here (朋友) a person in chat may have `FRIEND_PER_INVITER` appointments with her at once."""
FRIEND_PER_INVITER = 3
KEPT_APPOINTMENTS = 10
"""Past appointments (kept, missed) kept in her state for the record; the oldest goes first."""


def appointment_id(asked_by: Party, invitee: str, start: datetime, place: str) -> str:
    key = f"{asked_by.key}|{invitee}|{start.isoformat()}|{place}"
    return "apt_" + hashlib.sha1(key.encode()).hexdigest()[:12]


class Appointment(_Model):
    id: str
    other: Party
    """Whom she meets (for the invitee: the inviter; for the inviter: the invitee)."""
    asked_by: Party
    """Who proposed it (a character, or a person in chat)."""
    source: Literal["character", "chat"] = "character"
    """Where the invitation came from: another character's conversation, or chat."""
    place: str
    """Place id where they meet."""
    start: AwareDatetime
    minutes: int = Field(60, ge=10, le=240)
    activity: str = Field("", max_length=40)
    """What they mean to do there, in Chinese (一起散步)."""
    via: str = Field("", max_length=80)
    """For an invitation from chat, the conversation it was made in (``group:qq:123``): where
    she may tell them how it went."""
    status: AppointmentStatus = "planned"
    created_at: AwareDatetime
    note: str = Field("", max_length=120)
    """How it ended (kept: the meeting's episode; missed: where she was instead)."""
    there_from: AwareDatetime | None = None
    """When she was at the place within its window, first and last (`note_presence`): there
    with the other at the same time keeps it, meeting or not (`settle_over`)."""
    there_until: AwareDatetime | None = None
    was_at: str = Field("", max_length=40)
    """Where she was at its start, as the record says it (薄暮咖啡, 去南风公园的路上)."""

    @property
    def end(self) -> datetime:
        return self.start + timedelta(minutes=self.minutes)

    @property
    def opens(self) -> datetime:
        """From when being there with the other keeps it."""
        return self.start - timedelta(minutes=EARLY_MINUTES)

    def keeps(self, now: datetime, place: str, other_key: str) -> bool:
        """Whether meeting ``other_key`` at ``place`` at ``now`` keeps this appointment."""
        return (
            self.status == "planned"
            and place == self.place
            and other_key == self.other.key
            and self.opens <= now <= self.end
        )

    def due(self, now: datetime, lead_minutes: int = 60) -> bool:
        """Planned, and time to go there or be there (from ``lead_minutes`` before the start)."""
        return self.status == "planned" and (
            self.start - timedelta(minutes=lead_minutes) <= now <= self.end
        )

    def line(self, town: Town, now: datetime) -> str:
        """One Chinese line for prompts and status: 明天 15:00 和枫在南风公园一起散步（枫约的）."""
        day = day_word(self.start.date(), now.date())
        who = "我约的" if self.asked_by.key != self.other.key else f"{self.asked_by.name}约的"
        return (
            f"{day} {self.start.strftime('%H:%M')} 和{self.other.name}在{town.place_name(self.place)}"
            f"{self.activity}（{who}）"
        )


def review_invitation(
    proposal: Appointment,
    planned: Sequence[Appointment],
    *,
    now: datetime,
    town: Town,
    closeness: float | None = None,
    lenient: bool = False,
) -> str | None:
    """Why she declines ``proposal`` given her ``planned`` appointments (a Chinese sentence the
    inviter reads), or None if she accepts.

    ``closeness`` is hers to the inviter (a character's invitation needs
    `MIN_CLOSENESS_TO_ACCEPT`, a person's `MIN_CLOSENESS_PERSON`, and a person she counts as a
    friend may have more appointments at once: `inviter_limit`); ``lenient`` (an admin in chat)
    lifts the per-inviter and per-day limits, never the calendar, the opening hours or the
    clock."""
    if proposal.asked_by.kind == "person":
        if why := pushed_away(proposal.asked_by, closeness):
            return why  # whoever asks comes first: no time would do
    elif closeness is not None and closeness < MIN_CLOSENESS_TO_ACCEPT:
        return f"和{proposal.asked_by.name}还不太熟"
    start = proposal.start
    place = town.places.get(proposal.place)
    if place is None:
        return f"羽浦町没有「{proposal.place}」这个地方"
    if place.private:
        return f"{place.name}不方便见面"
    if start <= now:
        return "那个时间已经过去了"
    if start < now + timedelta(minutes=MIN_LEAD_MINUTES):
        return "时间太赶了，来不及过去"
    if start > now + timedelta(days=MAX_AHEAD_DAYS):
        return "太久以后的事情，现在还定不下来"
    if in_window(start, *NIGHT_WINDOW):
        return f"那时候在睡觉（约在 {AWAKE_WINDOW[0]}–{AWAKE_WINDOW[1]} 之间吧）"
    if not in_window(start, *AWAKE_WINDOW):
        return f"那个时间不方便出门（约在 {AWAKE_WINDOW[0]}–{AWAKE_WINDOW[1]} 之间吧）"
    if is_school_day(start.date()) and in_window(start, *SCHOOL_WINDOW):
        return "那时候要上课"
    if place.hours is not None and not (
        in_window(start, *place.hours)
        and in_window(proposal.end - timedelta(minutes=1), *place.hours)
    ):
        return f"{place.name}那时候不开门（营业 {place.hours[0]}–{place.hours[1]}）"
    ahead = [a for a in planned if a.status == "planned"]
    for other in ahead:
        if abs((other.start - start).total_seconds()) < CLEARANCE_MINUTES * 60:
            return f"那时候已经和{other.other.name}约好了"
    if lenient:
        return None
    if len(ahead) >= MAX_PLANNED:
        return "最近已经约了好多事，排不下了"
    limit = inviter_limit(proposal.asked_by.kind, closeness)
    if sum(1 for a in ahead if a.asked_by.key == proposal.asked_by.key) >= limit:
        return f"已经答应{proposal.asked_by.name}好几件事了，先把这些做完"
    if sum(1 for a in ahead if a.start.date() == start.date()) >= MAX_PER_DAY:
        return "那天已经有别的约了"
    return None


def inviter_limit(kind: PartyKind, closeness: float | None) -> int:
    """Appointments one inviter may have planned with her at once: `MAX_PER_INVITER`, and for a
    person in chat she counts as a friend, `FRIEND_PER_INVITER`."""
    if kind == "person" and closeness is not None and closeness >= FRIEND_CLOSENESS:
        return FRIEND_PER_INVITER
    return MAX_PER_INVITER


FLEXIBLE_STEP_MINUTES = 30


def choose_start(
    proposal: Appointment,
    planned: Sequence[Appointment],
    *,
    now: datetime,
    town: Town,
    earliest: datetime | None = None,
    latest: datetime | None = None,
    closeness: float | None = None,
    lenient: bool = False,
) -> tuple[Appointment, str | None]:
    """An invitation for a part of a day (明天下午: usually 15:00, any time 13:00–18:00): the
    start nearest the usual one in [``earliest``, ``latest``] that `review_invitation` accepts
    (after class on a school day), every `FLEXIBLE_STEP_MINUTES`; without a window, ``proposal``
    as it is. Returns the proposal with the start chosen, and None, or the proposal as asked and
    why she declines it."""
    why = review_invitation(
        proposal, planned, now=now, town=town, closeness=closeness, lenient=lenient
    )
    if why is None or earliest is None or latest is None:
        return proposal, why
    step = timedelta(minutes=FLEXIBLE_STEP_MINUTES)
    starts: list[datetime] = []
    moment = earliest
    while moment <= latest:
        if moment != proposal.start:
            starts.append(moment)
        moment += step
    for start in sorted(starts, key=lambda s: (abs(s - proposal.start), s)):
        moved = proposal.model_copy(update={"start": start})
        if (
            review_invitation(
                moved, planned, now=now, town=town, closeness=closeness, lenient=lenient
            )
            is None
        ):
            return moved, None
    return proposal, why


def note_presence(
    appointments: Sequence[Appointment],
    *,
    place: str,
    since: datetime,
    until: datetime,
    town: Town,
    moving_to: str | None = None,
) -> list[Appointment]:
    """Her planned appointments as she starts something at ``place`` from ``since`` to
    ``until`` (on the way to ``moving_to`` for a movement): when it puts her at an
    appointment's place within its window, that time is noted (``there_from``/``there_until``),
    and when it covers an appointment's start, where she was then (``was_at``)."""
    out = []
    for a in appointments:
        if a.status == "planned" and since < a.end:
            update: dict[str, object] = {}
            if moving_to is None and place == a.place and until >= a.opens:
                first, last = max(since, a.opens), min(until, a.end)
                update["there_from"] = min(first, a.there_from or first)
                update["there_until"] = max(last, a.there_until or last)
            if since <= a.start < until:
                update["was_at"] = (
                    f"去{town.place_name(moving_to)}的路上"
                    if moving_to is not None
                    else town.place_name(place)
                )[:40]
            a = a.model_copy(update=update) if update else a
        out.append(a)
    return out


def _together_there(mine: Appointment, theirs: Appointment | None) -> bool:
    """Both copies of one appointment say they were at its place at the same time in its window."""
    if theirs is None:
        return False
    a, b = (mine.there_from, mine.there_until), (theirs.there_from, theirs.there_until)
    if a[0] is None or a[1] is None or b[0] is None or b[1] is None:
        return False
    return max(a[0], b[0]) <= min(a[1], b[1])


def settle_over(
    appointments: Sequence[Appointment],
    now: datetime,
    where: str,
    others: Mapping[str, Sequence[Appointment]] | None = None,
) -> tuple[list[Appointment], list[Appointment]]:
    """Her appointments with every planned one whose time has passed settled; and those. Kept
    when the other's copy (``others``: each party key's appointments, as read from them) and
    hers say both were at the place at the same time in its window, though they did not meet
    (a meeting keeps it at once: `world.social.apply_meeting`); missed otherwise, with where
    she was at its start (``where``, where she is now, when her record does not say)."""
    out: list[Appointment] = []
    settled: list[Appointment] = []
    for a in appointments:
        if a.status == "planned" and now > a.end:
            theirs = next((x for x in (others or {}).get(a.other.key, ()) if x.id == a.id), None)
            if _together_there(a, theirs):
                assert a.there_from is not None
                a = a.model_copy(
                    update={"status": "kept", "note": f"{a.there_from:%H:%M}起两人都在那里"}
                )
            else:
                a = a.model_copy(
                    update={"status": "missed", "note": f"那时她在{a.was_at or where}"}
                )
            settled.append(a)
        out.append(a)
    return prune(out), settled


def settling_with(appointments: Sequence[Appointment], now: datetime) -> list[str]:
    """The characters whose copies `settle_over` reads now (appointments with them over)."""
    return sorted(
        {
            a.other.id
            for a in appointments
            if a.status == "planned" and now > a.end and a.other.kind == "character"
        }
    )


def settle_appointments(
    social: SocialState,
    *,
    character_id: str,
    name: str,
    now: datetime,
    town: Town,
    where: str,
    others: Mapping[str, Sequence[Appointment]] | None = None,
) -> list[Episode]:
    """Settle her appointments whose time has passed (`settle_over`) on her working copy
    ``social``: closeness to the other moves (kept: up, missed: down); returns a plan episode
    for each, naming her ``name``."""
    social.appointments, settled = settle_over(social.appointments, now, where, others)
    episodes = []
    for a in settled:
        kept = a.status == "kept"
        relation = social.relations.get(a.other.key) or Relation(party=a.other)
        delta = CLOSENESS_DELTAS["appointment_kept" if kept else "appointment_missed"]
        social.relations = {
            **social.relations,
            a.other.key: relation.moved(now, delta, met=kept),
        }
        line = a.line(town, a.start)
        episodes.append(
            Episode(
                id=f"{'apk' if kept else 'apm'}_{a.id[4:]}_{character_id}",
                character_id=character_id,
                type="plan",
                time=now,
                summary=f"{name}赴约：{line}，{a.note}"
                if kept
                else f"{name}没能赴约：{line}；{a.note}",
                data=PlanData(appointment=a.model_dump(mode="json"), status=a.status).dump(),
            )
        )
    return episodes


def prune(appointments: Sequence[Appointment]) -> list[Appointment]:
    """Planned ones all; of the past ones, the latest `KEPT_APPOINTMENTS`."""
    past = [a for a in appointments if a.status != "planned"][-KEPT_APPOINTMENTS:]
    return [a for a in appointments if a.status == "planned" or a in past]


# -- notes: reminders and promises ----------------------------------------------------------

NoteKind = Literal["reminder", "promise"]
NoteStatus = Literal["planned", "done", "missed", "past"]

NOTE_AHEAD_DAYS = 1
"""She sees a note in her decisions from the start of the day before it."""
NOTE_MINUTES = 60
"""A note with a clock time lasts this long (a promise at a place: she is there within it)."""
NOTE_MAX_AHEAD_DAYS = 30
MAX_NOTES = 8
"""Notes she keeps planned at most."""
MAX_NOTES_PER_PERSON = 3
"""Planned notes from one person at once (nobody fills her head with errands)."""
KEPT_NOTES = 10
"""Past notes (done, missed, past) kept in her state for the record; the oldest goes first."""


def note_id(by: Party, character_id: str, at: datetime, text: str) -> str:
    key = f"{by.key}|{character_id}|{at.isoformat()}|{text}"
    return "note_" + hashlib.sha1(key.encode()).hexdigest()[:12]


class Note(_Model):
    id: str
    kind: NoteKind = "reminder"
    """A reminder someone gave her (别忘了周五考试), or something she promised someone."""
    text: str = Field(min_length=1, max_length=60)
    """What to remember, in Chinese, as she would say it (考试; 帮小林看看樱花开了没有)."""
    by: Party
    """Who reminded her, or whom she promised."""
    at: AwareDatetime
    """When it is: a clock time, or the day's 00:00 with ``all_day``."""
    all_day: bool = False
    place: str | None = None
    """Where, for a promise to go somewhere: her decisions are drawn there at ``at``, and the
    promise is done when she is there in time."""
    via: str = Field("", max_length=80)
    """The chat conversation it came from (``group:qq:123``)."""
    status: NoteStatus = "planned"
    created_at: AwareDatetime
    note: str = Field("", max_length=120)
    """How it ended (done: when she was there; missed: where she was instead)."""

    @property
    def end(self) -> datetime:
        if self.all_day:
            day = self.at.date() + timedelta(days=1)
            return datetime.combine(day, datetime.min.time(), tzinfo=self.at.tzinfo)
        return self.at + timedelta(minutes=NOTE_MINUTES)

    def shows(self, now: datetime) -> bool:
        """Planned, and from the start of the day before it until it is over."""
        day_before = self.at.date() - timedelta(days=NOTE_AHEAD_DAYS)
        since = datetime.combine(day_before, datetime.min.time(), tzinfo=self.at.tzinfo)
        return self.status == "planned" and since <= now < self.end

    def due(self, now: datetime, lead_minutes: int = 60) -> bool:
        """A promise at a place whose time is near or now (her decisions go there)."""
        return (
            self.status == "planned"
            and self.place is not None
            and not self.all_day
            and self.at - timedelta(minutes=lead_minutes) <= now <= self.end
        )

    def line(self, town: Town, now: datetime) -> str:
        """明天：考试（小林提醒的） / 明天 15:00 在南风公园：帮小林看樱花（答应小林的）."""
        local = self.at.astimezone(now.tzinfo)
        when = day_word(local.date(), now.date()) + ("" if self.all_day else f" {local:%H:%M}")
        where = f" 在{town.place_name(self.place)}" if self.place else ""
        whose = f"{self.by.name}提醒的" if self.kind == "reminder" else f"答应{self.by.name}的"
        return f"{when}{where}：{self.text}（{whose}）"


def pushed_away(party: Party, closeness: float | None) -> str | None:
    """Why she wants nothing from a person in chat she has come to dislike (closeness under
    `MIN_CLOSENESS_PERSON`), or None."""
    if party.kind == "person" and closeness is not None and closeness < MIN_CLOSENESS_PERSON:
        return f"和{party.name}还不太熟"
    return None


def review_note(
    note: Note,
    notes: Sequence[Note],
    *,
    now: datetime,
    town: Town,
    closeness: float | None = None,
    lenient: bool = False,
) -> str | None:
    """Why she does not take ``note`` on (a Chinese sentence), or None. ``closeness`` is hers to
    whoever asks (`pushed_away`); ``lenient`` (an admin) lifts the per-person and total limits,
    never the clock or the town."""
    if why := pushed_away(note.by, closeness):
        return why
    if note.end <= now:
        return "那个时间已经过去了"
    if note.at > now + timedelta(days=NOTE_MAX_AHEAD_DAYS):
        return "太久以后的事情，到时候再提醒我吧"
    if note.place is not None and note.place not in town.places:
        return f"羽浦町没有「{note.place}」这个地方"
    planned = [n for n in notes if n.status == "planned" and n.id != note.id]
    if lenient:
        return None
    if sum(1 for n in planned if n.by.key == note.by.key) >= MAX_NOTES_PER_PERSON:
        return f"已经记了{note.by.name}好几件事了，先把这些做完"
    if len(planned) >= MAX_NOTES:
        return "要记的事太多了，记不过来"
    return None


def settle_notes(notes: Sequence[Note], now: datetime, where: str) -> tuple[list[Note], list[Note]]:
    """Her notes with every planned one that is over marked: a promise at a place missed (with
    where she was instead, ``where``), any other past; and the missed ones."""
    out: list[Note] = []
    missed: list[Note] = []
    for n in notes:
        if n.status == "planned" and now >= n.end:
            if n.place is not None and not n.all_day:
                n = n.model_copy(update={"status": "missed", "note": f"那时她在{where}"})
                missed.append(n)
            else:
                n = n.model_copy(update={"status": "past"})
        out.append(n)
    return prune_notes(out), missed


def prune_notes(notes: Sequence[Note]) -> list[Note]:
    """Planned ones all; of the others, the latest `KEPT_NOTES`."""
    past = [n for n in notes if n.status != "planned"][-KEPT_NOTES:]
    return [n for n in notes if n.status == "planned" or n in past]


# -- gifts from chat ------------------------------------------------------------------------

GIFT_MAX_VALUE = 30
"""A gift from a person in chat is an everyday thing worth at most this per piece (its shop
price, or what the supermarket pays for it): a snack, fruit, an ingredient, a diner meal. Not a
valuable and nothing dear: what she can sell is money, and money does not cross into her world."""
GIFT_MAX_QUANTITY = 3
GIFTS_PER_PERSON_PER_DAY = 1
GIFTS_PER_DAY = 3
"""Gifts she takes in a day from everyone in chat together: a group cannot feed her for free."""


def review_gift(
    name: str,
    quantity: int,
    by: Party,
    gifts_today: Sequence[str],
    *,
    closeness: float | None = None,
    lenient: bool = False,
) -> str | None:
    """Why she does not take ``quantity`` × ``name`` from ``by`` (a Chinese sentence), or None.
    ``gifts_today`` are the party keys of today's gifts, one per gift; ``closeness`` is hers to
    ``by`` (`pushed_away`). ``lenient`` (an admin, like ``/give``) lifts every limit."""
    from yuiju.world.items import item

    if lenient:
        return None
    if why := pushed_away(by, closeness):
        return why
    found = item(name)
    if found is None:
        return f"羽浦町没有「{name}」这种东西，收不到"
    value = found.price or found.sale_price or 0
    if "valuable" in found.kinds or value > GIFT_MAX_VALUE:
        return f"{name}太贵重了，不能收"
    if quantity > GIFT_MAX_QUANTITY:
        return f"{quantity}个太多了，一点点就好"
    if sum(1 for k in gifts_today if k == by.key) >= GIFTS_PER_PERSON_PER_DAY:
        return f"今天已经收过{by.name}的礼物了"
    if len(gifts_today) >= GIFTS_PER_DAY:
        return "今天已经收了好多礼物了"
    return None


# -- her social state -----------------------------------------------------------------------


class SocialState(_Model):
    relations: dict[str, Relation] = Field(default_factory=dict)
    """By `Party.key`."""
    news: list[NewsItem] = Field(default_factory=list)
    appointments: list[Appointment] = Field(default_factory=list)
    notes: list[Note] = Field(default_factory=list)
    """Reminders and promises (from chat), planned and the latest past ones."""
    day: date | None = None
    """Local date ``met_today``, ``model_talks_today`` and ``gifts_today`` refer to."""
    met_today: list[str] = Field(default_factory=list)
    """Party keys she met today (whom she has greeted already)."""
    model_talks_today: int = Field(0, ge=0)
    """Conversations she started today whose words the model wrote (the per-day budget)."""
    last_met_at: AwareDatetime | None = None
    """When she last met anyone (the offline policy's social need)."""
    gifts_today: list[str] = Field(default_factory=list)
    """Party keys of the gifts from chat she took today, one per gift."""

    def closeness(self, key: str, now: datetime, default: float = DEFAULT_CLOSENESS) -> float:
        relation = self.relations.get(key)
        return default if relation is None else relation.closeness_at(now)

    def met_on(self, day: date) -> list[str]:
        """Party keys she met on ``day`` (``met_today`` is of `day`, until her next start)."""
        return self.met_today if self.day == day else []

    def planned(self) -> list[Appointment]:
        return [a for a in self.appointments if a.status == "planned"]

    def notes_now(self, now: datetime) -> list[Note]:
        """The notes she sees in her decisions now (from the day before each), soonest first."""
        return sorted((n for n in self.notes if n.shows(now)), key=lambda n: n.at)

    def note_presence(
        self, place: str, since: datetime, until: datetime, town: Town, moving_to: str | None
    ) -> None:
        """She starts something at ``place`` (`note_presence` on her appointments)."""
        if any(a.status == "planned" for a in self.appointments):
            self.appointments = note_presence(
                self.appointments,
                place=place,
                since=since,
                until=until,
                town=town,
                moving_to=moving_to,
            )

    def gifts_on(self, day: date) -> list[str]:
        return self.gifts_today if self.day == day else []

    def roll_day(self, today: date) -> None:
        if self.day != today:
            self.day = today
            self.met_today = []
            self.model_talks_today = 0
            self.gifts_today = []
