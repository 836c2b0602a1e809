"""News from chat travels (issue 22): what a person tells 悠酱 is recorded with its source, passes
to 枫 when they meet, and 枫 can tell that person "悠酱说你要搬家了" from her own record; a
claim about who said what that her record does not back goes back to the model."""

from __future__ import annotations

import redis.asyncio as aioredis

from tests.conftest import at_time, make_engine
from tests.test_chat_plans import call, scripted, town
from tests.test_social_meetings import CHAT_WITH_KAEDE, WALK, by_character, in_the_park
from yuiju.memory.episodes import EpisodeRepo
from yuiju.message.people_grounding import PEOPLE_UNSURE_LINE
from yuiju.storage.history import HistoryStore

MORNING = "2026-09-05 09:50"  # a Saturday


async def test_news_told_in_chat_reaches_another_character_who_can_say_where_she_heard_it(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(
        redis,
        sqlite_history,
        policy=by_character(kaede=WALK, yuiju=CHAT_WITH_KAEDE),
        start=MORNING,
        characters=in_the_park("kaede", "yuiju"),
    )
    for loop in kit.loops.values():
        await loop.ensure_character()
    await kit.ticker.tick(at_time(MORNING))
    yuiju = await town(
        redis,
        sqlite_history,
        scripted(call("remember_news", text="小林下周要搬家"), "诶，要搬去哪里呀"),
        kit=kit,
        neighbours={"kaede": ("枫", "小枫")},
    )

    await yuiju.say("跟你说，我下周搬家")
    await yuiju.tick()
    (item,) = (await yuiju.her()).social.news
    assert (item.text, item.source.name, item.about.id if item.about else None) == (
        "小林下周要搬家",
        "小林",
        "qq:5",
    )
    told = await EpisodeRepo(sqlite_history).get(item.episode_id or "")
    assert told is not None and told.data["source"] == "chat" and told.data["via"] == "group:qq:100"

    # 悠酱 and 枫 meet in the park: she passes it on
    now = at_time("2026-09-05 10:00")
    await kit.clock.sleep_until(now)
    await kit.ticker.tick(now)
    await kit.loops["kaede"].step(now)
    await kit.loops["yuiju"].step(now)
    await kit.engine.flush_outbox(force=True)
    (heard,) = (await kit.character("kaede")).social.news  # type: ignore[union-attr]
    assert (heard.source.name, heard.origin.name, heard.hops) == ("悠酱", "小林", 1)

    # 小林 talks to 枫: she knows, from whom, and may say so
    kaede = await town(
        redis,
        sqlite_history,
        scripted("悠酱说你要搬家了！真的吗？", "千夏说你要搬去海边了", "嗯嗯"),
        kit=kit,
        character_id="kaede",
        neighbours={"yuiju": ("悠酱", "悠"), "chika": ("千夏",)},
    )
    out = await kaede.say("小枫早上好")
    assert out.replies == ["悠酱说你要搬家了！真的吗？"]
    context = kaede.model.calls[0][1]["content"]
    assert "你听说：小林下周要搬家（听悠酱说的）" in context

    out = await kaede.say("对了你听谁说的")
    feedback = kaede.model.calls[-1][-1]
    assert feedback["role"] == "system" and "千夏没说过这件事" in feedback["content"]
    assert out.replies == ["嗯嗯"]


async def test_a_person_cannot_flood_her_with_news(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    answers: list[object] = []
    for n in range(4):
        answers += [call("remember_news", text=f"小林第{n}件事", about_speaker=True), "嗯"]
    yuiju = await town(redis, sqlite_history, scripted(*answers))
    for n in range(4):
        await yuiju.say(f"告诉你第{n}件事")
    await yuiju.tick()

    assert len((await yuiju.her()).social.news) == 3


async def test_news_in_the_first_person_goes_back_to_the_model(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(
        redis,
        sqlite_history,
        scripted(
            call("remember_news", text="我下周要搬家"),
            call("remember_news", text="小林下周要搬家"),
            "知道啦",
        ),
    )
    await yuiju.say("我下周搬家")
    first = yuiju.model.calls[1][-1]["content"]
    assert first.startswith("Error:") and "小林下周要搬家" in first
    assert "记下了" in yuiju.model.calls[2][-1]["content"]


async def test_news_from_one_of_two_people_of_the_same_name_may_be_passed_on(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    """Two people called Ken talked with her (issue 30, held-out rerun): what the second Ken told
    her is his, and passing it on under the name they share is true; what neither said is not."""
    yuiju = await town(
        redis,
        sqlite_history,
        scripted(
            "晚上好呀",
            call("remember_news", text="Ken下周要去北海道旅行"),
            "哇，好羡慕",
            "Ken说他下周要去北海道旅行！",
            "Ken说他要转学了",
            "Ken说他要转学了",
        ),
    )
    await yuiju.say("晚上好", user=21006, name="Ken")
    await yuiju.tick()
    await yuiju.say("我下周要去北海道旅行了！", user=22003, name="Ken")
    await yuiju.tick()
    her = await yuiju.her()
    assert {r.party.id for r in her.social.relations.values()} >= {"qq:21006", "qq:22003"}
    (item,) = her.social.news
    assert item.source.id == "qq:22003"

    out = await yuiju.say("最近有什么新鲜事吗", user=22002, name="七七")
    assert out.replies == ["Ken说他下周要去北海道旅行！"]

    out = await yuiju.say("还有别的吗", user=22002, name="七七")
    assert out.replies == [PEOPLE_UNSURE_LINE]


async def test_news_a_namesake_told_her_before_the_world_applied_it_may_be_passed_on(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    """The same, while the news still waits for the world's next tick."""
    yuiju = await town(
        redis,
        sqlite_history,
        scripted(
            "晚上好呀",
            call("remember_news", text="Ken下周要去北海道旅行"),
            "哇，好羡慕",
            "Ken说他下周要去北海道旅行！",
        ),
    )
    await yuiju.say("晚上好", user=21006, name="Ken")
    await yuiju.tick()
    await yuiju.say("我下周要去北海道旅行了！", user=22003, name="Ken")

    out = await yuiju.say("最近有什么新鲜事吗", user=22002, name="七七")
    assert out.replies == ["Ken说他下周要去北海道旅行！"]
