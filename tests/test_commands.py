"""External world commands: validated one by one at the next tick; bad ones are rejected."""

from __future__ import annotations

import json

import pytest
import redis.asyncio as aioredis

from tests.conftest import at_time, make_character, make_engine
from yuiju.world.commands import CommandRejected, apply_command, enqueue_command, parse_command
from yuiju.world.state import WorldState


async def started(redis: aioredis.Redis):
    """An engine whose world exists (one tick at 08:00) and whose Yuiju has 300 coins."""
    kit = await make_engine(redis, None, start="2026-09-01 08:00")
    await kit.loop.ensure_character()
    await kit.ticker.tick(at_time("2026-09-01 08:00"))
    return kit


async def events(redis: aioredis.Redis, kit) -> list[tuple[str, dict]]:
    return [(f["type"], json.loads(f["data"])) for _, f in await redis.xrange(kit.keys.events)]


async def test_bad_commands_are_rejected_with_their_reason_and_a_good_one_still_applies(
    redis: aioredis.Redis,
) -> None:
    kit = await started(redis)
    world_before = await kit.store.load_world()
    assert world_before is not None
    park_fruit = sum(world_before.places["park"].resources.values())
    bad = [
        json.dumps({"type": "explode"}),
        "not json at all",
        json.dumps({"type": "give_item", "character_id": "nobody", "item": "野莓"}),
        json.dumps(
            {
                "type": "consume_resource",
                "place": "park",
                "resource": "野莓",
                "amount": park_fruit + 1,
            }
        ),
    ]
    await redis.rpush(kit.keys.commands, bad[0], bad[1])
    await enqueue_command(
        redis, kit.keys, {"type": "give_money", "character_id": "yuiju", "amount": 50}
    )
    await redis.rpush(kit.keys.commands, bad[2], bad[3])
    await redis.delete(kit.keys.events)

    assert await kit.ticker.tick(at_time("2026-09-01 09:00"))

    rejected = [json.loads(r) for r in await redis.lrange(kit.keys.rejected_commands, 0, -1)]
    assert [r["command"] for r in reversed(rejected)] == bad  # newest first in Redis
    reasons = {r["command"]: r["reason"] for r in rejected}
    assert "invalid command" in reasons[bad[0]] and "explode" in reasons[bad[0]]
    assert "invalid command" in reasons[bad[1]]
    assert "unknown character 'nobody'" in reasons[bad[2]]
    assert f"cannot consume {park_fruit + 1}" in reasons[bad[3]]

    her = await kit.character()
    assert her is not None and her.money == 350 and her.inventory == {}
    assert await redis.llen(kit.keys.commands) == 0
    seen = await events(redis, kit)
    assert [t for t, _ in seen if t.startswith("command_")].count("command_rejected") == 4
    assert [d["result"] for t, d in seen if t == "command_applied"] == ["gave 50 coins to yuiju"]
    world = await kit.store.load_world()
    assert world is not None and world.time == at_time("2026-09-01 09:00")  # evolutions ran too
    assert world.last_advanced_at == at_time("2026-09-01 09:00")
    assert sum(world.places["park"].resources.values()) == park_fruit  # nothing half-consumed


@pytest.mark.parametrize(
    ("command", "check"),
    [
        ({"type": "pause"}, lambda world, her: world.paused),
        ({"type": "set_weather", "weather": "雪"}, lambda world, her: world.weather.type == "雪"),
        (
            {"type": "give_item", "character_id": "yuiju", "item": "伞", "quantity": 2},
            lambda world, her: her.inventory == {"伞": 2},
        ),
    ],
)
async def test_a_queued_command_is_applied_at_the_next_tick(
    redis: aioredis.Redis, command, check
) -> None:
    kit = await started(redis)
    await enqueue_command(redis, kit.keys, command)

    await kit.ticker.tick(at_time("2026-09-01 08:00"))  # same instant: commands alone make a tick

    assert check(await kit.store.load_world(), await kit.character())


async def test_a_paused_world_starts_no_action_until_resumed(redis: aioredis.Redis) -> None:
    kit = await started(redis)
    await enqueue_command(redis, kit.keys, {"type": "pause"})
    await kit.ticker.tick(at_time("2026-09-01 08:00"))

    await kit.loop.step(at_time("2026-09-01 08:00"))
    her = await kit.character()
    assert her is not None and her.running is None

    await enqueue_command(redis, kit.keys, {"type": "resume"})
    await kit.ticker.tick(at_time("2026-09-01 08:01"))
    await kit.loop.step(at_time("2026-09-01 08:01"))
    her = await kit.character()
    assert her is not None and her.running is not None


@pytest.mark.parametrize(
    "raw",
    [
        {"type": "give_money", "character_id": "yuiju", "amount": 0},
        {"type": "give_item", "character_id": "yuiju", "item": ""},
        {"type": "set_weather", "weather": "沙尘暴"},
        {"type": "pause", "extra": 1},
    ],
)
async def test_enqueue_refuses_a_malformed_command(redis: aioredis.Redis, raw: dict) -> None:
    kit = await make_engine(redis, None)
    with pytest.raises(CommandRejected, match="invalid command"):
        await enqueue_command(redis, kit.keys, raw)
    assert await redis.llen(kit.keys.commands) == 0


def test_set_weather_before_any_weather_is_rejected() -> None:
    world = WorldState(
        time=at_time("2026-09-01 08:00"), last_advanced_at=at_time("2026-09-01 08:00")
    )
    with pytest.raises(CommandRejected, match="no weather yet"):
        apply_command(
            parse_command({"type": "set_weather", "weather": "晴"}),
            world,
            {"yuiju": make_character()},
        )
