"""News travels with its source kept; invitations and news from outside come in as world
commands, reviewed and recorded with who asked."""

from __future__ import annotations

import json

import redis.asyncio as aioredis

from tests.conftest import at_time, make_character, make_engine
from tests.test_social_meetings import (
    CHAT_WITH_KAEDE,
    WALK,
    by_character,
    in_the_park,
    step_in_order,
)
from yuiju.memory.episodes import EpisodeRepo
from yuiju.storage.history import HistoryStore
from yuiju.world.commands import enqueue_command
from yuiju.world.policies.scripted import ScriptedPolicy
from yuiju.world.policy import DecisionRequest
from yuiju.world.relations import NewsItem, Party, news_id
from yuiju.world.social import heard_from
from yuiju.world.town import HAURA

XIAOLIN = {"kind": "person", "id": "qq:123", "name": "小林"}
MOVING = "小林下周要搬家"
SATURDAY = "2026-09-05 10:00"


def moving_news() -> NewsItem:
    origin = Party.model_validate(XIAOLIN)
    return NewsItem(
        id=news_id(origin, MOVING),
        text=MOVING,
        about=origin,
        origin=origin,
        source=origin,
        learned_at=at_time("2026-09-04 20:00"),
    )


async def test_news_passes_on_in_a_chat_and_the_listener_knows_who_told_her(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    people = in_the_park("kaede", "yuiju")
    people["yuiju"].social.news = [moving_news()]
    kit = await make_engine(
        redis,
        sqlite_history,
        policy=by_character(kaede=WALK, yuiju=CHAT_WITH_KAEDE),
        start=SATURDAY,
        characters=people,
    )

    await step_in_order(kit, SATURDAY, "kaede", "yuiju")
    await kit.engine.flush_outbox(force=True)

    kaede = await kit.character("kaede")
    assert kaede is not None
    (item,) = kaede.social.news
    assert (item.text, item.origin.name, item.source.name, item.hops) == (MOVING, "小林", "悠酱", 1)
    assert item.learned_at == at_time(SATURDAY)
    # where she heard it is a recorded episode of hers: 枫 can say 悠酱说你要搬家了
    episode = await EpisodeRepo(sqlite_history).get(item.episode_id or "")
    assert episode is not None and episode.character_id == "kaede"
    assert (
        episode.type == "conversation"
        and "悠酱告诉枫：小林下周要搬家（小林说的）" in episode.summary
    )
    assert episode.data["news"][0]["teller"] == "yuiju"
    assert any(MOVING in line["text"] for line in episode.data["lines"])
    # the query the chat side uses: what she heard about someone, and from whom
    (found,) = heard_from(kaede, about="qq:123")
    assert found.source.name == "悠酱" and found.episode_id == episode.id
    repo = EpisodeRepo(sqlite_history)
    day = (at_time(SATURDAY), at_time("2026-09-06 00:00"))
    assert [e.id for e in await repo.conversations("kaede", *day, with_="yuiju")] == [episode.id]
    assert await repo.conversations("kaede", *day, with_="chika") == []


async def test_a_greeting_passes_no_news(redis: aioredis.Redis) -> None:
    people = in_the_park("kaede", "yuiju")
    people["yuiju"].social.news = [moving_news()]
    kit = await make_engine(
        redis,
        None,
        policy=by_character(
            kaede=WALK,
            yuiju={"action": "打招呼", "reason": "看到枫了", "params": {"partner": "枫"}},
        ),
        start=SATURDAY,
        characters=people,
    )

    await step_in_order(kit, SATURDAY, "kaede", "yuiju")

    kaede = await kit.character("kaede")
    assert kaede is not None and kaede.social.news == []
    assert kaede.running is not None and kaede.running.action_id == "greet"


async def started(redis: aioredis.Redis, history: HistoryStore | None = None):
    kit = await make_engine(redis, history, start="2026-09-03 12:00")
    await kit.loop.ensure_character()
    await kit.ticker.tick(at_time("2026-09-03 12:00"))
    return kit


async def test_news_told_from_chat_is_a_world_command_with_its_source(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await started(redis, sqlite_history)
    await enqueue_command(
        redis,
        kit.keys,
        {
            "type": "tell_news",
            "character_id": "yuiju",
            "by": XIAOLIN,
            "text": MOVING,
            "about": XIAOLIN,
        },
    )

    await kit.ticker.tick(at_time("2026-09-03 12:05"))
    await kit.engine.flush_outbox(force=True)

    yuiju = await kit.character()
    assert yuiju is not None
    (item,) = yuiju.social.news
    assert (item.source.name, item.origin.name, item.hops, item.about) == (
        "小林",
        "小林",
        0,
        item.origin,
    )
    episode = await EpisodeRepo(sqlite_history).get(item.episode_id or "")
    assert episode is not None and episode.data["source"] == "chat"
    assert episode.summary == "小林告诉悠酱：小林下周要搬家"


def invitation(start: str, **extra: object) -> dict[str, object]:
    return {
        "type": "invite",
        "character_id": "yuiju",
        "by": XIAOLIN,
        "place": "park",
        "start": at_time(start).isoformat(),
        "activity": "一起散步",
        **extra,
    }


async def test_an_invitation_from_chat_is_reviewed_and_applied_naming_who_asked(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await started(redis, sqlite_history)
    await enqueue_command(redis, kit.keys, invitation("2026-09-05 15:00"))
    await enqueue_command(redis, kit.keys, invitation("2026-09-04 10:00"))  # a school morning

    await kit.ticker.tick(at_time("2026-09-03 12:05"))
    await kit.engine.flush_outbox(force=True)

    yuiju = await kit.character()
    assert yuiju is not None
    (planned,) = yuiju.social.planned()
    assert (planned.asked_by.name, planned.source, planned.place) == ("小林", "chat", "park")
    assert planned.start == at_time("2026-09-05 15:00")
    plans = await EpisodeRepo(sqlite_history).between(
        "yuiju", at_time("2026-09-03 12:00"), at_time("2026-09-03 13:00"), type_="plan"
    )
    summaries = sorted(e.summary for e in plans)
    assert summaries == [
        "小林约悠酱9月4日10:00在南风公园一起散步，没答应：那时候要上课",
        "小林约悠酱9月5日15:00在南风公园一起散步，答应了",
    ]
    assert all(e.data["source"] == "chat" and e.data["asked_by"]["id"] == "qq:123" for e in plans)
    applied = [
        json.loads(f["data"])["result"]
        for _, f in await redis.xrange(kit.keys.events)
        if f["type"] == "command_applied"
    ]
    assert any(r.startswith("declined") for r in applied)


async def test_one_person_cannot_fill_her_week(redis: aioredis.Redis) -> None:
    kit = await started(redis)
    for day in (5, 6, 7):
        await enqueue_command(redis, kit.keys, invitation(f"2026-09-0{day} 15:00"))

    await kit.ticker.tick(at_time("2026-09-03 12:05"))

    yuiju = await kit.character()
    assert yuiju is not None and len(yuiju.social.planned()) == 2


async def test_she_goes_to_what_she_accepted_from_chat_and_it_counts_as_kept(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(redis, sqlite_history, start="2026-09-05 06:00")
    await kit.loop.ensure_character()
    await kit.ticker.tick(at_time("2026-09-05 06:00"))
    await enqueue_command(redis, kit.keys, invitation("2026-09-05 15:00"))

    await kit.engine.run(until=at_time("2026-09-05 17:00"))

    yuiju = await kit.character()
    assert yuiju is not None
    (appointment,) = yuiju.social.appointments
    assert appointment.status == "kept", appointment
    park = [
        r
        for r in kit.stats.timeline
        if r["place"] == "park"
        and at_time("2026-09-05 14:30").isoformat()
        <= r["start"]
        <= at_time("2026-09-05 16:00").isoformat()
    ]
    assert park, [(r["id"], r["start"]) for r in kit.stats.timeline]


def stays_away(r: DecisionRequest) -> dict[str, object]:
    """She idles while she may; once she should set off, she walks anywhere but the park."""
    if any(a.name == "发呆" for a in r.candidates):
        return {"action": "发呆", "reason": "不想动", "durationMinute": 60}
    away = next(a for a in r.candidates if a.moves_to not in (None, "park"))
    return {"action": away.offered_as, "reason": "不想去"}


async def test_a_missed_appointment_is_recorded_with_where_she_was_at_its_time(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(
        redis,
        sqlite_history,
        policy=ScriptedPolicy(stays_away),
        start="2026-09-05 06:00",
        characters={"yuiju": make_character(location="home")},
    )
    await kit.loop.ensure_character()
    await kit.ticker.tick(at_time("2026-09-05 06:00"))
    await enqueue_command(redis, kit.keys, invitation("2026-09-05 15:00"))

    await kit.engine.run(until=at_time("2026-09-05 17:00"))
    await kit.engine.flush_outbox(force=True)

    yuiju = await kit.character()
    assert yuiju is not None
    (appointment,) = yuiju.social.appointments
    episodes = await EpisodeRepo(sqlite_history).between(
        "yuiju", at_time("2026-09-05 06:00"), at_time("2026-09-05 18:00")
    )
    (then,) = [
        e
        for e in episodes
        if e.type == "behavior" and e.time <= at_time("2026-09-05 15:00") < (e.end_time or e.time)
    ]
    action = kit.loop.catalogue.actions[then.data["action"]]
    was = (
        f"去{HAURA.place_name(action.moves_to)}的路上"
        if action.moves_to
        else HAURA.place_name(then.data["place"])
    )
    assert appointment.status == "missed" and appointment.note == f"那时她在{was}"
    missed = [e for e in episodes if e.type == "plan" and e.data.get("status") == "missed"]
    assert len(missed) == 1 and "没能赴约" in missed[0].summary


async def test_both_at_the_place_at_once_keeps_it_on_each_side_read_from_the_others_state(
    redis: aioredis.Redis,
) -> None:
    """Both sat in the café in the window without meeting, and are home by the time it is
    settled: each loop reads the other's saved copy before her next start (no meeting, no
    company at home), so each side records it kept."""
    from tests.test_transitions import KAEDE, YUIJU, copy_of
    from yuiju.world.relations import SocialState

    there = ("2026-09-05 14:30", "2026-09-05 16:00")
    states = {
        me.id: make_character(
            id=me.id,
            location="home",
            social=SocialState(
                appointments=[copy_of(me, other, "2026-09-05 15:00", "cafe", there)]
            ),
        )
        for me, other in ((YUIJU, KAEDE), (KAEDE, YUIJU))
    }
    kit = await make_engine(
        redis, None, policy=by_character(), start="2026-09-05 17:00", characters=states
    )
    for cid, state in states.items():  # both saved before either settles
        await redis.set(kit.keys.character(cid), state.model_dump_json())

    await step_in_order(kit, "2026-09-05 17:00", "yuiju", "kaede")

    for cid in states:
        her = await kit.character(cid)
        assert her is not None
        (appointment,) = her.social.appointments
        assert appointment.status == "kept" and appointment.note == "14:30起两人都在那里", cid
