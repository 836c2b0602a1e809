"""Hybrid recall on both vector stores: words and meaning fused, relevance first, time ranges,
budgets that say what they cut, bulk import, and re-indexing stores of the old layout."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.reindex import reindex_store
from yuiju.memory.semantic import NewMemory, SemanticMemory
from yuiju.memory.timeparse import time_range
from yuiju.memory.vectors import (
    EdgeVectorStore,
    EmbedderChanged,
    LegacyLayout,
    QdrantClientStore,
    VectorStore,
    point_id,
)

TZ = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 9, 10, 21, 0, tzinfo=TZ)  # a Thursday


class SameVector(HashingEmbedder):
    """Every text gets the same vector: meaning says nothing, only words can find a memory."""

    def vector(self, text: str) -> list[float]:
        return super().vector("同")


@pytest.fixture
def store(vector_store: VectorStore) -> VectorStore:
    return vector_store


def mem(
    text: str, key: str, *, days_ago: float = 0.1, importance: float = 0.5, group: str = "g1"
) -> NewMemory:
    return NewMemory(
        kind="chat",
        character_id="yuiju",
        text=text,
        time=NOW - timedelta(days=days_ago),
        key=key,
        importance=importance,
        group_id=group,
    )


FILLER = [
    "今天好困",
    "吃饭了吗",
    "哈哈哈对啊",
    "又下雨了",
    "Traffic was terrible this morning",
    "Coffee keeps me alive",
    "晚上看了个剧",
    "周末一起玩吧",
    "I need a vacation",
    "Good morning!",
]


async def recall_texts(memory: SemanticMemory, query: str, **kw: object) -> list[str]:
    return [
        r.text
        for r in await memory.recall(query, character_id="yuiju", now=NOW, group_id="g1", **kw)
    ]  # type: ignore[arg-type]


async def test_words_find_a_memory_that_meaning_alone_cannot(store: VectorStore) -> None:
    memory = SemanticMemory(store, SameVector(64))
    await memory.remember([mem(t, f"f{i}") for i, t in enumerate(FILLER * 3)])
    await memory.remember(
        [
            mem("We adopted a beagle puppy and named him Biscuit", "dog"),
            mem("我在南风公园看到了樱花", "park"),
        ]
    )
    assert (await recall_texts(memory, "What is the name of the puppies?"))[
        0
    ] == "We adopted a beagle puppy and named him Biscuit"
    assert (await recall_texts(memory, "公园里有什么"))[0] == "我在南风公园看到了樱花"


async def test_an_old_exactly_matching_memory_beats_new_unrelated_ones(store: VectorStore) -> None:
    memory = SemanticMemory(store, HashingEmbedder(64))
    await memory.remember([mem("去年夏天在青岛学会了冲浪", "old", days_ago=400, importance=0.2)])
    await memory.remember(
        [mem(t, f"new{i}", days_ago=0.01, importance=1.0) for i, t in enumerate(FILLER)]
    )
    assert (await recall_texts(memory, "冲浪是在哪学的？"))[0] == "去年夏天在青岛学会了冲浪"


async def test_among_equally_relevant_memories_the_newer_comes_first(store: VectorStore) -> None:
    memory = SemanticMemory(store, HashingEmbedder(64))
    await memory.remember(
        [mem("我在星河科技上班", "a", days_ago=200), mem("我在星河科技上班", "b", days_ago=2)]
    )
    found = await memory.recall("星河科技", character_id="yuiju", now=NOW, group_id="g1")
    assert [r.id for r in found[:2]] == [
        point_id("chat", "yuiju", "b"),
        point_id("chat", "yuiju", "a"),
    ]


async def test_a_question_naming_a_time_prefers_memories_from_then(store: VectorStore) -> None:
    memory = SemanticMemory(store, HashingEmbedder(64))
    await memory.remember(
        [
            mem("周末去香山爬山了", "w0", days_ago=40),
            mem("周末去凤凰岭爬山了", "w1", days_ago=5),
            mem("周末去灵山爬山了", "w2", days_ago=20),
            mem("周末去妙峰山爬山了", "w3", days_ago=12),
            mem("This weekend I went hiking at Eagle Peak", "e0", days_ago=6),
            mem("This weekend I went hiking at Bear Ridge", "e1", days_ago=60),
        ]
    )
    assert (await recall_texts(memory, "上周去哪里爬山了？"))[0] == "周末去凤凰岭爬山了"
    assert (await recall_texts(memory, f"{(NOW - timedelta(days=20)):%-m月%-d日}去哪里爬山了？"))[
        0
    ] == "周末去灵山爬山了"
    assert (await recall_texts(memory, "Where did I go hiking last week?"))[
        0
    ] == "This weekend I went hiking at Eagle Peak"
    # a time with nothing in it: the rest still comes back
    assert len(await recall_texts(memory, "去年去哪里爬山了？")) == 6


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("昨天吃了什么", "2026-09-09", "2026-09-10"),
        ("what did we do yesterday?", "2026-09-09", "2026-09-10"),
        ("前天", "2026-09-08", "2026-09-09"),
        ("上周去哪了", "2026-08-31", None),  # Monday of last week .. now
        ("last week", "2026-08-31", None),
        ("上个月的事", "2026-08-01", "2026-09-01"),
        ("last month", "2026-08-01", "2026-09-01"),
        ("3月5日那天", "2026-03-05", "2026-03-06"),
        ("12月5号", "2025-12-05", "2025-12-06"),  # no year: the latest not after now
        ("on May 7", "2026-05-07", "2026-05-08"),
        ("7 May 2023", "2023-05-07", "2023-05-08"),
        ("2023年5月", "2023-05-01", "2023-06-01"),
        ("in 2024", "2024-01-01", "2025-01-01"),
        ("三天前", "2026-09-07", "2026-09-08"),
        ("two weeks ago", "2026-08-24", "2026-08-31"),
    ],
)
def test_time_words_become_ranges(question: str, start: str, end: str | None) -> None:
    found = time_range(question, NOW)
    assert found is not None
    assert found.start.date().isoformat() == start
    assert found.end.date().isoformat() == end if end else found.end > NOW


def test_questions_without_a_time_have_no_range() -> None:
    for q in (
        "你喜欢什么颜色",
        "What did Caroline research?",
        "may I ask what you like",
        "三个人去了公园",
    ):
        assert time_range(q, NOW) is None, q


async def test_no_budget_means_no_budget_and_a_cut_says_so(store: VectorStore) -> None:
    memory = SemanticMemory(store, HashingEmbedder(64))
    await memory.remember(
        [mem("公园" * 40, "long", importance=1.0), mem("公园散步", "short"), mem("去公园", "s2")]
    )
    unbounded = await memory.recall(
        "公园", character_id="yuiju", now=NOW, group_id="g1", token_budget=None
    )
    assert len(unbounded) == 3 and unbounded.cut_by_budget == 0
    bounded = await memory.recall(
        "公园", character_id="yuiju", now=NOW, group_id="g1", token_budget=10
    )
    assert "公园" * 40 not in [r.text for r in bounded] and bounded.cut_by_budget == 1


async def test_memory_search_defaults_come_from_the_config_and_none_lifts_the_budget(
    store: VectorStore, sqlite_history
) -> None:
    from yuiju.memory.distill import ChatMemories
    from yuiju.memory.service import MemoryService

    memory = SemanticMemory(store, HashingEmbedder(64))
    chat = ChatMemories(sqlite_history, memory, "yuiju")
    await chat.ensure()
    await chat.add_many([])
    service = MemoryService.__new__(MemoryService)
    service.character_id, service.semantic, service.recall_limit, service.token_budget = (
        "yuiju",
        memory,
        10,
        30,
    )
    await memory.remember(
        [mem(f"公园散步第{i}次，看到了很多很多的花和树", f"k{i}") for i in range(15)]
    )
    by_config = await service.memory_search("公园", now=NOW, group_id="g1")
    assert len(by_config) < 10 and by_config.cut_by_budget > 0
    unbounded = await service.memory_search("公园", now=NOW, group_id="g1", token_budget=None)
    assert len(unbounded) == 10 and unbounded.cut_by_budget == 0


async def test_chat_lines_are_indexed_with_the_speakers_name(
    store: VectorStore, sqlite_history
) -> None:
    from yuiju.memory.distill import ChatLine, ChatMemories

    memory = SemanticMemory(store, HashingEmbedder(64))
    chat = ChatMemories(sqlite_history, memory, "yuiju")
    await chat.ensure()
    ids = await chat.add_many(
        [
            ChatLine(
                user_id="qq:1",
                text="I started pottery classes",
                time=NOW,
                group_id="g1",
                nickname="Caroline",
            ),
            # a day apart: not one the other's context (tests/test_memory_context.py)
            ChatLine(
                user_id="qq:2",
                text="I started violin classes",
                time=NOW - timedelta(days=1),
                group_id="g1",
                nickname="Melanie",
            ),
        ]
    )
    found = await memory.recall(
        "What classes did Caroline start?", character_id="yuiju", now=NOW, group_id="g1"
    )
    assert found[0].text == "I started pottery classes" and found[0].payload["ref"] == ids[0]
    assert found[0].payload["embedded_text"] == "Caroline: I started pottery classes"


# -- the old layout ---------------------------------------------------------------------------------


def _legacy_edge(path: Path, texts: Sequence[str], embedder: HashingEmbedder) -> list[list[float]]:
    """A store as written before hybrid recall: one unnamed dense vector per point."""
    import qdrant_edge as q

    shard = q.EdgeShard.create(
        str(path),
        q.EdgeConfig(vectors=q.EdgeVectorParams(size=embedder.dim, distance=q.Distance.Cosine)),
    )
    vectors = [embedder.vector(t) for t in texts]
    shard.update(
        q.UpdateOperation.upsert_points(
            [
                q.Point(point_id("chat", "yuiju", f"k{i}"), v, _payload(t, i))
                for i, (t, v) in enumerate(zip(texts, vectors, strict=True))
            ]
        )
    )
    shard.flush()
    shard.close()
    return vectors


def _payload(text: str, i: int) -> dict[str, object]:
    return {
        "kind": "chat",
        "character_id": "yuiju",
        "user_id": "qq:1",
        "group_id": "g1",
        "scope": "group:g1",
        "ref": f"k{i}",
        "text": text,
        "time": NOW.timestamp() - i * 86400,
        "importance": 0.3,
        "nickname_hint": i,
    }


class CountingEmbedder(HashingEmbedder):
    documents = 0

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.documents += len(texts)
        return await super().embed_documents(texts)


TEXTS = [
    f"第{i}天：在公园散步，看到了{flower}"
    for i, flower in enumerate(["樱花", "桃花", "梅花", "荷花", "菊花"] * 120)
]


async def test_an_old_edge_store_is_named_and_reindexed_without_re_embedding(
    tmp_path: Path,
) -> None:
    path = tmp_path / "qdrant-edge" / "yuiju_memory"
    path.parent.mkdir()
    embedder = CountingEmbedder(64)
    old_vectors = _legacy_edge(path, TEXTS, embedder)
    with pytest.raises(LegacyLayout, match=r"600 memories.*yuiju memory reindex"):
        EdgeVectorStore.open(path, 64, embedder=embedder.name)

    seen: list[int] = []
    report = await reindex_store(
        url=None,
        api_key=None,
        collection="yuiju_memory",
        data_dir=tmp_path,
        engine="edge",
        embedder=embedder,
        progress=lambda total: seen.append,
    )
    assert (
        report.points == 600
        and not report.re_embedded
        and embedder.documents == 0
        and sum(seen) == 600
    )
    assert report.backup is not None and report.backup.exists()

    store = EdgeVectorStore.open(path, 64, embedder=embedder.name)
    try:
        assert await store.count() == 600
        async for batch in store.points(600):
            by_id = {p.id: p for p in batch}
        moved = by_id[point_id("chat", "yuiju", "k7")]
        assert moved.vector == pytest.approx(old_vectors[7], abs=1e-6)
        assert moved.payload["nickname_hint"] == 7 and moved.payload["text"] == TEXTS[7]
        memory = SemanticMemory(store, embedder)
        found = await memory.recall("荷花", character_id="yuiju", now=NOW, group_id="g1", limit=5)
        assert found and all("荷花" in r.text for r in found)
    finally:
        await store.close()


async def test_an_old_server_collection_is_reindexed_in_place(tmp_path: Path) -> None:
    from qdrant_client import AsyncQdrantClient, models

    embedder = CountingEmbedder(64)
    client = AsyncQdrantClient(path=str(tmp_path / "qdrant-local"))
    await client.create_collection(
        "yuiju_memory", vectors_config=models.VectorParams(size=64, distance=models.Distance.COSINE)
    )
    await client.upsert(
        "yuiju_memory",
        points=[
            models.PointStruct(
                id=point_id("chat", "yuiju", f"k{i}"),
                vector=embedder.vector(t),
                payload=_payload(t, i),
            )
            for i, t in enumerate(TEXTS)
        ],
    )
    await client.close()
    with pytest.raises(LegacyLayout, match="yuiju memory reindex"):
        await QdrantClientStore.open(
            collection="yuiju_memory", dim=64, path=tmp_path / "qdrant-local"
        )

    report = await reindex_store(
        url=None,
        api_key=None,
        collection="yuiju_memory",
        data_dir=tmp_path,
        engine="local",
        embedder=embedder,
    )
    assert report.points == 600 and not report.re_embedded and embedder.documents == 0

    store = await QdrantClientStore.open(
        collection="yuiju_memory", dim=64, path=tmp_path / "qdrant-local", embedder=embedder.name
    )
    try:
        assert await store.count() == 600
        assert not await store.client.collection_exists("yuiju_memory_reindexing")
        found = await SemanticMemory(store, embedder).recall(
            "梅花", character_id="yuiju", now=NOW, group_id="g1", limit=5
        )
        assert found and all("梅花" in r.text for r in found)
    finally:
        await store.close()


async def test_another_embedder_is_refused_and_reindex_re_embeds(tmp_path: Path) -> None:
    path = tmp_path / "qdrant-edge" / "yuiju_memory"
    first = HashingEmbedder(64)
    store = EdgeVectorStore.open(path, 64, embedder=first.name)
    await SemanticMemory(store, first).remember([mem("记住我", "k")])
    await store.close()

    class Other(CountingEmbedder):
        name = "other-model-64"

    other = Other(64)
    other.name = "other-model-64"
    with pytest.raises(EmbedderChanged, match="reindex"):
        EdgeVectorStore.open(path, 64, embedder=other.name)
    report = await reindex_store(
        url=None,
        api_key=None,
        collection="yuiju_memory",
        data_dir=tmp_path,
        engine="edge",
        embedder=other,
    )
    assert report.re_embedded and other.documents == 1
    store = EdgeVectorStore.open(path, 64, embedder=other.name)
    assert await store.count() == 1
    await store.close()
    assert json.loads((path / "yuiju_meta.json").read_text())["embedder"] == "other-model-64"


# -- the command line ------------------------------------------------------------------------------


def _config(tmp_path: Path, redis_url: str) -> Path:
    config = tmp_path / "yuiju.toml"
    config.write_text(
        f"""
