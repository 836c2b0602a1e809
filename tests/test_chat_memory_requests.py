"""In chat: /memory me (or in words) answered privately, a forget with a confirmation step, only
by that person or an admin, rate-limited; an admin can forget a person or a group."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.conftest import at_time
from tests.test_message_service import ADMIN, GROUP, make_kit
from yuiju.config import YuijuConfig
from yuiju.memory.distill import FACTS
from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.service import MemoryService, build_memory
from yuiju.memory.vectors import QdrantClientStore
from yuiju.message.memory_chat import REQUESTS_PER_HOUR
from yuiju.world.commands import ForgetPerson, parse_command


@pytest.fixture
async def memory(sqlite_history: Any) -> AsyncIterator[MemoryService]:
    store = await QdrantClientStore.open(collection="c", dim=64, location=":memory:")
    service = await build_memory(
        YuijuConfig(),
        sqlite_history,
        SemanticMemory(store, HashingEmbedder(64)),
        character_id="yuiju",
    )
    await service.chat.add("qq:5", "我的猫叫土豆", at_time("2026-09-01 09:00"), nickname="u5")
    await sqlite_history.put(
        FACTS.name,
        {
            "_id": "fact_5",
            "character_id": "yuiju",
            "user_id": "qq:5",
            "content": "这个用户养了一只猫",
            "importance": 0.7,
            "time": at_time("2026-09-01 09:00"),
            "indexed": False,
        },
    )
    yield service
    await store.close()


async def queued(kit: Any) -> list[Any]:
    deps = kit.service.deps
    return [parse_command(raw) for raw in await deps.redis.lrange(deps.keys.commands, 0, -1)]


async def test_memory_me_in_a_group_is_answered_privately(
    redis: Any, sqlite_history: Any, memory: MemoryService
) -> None:
    kit = await make_kit(redis, sqlite_history, memory=memory)
    out = await kit.say("/memory me", user=5)
    assert out.reason == "memory request"
    [(scene, target, text)] = kit.sent
    assert (scene, target) == ("private", 5)
    assert "fact_5：这个用户养了一只猫" in text and "你说过的话 1 条" in text
    kit.sent.clear()
    await kit.say("你都记得我什么呀", user=5, group=None)  # in words, in private
    assert kit.sent[0][:2] == ("private", 5) and "fact_5" in kit.sent[0][2]
    # not recorded: a privacy request is not part of the conversation
    assert not await redis.llen(kit.service.deps.keys.chat_recent("yuiju", f"group:qq:{GROUP}"))


async def test_forget_needs_confirmation_then_goes_through_the_world(
    redis: Any, sqlite_history: Any, memory: MemoryService
) -> None:
    kit = await make_kit(redis, sqlite_history, memory=memory)
    await kit.say("忘掉我吧", user=5, group=None)
    ask = kit.sent[-1][2]
    assert "/memory forget confirm" in ask and not await queued(kit)
    await kit.say("/memory forget confirm 0000x", user=5, group=None)
    assert "确认码不对" in kit.sent[-1][2] and not await queued(kit)
    await kit.say("忘掉我吧", user=5, group=None)
    code = kit.sent[-1][2].rsplit(" ", 1)[-1]
    await kit.say(f"/memory forget confirm {code}", user=5, group=None)
    [command] = await queued(kit)
    assert isinstance(command, ForgetPerson)
    assert command.id == "qq:5" and command.requested_by == "qq:5" and "qq:5" in command.ids


async def test_only_an_admin_forgets_someone_else_or_a_group(
    redis: Any, sqlite_history: Any, memory: MemoryService
) -> None:
    kit = await make_kit(redis, sqlite_history, memory=memory)
    await kit.say("/memory forget qq:6", user=5, group=None)
    assert "只有管理员" in kit.sent[-1][2]
    await kit.say("/memory forget group qq:100", user=ADMIN, group=None)
    code = kit.sent[-1][2].rsplit(" ", 1)[-1]
    await kit.say(f"/memory forget confirm {code}", user=ADMIN, group=None)
    [command] = await queued(kit)
    assert isinstance(command, ForgetPerson)
    assert (command.subject, command.id, command.requested_by) == ("group", "qq:100", "admin:qq:1")


async def test_one_fact_is_forgotten_or_corrected_by_its_owner_only(
    redis: Any, sqlite_history: Any, memory: MemoryService
) -> None:
    kit = await make_kit(redis, sqlite_history, memory=memory)
    await kit.say("/memory correct fact_5 这个用户养了两只猫", user=6, group=None)
    assert "没有找到" in kit.sent[-1][2]
    await kit.say("/memory correct fact_5 这个用户养了两只猫", user=5, group=None)
    assert "两只猫" in kit.sent[-1][2]
    assert await sqlite_history.get(FACTS.name, "fact_5") is None


async def test_requests_are_rate_limited(
    redis: Any, sqlite_history: Any, memory: MemoryService
) -> None:
    kit = await make_kit(redis, sqlite_history, memory=memory)
    for _ in range(REQUESTS_PER_HOUR):
        await kit.say("/memory me", user=5, group=None)
    await kit.say("/memory me", user=5, group=None)
    assert "太频繁" in kit.sent[-1][2]
    assert json.dumps(kit.sent, ensure_ascii=False).count("fact_5") == REQUESTS_PER_HOUR


@pytest.mark.parametrize("text", ["你还记得我上次说的什么吗", "别忘了我", "忘了我说的话吧"])
async def test_ordinary_talk_about_remembering_is_not_a_request(
    redis: Any, sqlite_history: Any, memory: MemoryService, text: str
) -> None:
    kit = await make_kit(redis, sqlite_history, memory=memory)
    assert kit.service.memory_chat.request(kit.entry(text, user=5, group=None)) is None
    assert kit.service.memory_chat.request(kit.entry("你都记得我什么", user=5, group=None)) == "me"
    assert kit.service.memory_chat.request(kit.entry("忘掉我吧", user=5, group=GROUP)) is None
    assert kit.service.memory_chat.request(kit.entry("忘掉我吧", user=5, at=True)) == "forget"
