"""The diary: grounding review, the factual fallback, weekly and monthly summaries, indexing."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from yuiju.llm import FunctionChatModel, LLMUnavailable
from yuiju.llm.model import ChatMessage, JsonSchema
from yuiju.memory.diary import DiaryVoice, DiaryWriter, diary_date
from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.episodes import Episode, EpisodeRepo
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.vectors import QdrantClientStore
from yuiju.storage.history import HistoryStore

TZ = ZoneInfo("Asia/Shanghai")
DAY = date(2026, 9, 6)  # a Sunday
VOICE = DiaryVoice(name="悠酱", persona="你是悠酱，十六岁的高中生。")


def ep(n: int, hour: int, summary: str) -> Episode:
    return Episode.model_validate(
        {
            "_id": f"e{n}",
            "character_id": "yuiju",
            "type": "behavior",
            "status": "completed",
            "time": datetime(DAY.year, DAY.month, DAY.day, hour, tzinfo=TZ),
            "summary": summary,
        }
    )


async def writer(
    history: HistoryStore,
    model: FunctionChatModel | None,
    *,
    semantic: SemanticMemory | None = None,
    rounds: int = 2,
) -> DiaryWriter:
    repo = EpisodeRepo(history)
    await repo.ensure()
    for e in (
        ep(1, 8, "去学校上课"),
        ep(2, 16, "在南风公园散步，看到了晚霞"),
        ep(3, 19, "在家吃了咖喱饭"),
    ):
        await repo.put(e)
    w = DiaryWriter(
        history, repo, model=model, voice=VOICE, tz=TZ, semantic=semantic, review_rounds=rounds
    )
    await w.ensure()
    return w


def draft(*sentences: tuple[str, list[str]]) -> str:
    return json.dumps(
        {"paragraphs": [[{"text": t, "episode_ids": ids} for t, ids in sentences]]},
        ensure_ascii=False,
    )


def scripted(
    drafts: list[str], reviews: list[list[dict[str, object]]] | None = None
) -> FunctionChatModel:
    drafts, reviews = list(drafts), list(reviews or [])

    def answer(messages: list[ChatMessage], schema: JsonSchema | None) -> str:
        assert schema is not None
        if schema.name == "diary_review":
            return json.dumps({"unsupported": reviews.pop(0) if reviews else []})
        if schema.name == "diary":
            return drafts.pop(0)
        return json.dumps({"text": "这一周过得很充实。"})

    return FunctionChatModel(answer)


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        ("2026-09-06T22:30", date(2026, 9, 6)),
        ("2026-09-07T01:10", date(2026, 9, 6)),
        ("2026-09-06T13:00", None),
    ],
)
def test_diary_date_of_a_bedtime(when: str, expected: date | None) -> None:
    assert diary_date(datetime.fromisoformat(when).replace(tzinfo=TZ)) == expected


async def test_an_invented_event_is_rejected_and_revised(history: HistoryStore) -> None:
    model = scripted(
        [
            draft(("今天在公园看到了晚霞。", ["e2"]), ("放学后和哥哥去了游乐园。", ["e2"])),
            draft(("今天在公园看到了晚霞，好美。", ["e2"]), ("晚饭的咖喱饭很好吃。", ["e3"])),
        ],
        reviews=[[{"index": 1, "reason": "经历里没有游乐园，也没有哥哥"}], []],
    )
    w = await writer(history, model)
    diary = await w.write_day("yuiju", DAY, datetime(2026, 9, 6, 22, tzinfo=TZ))
    assert diary.source == "llm" and diary.rounds == 1
    assert "游乐园" not in diary.text and "晚霞" in diary.text
    assert diary.episode_ids == ["e2", "e3"]
    assert diary.rejected[0]["text"] == "放学后和哥哥去了游乐园。"
    revision_request = model.calls[2][-1]["content"]
    assert "游乐园" in revision_request and "没有当天经历的支持" in revision_request


async def test_sentences_citing_unknown_episodes_are_cut_after_the_last_round(
    history: HistoryStore,
) -> None:
    bad = draft(("今天在公园散步。", ["e2"]), ("还去海边游泳了。", ["e99"]), ("开心！", []))
    w = await writer(history, scripted([bad, bad]), rounds=1)
    diary = await w.write_day("yuiju", DAY, datetime(2026, 9, 6, 22, tzinfo=TZ))
    assert diary.text == "今天在公园散步。"
    assert {r["reason"] for r in diary.rejected} >= {
        "没有引用任何经历",
        "引用了不存在的经历编号 ['e99']",
    }


async def test_without_an_llm_the_diary_is_a_factual_summary(history: HistoryStore) -> None:
    w = await writer(history, None)
    diary = await w.write_day("yuiju", DAY, datetime(2026, 9, 6, 22, tzinfo=TZ))
    assert diary.source == "factual"
    assert diary.text.splitlines() == [
        "2026-09-06 的记录：",
        "08:00 去学校上课",
        "16:00 在南风公园散步，看到了晚霞",
        "19:00 在家吃了咖喱饭",
    ]


async def test_an_llm_failure_falls_back_to_the_factual_summary(history: HistoryStore) -> None:
    def down(messages: list[ChatMessage], schema: JsonSchema | None) -> str:
        raise LLMUnavailable("provider down", retryable=False)

    w = await writer(history, FunctionChatModel(down))
    diary = await w.write_day("yuiju", DAY, datetime(2026, 9, 6, 22, tzinfo=TZ))
    assert diary.source == "factual" and "咖喱饭" in diary.text


async def test_writing_twice_keeps_the_first_entry_and_sunday_closes_the_week(
    history: HistoryStore,
) -> None:
    model = scripted([draft(("今天在公园散步。", ["e2"]))])
    w = await writer(history, model)
    now = datetime(2026, 9, 6, 22, tzinfo=TZ)
    first = await w.write_day("yuiju", DAY, now)
    again = await w.write_day("yuiju", DAY, now + timedelta(hours=1))
    assert again == first
    week = await w.get("yuiju", "week", DAY - timedelta(days=6))
    assert week is not None and week.text == "这一周过得很充实。" and week.episode_ids == [first.id]
    assert [
        d.date for d in await w.find("yuiju", start=date(2026, 9, 1), end=date(2026, 9, 8))
    ] == ["2026-09-06"]


async def test_the_month_summary_is_written_on_its_last_day(history: HistoryStore) -> None:
    w = await writer(history, None)
    last = date(2026, 9, 30)
    await w.write_day("yuiju", last, datetime(2026, 9, 30, 23, tzinfo=TZ))
    month = await w.get("yuiju", "month", date(2026, 9, 1))
    assert month is not None and month.source == "factual" and month.end_date == "2026-09-30"


async def test_the_diary_is_indexed_for_recall_in_paragraph_chunks(history: HistoryStore) -> None:
    store = await QdrantClientStore.open(collection="d", dim=64, location=":memory:")
    semantic = SemanticMemory(store, HashingEmbedder(64))
    w = await writer(history, None, semantic=semantic)
    diary = await w.write_day("yuiju", DAY, datetime(2026, 9, 6, 22, tzinfo=TZ))
    got = await semantic.recall(
        "咖喱饭", character_id="yuiju", now=datetime(2026, 9, 7, tzinfo=TZ), kinds=["diary"]
    )
    assert diary.id in {r.payload["ref"] for r in got}
    await store.close()
