"""What one person tells her stays theirs: profiles, private chats, group memories, output filters."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from yuiju.memory.episodes import Episode, EpisodeRepo
from yuiju.memory.service import MemoryService
from yuiju.message.agent import RunContext
from yuiju.message.model import Conversation, legacy_forms
from yuiju.message.output import sanitize
from yuiju.message.proactive import memory_group_id
from yuiju.message.tools import person_profile
from yuiju.storage.history import HistoryStore

NOW = datetime(2026, 9, 6, 21, 0, tzinfo=ZoneInfo("Asia/Shanghai"))


class _Profiles:
    async def person_profile(self, platform: str, uid: str) -> Any:
        class Profile:
            def render(self) -> str:
                return f"{uid} 的档案：私下说过要去医院"

        return Profile()


class _People:
    async def canonical(self, person: str) -> str:
        return person


class _Deps:
    memory = _Profiles()
    people = _People()


def _ctx(user_id: int, *, admin: bool = False) -> RunContext[Any]:
    return RunContext(
        deps=_Deps(),
        user_id=f"qq:{user_id}",
        conversation=Conversation.group("qq", 5),
        is_admin=admin,
    )


async def test_a_user_reads_only_their_own_profile_unless_admin() -> None:
    assert "档案" in await person_profile.run(_ctx(111), {})
    denied = await person_profile.run(_ctx(111), {"user_id": 222})
    assert "222" not in denied and "医院" not in denied
    assert "222 的档案" in await person_profile.run(_ctx(1, admin=True), {"user_id": 222})


async def test_today_events_and_the_diary_leave_private_chats_out(
    sqlite_history: HistoryStore,
) -> None:
    repo = EpisodeRepo(sqlite_history)
    await repo.ensure()
    await repo.put(
        Episode.model_validate(
            {
                "_id": "bhv_1",
                "character_id": "yuiju",
                "type": "behavior",
                "time": NOW.replace(hour=10),
                "status": "completed",
                "summary": "yuiju在南风公园散步",
            }
        )
    )
    await repo.put(
        Episode.model_validate(
            {
                "_id": "conv_1",
                "character_id": "yuiju",
                "type": "conversation",
                "time": NOW.replace(hour=11),
                "summary": "和小B聊天：我下周要去医院做手术，别告诉别人",
                "data": {"session_id": "private:222"},
            }
        )
    )
    svc = MemoryService.__new__(MemoryService)  # only the episode repository is needed here
    svc.episodes, svc.character_id = repo, "yuiju"
    assert [e.id for e in await svc.today_events(NOW)] == ["bhv_1"]


def test_her_group_posts_are_remembered_under_the_id_the_chat_recalls_with() -> None:
    group = Conversation.group("qq", 123456)
    assert memory_group_id(group) == group.key == "qq:123456"
    assert memory_group_id(group) in legacy_forms(group.key)  # what the chat side recalls with


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[C[CQ:x]Q:at,qq=all]大家好", "大家好"),
        ("@全体成员们 集合", "们 集合"),
        ("@all 开会", "开会"),
        ("@alligator 你好", "@alligator 你好"),
        ("[CQ:at,qq=all]", ""),
    ],
)
def test_output_never_carries_cq_codes_or_at_all(text: str, expected: str) -> None:
    assert sanitize(text, max_chars=100) == expected


def test_the_bot_never_listens_beyond_loopback_without_a_token() -> None:
    from yuiju.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="access_token"):
        load_config(environ={"YUIJU_ONEBOT__ENABLED": "true", "YUIJU_ONEBOT__HOST": "0.0.0.0"})
    cfg = load_config(
        environ={
            "YUIJU_ONEBOT__ENABLED": "true",
            "YUIJU_ONEBOT__HOST": "0.0.0.0",
            "YUIJU_ONEBOT__ACCESS_TOKEN": "s3cret",
        }
    )
    assert cfg.onebot.host == "0.0.0.0"
