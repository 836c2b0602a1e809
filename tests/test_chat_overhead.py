"""The chat pipeline's own cost on the way to her answer (issue 21 item 10), in what does not
depend on the machine's load: Redis round trips before the model is asked. Each one is a
millisecond or more on a loaded machine, and on the way to every answer."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
import redis.asyncio as aioredis

from tests.test_message_service import FakeMemory, make_kit


def count_round_trips(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every request redis-py sends (a command, or a whole pipeline) is one round trip."""
    from redis.asyncio.connection import AbstractConnection

    sent: Counter[str] = Counter()
    send = AbstractConnection.send_packed_command

    async def counted(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        sent["round trips"] += 1
        await send(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)
    return sent


async def test_an_answered_message_costs_five_redis_round_trips_before_the_model_is_asked(
    redis: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = count_round_trips(monkeypatch)
    asked_after: list[int] = []

    def model(messages: list[dict[str, Any]], schema: Any) -> str:
        asked_after.append(sent["round trips"])
        return "在的～"

    kit = await make_kit(redis, fn=model, memory=FakeMemory())
    await kit.say("在吗", at=True)  # her session exists, as in any conversation going on
    await kit.service.drain()
    await asyncio.sleep(0)
    before = sent["round trips"]
    out = await kit.say("今天过得怎么样", at=True)
    assert out.answered
    # the message's record, her session's context (compaction reads the same), and, at the same
    # time, the person's account links (one read serves recall and the profile) and what she
    # knows of them (`proposals.person_context`: their person, the world's pending commands)
    assert asked_after[-1] - before == 5


async def test_rereading_the_pending_commands_validates_only_those_queued_since(
    redis: aioredis.Redis,
) -> None:
    # what she knows of a speaker reads every pending command at every message; a bot running
    # without its world keeps up to `MAX_QUEUED` of them, so validating each again at each
    # message grew with the queue
    from yuiju.message.deps import RedisCommands
    from yuiju.storage.keys import Keys

    keys = Keys("t")
    commands = RedisCommands(redis, keys)

    def chat_with(who: str) -> dict[str, Any]:
        by = {"kind": "person", "id": who, "name": who}
        return {"type": "chat_with", "character_id": "yuiju", "by": by, "tone": "kind"}

    await commands.enqueue(chat_with("qq:1"))
    await commands.enqueue(chat_with("qq:2"))
    await redis.rpush(keys.commands, "{not json")  # left out, as the tick would reject it
    first = await commands.pending()
    await commands.enqueue(chat_with("qq:3"))
    second = await commands.pending()
    assert [c.model_dump() for c in second] == [c.model_dump() for c in [*first, second[-1]]]
    assert len(second) == 3
    assert second[0] is first[0] and second[1] is first[1]  # not validated again
    await redis.delete(keys.commands)  # the tick took them
    assert await commands.pending() == []
    await commands.enqueue(chat_with("qq:1"))
    (again,) = await commands.pending()
    assert again == first[0] and again is not first[0]  # forgotten once the tick took it
