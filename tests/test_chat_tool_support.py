"""News and gifts from chat are queued only when the person's own words say them (issue 30 item
5): a tool call whose argument the speaker never said goes back to the model, and nothing reaches
her life."""

from __future__ import annotations

import redis.asyncio as aioredis

from tests.test_chat_plans import call, scripted, tool_result, town
from yuiju.storage.history import HistoryStore


async def test_news_the_speaker_never_said_is_not_queued(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(
        redis,
        sqlite_history,
        scripted(call("remember_news", text="小林在听喜欢的歌，心情很好"), "嗯嗯"),
    )
    await yuiju.say("今天好冷啊")
    assert "没有说过" in tool_result(yuiju.model, 1)
    assert await yuiju.chat.deps.commands.pending() == [] or all(
        c.type != "tell_news" for c in await yuiju.chat.deps.commands.pending()
    )
    await yuiju.tick()
    assert (await yuiju.her()).social.news == []


async def test_news_said_a_message_earlier_is_queued(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(
        redis,
        sqlite_history,
        scripted("诶！", call("remember_news", text="小林下周要转学"), "会想你的"),
    )
    await yuiju.say("跟你说个事，我下周转学")
    await yuiju.say("你要记得我哦")
    assert "记下了" in tool_result(yuiju.model, 2)


async def test_a_gift_the_speaker_never_offered_is_not_queued(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(redis, sqlite_history, scripted(call("receive_gift", item="铜锣烧"), "嗯嗯"))
    before = (await yuiju.her()).inventory
    await yuiju.say("今天好冷啊")
    assert "没有说过" in tool_result(yuiju.model, 1)
    await yuiju.tick()
    assert (await yuiju.her()).inventory == before
