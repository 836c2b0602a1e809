"""The grounding check covers people (issue 22): what she says about meeting someone, or about
what someone said, must match her record (conversation episodes, kept appointments, news with its
source); a mismatch goes back to the model once, like a claim about her day."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis.asyncio as aioredis

from tests.conftest import at_time
from tests.test_chat_plans import THURSDAY_EVENING, scripted, town
from yuiju.memory.episodes import Episode, EpisodeRepo
from yuiju.message.people_grounding import PEOPLE_UNSURE_LINE, Someone, people_claims
from yuiju.storage.history import HistoryStore

KAEDE = Someone("character", "kaede", "枫")
PEOPLE = {"枫": KAEDE, "小枫": KAEDE, "千夏": Someone("character", "chika", "千夏")}
NOW = at_time(THURSDAY_EVENING)


def met_kaede(when: str, summary: str = "悠酱和枫在日和食堂一起在日和食堂吃饭") -> Episode:
    start = at_time(when)
    return Episode(
        _id=f"cnv_{when}",
        character_id="yuiju",
        type="conversation",
        time=start,
        end_time=start + timedelta(minutes=30),
        summary=summary,
        data={
            "meeting_id": f"mtg_{when}",
            "with": [{"id": "kaede", "name": "枫"}],
            "lines": [{"speaker": "kaede", "name": "枫", "text": "下周六我要去钓鱼比赛！"}],
            "news": [],
        },
    )


async def test_a_false_meeting_yesterday_goes_back_to_the_model_once(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(
        redis, sqlite_history, scripted("我昨天见到枫了！", "昨天没见到枫，前天中午和她一起吃了饭")
    )
    await EpisodeRepo(sqlite_history).put(met_kaede("2026-09-01 12:10"))  # two days ago

    out = await yuiju.say("你昨天见到枫了吗")

    assert out.replies == ["昨天没见到枫，前天中午和她一起吃了饭"]
    feedback = yuiju.model.calls[1][-1]
    assert feedback["role"] == "system"
    assert "记录里昨天没有和枫见过面" in feedback["content"]
    assert "09-01 12:10 悠酱和枫在日和食堂" in feedback["content"]  # her record of 枫


async def test_a_second_false_claim_about_someone_is_not_sent(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(redis, sqlite_history, scripted("我昨天见到枫了", "昨天和小枫一起散步了"))
    out = await yuiju.say("最近见过枫吗")
    assert out.replies == [PEOPLE_UNSURE_LINE]


async def test_a_true_meeting_and_what_she_said_pass(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(
        redis, sqlite_history, scripted("昨天中午和枫一起吃了饭，她说下周六要去钓鱼比赛")
    )
    await EpisodeRepo(sqlite_history).put(met_kaede("2026-09-02 12:10"))
    out = await yuiju.say("昨天干嘛了")
    assert out.replies == ["昨天中午和枫一起吃了饭，她说下周六要去钓鱼比赛"]
    assert len(yuiju.model.calls) == 1


@pytest.mark.parametrize(
    "answer",
    [
        "我想见枫",
        "明天要去见枫",
        "你昨天见到枫了吗？",
        "枫很喜欢钓鱼",
        "我经常和枫一起吃饭",
        "千夏和枫昨天一起去了海边",  # someone else's meeting
        "他昨天见到枫了",
        "枫说得对",
        "我昨天看到枫叶了",
        "今天看到千夏发的照片了",
        "小枫说呢",
    ],
)
def test_wishes_questions_habits_and_others_doings_are_not_claims(answer: str) -> None:
    assert people_claims(answer, PEOPLE, NOW) == []


@pytest.mark.parametrize(
    ("answer", "kind", "day"),
    [
        ("我昨天见到枫了", "met", "昨天"),
        ("前天碰到了小枫", "met", "前天"),
        ("今天和枫一起散步了", "met", "今天"),
        ("枫来找我玩了", "met", "最近"),
        ("昨天没见到枫", "met", "昨天"),
        ("枫说她下周要去钓鱼", "said", "最近"),
        ("听千夏说要下雨了", "said", "最近"),
    ],
)
def test_claims_about_people_are_read_with_their_day(answer: str, kind: str, day: str) -> None:
    (claim,) = people_claims(answer, PEOPLE, NOW)
    assert (claim.kind, claim.day) == (kind, day)
    assert claim.negated == ("没" in answer)
