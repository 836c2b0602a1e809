"""What a chat line tells of happened when the line says ("last month", "上个月", "下周"), not
when it was said: a question pinned to a month finds news of that month told weeks later, and
"as of <month>" / "截至<月>" means up to the end of that month."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from yuiju.memory.distill import ChatLine, ChatMemories
from yuiju.memory.embeddings import HashingEmbedder
from yuiju.memory.semantic import SemanticMemory
from yuiju.memory.timeparse import referred_range, time_range
from yuiju.memory.vectors import VectorStore, Where

TZ = ZoneInfo("Asia/Shanghai")
NOW = datetime(2026, 9, 10, 21, 0, tzinfo=TZ)  # a Thursday


@pytest.mark.parametrize(
    ("text", "first", "last"),
    [
        ("Last month I ran the city half marathon!", "2026-08-01", "2026-08-31"),
        ("上个月去青岛冲浪了", "2026-08-01", "2026-08-31"),
        ("我下周要去海边", "2026-09-14", "2026-09-20"),
        ("next week we fly to Lisbon", "2026-09-14", "2026-09-20"),
        ("下个月搬家", "2026-10-01", "2026-10-31"),
        ("yesterday I adopted a kitten", "2026-09-09", "2026-09-09"),
        ("三天前摔了一跤", "2026-09-07", "2026-09-07"),
        ("Tomorrow is my exam", "2026-09-11", "2026-09-11"),
        ("后天考试", "2026-09-12", "2026-09-12"),
        ("two weeks ago we went camping", "2026-08-24", "2026-08-30"),
        # the first time said counts, wherever its rule is in the list
        ("Spent most of last month at my easel, and this week I finished it", "2026-08-01", None),
    ],
)
def test_a_relative_time_in_a_line_resolves_against_when_it_was_said(
    text: str, first: str, last: str | None
) -> None:
    found = referred_range(text, NOW)
    assert found is not None
    assert found.start.date().isoformat() == first
    if last:
        assert found.last.date().isoformat() == last  # inclusive: the last day it refers to


def test_a_line_without_a_time_or_with_a_vague_one_refers_to_nothing_else() -> None:
    for text in (
        "I love painting",
        "今年真是忙死了",
        "may I ask what you like",
        "last year was rough",
    ):
        assert referred_range(text, NOW) is None, text


@pytest.mark.parametrize(
    ("question", "end", "rest"),
    [
        ("As of March 2026, where does Ann work?", "2026-04-01", "where does Ann work?"),
        ("Where did Ann work as of March?", "2026-04-01", "Where did Ann work ?"),
        ("截至3月，小林在哪上班？", "2026-04-01", "小林在哪上班？"),
        ("截止到2025年12月小林养了什么", "2026-01-01", "小林养了什么"),
    ],
)
def test_as_of_a_month_means_up_to_its_end(question: str, end: str, rest: str) -> None:
    found = time_range(question, NOW)
    assert found is not None
    assert found.start is None and found.end.date().isoformat() == end
    assert found.rest == rest


def said(text: str, when: datetime, who: str = "Ann", group: str = "g1") -> ChatLine:
    return ChatLine(user_id=f"qq:{who}", text=text, time=when, group_id=group, nickname=who)


async def chat(store: VectorStore, history) -> tuple[ChatMemories, SemanticMemory]:  # type: ignore[no-untyped-def]
    memory = SemanticMemory(store, HashingEmbedder(64))
    memories = ChatMemories(history, memory, "yuiju")
    await memories.ensure()
    return memories, memory


async def recall(memory: SemanticMemory, question: str) -> list[str]:
    found = await memory.recall(
        question, character_id="yuiju", now=NOW, group_id="g1", token_budget=None
    )
    return [r.text for r in found]


def july(day: int, hour: int = 20) -> datetime:
    return datetime(2026, 7, day, hour, tzinfo=TZ)


async def test_news_told_weeks_later_is_found_by_the_month_it_happened(
    vector_store: VectorStore, sqlite_history
) -> None:
    memories, memory = await chat(vector_store, sqlite_history)
    await memories.add_many(
        [
            said("今天好热，一直在家吹空调", july(5)),
            said("周末去超市买了西瓜", july(12)),
            said("最近在学做饭", july(20)),
            said("上个月我去青岛冲浪了，超好玩", datetime(2026, 8, 3, 20, tzinfo=TZ)),
            said("好想再去冲浪", datetime(2026, 9, 1, 20, tzinfo=TZ)),
        ]
    )
    assert (await recall(memory, "7月去哪冲浪了？"))[0] == "上个月我去青岛冲浪了，超好玩"


async def test_an_answer_about_retold_news_refers_to_when_the_news_happened(
    vector_store: VectorStore, sqlite_history
) -> None:
    memories, memory = await chat(vector_store, sqlite_history)
    t = datetime(2026, 8, 3, 10, tzinfo=TZ)
    ids = await memories.add_many(
        [
            said("Last month I finally finished a painting!", t),
            said("Ooh, what's it of?", t + timedelta(minutes=1), who="Bob"),
            said("A stormy sea with one tiny boat.", t + timedelta(minutes=2)),
            said("Love it!", t + timedelta(minutes=3), who="Bob"),
        ]
    )
    payload = {
        h.payload["ref"]: h.payload
        for h in await memory.store.scroll(Where(eq={"character_id": "yuiju"}))
    }
    july_first = datetime(2026, 7, 1, tzinfo=TZ).timestamp()
    for news_question_answer in ids[:3]:
        assert payload[news_question_answer]["about_start"] == july_first
    assert payload[ids[3]]["about_start"] == payload[ids[3]]["time"]  # a reaction: said then
    found = await recall(memory, "What did Ann paint in July 2026?")
    assert "A stormy sea with one tiny boat." in found[:2]


async def test_as_of_a_month_finds_what_was_said_before_its_end(
    vector_store: VectorStore, sqlite_history
) -> None:
    memories, memory = await chat(vector_store, sqlite_history)
    await memories.add_many(
        [
            said("I work at Starfield Tech now", datetime(2026, 2, 10, 20, tzinfo=TZ)),
            said("I went to a concert today", datetime(2026, 3, 15, 20, tzinfo=TZ)),
            said("I quit and now work at Moonlight Studio", datetime(2026, 5, 10, 20, tzinfo=TZ)),
        ]
    )
    assert (await recall(memory, "As of March 2026, where did Ann work?"))[
        0
    ] == "I work at Starfield Tech now"
