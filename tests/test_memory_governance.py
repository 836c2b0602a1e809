"""Memory governance on both history backends: export, forget (a person, a group), one item,
a correction, the audit entry."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import redis.asyncio as aioredis

from yuiju.memory.distill import FACTS, ChatLine, ChatMemories
from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.episodes import EPISODES, Episode, EpisodeRepo
from yuiju.memory.governance import MEMORY_AUDIT, Governance, GovernanceDeps, Subject, scrub
from yuiju.memory.messagelog import CHAT_LOG
from yuiju.memory.persons import PersonRepo
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.vectors import QdrantClientStore, Where
from yuiju.storage.history import HistoryStore
from yuiju.storage.keys import Keys

TZ = ZoneInfo("Asia/Shanghai")
T0 = datetime(2026, 9, 1, 20, 0, tzinfo=TZ)
MING = Subject(kind="user", id="qq:777", ids=("qq:777", "777"))
HONG = Subject(kind="user", id="qq:888", ids=("qq:888", "888"))
KEYS = Keys("gov")
GROUP = "qq:5000"
SID = f"group:{GROUP}"


@pytest.fixture
async def semantic() -> AsyncIterator[SemanticMemory]:
    store = await QdrantClientStore.open(collection="g", dim=64, location=":memory:")
    yield SemanticMemory(store, HashingEmbedder(64))
    await store.close()


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


async def lived(
    history: HistoryStore, semantic: SemanticMemory, redis: aioredis.Redis
) -> Governance:
    """A group chat of 小明 and 小红 with her, private chats, facts, profiles, episodes, Redis."""
    chat = ChatMemories(history, semantic, "yuiju", context_minutes=60)
    await chat.ensure()
    await chat.add_many(
        [
            ChatLine(
                user_id="qq:777",
                text="我周末去青岛冲浪了吗？",
                time=at(0),
                group_id=GROUP,
                nickname="小明",
            ),
            ChatLine(
                user_id="qq:888",
                text="我喜欢下雨天的图书馆",
                time=at(1),
                group_id=GROUP,
                nickname="小红",
            ),
            ChatLine(user_id="qq:777", text="我的猫叫土豆", time=at(2), nickname="小明"),
            ChatLine(user_id="qq:888", text="我在学大提琴", time=at(3), nickname="小红"),
        ]
    )
    await history.ensure(FACTS, CHAT_LOG)
    for user, content in (
        ("qq:777", "这个用户养了一只叫土豆的猫"),
        ("qq:888", "这个用户在学大提琴"),
    ):
        await history.put(
            FACTS.name,
            {
                "_id": f"fact_{user[-3:]}",
                "character_id": "yuiju",
                "user_id": user,
                "content": content,
                "importance": 0.7,
                "time": at(5),
                "indexed": True,
            },
        )
    persons = PersonRepo(history, "yuiju")
    await persons.ensure()
    await persons.correct("qq", "777", "喜好", "冲浪和猫", at(5))
    await persons.correct("qq", "888", "喜好", "图书馆", at(5))
    for n, (user, name, text, sid) in enumerate(
        [
            ("qq:777", "小明", "我周末去青岛冲浪了吗？", SID),
            ("qq:888", "小红", "我喜欢下雨天的图书馆", SID),
            ("qq:777", "小明", "我的猫叫土豆", "private:qq:777"),
            ("self:yuiju", "悠酱", "土豆好可爱", "private:qq:777"),
        ]
    ):
        await history.put(
            CHAT_LOG.name,
            {
                "_id": f"log{n}",
                "id": str(n),
                "character_id": "yuiju",
                "session_id": sid,
                "user_id": user,
                "sender_name": name,
                "text": text,
                "time": at(n),
            },
        )
    episodes = EpisodeRepo(history)
    await episodes.ensure()
    await episodes.put(
        Episode.model_validate(
            {
                "_id": "conv_group",
                "character_id": "yuiju",
                "type": "conversation",
                "time": at(0),
                "summary": "小明说周末去青岛冲浪。小红喜欢下雨天的图书馆。",
                "data": {
                    "session_id": SID,
                    "counterparties": [
                        {"user_id": "qq:777", "name": "小明"},
                        {"user_id": "qq:888", "name": "小红"},
                    ],
                    "message_count": 2,
                    "messages": [
                        {"speaker": "小明", "text": "我周末去青岛冲浪了吗？", "time": at(0)},
                        {"speaker": "小红", "text": "我喜欢下雨天的图书馆", "time": at(1)},
                    ],
                },
            }
        )
    )
    await episodes.put(
        Episode.model_validate(
            {
                "_id": "conv_private",
                "character_id": "yuiju",
                "type": "conversation",
                "time": at(2),
                "summary": "小明说他的猫叫土豆",
                "data": {
                    "session_id": "private:qq:777",
                    "counterparties": [{"user_id": "qq:777", "name": "小明"}],
                    "messages": [{"speaker": "小明", "text": "我的猫叫土豆", "time": at(2)}],
                },
            }
        )
    )
    await episodes.put(
        Episode.model_validate(
            {
                "_id": "nws_1_yuiju",
                "character_id": "yuiju",
                "type": "conversation",
                "time": at(4),
                "summary": "小明告诉悠酱：小明下周要搬家",
                "data": {"by": {"kind": "person", "id": "qq:777", "name": "小明"}},
            }
        )
    )
    await semantic.remember([])
    from yuiju.memory.semantic import NewMemory

    await semantic.remember(
        [
            NewMemory(
                kind="episode", character_id="yuiju", text=e_text, time=at(0), key=eid, ref=eid
            )
            for eid, e_text in (
                ("conv_group", "小明说周末去青岛冲浪。小红喜欢下雨天的图书馆。"),
                ("conv_private", "小明说他的猫叫土豆"),
            )
        ]
        + [
            NewMemory(kind="fact", character_id="yuiju", text=t, time=at(5), key=k, user_id=u)
            for k, u, t in (
                ("fact_777", "qq:777", "这个用户养了一只叫土豆的猫"),
                ("fact_888", "qq:888", "这个用户在学大提琴"),
            )
        ]
    )
    await redis.sadd(KEYS.chat_sessions("yuiju"), SID, "private:qq:777", "private:qq:888")
    for sid, user, text in (
        (SID, "qq:777", "冲浪"),
        (SID, "qq:888", "图书馆"),
        ("private:qq:777", "qq:777", "土豆"),
    ):
        await redis.rpush(
            KEYS.chat_recent("yuiju", sid),
            json.dumps({"user_id": user, "sender_name": "x", "text": text}, ensure_ascii=False),
        )
    await redis.rpush(
        KEYS.chat_context("yuiju", SID),
        json.dumps(
            {"role": "user", "content": "小明：我周末去青岛冲浪了吗？", "message_id": "0"},
            ensure_ascii=False,
        ),
        json.dumps(
            {"role": "user", "content": "小红：我喜欢下雨天的图书馆", "message_id": "1"},
            ensure_ascii=False,
        ),
    )
    await redis.set(KEYS.chat_summary("yuiju", SID), "小明在聊冲浪。小红喜欢图书馆。")
    await redis.set(KEYS.chat_summary("yuiju", "private:qq:777"), "小明的猫叫土豆。")
    await redis.rpush(
        KEYS.commands,
        json.dumps(
            {
                "type": "tell_news",
                "character_id": "yuiju",
                "by": {"kind": "person", "id": "qq:777", "name": "小明"},
                "text": "我要去冲浪",
            },
            ensure_ascii=False,
        ),
    )
    await redis.hset(KEYS.people_links, "tg:42", "qq:777")
    from yuiju.memory.diary import DIARIES

    await history.ensure(DIARIES)
    await history.put(
        DIARIES.name,
        {
            "_id": "diary_yuiju_day_2026-09-01",
            "character_id": "yuiju",
            "period": "day",
            "date": "2026-09-01",
            "end_date": "2026-09-01",
            "text": "今天去了图书馆。小明说他去青岛冲浪了。晚上早早睡了。",
            "source": "factual",
            "written_at": at(120),
        },
    )
    gov = Governance(
        GovernanceDeps(
            history=history, semantic=semantic, redis=redis, keys=KEYS, character_ids=["yuiju"]
        )
    )
    await gov.ensure()
    return gov


def everything(items: list) -> str:
    return json.dumps([i.document() for i in items], ensure_ascii=False, default=str)


def test_scrub_drops_the_sentences_naming_them() -> None:
    assert scrub("小明说周末去冲浪。小红喜欢图书馆。", ["小明"]) == "小红喜欢图书馆。"
    assert scrub("没有人", ["小明"]) == "没有人"


async def test_export_lists_what_she_keeps_of_a_person_in_every_store(
    history: HistoryStore, semantic: SemanticMemory, redis: aioredis.Redis
) -> None:
    gov = await lived(history, semantic, redis)
    items = await gov.export(MING)
    where = {(i.store, i.where) for i in items}
    for collection in ("chat_memories", "facts", "persons", "chat_log", "episodes"):
        assert ("history", collection) in where, collection
    assert any(i.store == "vectors" for i in items)
    assert any(i.store == "redis" and i.where.endswith(":summary") for i in items)
    text = everything(items)
    assert "土豆" in text and "冲浪" in text
    assert "大提琴" not in text  # 小红's private line is not his


async def test_forget_erases_him_everywhere_and_keeps_her(
    history: HistoryStore, semantic: SemanticMemory, redis: aioredis.Redis
) -> None:
    gov = await lived(history, semantic, redis)
    counts = await gov.forget(MING, requested_by="admin:cli", now=at(60), request_id="req-1")

    assert counts["history.chat_memories"] == 2 and counts["history.facts"] == 1
    assert counts["history.persons"] == 1 and counts["vectors.points"] >= 4
    assert await gov.export(MING) == []
    # nothing of his words anywhere she reads
    for spec in (FACTS, CHAT_LOG, EPISODES):
        assert "土豆" not in json.dumps(
            await history.find(spec.name), ensure_ascii=False, default=str
        )
    assert not await semantic.store.scroll(Where(eq={"user_id": ["qq:777", "777"]}))
    payloads = json.dumps(
        [h.payload for h in await semantic.store.scroll(Where(eq={"character_id": "yuiju"}))],
        ensure_ascii=False,
    )
    assert "小明" not in payloads and "土豆" not in payloads
    found = await semantic.recall(
        "猫 土豆 冲浪", character_id="yuiju", now=at(60), every_scope=True
    )
    assert all("土豆" not in r.text and "冲浪" not in r.text for r in found)
    from yuiju.memory.diary import DIARIES

    diary = await history.get(DIARIES.name, "diary_yuiju_day_2026-09-01")
    assert diary is not None and diary["text"] == "今天去了图书馆。晚上早早睡了。"
    # the group's episode stays, rewritten without him
    group = await history.get(EPISODES.name, "conv_group")
    assert group is not None and group["summary"] == "小红喜欢下雨天的图书馆。"
    assert [m["speaker"] for m in group["data"]["messages"]] == ["小红"]
    assert await history.get(EPISODES.name, "conv_private") is None
    assert await history.get(EPISODES.name, "nws_1_yuiju") is None
    # Redis: his session gone, the group's context keeps its turns without his words
    assert await redis.get(KEYS.chat_summary("yuiju", "private:qq:777")) is None
    assert await redis.get(KEYS.chat_summary("yuiju", SID)) == "小红喜欢图书馆。"
    context = [json.loads(x) for x in await redis.lrange(KEYS.chat_context("yuiju", SID), 0, -1)]
    assert len(context) == 2 and "冲浪" not in json.dumps(context, ensure_ascii=False)
    assert await redis.llen(KEYS.commands) == 0
    assert await redis.hget(KEYS.people_links, "tg:42") is None
    assert "private:qq:777" not in await redis.smembers(KEYS.chat_sessions("yuiju"))
    # 小红 is kept whole
    hong = everything(await gov.export(HONG))
    assert "大提琴" in hong and "图书馆" in hong
    assert await history.get(FACTS.name, "fact_888") is not None
    # the audit entry: who, when, counts; never the content or whom
    [entry] = await history.find(MEMORY_AUDIT.name)
    assert entry["requested_by"] == "admin:cli" and entry["request_id"] == "req-1"
    assert entry["counts"]["history.facts"] == 1
    assert "777" not in json.dumps(entry, default=str) and "土豆" not in json.dumps(
        entry, ensure_ascii=False, default=str
    )
    assert await gov.audited("req-1") is not None


async def test_forgetting_a_group_leaves_private_chats(
    history: HistoryStore, semantic: SemanticMemory, redis: aioredis.Redis
) -> None:
    gov = await lived(history, semantic, redis)
    await gov.forget(
        Subject(kind="group", id=GROUP, ids=(GROUP, "5000")), requested_by="qq:1", now=at(60)
    )
    assert await history.get(EPISODES.name, "conv_group") is None
    items = await gov.export(MING)
    assert "土豆" in everything(items)  # what he said in private stays
    said = [i.content["text"] for i in items if i.where in ("chat_memories", "chat_log")]
    assert said and not any("冲浪" in t for t in said)
    assert await redis.llen(KEYS.chat_recent("yuiju", SID)) == 0


async def test_one_fact_is_forgotten_or_corrected_by_id(
    history: HistoryStore, semantic: SemanticMemory, redis: aioredis.Redis
) -> None:
    gov = await lived(history, semantic, redis)
    new = await gov.correct_fact(
        "fact_888", "这个用户在学小提琴", requested_by="qq:888", now=at(60)
    )
    assert new["supersedes"] == "fact_888" and await history.get(FACTS.name, "fact_888") is None
    found = await semantic.recall(
        "学什么乐器", character_id="yuiju", now=at(60), user_id="qq:888", kinds=["fact"]
    )
    assert [r.text for r in found] == ["这个用户在学小提琴"]
    assert await gov.forget_item("fact_777", requested_by="admin:cli", now=at(61)) == "facts"
    assert await history.get(FACTS.name, "fact_777") is None
    assert not await semantic.store.count(Where(eq={"ref": "fact_777"}))
    assert await gov.forget_item("fact_nope", requested_by="admin:cli", now=at(61)) is None
    with pytest.raises(KeyError):
        await gov.correct_fact("fact_nope", "x", requested_by="a", now=at(62))
    assert len(await gov.audit_log()) == 2


# -- with the daemon running: through the world, then the memory worker ----------------------------


async def test_a_running_daemon_forgets_through_the_world_then_the_memory_worker(
    sqlite_history: HistoryStore, semantic: SemanticMemory, redis: aioredis.Redis
) -> None:
    from tests.conftest import make_engine
    from yuiju.memory.indexer import MemoryWorker
    from yuiju.message.memory_requests import forget_command
    from yuiju.world.commands import TellNews, enqueue_command

    kit = await make_engine(redis, sqlite_history, prefix="gov")
    await kit.loop.ensure_character()
    await kit.ticker.tick(kit.clock.now())
    ming = {"kind": "person", "id": "qq:777", "name": "小明"}
    await enqueue_command(
        redis,
        KEYS,
        TellNews(character_id="yuiju", by=ming, text="小明下周要搬家"),  # type: ignore[arg-type]
    )
    await kit.ticker.tick(kit.clock.now())
    await kit.engine.flush_outbox(force=True)
    state = await kit.store.load_character("yuiju")
    assert state is not None and state.social.news
    gov = await lived(sqlite_history, semantic, redis)
    worker = MemoryWorker(redis, KEYS.events, {}, clock=kit.clock, governance=gov, block_ms=1)
    await worker.ensure_group()
    await worker.run_once(block=False)  # what came before: nothing of the forget

    command = forget_command(MING, await gov.names(MING), "admin:cli")
    await enqueue_command(redis, KEYS, command)
    await kit.ticker.tick(kit.clock.now())  # the engine: one writer of her state
    state = await kit.store.load_character("yuiju")
    assert state is not None and not state.social.news
    assert await gov.audited(command.request_id) is None  # the stores' part is the worker's
    await worker.run_once(block=False)

    entry = await gov.audited(command.request_id)
    # his news told through a command, and the one `lived` left queued (applied at this tick)
    assert entry is not None and entry["counts"]["state.news"] == 2
    assert entry["counts"]["history.facts"] == 1 and entry["counts"]["history.episodes"] >= 3
    assert await gov.export(MING) == []
    stream = json.dumps(await redis.xrange(KEYS.events), ensure_ascii=False)
    assert "小明" not in stream and "qq:777" not in stream


# -- retention, applied by the nightly job ----------------------------------------------------------


async def test_retention_of_the_message_log_and_unreferenced_chat_memories(
    history: HistoryStore, semantic: SemanticMemory, redis: aioredis.Redis
) -> None:
    from yuiju.memory.distill import CHAT_MEMORIES, Distiller

    await lived(history, semantic, redis)
    later = at(60 * 24 * 40)  # 40 days on
    await history.put(  # one line is cited by a fact: kept however old
        FACTS.name,
        {
            "_id": "fact_cites",
            "character_id": "yuiju",
            "user_id": "qq:888",
            "content": "x",
            "importance": 0.5,
            "time": at(5),
            "indexed": True,
            "sources": [
                d["_id"] for d in await history.find(CHAT_MEMORIES.name) if "大提琴" in d["text"]
            ],
        },
    )
    off = Distiller(history, semantic, None, character_id="yuiju", keep_undistilled_days=365)
    await off.run(later)  # off by default: nothing goes
    assert await history.count(CHAT_LOG.name) == 4 and await history.count(CHAT_MEMORIES.name) == 4

    on = Distiller(
        history,
        semantic,
        None,
        character_id="yuiju",
        keep_undistilled_days=365,
        keep_chat_log_days=30,
        keep_unreferenced_chat_days=10,
    )
    report = await on.run(later)
    assert await history.count(CHAT_LOG.name) == 0
    assert [d["text"] for d in await history.find(CHAT_MEMORIES.name)] == ["我在学大提琴"]
    assert report.deleted == 3
    assert await semantic.store.count(Where(eq={"kind": "chat"})) == 1


async def test_a_line_after_a_forgotten_one_is_not_read_with_it(
    history: HistoryStore, semantic: SemanticMemory, redis: aioredis.Redis
) -> None:
    """The chat side keeps the last line of each chat in memory: a line said after a forget (in
    the same process or another) must not carry the forgotten line's words as its context."""
    chat = ChatMemories(history, semantic, "yuiju", context_minutes=60)
    await chat.ensure()
    await chat.add("qq:777", "你猜我周末去哪了？", at(0), group_id=GROUP, nickname="小明")
    gov = await lived(history, semantic, redis)
    await gov.forget(MING, requested_by="admin:cli", now=at(1))
    await chat.add("qq:888", "去海边了吗？", at(2), group_id=GROUP, nickname="小红")
    stored = await history.find("chat_memories", eq={"user_id": "qq:888"})
    assert all("周末" not in json.dumps(d, ensure_ascii=False, default=str) for d in stored)


