"""Person memory, distillation, knowledge files, the memory API and the event-stream worker."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, get_args
from zoneinfo import ZoneInfo

import pytest

from tests.spies import record_reads
from yuiju.config import YuijuConfig
from yuiju.llm import FunctionChatModel
from yuiju.llm.errors import LLMUnavailable
from yuiju.llm.model import ChatMessage, JsonSchema
from yuiju.memory.diary import DiaryVoice
from yuiju.memory.distill import schedule_distillation
from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.episodes import DOINGS, Episode, EpisodeType
from yuiju.memory.indexer import MemoryWorker
from yuiju.memory.knowledge import chunk_paragraphs
from yuiju.memory.persons import Counterpart
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.service import MemoryService, build_memory
from yuiju.memory.vectors import QdrantClientStore, Where
from yuiju.storage.history import HistoryStore
from yuiju.world.social import conversation_episode_id

TZ = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 9, 6, 21, 0, tzinfo=TZ)


@pytest.fixture
async def semantic() -> AsyncIterator[SemanticMemory]:
    store = await QdrantClientStore.open(collection="s", dim=64, location=":memory:")
    yield SemanticMemory(store, HashingEmbedder(64))
    await store.close()


def fact_model(facts_by_user: dict[str, list[str]]) -> FunctionChatModel:
    def answer(messages: list[ChatMessage], schema: JsonSchema | None) -> str:
        prompt = messages[0]["content"]
        user = next(u for u in facts_by_user if f"用户 {u} " in prompt)
        return json.dumps(
            {"facts": [{"content": f, "importance": 0.7} for f in facts_by_user[user]]},
            ensure_ascii=False,
        )

    return FunctionChatModel(answer)


async def service(
    history: HistoryStore, semantic: SemanticMemory, model: FunctionChatModel | None = None
) -> MemoryService:
    return await build_memory(
        YuijuConfig(),
        history,
        semantic,
        character_id="yuiju",
        chat_model=model,
        voice=DiaryVoice(name="悠酱", persona="你是悠酱。"),
    )


# -- distillation ------------------------------------------------------------------------------------


async def test_distillation_is_per_user_idempotent_and_keeps_the_user_id(
    history: HistoryStore, semantic: SemanticMemory
) -> None:
    model = fact_model({"qq:1": ["这个用户喜欢猫。"], "qq:2": ["这个用户在学钢琴。"]})
    m = await service(history, semantic, model)
    await m.chat.add("qq:1", "我家有两只猫，超可爱", NOW - timedelta(hours=3))
    await m.chat.add("qq:2", "今天练了两小时钢琴", NOW - timedelta(hours=2))
    first = await m.distiller.run(NOW)
    assert (first.users, first.processed, first.facts_added) == (2, 2, 2)
    for call in model.calls:  # one user's words per call
        assert ("猫" in call[0]["content"]) != ("钢琴" in call[0]["content"])
    again = await m.distiller.run(NOW + timedelta(minutes=5))
    assert (again.users, again.processed, again.facts_added, again.facts_updated) == (0, 0, 0, 0)
    assert [f["content"] for f in await m.chat.facts("qq:1")] == ["这个用户喜欢猫。"]
    recalled = await m.memory_search("猫", now=NOW, user_id="qq:1", kinds=["fact"])
    assert [(r.text, r.user_id) for r in recalled] == [("这个用户喜欢猫。", "qq:1")]
    assert await m.memory_search("猫", now=NOW, user_id="qq:2", kinds=["fact"]) == [] or all(
        r.user_id == "qq:2"
        for r in await m.memory_search("猫", now=NOW, user_id="qq:2", kinds=["fact"])
    )


async def test_the_distillation_prompt_names_her_by_her_cards_name_not_her_id(
    history: HistoryStore, semantic: SemanticMemory
) -> None:
    """`yuiju bot` and `yuiju memory` build her memory without a voice: the card names her."""
    model = fact_model({"qq:1": ["这个用户喜欢猫。"]})
    m = await build_memory(YuijuConfig(), history, semantic, character_id="yuiju", chat_model=model)
    await m.chat.add("qq:1", "我家有两只猫", NOW - timedelta(hours=3))
    await m.distiller.run(NOW)
    (call,) = model.calls
    assert "对悠酱说过的话" in call[0]["content"] and "yuiju" not in call[0]["content"]


async def test_the_same_fact_again_merges_instead_of_duplicating(
    history: HistoryStore, semantic: SemanticMemory
) -> None:
    m = await service(history, semantic, fact_model({"qq:1": ["这个用户喜欢猫。"]}))
    await m.chat.add("qq:1", "我喜欢猫", NOW - timedelta(days=2))
    await m.distiller.run(NOW - timedelta(days=1))
    await m.chat.add("qq:1", "猫真的好可爱", NOW - timedelta(hours=1))
    report = await m.distiller.run(NOW)
    assert report.processed == 1 and report.facts_added == 0
    assert len(await m.chat.facts("qq:1")) == 1


async def test_retention_deletes_old_raw_memories(
    history: HistoryStore, semantic: SemanticMemory
) -> None:
    m = await service(
        history, semantic, None
    )  # no LLM: nothing is distilled, old raw memories expire
    await m.chat.add("qq:1", "很久以前说的话", NOW - timedelta(days=40))
    await m.chat.add("qq:1", "最近说的话", NOW - timedelta(days=1))
    report = await m.distiller.run(NOW)
    assert report.deleted == 1
    assert [r.text for r in await m.memory_search("说的话", now=NOW, user_id="qq:1")] == [
        "最近说的话"
    ]


def test_the_nightly_job_is_an_aware_cron_at_the_configured_time() -> None:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    scheduler = AsyncIOScheduler(timezone=TZ)

    async def job() -> None: ...

    added = schedule_distillation(scheduler, job, at="02:00", tz=TZ)
    nxt = added.trigger.get_next_fire_time(None, NOW)
    assert nxt == datetime(2026, 9, 7, 2, 0, tzinfo=TZ) and nxt.tzinfo is not None


# -- person memory ---------------------------------------------------------------------------------


async def test_person_profiles_are_keyed_by_platform_and_id_and_corrections_stick(
    history: HistoryStore, semantic: SemanticMemory
) -> None:
    model = FunctionChatModel(
        lambda m, s: (
            '{"people": [{"person": "1", "changes": [{"section": "喜好", "content": "喜欢猫"},'
            ' {"section": "称呼", "content": "阿明"}]}]}'
        )
    )
    m = await service(history, semantic, model)
    await m.persons.correct("qq", "1", "称呼", "小明", NOW)
    p = await m.persons.update_from_conversation(
        "qq", "1", "明明", [("明明", "我最喜欢猫了")], NOW, model=model
    )
    assert p.sections == {"称呼": "小明", "喜好": "喜欢猫"} and p.nickname == "明明" and p.heat == 1
    renamed = await m.persons.update_from_conversation(
        "qq", "1", "新昵称", [("新昵称", "hi")], NOW, model=None
    )
    assert renamed.id == p.id and renamed.heat == 2
    assert await m.person_profile("qq", "2") is None
    assert [x.user_id for x in await m.persons.list()] == ["1"]


async def test_a_window_updates_everyone_in_it_with_one_model_call_per_eight_people(
    history: HistoryStore, semantic: SemanticMemory
) -> None:
    """A busy group's window names many people: one call proposes for up to eight of them (it
    was one call each, the whole transcript sent again every time); a number the prompt did not
    give is sent back once with the numbers it may use."""
    answers = iter(
        [
            '{"people": [{"person": "1", "changes": [{"section": "喜好", "content": "喜欢猫"}]},'
            ' {"person": "12", "changes": [{"section": "喜好", "content": "乱写"}]}]}',
            '{"people": [{"person": "1", "changes": [{"section": "喜好", "content": "喜欢猫"}]},'
            ' {"person": "3", "changes": [{"section": "雷区", "content": "怕打雷"}]}]}',
            '{"people": [{"person": "2", "changes": [{"section": "喜好", "content": "喜欢钓鱼"}]}]}',
        ]
    )
    model = FunctionChatModel(lambda m, s: next(answers))
    m = await service(history, semantic, model)
    people = [Counterpart("qq", str(n), f"人{n}") for n in range(1, 11)]
    said = [(f"人{n}", f"我是第{n}个") for n in range(1, 11)]
    profiles = await m.persons.update_from_window(people, said, NOW, model=model)
    assert len(model.calls) == 3  # eight people, the number 12 sent back once, then two more
    assert "编号 ['12'] 不存在" in str(model.calls[1][-1]["content"])
    assert "[8] 人8（qq:8）" in str(model.calls[0][0]["content"])
    assert "[1] 人9（qq:9）" in str(model.calls[2][0]["content"])
    by_id = {p.user_id: p for p in profiles}
    assert by_id["1"].sections == {"喜好": "喜欢猫"} and by_id["3"].sections == {"雷区": "怕打雷"}
    assert by_id["10"].sections == {"喜好": "喜欢钓鱼"} and by_id["2"].sections == {}
    assert all(p.heat == 10 and p.nickname == f"人{p.user_id}" for p in profiles)
    assert (await m.person_profile("qq", "10")).sections == {"喜好": "喜欢钓鱼"}  # type: ignore[union-attr]

    def down(messages: Sequence[ChatMessage], schema: JsonSchema | None) -> str:
        raise LLMUnavailable("model down")

    broken = FunctionChatModel(down)
    again = await m.persons.update_from_window(people[:2], said[:1], NOW, model=broken)
    assert [p.heat for p in again] == [11, 11] and again[0].sections == {"喜好": "喜欢猫"}


async def test_today_events_reads_her_doings_of_those_hours_and_no_conversation(
    history: HistoryStore, semantic: SemanticMemory
) -> None:
    """A busy group's day holds hundreds of conversation episodes with their messages: the
    query leaves them out (they were read, validated and dropped at every call)."""
    m = await service(history, semantic)
    day = NOW.replace(hour=0, minute=0)
    for n, (hour, kind) in enumerate(
        [(7, "behavior"), (9, "conversation"), (10, "behavior"), (13, "plan"), (23, "behavior")]
    ):
        await m.episodes.put(
            Episode.model_validate(
                {
                    "_id": f"e{n}",
                    "character_id": "yuiju",
                    "type": kind,
                    "time": day + timedelta(hours=hour),
                    "summary": f"{kind} at {hour}",
                }
            )
        )
    await m.episodes.put(  # yesterday's
        Episode.model_validate(
            {
                "_id": "old",
                "character_id": "yuiju",
                "type": "behavior",
                "time": day - timedelta(hours=1),
                "summary": "yesterday",
            }
        )
    )
    read = record_reads(history)
    got = [e.summary for e in await m.today_events(NOW)]
    assert got == ["behavior at 7", "behavior at 10", "plan at 13", "behavior at 23"]
    assert not [d for d in read if d["type"] == "conversation"]
    assert [e.summary for e in await m.today_events(NOW, start_hour=9, end_hour=13)] == [
        "behavior at 10"
    ]
    assert [e.summary for e in await m.today_events(NOW, limit=1)] == ["behavior at 7"]
    assert await m.today_events(NOW, start_hour=14, end_hour=9) == []
    assert set(DOINGS) == set(get_args(EpisodeType)) - {"conversation"}  # a new type is a doing


async def test_talks_with_a_character_are_read_without_her_chat_windows(
    history: HistoryStore, semantic: SemanticMemory
) -> None:
    m = await service(history, semantic)
    met = conversation_episode_id("mtg_1", "yuiju")
    for doc_id, data in [
        (met, {"with": [{"id": "mika", "name": "美香"}]}),
        ("conv_window", {"messages": [{"speaker": "小林", "text": "在吗"}]}),
    ]:
        await m.episodes.put(
            Episode.model_validate(
                {
                    "_id": doc_id,
                    "character_id": "yuiju",
                    "type": "conversation",
                    "time": NOW - timedelta(hours=1),
                    "summary": doc_id,
                    "data": data,
                }
            )
        )
    read = record_reads(history)
    start = NOW - timedelta(days=1)
    talks = await m.episodes.conversations("yuiju", start, NOW, with_="mika")
    assert [e.id for e in talks] == [met] and [d["_id"] for d in read] == [met]
    assert {e.id for e in await m.episodes.conversations("yuiju", start, NOW)} == {
        met,
        "conv_window",
    }


# -- knowledge files -------------------------------------------------------------------------------


def test_chunks_are_paragraphs_with_real_overlap() -> None:
    paras = [f"第{i}段。" + "内容" * 30 for i in range(6)]
    chunks = chunk_paragraphs("\n\n".join(paras), size=150, overlap=20)
    assert (
        len(chunks) == 3 and chunks[0].start_line == 1 and chunks[1].start_line == 5
    )  # two 64-char paragraphs per chunk
    for prev, cur in itertools.pairwise(chunks):
        assert cur.text.startswith(prev.text[-20:])
    joined = chunk_paragraphs("a\n\nb\n\nc", size=100, overlap=0)
    assert [c.text for c in joined] == ["a\n\nb\n\nc"]


async def test_knowledge_files_are_indexed_incrementally(
    history: HistoryStore, semantic: SemanticMemory, tmp_path: Path
) -> None:
    m = await service(history, semantic)
    (tmp_path / "shrine.md").write_text("羽浦神社在山上。\n\n夏天有祭典。", encoding="utf-8")
    (tmp_path / "cafe.txt").write_text("海猫咖啡馆的招牌是布丁。", encoding="utf-8")
    (tmp_path / "secret.json").write_text('{"api_key": "sk-x"}', encoding="utf-8")
    first = await m.knowledge.sync([tmp_path], NOW)
    assert len(first.indexed) == 2
    (tmp_path / "cafe.txt").write_text("海猫咖啡馆的招牌是抹茶蛋糕。", encoding="utf-8")
    second = await m.knowledge.sync([tmp_path], NOW)
    assert [Path(p).name for p in second.indexed] == ["cafe.txt"] and second.unchanged == 1
    found = await m.knowledge_search("咖啡馆的招牌", now=NOW)
    assert "抹茶" in found[0].text and all("布丁" not in f.text for f in found)
    (tmp_path / "shrine.md").unlink()
    third = await m.knowledge.sync([tmp_path], NOW)
    assert [Path(p).name for p in third.removed] == ["shrine.md"]
    assert all("神社" not in f.text for f in await m.knowledge_search("神社", now=NOW))


# -- the API and the worker --------------------------------------------------------------------------


class FixedClock:
    tz = TZ

    def now(self) -> datetime:
        return NOW


async def test_worker_indexes_completed_episodes_and_writes_the_diary_at_bedtime(
    history: HistoryStore, semantic: SemanticMemory, redis: object
) -> None:
    m = await service(history, semantic)
    await m.episodes.put(
        Episode.model_validate(
            {
                "_id": "bhv_1",
                "character_id": "yuiju",
                "type": "behavior",
                "status": "completed",
                "time": NOW - timedelta(hours=3),
                "summary": "在南风公园散步，看到了晚霞",
            }
        )
    )
    stream = "yuiju:events"
    worker = MemoryWorker(redis, stream, {"yuiju": m}, clock=FixedClock(), block_ms=10)
    await worker.ensure_group()
    done = {
        "episode_id": "bhv_1",
        "action": "walk_in_park",
        "name": "散步",
        "summary": "散步",
        "share": False,
    }
    for _ in range(2):  # a replayed event changes nothing
        await redis.xadd(
            stream,
            {
                "type": "action_completed",
                "character_id": "yuiju",
                "time": NOW.isoformat(),  # type: ignore[attr-defined]
                "data": json.dumps(done, ensure_ascii=False),
            },
        )
    await redis.xadd(
        stream,
        {
            "type": "action_started",
            "character_id": "yuiju",  # type: ignore[attr-defined]
            "time": (NOW + timedelta(hours=1)).isoformat(),
            "data": json.dumps({"action": "sleep"}),
        },
    )
    assert await worker.run_once(block=False) == 3
    assert await semantic.store.count(Where(eq={"kind": "episode"})) == 1
    assert (
        await semantic.store.count(Where(eq={"kind": "diary"})) == 2
    )  # the day, and the week it closes (a Sunday)
    found = await m.memory_search("公园晚霞", now=NOW, kinds=["episode"])
    assert [r.text for r in found] == ["在南风公园散步，看到了晚霞"]
    diary = await m.diary.get("yuiju", "day", NOW.date())
    assert diary is not None and "晚霞" in diary.text
    context = await m.decision_context(NOW, query="公园")
    assert "18:00 在南风公园散步" in context


async def test_a_failed_entry_stays_pending_and_is_retried(
    history: HistoryStore, semantic: SemanticMemory, redis: object
) -> None:
    m = await service(history, semantic)
    stream = "yuiju:events"
    worker = MemoryWorker(redis, stream, {"yuiju": m}, clock=FixedClock(), block_ms=10)
    await worker.ensure_group()
    await redis.xadd(
        stream,
        {
            "type": "action_completed",
            "character_id": "yuiju",
            "time": NOW.isoformat(),  # type: ignore[attr-defined]
            "data": json.dumps(
                {"episode_id": "bhv_2", "summary": "在图书馆读书"}, ensure_ascii=False
            ),
        },
    )
    real = semantic.embedder

    class Down(HashingEmbedder):
        async def embed_documents(self, texts: object) -> list[list[float]]:
            raise ConnectionError("embedder down")

    semantic.embedder = Down(64)
    with pytest.raises(ConnectionError):
        await worker.run_once(block=False)
    semantic.embedder = real
    assert await worker.run_once(block=False) == 1
    assert await semantic.store.count() == 1


async def test_memory_store_is_recalled_for_that_user_only(
    history: HistoryStore, semantic: SemanticMemory
) -> None:
    m = await service(history, semantic)
    await m.memory_store("这个用户的生日是三月五日", user_id="qq:7", now=NOW)
    assert [r.text for r in await m.memory_search("生日", now=NOW, user_id="qq:7")] == [
        "这个用户的生日是三月五日"
    ]
    assert await m.memory_search("生日", now=NOW, user_id="qq:8") == []
    await asyncio.sleep(0)


async def test_episodes_can_be_searched_by_keyword(
    history: HistoryStore, semantic: SemanticMemory
) -> None:
    m = await service(history, semantic)
    for n, text in enumerate(["在公园散步", "在图书馆读书", "又去公园喂猫"]):
        await m.episodes.put(
            Episode.model_validate(
                {
                    "_id": f"k{n}",
                    "character_id": "yuiju",
                    "type": "behavior",
                    "time": NOW - timedelta(hours=5 - n),
                    "summary": text,
                }
            )
        )
    found = await m.episodes.search("yuiju", "公园", NOW - timedelta(days=1), NOW)
    assert [e.id for e in found] == ["k2", "k0"]


async def test_the_diary_waits_for_the_engines_outbox_to_drain(redis) -> None:
    from yuiju.memory.indexer import MemoryWorker

    await redis.rpush("t:outbox", "{}")
    worker = MemoryWorker(redis, "t:events", {}, clock=None, outbox="t:outbox", drain_seconds=1.0)
    waiter = asyncio.create_task(worker._wait_for_outbox())
    await asyncio.sleep(0.3)
    assert not waiter.done()  # still waiting while an episode is queued
    await redis.delete("t:outbox")
    await asyncio.wait_for(waiter, 1.0)


async def test_a_fact_stored_while_the_embedder_is_down_is_kept_and_indexed_later(
    sqlite_history: HistoryStore, semantic: SemanticMemory
) -> None:
    svc = await service(sqlite_history, semantic)
    real = semantic.embedder.embed_documents

    async def down(texts: list[str]) -> list[list[float]]:
        raise ConnectionError("embedding endpoint down")

    semantic.embedder.embed_documents = down  # type: ignore[method-assign]
    doc_id = await svc.memory_store(
        "小明喜欢吃抹茶布丁", user_id="u7", now=NOW
    )  # no exception for the chat
    assert (await sqlite_history.get("facts", doc_id))["indexed"] is False  # type: ignore[index]
    assert await svc.index_pending() == 0

    semantic.embedder.embed_documents = real  # type: ignore[method-assign]
    assert await svc.index_pending() == 1
    found = await svc.memory_search("抹茶布丁", now=NOW, user_id="u7")
    assert [r.text for r in found] == ["小明喜欢吃抹茶布丁"]


async def test_a_distilled_fact_whose_indexing_fails_is_indexed_later(
    sqlite_history: HistoryStore, semantic: SemanticMemory
) -> None:
    m = await service(sqlite_history, semantic, fact_model({"qq:1": ["这个用户喜欢猫。"]}))
    await m.chat.add("qq:1", "我家有两只猫，超可爱", NOW - timedelta(hours=3))
    real = semantic.store.upsert

    async def down(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("vector store down")

    semantic.store.upsert = down  # type: ignore[method-assign]
    report = await m.distiller.run(NOW)
    assert report.facts_added == 1
    assert [f["indexed"] for f in await m.chat.facts("qq:1")] == [False]

    semantic.store.upsert = real  # type: ignore[method-assign]
    assert await m.index_pending() == 1
    recalled = await m.memory_search("猫", now=NOW, user_id="qq:1", kinds=["fact"])
    assert [r.text for r in recalled] == ["这个用户喜欢猫。"]


async def test_the_worker_embeds_a_run_of_completed_episodes_in_one_call(
    history: HistoryStore, semantic: SemanticMemory, redis: object
) -> None:
    m = await service(history, semantic)
    calls: list[int] = []
    real = semantic.embedder

    class Counting(HashingEmbedder):
        async def embed_documents(self, texts: object) -> list[list[float]]:
            calls.append(len(texts))  # type: ignore[arg-type]
            return await real.embed_documents(texts)  # type: ignore[arg-type]

    semantic.embedder = Counting(64)
    stream = "yuiju:events"
    worker = MemoryWorker(redis, stream, {"yuiju": m}, clock=FixedClock(), block_ms=10)
    await worker.ensure_group()
    for i in range(5):
        await redis.xadd(
            stream,
            {
                "type": "action_completed",
                "character_id": "yuiju",
                "time": NOW.isoformat(),  # type: ignore[attr-defined]
                "data": json.dumps(
                    {"episode_id": f"bhv_b{i}", "summary": f"第{i}件事"}, ensure_ascii=False
                ),
            },
        )
    assert await worker.run_once(block=False) == 5
    semantic.embedder = real
    assert calls == [5] and await semantic.store.count(Where(eq={"kind": "episode"})) == 5
