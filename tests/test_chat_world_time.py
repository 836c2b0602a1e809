"""The chat side lives in world time: after a `--speed` demo left world time ahead of the wall
clock, a standalone `yuiju bot` continues from the saved world time as the engine does, and the
messages she reads and archives are stamped in world time, so her conversations fall in her
timeline where they happened, not hours before her last action."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from nonebot_plugin_yuiju.onebot import normalize
from tests.chatkit import RecordingSender
from tests.conftest import TZ
from tests.test_chat_input import payload
from tests.test_message_service import BOT, FakeMemory, make_kit
from yuiju.config import YuijuConfig
from yuiju.memory.episodes import EpisodeRepo
from yuiju.storage.keys import Keys
from yuiju.world.clock import RealClock
from yuiju.world.state import WorldState
from yuiju.world.store import StateStore


async def save_world_ahead(redis: Any, keys: Keys, lead: timedelta) -> datetime:
    ahead = datetime.now(TZ) + lead
    await redis.set(keys.world, WorldState(time=ahead, last_advanced_at=ahead).model_dump_json())
    return ahead


async def test_a_standalone_bot_continues_from_the_saved_world_time(
    redis: Any, sqlite_history: Any
) -> None:
    from yuiju.message.bot import build_service

    cfg = YuijuConfig()
    saved = await save_world_ahead(redis, Keys(cfg.redis.prefix), timedelta(hours=2))
    closers: list[Any] = []
    service = await build_service(
        cfg, sender=RecordingSender(), on_stop=closers, redis=redis, history=sqlite_history
    )
    for closer in reversed(closers):  # the proactive task it started
        await closer()
    assert service.deps.clock.now() >= saved  # not the wall clock, two hours behind her life
    assert service.deps.clock.now() - saved < timedelta(minutes=1)


async def test_messages_are_stamped_in_world_time_and_archived_after_her_last_action(
    redis: Any,
) -> None:
    keys = Keys("t")
    saved = await save_world_ahead(redis, keys, timedelta(hours=2))
    clock = RealClock(TZ)
    clock.continue_from(await StateStore(redis, keys).saved_world_time([]))
    memory = FakeMemory()
    kit = await make_kit(redis, memory=memory, clock=clock)

    entry = normalize(
        payload("今天好热", stamp=int(datetime.now(TZ).timestamp())), self_id=BOT, tz=TZ
    )
    assert entry is not None
    await kit.service.handle(entry)
    [seen] = await kit.service.sessions.recent(entry.session_id, 1)
    assert abs(seen.time - clock.now()) < timedelta(minutes=1), (seen.time, clock.now())

    await kit.service.recorder.flush_windows()
    [episode] = memory.episodes_put
    assert episode.time >= saved - timedelta(seconds=5)  # not two hours before her last action


async def test_episodes_of_a_conversation_sort_after_the_action_they_followed(
    redis: Any, sqlite_history: Any
) -> None:
    """The same through the real episode store: her day, read back in order, ends with the chat."""
    from yuiju.memory.episodes import Episode

    keys = Keys("t")
    saved = await save_world_ahead(redis, keys, timedelta(hours=2))
    repo = EpisodeRepo(sqlite_history)
    await repo.ensure()
    await repo.put(
        Episode.model_validate(
            {
                "_id": "ep1",
                "character_id": "yuiju",
                "type": "behavior",
                "time": saved - timedelta(minutes=30),
                "end_time": saved,
                "status": "completed",
                "summary": "在公园散步",
            }
        )
    )
    clock = RealClock(TZ)
    clock.continue_from(saved)

    class Memory(FakeMemory):
        @property
        def episodes(self) -> Any:
            return repo

    kit = await make_kit(redis, memory=Memory(), clock=clock)
    entry = normalize(
        payload("散步开心吗", stamp=int(datetime.now(TZ).timestamp())), self_id=BOT, tz=TZ
    )
    assert entry is not None
    await kit.service.handle(entry)
    await kit.service.recorder.flush_windows()
    day = await repo.between("yuiju", saved - timedelta(hours=3), saved + timedelta(hours=1))
    assert [e.type for e in day] == ["behavior", "conversation"]