async def test_lines_stored_together_are_still_read_with_the_line_before(
    history: HistoryStore, semantic: SemanticMemory
) -> None:
    chat = ChatMemories(history, semantic, "yuiju", context_minutes=60)
    await chat.ensure()
    await chat.add_many(
        [
            ChatLine(user_id="qq:777", text="你猜我去哪了？", time=at(0), group_id=GROUP),
            ChatLine(user_id="qq:888", text="海边！", time=at(1), group_id=GROUP),
        ]
    )
    [answer] = await history.find("chat_memories", eq={"user_id": "qq:888"})
    assert answer.get("reply_to") and answer.get("context_text") == "你猜我去哪了？"


async def test_one_chat_line_forgotten_leaves_the_log_and_the_episodes_too(
    history: HistoryStore, semantic: SemanticMemory, redis: aioredis.Redis
) -> None:
    gov = await lived(history, semantic, redis)
    [line] = [d for d in await history.find("chat_memories") if d["text"] == "我的猫叫土豆"]
    assert await gov.forget_item(line["_id"], requested_by="qq:777", now=at(60)) == "chat_memories"
    assert await history.get(CHAT_LOG.name, "log2") is None
    assert await history.get(CHAT_LOG.name, "log3") is not None  # her answer is hers
    episode = await history.get(EPISODES.name, "conv_private")
    assert episode is not None and episode["data"]["messages"] == []
    assert not await semantic.store.count(Where(eq={"ref": line["_id"]}))
    [entry] = await gov.audit_log()
    assert entry["counts"] == {
        "history.chat_log": 1,
        "history.episodes.rewritten": 1,
        "history.chat_memories": 1,
        "vectors.points": 1,
    }