[app]
data_dir = "{(tmp_path / "data").as_posix()}"
[redis]
url = "{redis_url}"
prefix = "cli-{tmp_path.name}"
[embeddings]
provider = "hashing"
""",
        encoding="utf-8",
    )
    return config


def test_memory_import_checks_every_line_first_and_imports_once(
    tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from yuiju import cli as yuiju_cli

    config = str(_config(tmp_path, redis_url))
    log = tmp_path / "chat.jsonl"
    good = [
        {
            "time": "2026-03-05T20:15:00+08:00",
            "user_id": "qq:1",
            "text": "我下周要去青岛冲浪",
            "group_id": "qq:g1",
            "nickname": "小明",
        },
        {
            "time": "2026-03-05T20:16:00+08:00",
            "user_id": "qq:2",
            "text": "好羡慕，我只能在家写作业",
            "group_id": "qq:g1",
        },
        {"time": "2026-03-06T09:00:00+08:00", "user_id": "qq:1", "text": "私下跟你说，我其实怕水"},
    ]
    lines = [
        json.dumps(good[0], ensure_ascii=False),
        "{not json",
        json.dumps(good[1], ensure_ascii=False),
        json.dumps({"time": "2026-03-05T20:17:00", "user_id": "qq:3", "text": "没有时区"}),
        "",
        json.dumps(good[2], ensure_ascii=False),
    ]
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")

    assert yuiju_cli.main(["--config", config, "memory", "import", str(log), "--quiet"]) != 0
    err = capsys.readouterr().err
    assert (
        "line 2: not JSON" in err
        and "line 4: time" in err
        and "nothing imported" in err
        and "--skip-bad" in err
    )

    assert (
        yuiju_cli.main(["--config", config, "memory", "import", str(log), "--quiet", "--skip-bad"])
        == 0
    )
    assert (
        "3 new chat lines imported, 0 already there, 2 bad line(s) skipped"
        in capsys.readouterr().out
    )
    assert (
        yuiju_cli.main(["--config", config, "memory", "import", str(log), "--quiet", "--skip-bad"])
        == 0
    )  # again: no duplicates, and it says so
    assert (
        "0 new chat lines imported, 3 already there, 2 bad line(s) skipped"
        in capsys.readouterr().out
    )

    assert yuiju_cli.main(["--config", config, "memory", "search", "冲浪", "--group", "qq:g1"]) == 0
    out = capsys.readouterr().out
    assert (
        out.count("我下周要去青岛冲浪") == 1 and "怕水" not in out
    )  # said in private: not in the group
    assert yuiju_cli.main(["--config", config, "memory", "search", "怕水", "--user", "qq:1"]) == 0
    assert "私下跟你说，我其实怕水" in capsys.readouterr().out


def test_memory_search_looks_in_every_scope_says_which_and_says_when_nothing_matches(
    tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from yuiju import cli as yuiju_cli

    config = str(_config(tmp_path, redis_url))
    log = tmp_path / "chat.jsonl"
    rows = [
        {
            "time": "2026-03-05T20:15:00+08:00",
            "user_id": "qq:1",
            "text": "我下周要去青岛冲浪",
            "group_id": "qq:g1",
            "nickname": "小明",
        },
        {"time": "2026-03-06T09:00:00+08:00", "user_id": "qq:1", "text": "私下跟你说，我其实怕水"},
        {
            "time": "2026-03-07T09:00:00+08:00",
            "user_id": "qq:2",
            "text": "周末一起去爬山吧",
            "group_id": "qq:g2",
            "nickname": "小红",
        },
    ]
    log.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    assert yuiju_cli.main(["--config", config, "memory", "import", str(log), "--quiet"]) == 0
    capsys.readouterr()

    assert yuiju_cli.main(["--config", config, "memory", "search", "冲浪"]) == 0
    out = capsys.readouterr().out
    assert "我下周要去青岛冲浪" in out and "group:qq:g1" in out
    assert yuiju_cli.main(["--config", config, "memory", "search", "怕水"]) == 0
    out = capsys.readouterr().out
    assert "私下跟你说，我其实怕水" in out and "private:qq:1" in out

    assert yuiju_cli.main(["--config", config, "memory", "search", "xyzzy quux"]) == 0
    out = capsys.readouterr().out
    assert "no memories of yuiju match 'xyzzy quux'" in out and "冲浪" not in out


async def test_a_question_whose_words_match_nothing_and_whose_meaning_is_far_finds_nothing(
    store: VectorStore,
) -> None:
    memory = SemanticMemory(store, HashingEmbedder(64))
    await memory.remember(
        [mem(t, f"f{i}") for i, t in enumerate(FILLER * 2)]
        + [mem("我在南风公园看到了樱花", "park")]
    )
    assert await recall_texts(memory, "xyzzy quux") == []
    assert (await recall_texts(memory, "公园里有什么"))[0] == "我在南风公园看到了樱花"
    assert len(await recall_texts(memory, "有什么")) == 10  # no searchable word: meaning decides
    memory.weights = replace(memory.weights, floor=0.0)  # the floor off
    assert len(await recall_texts(memory, "xyzzy quux")) == 10


def test_memory_reindex_converts_an_old_store_that_start_up_names(
    tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from yuiju import cli as yuiju_cli

    config = str(_config(tmp_path, redis_url))
    path = tmp_path / "data" / "qdrant-edge" / "yuiju_memory"
    path.parent.mkdir(parents=True)
    _legacy_edge(path, TEXTS[:50], HashingEmbedder(256))

    assert yuiju_cli.main(["--config", config, "memory", "search", "荷花"]) != 0
    assert "yuiju memory reindex" in capsys.readouterr().err
    assert yuiju_cli.main(["--config", config, "memory", "reindex"]) == 0
    assert (
        "50 memories re-indexed, stored vectors kept (not re-embedded)" in capsys.readouterr().out
    )
    # stored under the plain group id "g1" before ids were platform-qualified: read as QQ's
    argv = ["memory", "search", "荷花", "--group", "qq:g1"]
    assert yuiju_cli.main(["--config", config, *argv]) == 0
    assert "荷花" in capsys.readouterr().out


def test_memory_search_finds_imported_lines_by_plain_or_qualified_ids(
    tmp_path: Path, redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 19: `--user 12345 --group 67890` found nothing of what was imported as qq:12345
    from yuiju import cli as yuiju_cli

    config = str(_config(tmp_path, redis_url))
    log = tmp_path / "chat.jsonl"
    lines = [
        {
            "time": "2026-03-05T20:15:00+08:00",
            "user_id": "qq:12345",
            "text": "我下周要去海边",
            "group_id": "qq:67890",
        },
        # an export with plain QQ numbers: read as QQ's, like an old config
        {
            "time": "2026-03-05T20:16:00+08:00",
            "user_id": "12346",
            "text": "我也想去海边",
            "group_id": "67890",
        },
    ]
    log.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines), encoding="utf-8")
    assert yuiju_cli.main(["--config", config, "memory", "import", str(log), "--quiet"]) == 0
    capsys.readouterr()
    for user, group in (("12345", "67890"), ("qq:12345", "qq:67890")):
        argv = ["memory", "search", "海边", "--user", user, "--group", group]
        assert yuiju_cli.main(["--config", config, *argv]) == 0
        out = capsys.readouterr().out
        assert "我下周要去海边" in out and "我也想去海边" in out, (user, group)
    assert yuiju_cli.main(["--config", config, "memory", "search", "海边", "--user", "bob"]) != 0
    assert "'qq:12345' or 'tg:678'" in capsys.readouterr().err
