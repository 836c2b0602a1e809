"""Who is with whom now, and the relationships: `yuiju status` (text and --json) and the page."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import httpx
import pytest
import redis.asyncio as aioredis

from tests.conftest import TZ, make_engine
from tests.test_social_meetings import (
    CHAT_WITH_KAEDE,
    WALK,
    by_character,
    in_the_park,
    step_in_order,
)
from yuiju.config import load_config
from yuiju.storage.history import HistoryStore
from yuiju.web.app import create_app
from yuiju.web.view import Observer
from yuiju.world.town import HAURA

SATURDAY = "2026-09-05 10:00"


async def meeting(redis: aioredis.Redis) -> None:
    """悠酱 and 枫 chatting in the park (from 10:00 to 10:20)."""
    kit = await make_engine(
        redis,
        None,
        policy=by_character(kaede=WALK, yuiju=CHAT_WITH_KAEDE),
        start=SATURDAY,
        characters=in_the_park("kaede", "yuiju"),
    )
    await step_in_order(kit, SATURDAY, "kaede", "yuiju")


async def test_status_shows_who_is_with_whom_and_their_closeness(
    redis: aioredis.Redis, redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from yuiju import cli as yuiju_cli

    await meeting(redis)
    cfg = load_config(
        environ={
            "YUIJU_REDIS__URL": redis_url,
            "YUIJU_APP__DATA_DIR": str(tmp_path),
            "YUIJU_WORLD__CHARACTERS": '["yuiju", "kaede"]',
        }
    )

    assert await yuiju_cli._status(cfg, as_json=True) == 0
    report = json.loads(capsys.readouterr().out)
    social = report["social"]
    (now,) = social["together"]
    assert set(now["with"]) == {"yuiju", "kaede"} and now["doing"] == "聊天"
    assert now["place"] == "南风公园" and now["until"].startswith("2026-09-05T10:20")
    (to_kaede,) = social["relations"]["yuiju"]
    assert to_kaede["id"] == "kaede" and to_kaede["name"] == "枫" and to_kaede["meetings"] == 1
    assert to_kaede["closeness"] > 55 and to_kaede["band"] == "朋友"  # classmates (the card: 55)
    assert report["characters"]["kaede"]["social"]["relations"]["character:yuiju"]["meetings"] == 1

    assert await yuiju_cli._status(cfg, as_json=False) == 0
    text = capsys.readouterr().out
    assert "在一起：悠酱和枫在南风公园聊天（到 10:20）" in text
    assert "悠酱 → 枫 朋友（57）" in text


async def test_the_observer_page_shows_who_is_together_and_her_relations(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    kit = await make_engine(
        redis,
        sqlite_history,
        policy=by_character(kaede=WALK, yuiju=CHAT_WITH_KAEDE),
        start=SATURDAY,
        characters=in_the_park("kaede", "yuiju"),
    )
    await step_in_order(kit, SATURDAY, "kaede", "yuiju")
    await kit.engine.flush_outbox(force=True)
    observer = Observer(
        redis=redis,
        history=sqlite_history,
        keys=kit.keys,
        town=HAURA,
        tz=TZ,
        character_ids=["yuiju", "kaede"],
        catalogue=kit.loop.catalogue,
        now=kit.clock.now,
        names={"yuiju": "悠酱", "kaede": "枫"},
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(observer)), base_url="http://observer"
    ) as client:
        page = (await client.get("/")).text
        state = (await client.get("/api/state")).json()

    assert "和别人" in page
    assert "悠酱和枫在南风公园聊天（到 10:20）" in page
    assert "枫" in page and "朋友（57）" in page
    assert state["social"]["together"][0]["with"] == ["yuiju", "kaede"]
    assert state["social"]["relations"][0]["name"] == "枫"


async def test_actions_why_sees_who_is_there(
    redis: aioredis.Redis, redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from yuiju import cli as yuiju_cli

    await meeting(redis)
    cfg = load_config(
        environ={
            "YUIJU_REDIS__URL": redis_url,
            "YUIJU_APP__DATA_DIR": str(tmp_path),
            "YUIJU_WORLD__CHARACTERS": '["yuiju", "kaede"]',
        }
    )

    later = datetime(2026, 12, 5, 11, 0, tzinfo=TZ)  # a Saturday morning, months after the chat
    assert await yuiju_cli._actions_why(cfg, "greet", "yuiju", now=later) == 0
    out = capsys.readouterr().out
    # then 枫 is there, free, and not met that day
    assert "greet 打招呼: offered now" in out and "这里没有别人" not in out
