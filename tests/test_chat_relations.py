"""Her closeness to people from chat (issue 22): it moves with what they say to her and what they
plan together, decays slowly, decides whose invitations she takes and how she talks to them, and
shows in `yuiju status` and on the observer page."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from tests.conftest import at_time
from tests.test_chat_plans import (
    INVITE,
    THURSDAY_EVENING,
    call,
    scripted,
    status_json,
    tool_result,
    town,
)
from yuiju.config import load_config
from yuiju.storage.history import HistoryStore
from yuiju.world.relations import (
    CHAT_GAIN_PER_DAY,
    Party,
    Relation,
    review_invitation,
)
from yuiju.world.store import Commit
from yuiju.world.town import HAURA

XIAOLIN = Party(kind="person", id="qq:5", name="小林")


async def test_talking_kindly_brings_her_closer_a_little_a_day_and_unkind_words_push_away(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(redis, sqlite_history, scripted())
    for text in ("今天好热", "谢谢你陪我聊天", "悠酱好可爱", "晚安"):
        await yuiju.say(text)
    await yuiju.tick()

    relation = (await yuiju.her()).social.relations["person:qq:5"]
    assert relation.party == XIAOLIN and relation.talks == 4
    # 4 turns and 3 kind ones would be 5.0: a day of chat adds at most CHAT_GAIN_PER_DAY
    assert relation.closeness == pytest.approx(10 + CHAT_GAIN_PER_DAY)

    await yuiju.say("闭嘴吧笨蛋", user=6, name="小美")
    await yuiju.tick()
    rude = (await yuiju.her()).social.relations["person:qq:6"]
    assert rude.closeness == pytest.approx(10 + 0.5 - 2)

    # decays back towards where a stranger rests
    later = relation.closeness_at(at_time(THURSDAY_EVENING) + timedelta(days=14))
    assert 10 < later < 10 + CHAT_GAIN_PER_DAY / 2 + 0.01


async def test_how_close_she_is_shapes_her_tone_in_chat(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(redis, sqlite_history, scripted())
    await yuiju.say("你好呀")
    context = yuiju.model.calls[-1][1]["content"]
    assert "小林：不太熟（第一次聊）。你们还不太熟：礼貌、有点拘谨" in context

    her = await yuiju.her()
    her.social.relations["person:qq:5"] = Relation(
        party=XIAOLIN, closeness=45, rest=10, as_of=at_time(THURSDAY_EVENING), talks=30
    )
    await yuiju.world.store.transact(
        lambda snap: (Commit(characters={"yuiju": her}), None), characters=["yuiju"]
    )
    await yuiju.say("在吗")
    context = yuiju.model.calls[-1][1]["content"]
    assert "小林：朋友（聊过 30 次）。你们是朋友：放松随意" in context


def test_whose_invitation_she_takes_depends_on_how_close_they_are() -> None:
    from tests.test_social_relations import NOW, invitation

    ask = invitation("2026-09-05 15:00", by=XIAOLIN, source="chat")
    assert review_invitation(ask, [], now=NOW, town=HAURA, closeness=10) is None  # a stranger
    pushed_away = review_invitation(ask, [], now=NOW, town=HAURA, closeness=4)
    assert pushed_away == "和小林还不太熟"
    two = [invitation(f"2026-09-0{d} 15:00", by=XIAOLIN, source="chat") for d in (6, 7)]
    more = invitation("2026-09-08 18:00", by=XIAOLIN, source="chat")
    assert "好几件事" in (review_invitation(more, two, now=NOW, town=HAURA, closeness=30) or "")
    assert review_invitation(more, two, now=NOW, town=HAURA, closeness=45) is None  # a friend


async def test_keeping_what_was_planned_in_chat_brings_her_closer(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(redis, sqlite_history, scripted(call("propose_plan", **INVITE), "好呀"))
    await yuiju.say("明天下午一起去南风公园吧")
    await yuiju.tick()
    before = (await yuiju.her()).social.relations["person:qq:5"]

    await yuiju.world.engine.run(until=at_time("2026-09-04 21:00"))

    after = (await yuiju.her()).social.relations["person:qq:5"]
    (appointment,) = (await yuiju.her()).social.appointments
    if appointment.status == "kept":
        assert after.meetings == 1 and after.closeness > before.closeness_at(
            at_time("2026-09-04 21:00")
        )
    else:
        assert after.closeness < before.closeness


async def test_status_and_the_observer_page_show_her_people_from_chat(
    redis: aioredis.Redis,
    redis_url: str,
    sqlite_history: HistoryStore,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from yuiju import cli as yuiju_cli

    yuiju = await town(
        redis,
        sqlite_history,
        scripted(call("propose_plan", kind="remind", when="下周一", what="考试"), "好"),
    )
    await yuiju.say("谢谢你！别忘了下周一考试")
    await yuiju.tick()

    report = await status_json(redis_url, tmp_path, capsys)
    (person,) = [r for r in report["social"]["relations"]["yuiju"] if r["kind"] == "person"]
    assert (person["id"], person["name"], person["band"], person["talks"]) == (
        "qq:5",
        "小林",
        "不太熟",
        1,
    )
    assert report["social"]["notes"]["yuiju"] == ["9月7日：考试（小林提醒的）"]

    cfg = load_config(environ={"YUIJU_REDIS__URL": redis_url, "YUIJU_APP__DATA_DIR": str(tmp_path)})
    assert await yuiju_cli._status(cfg, as_json=False) == 0
    text = capsys.readouterr().out
    assert "小林（聊天） 不太熟（12）" in text and "记着：9月7日：考试（小林提醒的）" in text

    import httpx

    from tests.conftest import TZ
    from yuiju.web.app import create_app
    from yuiju.web.view import Observer

    observer = Observer(
        redis=redis,
        history=sqlite_history,
        keys=yuiju.world.keys,
        town=HAURA,
        tz=TZ,
        character_ids=["yuiju"],
        catalogue=yuiju.world.loop.catalogue,
        now=yuiju.world.clock.now,
        names={"yuiju": "悠酱"},
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(observer)), base_url="http://observer"
    ) as client:
        page = (await client.get("/")).text
        social = (await client.get("/api/state")).json()["social"]
    assert any(r["kind"] == "person" and r["name"] == "小林" for r in social["relations"])
    assert social["notes"] == ["9月7日：考试（小林提醒的）"]
    assert "小林（聊天） 不太熟（12）" in page and "9月7日：考试（小林提醒的）" in page


async def test_someone_she_has_come_to_dislike_gets_no_for_everything(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(
        redis,
        sqlite_history,
        scripted(
            call("propose_plan", **INVITE),
            "……",
            call("propose_plan", kind="remind", when="周五", what="考试"),
            "……",
            call("receive_gift", item="铜锣烧"),
            "……",
        ),
    )
    her = await yuiju.her()
    her.social.relations["person:qq:5"] = Relation(
        party=XIAOLIN, closeness=3, rest=10, as_of=at_time(THURSDAY_EVENING)
    )
    await yuiju.world.store.transact(
        lambda snap: (Commit(characters={"yuiju": her}), None), characters=["yuiju"]
    )

    for text in ("明天下午一起去南风公园吧", "别忘了周五考试", "送你铜锣烧"):
        await yuiju.say(text)
    await yuiju.tick()

    for request in (1, 3, 5):
        assert "和小林还不太熟" in tool_result(yuiju.model, request)
    her = await yuiju.her()
    assert her.social.planned() == [] and her.social.notes == []
    assert "铜锣烧" not in her.inventory


async def test_without_a_world_to_apply_them_chat_does_not_pile_up_commands(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    from yuiju.message.proposals import MAX_QUEUED

    yuiju = await town(redis, sqlite_history, scripted())
    keys = yuiju.world.keys
    await redis.rpush(keys.commands, *(['{"type": "pause"}'] * MAX_QUEUED))
    await yuiju.say("你好")
    assert await redis.llen(keys.commands) == MAX_QUEUED
