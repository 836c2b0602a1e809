"""People are platform-qualified everywhere (issue 19): imported lines are found by live chat,
what was stored with plain ids before platforms is read as QQ's without losing anything, an admin
links one person's accounts across platforms, and the core chain runs the same for any platform."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import at_time
from tests.test_message_service import ADMIN, GROUP, make_kit
from yuiju.config import ChatConfig, GroupPolicy, YuijuConfig
from yuiju.memory.chatlog import import_chat_log, parse_chat_log
from yuiju.memory.diary import DiaryVoice
from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.service import MemoryService, build_memory
from yuiju.memory.vectors import QdrantClientStore
from yuiju.message.model import Conversation, Entry
from yuiju.message.recorder import CHAT_LOG
from yuiju.storage.history import HistoryStore
from yuiju.storage.keys import Keys

QQ_USER = 12345
QQ_GROUP = 67890


@pytest.fixture
async def memory(sqlite_history: HistoryStore) -> AsyncIterator[MemoryService]:
    store = await QdrantClientStore.open(collection="people", dim=64, location=":memory:")
    try:
        yield await build_memory(
            YuijuConfig(),
            sqlite_history,
            SemanticMemory(store, HashingEmbedder(64)),
            character_id="yuiju",
            voice=DiaryVoice(name="悠酱", persona="你是悠酱。"),
        )
    finally:
        await store.close()


def situation(kit: Any) -> str:
    """The dynamic system message of her last turn: what she recalled and whom she knows."""
    return str(kit.model.calls[-1][1]["content"])


def entry(kit: Any, text: str, *, conversation: Conversation, user: str, at: bool = True) -> Entry:
    kit.n += 1
    return Entry(
        id=f"m{kit.n}",
        conversation=conversation,
        user_id=user,
        sender_name="小明",
        time=at_time("2026-09-01 10:00"),
        text=text,
        mentions_me=at,
    )


# -- import and live chat meet ---------------------------------------------------------------------


async def test_imported_chat_lines_are_found_by_live_chat(
    redis: Any, sqlite_history: HistoryStore, memory: MemoryService, tmp_path: Path
) -> None:
    log = tmp_path / "chat.jsonl"
    log.write_text(
        json.dumps(
            {
                "time": "2026-08-20T20:15:00+08:00",
                "user_id": f"qq:{QQ_USER}",
                "text": "我下周要去海边捡贝壳",
                "group_id": f"qq:{QQ_GROUP}",
                "nickname": "小明",
            },
            ensure_ascii=False,
        )
        + "\n",
        encoding="utf-8",
    )
    parsed = parse_chat_log(log)
    assert not parsed.errors
    await import_chat_log(memory.chat, parsed.lines)
    # what live chat searched before platforms: the plain ids, a scope the import never fills
    old_scope = await memory.memory_search(
        "海边捡贝壳", now=at_time("2026-09-01 10:00"), user_id=str(QQ_USER), group_id=str(QQ_GROUP)
    )
    assert not [r for r in old_scope if "贝壳" in r.text]

    kit = await make_kit(redis, sqlite_history, memory=memory, groups={str(QQ_GROUP): {}})
    out = await kit.say("悠酱还记得海边捡贝壳的事吗", user=QQ_USER, group=QQ_GROUP, at=True)
    assert out.answered
    assert "我下周要去海边捡贝壳" in situation(kit)


async def test_memories_stored_with_plain_ids_before_platforms_are_still_recalled(
    redis: Any, sqlite_history: HistoryStore, memory: MemoryService
) -> None:
    # live chat up to now stored what people said under their plain QQ number
    await memory.chat.add(
        str(QQ_USER), "我养了一只叫豆豆的猫", at_time("2026-08-30 21:00"), group_id=str(QQ_GROUP)
    )
    await memory.memory_store("小明对花生过敏", user_id=str(QQ_USER), now=at_time("2026-08-30"))
    kit = await make_kit(redis, sqlite_history, memory=memory, groups={str(QQ_GROUP): {}})
    await kit.say("悠酱还记得豆豆吗，我的猫", user=QQ_USER, group=QQ_GROUP, at=True)
    assert "豆豆" in situation(kit)
    await kit.say("悠酱我能吃花生吗", user=QQ_USER, group=QQ_GROUP, at=True)
    assert "花生过敏" in situation(kit)


async def test_what_live_chat_records_is_platform_qualified(
    redis: Any, sqlite_history: HistoryStore, memory: MemoryService
) -> None:
    kit = await make_kit(
        redis, sqlite_history, memory=memory, window_messages=2, groups={str(QQ_GROUP): {}}
    )
    await kit.say("我明天要考试了", user=QQ_USER, group=QQ_GROUP)
    await kit.say("祝我好运", user=QQ_USER, group=QQ_GROUP)
    await kit.service.drain()
    raw = await sqlite_history.find(
        "chat_memories", eq={"character_id": "yuiju", "user_id": f"qq:{QQ_USER}"}
    )
    assert [(r["text"], r["group_id"]) for r in raw] == [
        ("我明天要考试了", f"qq:{QQ_GROUP}"),
        ("祝我好运", f"qq:{QQ_GROUP}"),
    ]
    logged = await sqlite_history.find(CHAT_LOG.name, eq={"character_id": "yuiju"})
    assert {d["user_id"] for d in logged} == {f"qq:{QQ_USER}"}
    assert {d["session_id"] for d in logged} == {f"group:qq:{QQ_GROUP}"}
    profile = await memory.person_profile("qq", str(QQ_USER))
    assert profile is not None and profile.nickname == f"u{QQ_USER}"


# -- data written the old way ------------------------------------------------------------------------


async def test_a_redis_session_written_before_platforms_is_kept_under_its_qq_name(
    redis: Any,
) -> None:
    keys, old = Keys("t"), f"group:{GROUP}"
    said = {
        "id": "9",
        "scene": "group",
        "group_id": GROUP,
        "user_id": 5,
        "sender_name": "小明",
        "time": at_time("2026-09-01 09:00").isoformat(),
        "text": "昨天说好一起去看烟花",
    }
    hers = {**said, "id": "bot-1", "user_id": 10001, "from_bot": True, "text": "好呀，约好了"}
    await redis.rpush(keys.chat_recent("yuiju", old), json.dumps(said), json.dumps(hers))
    await redis.rpush(keys.chat_window("yuiju", old), json.dumps(said))
    await redis.rpush(
        keys.chat_context("yuiju", old),
        json.dumps({"role": "user", "content": "昨天说好一起去看烟花"}),
        json.dumps({"role": "assistant", "content": "好呀，约好了"}),
    )
    await redis.set(keys.chat_summary("yuiju", old), "和小明约了看烟花")
    await redis.sadd(keys.chat_sessions("yuiju"), old)

    kit = await make_kit(redis)  # starting renames the session
    assert await kit.service.sessions.sessions() == [f"group:qq:{GROUP}"]
    window, _ = await kit.service.sessions.window_peek(f"group:qq:{GROUP}")
    assert [e.text for e in window] == ["昨天说好一起去看烟花"]
    await kit.say("悠酱还记得我们约了什么吗", at=True)
    seen = kit.model.calls[-1]
    assert "和小明约了看烟花" in seen[1]["content"]
    assert [m["content"] for m in seen[2:4]] == ["昨天说好一起去看烟花", "好呀，约好了"]
    recent = await kit.service.sessions.recent(f"group:qq:{GROUP}", 10)
    assert [(e.user_id, e.from_bot) for e in recent[:2]] == [("qq:5", False), ("self:legacy", True)]
    assert all(e.conversation == Conversation.group("qq", GROUP) for e in recent)
    assert await kit.service.sessions.migrate() == 0  # once


async def test_a_message_log_record_written_before_platforms_reads_as_qq(
    history: HistoryStore,
) -> None:
    await history.ensure(CHAT_LOG)
    await history.put(
        CHAT_LOG.name,
        {
            "_id": "yuiju:private:7:1:abc",
            "character_id": "yuiju",
            "session_id": "private:7",
            "id": "bot-1",
            "scene": "private",
            "group_id": None,
            "user_id": 10001,
            "sender_name": "悠酱",
            "time": at_time("2026-09-01 09:00"),
            "text": "晚安",
            "from_bot": True,
            "segments": [],
        },
    )
    [doc] = await history.find(CHAT_LOG.name, eq={"character_id": "yuiju"})
    old = Entry.model_validate(doc)
    assert old.conversation == Conversation.private("qq:7") and old.from_bot


def test_admins_and_whitelist_in_an_old_config_are_qq_ids() -> None:
    cfg = ChatConfig(admins=[10001, "tg:678"], private_whitelist=["10002"])
    assert cfg.admins == ["qq:10001", "tg:678"] and cfg.private_whitelist == ["qq:10002"]
    with pytest.raises(ValueError, match="'qq:12345' or 'tg:678'"):
        ChatConfig(admins=["bob"])
    groups = ChatConfig(groups={"123": GroupPolicy(), "tg:-100": GroupPolicy(reply="mention")})
    assert groups.group_policy("qq:123").reply == "name"
    assert groups.group_policy("tg:-100").reply == "mention"
    assert not groups.group_policy("tg:123").enabled  # a QQ group's number is not another's


# -- one person, several accounts ------------------------------------------------------------------


async def test_an_admin_links_accounts_and_her_memory_of_them_is_one(
    redis: Any, sqlite_history: HistoryStore, memory: MemoryService
) -> None:
    await memory.memory_store("小明对花生过敏", user_id=f"qq:{QQ_USER}", now=at_time("2026-08-30"))
    await memory.persons.correct(
        "qq", str(QQ_USER), "喜好", "喜欢海边", at_time("2026-08-30 10:00")
    )
    kit = await make_kit(redis, sqlite_history, memory=memory, groups={"tg:-100": GroupPolicy()})
    tg_group = Conversation.group("tg", "-100")
    await kit.service.handle(entry(kit, "悠酱我能吃花生吗", conversation=tg_group, user="tg:678"))
    assert "花生过敏" not in situation(kit) and "喜欢海边" not in situation(kit)

    out = await kit.say(f"/link qq:{QQ_USER} tg:678", group=None, user=ADMIN)
    assert out.replies == [f"记住了，这些账号是同一个人：qq:{QQ_USER} = tg:678。"]
    await kit.service.handle(entry(kit, "悠酱我能吃花生吗", conversation=tg_group, user="tg:678"))
    assert "花生过敏" in situation(kit) and "喜欢海边" in situation(kit)

    # what the linked account says is remembered under the person
    await kit.service.handle(
        entry(kit, "记住我下个月搬家", conversation=tg_group, user="tg:678", at=False)
    )
    await kit.service.recorder.flush_windows()
    moved = await sqlite_history.find(
        "chat_memories", eq={"character_id": "yuiju", "user_id": f"qq:{QQ_USER}"}
    )
    assert "记住我下个月搬家" in [m["text"] for m in moved]

    out = await kit.say("/unlink tg:678", group=None, user=ADMIN)
    assert out.replies == ["tg:678 已单独算一个人。"]
    await kit.service.handle(entry(kit, "悠酱我能吃花生吗", conversation=tg_group, user="tg:678"))
    assert "花生过敏" not in situation(kit)


async def test_link_refuses_ids_it_cannot_read(redis: Any) -> None:
    kit = await make_kit(redis)
    out = await kit.say("/link qq:1 bob", group=None, user=ADMIN)
    assert out.replies[0].startswith("参数不对") and "'tg:678'" in out.replies[0]
    out = await kit.say("/link qq:1 qq:1", group=None, user=ADMIN)
    assert out.replies[0].startswith("参数不对")


# -- the chain knows no platform ---------------------------------------------------------------------


async def test_a_conversation_on_another_platform_runs_the_same_chain(redis: Any) -> None:
    kit = await make_kit(redis, admins=[ADMIN, "tg:678"], groups={"tg:-100": GroupPolicy()})
    tg_group = Conversation.group("tg", "-100")
    out = await kit.service.handle(entry(kit, "悠酱在吗", conversation=tg_group, user="tg:9"))
    assert out.replies == ["嗯嗯，我在"] and kit.sent == [("group", -100, "嗯嗯，我在")]
    assert "你在 Telegram 群（-100）里聊天。" in situation(kit)
    assert 'id="tg:9"' in kit.model.calls[-1][-1]["content"]
    out = await kit.service.handle(entry(kit, "/pause", conversation=tg_group, user="tg:678"))
    assert out.reason == "admin command" and out.replies == ["世界将暂停。"]
    recent = await kit.service.sessions.recent("group:tg:-100", 10)
    # the admin's answer is for the admin, never her line in the group's history
    assert [e.user_id for e in recent] == ["tg:9", "self:yuiju", "tg:678"]
    # the same number on QQ is another group, another person
    out = await kit.say("悠酱在吗", user=9, group=-100, at=True)
    assert out.reason == "group not enabled"


def test_the_chat_core_imports_nothing_of_nonebot() -> None:
    code = (
        "import sys, yuiju.message.service, yuiju.message.bot, yuiju.message.proactive, "
        "yuiju.message.tools, yuiju.message.admin, yuiju.message.debug; "
        "print(sorted(m for m in sys.modules if m.split('.')[0].startswith('nonebot')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


def test_the_chat_core_has_no_import_cycle() -> None:
    # issue 20 item 2: admin ↔ service ↔ tools imported each other (lazily or for types)
    import ast

    root = Path(__file__).resolve().parents[1] / "message"
    graph: dict[str, set[str]] = {}
    for path in root.glob("*.py"):
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "yuiju.message."
            ):
                found.add(str(node.module).split(".")[2])
        graph[path.stem] = found - {path.stem}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})):
                return True
        return False

    assert [m for m in sorted(graph) if reaches(m, m, {m})] == []
