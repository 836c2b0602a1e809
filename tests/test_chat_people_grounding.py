"""The grounding check covers people (issue 22): what she says about meeting someone, or about
what someone said, must match her record (conversation episodes, kept appointments, news with its
source); a mismatch goes back to the model once, like a claim about her day."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis.asyncio as aioredis

from tests.chatkit import make_service
from tests.conftest import at_time, make_character
from tests.test_chat_plans import GROUP, NEIGHBOURS, THURSDAY_EVENING, scripted, town
from yuiju.config import ChatConfig, GroupPolicy
from yuiju.memory.episodes import Episode, EpisodeRepo
from yuiju.message.model import Conversation, Entry
from yuiju.message.people_grounding import (
    PEOPLE_UNSURE_LINE,
    PeopleCheck,
    Someone,
    people_claims,
)
from yuiju.storage.history import HistoryStore
from yuiju.world.clock import SimClock
from yuiju.world.relations import NewsItem, Party, SocialState

KAEDE = Someone("character", "kaede", "枫")
PEOPLE = {"枫": KAEDE, "小枫": KAEDE, "千夏": Someone("character", "chika", "千夏")}
XIAOLIN = Someone("person", "qq:123", "小林")
NOW = at_time(THURSDAY_EVENING)
DAY = timedelta(days=1)


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
        "我昨天跟枫说了小林要搬家",  # what she told them
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


@pytest.mark.parametrize(
    ("answer", "day", "negated"),
    [
        ("周二见到千夏了", "2026-09-01", False),
        ("星期三和枫一起吃了饭", "2026-09-02", False),
        ("上周六在南风公园碰到了千夏", "2026-08-29", False),
        ("上星期天没见到枫", "2026-08-30", True),
        ("礼拜一没和枫见面", "2026-08-31", True),
    ],
)
def test_a_day_named_by_its_weekday_is_that_day(answer: str, day: str, negated: bool) -> None:
    (claim,) = people_claims(answer, PEOPLE, NOW)
    assert (claim.start, claim.end) == (at_time(f"{day} 00:00"), at_time(day + " 00:00") + DAY)
    assert claim.negated is negated


@pytest.mark.parametrize(
    ("answer", "kind", "content"),
    [
        ("枫前天跟我说「我不喜欢吃香菜」", "said", "我不喜欢吃香菜"),
        ("小林今天告诉我他的自行车坏了", "said", "他的自行车坏了"),
        ("千夏9月2日跟我说她想加入美术社", "said", "她想加入美术社"),
        ("今天枫对我说：「下次再聊！」", "said", "下次再聊！"),
        ("前天悠酱对我说：「枫！早上好～」", "said", "枫！早上好～"),
        ("千夏跟我说「要不要一起吃午饭？」", "said", "要不要一起吃午饭？"),
        ("千夏跟我说「我昨天见到枫了」", "said", "我昨天见到枫了"),  # not hers about 枫
        ("枫昨天来找我玩了", "met", ""),
        ("千夏9月2日来找我聊天了", "met", ""),
        ("昨天没和枫见面", "met", ""),
        ("我昨天见到枫了，你呢？", "met", ""),
        ("枫跟我说「我不喜欢吃香菜」怎么突然问这个？", "said", "我不喜欢吃香菜"),
        ("今天和千夏在星见丘高校打了个招呼", "met", ""),
        ("昨天和枫打了招呼", "met", ""),
    ],
)
def test_claims_are_read_through_times_quotes_greetings_and_a_question_after_them(
    answer: str, kind: str, content: str
) -> None:
    people = {**PEOPLE, "小林": XIAOLIN, "悠酱": Someone("character", "yuiju", "悠酱")}
    (claim,) = people_claims(answer, people, NOW)
    assert (claim.kind, claim.content) == (kind, content)


async def test_news_she_had_through_someone_else_is_not_what_its_origin_told_her(
    sqlite_history: HistoryStore,
) -> None:
    """枫 heard from 悠酱 that 小林 is moving: 小林 never told her anything, though 小林 said it."""
    repo = EpisodeRepo(sqlite_history)
    await repo.ensure()
    xiaolin = Party(kind="person", id="qq:123", name="小林")
    yuiju = Party(kind="character", id="yuiju", name="悠酱")
    news = NewsItem(
        id="news_1",
        text="小林下周要搬家",
        about=xiaolin,
        origin=xiaolin,
        source=yuiju,
        learned_at=at_time("2026-09-01 12:10"),
        hops=1,
    )
    kaede = make_character(id="kaede", social=SocialState(news=[news]))
    check = PeopleCheck(repo, "kaede", {"yuiju": ("悠酱", "悠"), "chika": ("千夏",)})

    for made_up in ("小林跟我说他下周要搬家", "听小林说他下周要搬家", "小林告诉我他的自行车坏了"):
        assert await check.check(made_up, char=kaede, now=NOW) is not None, made_up
    for true in ("悠酱告诉我小林下周要搬家", "听悠酱说小林下周要搬家", "小林说他下周要搬家"):
        assert await check.check(true, char=kaede, now=NOW) is None, true


async def test_the_chat_checks_people_on_a_history_store_it_opened_itself(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    """`yuiju bot` without memory opens the history store alone: nothing else declared the
    episodes there, and the check must not pass every claim for want of them."""
    model = scripted("我昨天见到枫了！", "昨天没见到枫呢")
    chat = make_service(
        redis,
        cfg=ChatConfig(groups={str(GROUP): GroupPolicy(reply="mention")}, max_pause_seconds=0),
        clock=SimClock(NOW),
        model=model,
        history=sqlite_history,
        neighbours=NEIGHBOURS,
    )
    await chat.ensure()
    out = await chat.handle(
        Entry(
            id="1",
            conversation=Conversation.group("qq", GROUP),
            user_id="qq:5",
            sender_name="小林",
            time=NOW,
            text="@悠酱 你昨天见到枫了吗",
            mentions_me=True,
        )
    )
    assert out.replies == ["昨天没见到枫呢"]


def test_a_time_in_someones_words_is_not_when_they_said_them() -> None:
    found = people_claims("千夏跟我说「枫！早上好～」千夏还说下次一起去海边。", PEOPLE, NOW)
    assert [(c.content, c.day) for c in found] == [
        ("枫！早上好～", "最近"),
        ("下次一起去海边", "最近"),
    ]


def test_a_claim_after_a_quote_is_read_on_its_own() -> None:
    """What stands before a closing quote (a day, a 不 in someone's words) is not part of the
    claim that follows it."""
    found = people_claims("上周六枫对我说：「我可不会迟到。」枫这几天来找我玩了。", PEOPLE, NOW)
    assert [(c.kind, c.day, c.negated) for c in found] == [
        ("said", "上周六", False),
        ("met", "最近", False),
    ]


# -- issue 30 item 4: people she does not know, and what she did with someone she does ----------


@pytest.mark.parametrize(
    "answer",
    [
        "凯昨天来找我了，他说他要转学",
        "昨天和小美一起去逛街了",
        "听阿杰说学校要放假了",
        "同桌今天跟我说她养了只猫",
        "前天遇到了隔壁班的小李",
        "中午那会儿前桌约我出去玩了",
        "小雨说图书馆要装修",
        "我今天上午跟堂哥一块儿吃了饭",
    ],
)
async def test_a_person_she_does_not_know_is_never_claimed(
    sqlite_history: HistoryStore, answer: str
) -> None:
    repo = EpisodeRepo(sqlite_history)
    await repo.ensure()
    check = PeopleCheck(repo, "yuiju", {"kaede": ("枫", "小枫"), "chika": ("千夏",)})
    found = await check.check(answer, char=make_character(), now=NOW)
    assert found is not None and "不认识" in found, answer


@pytest.mark.parametrize(
    "answer",
    [
        "你昨天来找我了吗？",
        "小林跟我说过他下周要搬家",  # the speaker: what they said is checked elsewhere
        "他们说明天会下雨",
        "大家都在聊考试的事",
        "我和你一起去吧",
        "据说明天要下雨",
        "老实说挺好的",
        "今天看到了彩虹",
    ],
)
async def test_the_speaker_pronouns_and_groups_are_not_strangers(
    sqlite_history: HistoryStore, answer: str
) -> None:
    repo = EpisodeRepo(sqlite_history)
    await repo.ensure()
    check = PeopleCheck(repo, "yuiju", {"kaede": ("枫", "小枫")})
    found = await check.check(answer, char=make_character(), now=NOW, speaker="小林")
    assert found is None or "不认识" not in found, (answer, found)


# -- a stranger's model (issue 30, second round): meeting someone needs a meeting that day --------


def heard_of_xiaolin() -> SocialState:
    """She knows 小林 only from what 小林 told her in chat (news), never from a meeting."""
    xiaolin = Party(kind="person", id="qq:123", name="小林")
    news = NewsItem(
        id="news_1",
        text="小林下周要搬家",
        about=xiaolin,
        origin=xiaolin,
        source=xiaolin,
        learned_at=at_time("2026-09-01 12:10"),
        hops=0,
    )
    return SocialState(news=[news])


@pytest.mark.parametrize(
    "answer",
    [
        "早上跑步的时候碰到了隔壁班的小林，聊了好久",
        "今天在公园遇到了小林",
        "下午和小林聊了好久",
        "今天跟小林在食堂聊了一会儿",
        "昨天在食堂碰到了同班的千夏",
        "前天在路上撞见了枫",
        "今天跟小林一起跑步了",
        "今天和千夏一块儿写作业了",
        "今天见着小林了",
        "今天在车站偶遇了小林",
        "今天小林请我喝了奶茶",
    ],
)
async def test_meeting_someone_needs_a_meeting_with_them_that_day(
    sqlite_history: HistoryStore, answer: str
) -> None:
    repo = EpisodeRepo(sqlite_history)
    await repo.ensure()
    check = PeopleCheck(repo, "yuiju", {"kaede": ("枫", "小枫"), "chika": ("千夏",)})
    char = make_character(social=heard_of_xiaolin())
    found = await check.check(answer, char=char, now=NOW)
    assert found is not None and "见过面" in found, (answer, found)


@pytest.mark.parametrize(
    "answer",
    ["昨天中午在食堂碰到了同班的枫", "昨天中午和枫聊了好久", "昨天遇到枫了，聊了好久"],
)
async def test_a_true_meeting_said_with_who_they_are_passes(
    sqlite_history: HistoryStore, answer: str
) -> None:
    repo = EpisodeRepo(sqlite_history)
    await repo.ensure()
    await repo.put(met_kaede("2026-09-02 12:10"))  # yesterday
    check = PeopleCheck(repo, "yuiju", {"kaede": ("枫", "小枫"), "chika": ("千夏",)})
    char = make_character(social=heard_of_xiaolin())
    assert await check.check(answer, char=char, now=NOW) is None, answer


async def test_chatting_with_a_person_from_chat_is_backed_by_that_chat(
    sqlite_history: HistoryStore,
) -> None:
    """聊 with someone from chat is true when she chatted with them that day (a chat window of
    her record), though she never met them; meeting them still needs a meeting."""
    repo = EpisodeRepo(sqlite_history)
    await repo.ensure()
    await repo.put(
        Episode.model_validate(
            {
                "_id": "chat_window_1",
                "character_id": "yuiju",
                "type": "conversation",
                "time": NOW - timedelta(hours=3),
                "summary": "小林说他下周要搬家",
                "data": {
                    "counterparties": [{"user_id": "qq:123", "name": "小林"}],
                    "messages": [{"speaker": "小林", "text": "我下周要搬家"}],
                },
            }
        )
    )
    check = PeopleCheck(repo, "yuiju", {"kaede": ("枫", "小枫")})
    char = make_character(social=heard_of_xiaolin())
    assert await check.check("今天和小林聊了好久", char=char, now=NOW) is None
    found = await check.check("今天在公园碰到了小林", char=char, now=NOW)
    assert found is not None and "见过面" in found


# -- issue 30, third round: every name of a coordinated list is checked -------------------------


def met_chika(when: str) -> Episode:
    episode = met_kaede(when, "悠酱和千夏在南风公园打了招呼")
    return episode.model_copy(
        update={
            "id": f"cnv_chika_{when}",
            "data": {**episode.data, "with": [{"id": "chika", "name": "千夏"}], "lines": []},
        }
    )


@pytest.mark.parametrize(
    ("answer", "names"),
    [
        ("昨天碰到枫和千夏了", ["枫", "千夏"]),
        ("昨天碰到了枫、千夏", ["枫", "千夏"]),
        ("昨天跟枫、千夏还有小林一起吃了午饭", ["枫", "千夏", "小林"]),
        ("昨天和枫与千夏一起散步了", ["枫", "千夏"]),
        ("昨天见到了千夏及枫", ["千夏", "枫"]),
    ],
)
def test_every_name_of_a_list_is_a_claim(answer: str, names: list[str]) -> None:
    people = {**PEOPLE, "小林": XIAOLIN}
    found = people_claims(answer, people, NOW)
    assert [(c.who.name, c.kind) for c in found] == [(n, "met") for n in names]


@pytest.mark.parametrize(
    "answer",
    [
        "昨天碰到枫和千夏了",
        "昨天跟枫、千夏还有小林一起吃了午饭",
        "昨天和枫与千夏一起散步了",
    ],
)
async def test_a_name_after_the_first_is_checked_too(
    sqlite_history: HistoryStore, answer: str
) -> None:
    repo = EpisodeRepo(sqlite_history)
    await repo.ensure()
    await repo.put(met_kaede("2026-09-02 12:10"))  # yesterday: 枫 only
    check = PeopleCheck(repo, "yuiju", {"kaede": ("枫", "小枫"), "chika": ("千夏",)})
    found = await check.check(answer, char=make_character(social=heard_of_xiaolin()), now=NOW)
    assert found is not None and "没有和千夏见过面" in found, (answer, found)


@pytest.mark.parametrize(
    "answer",
    ["昨天跟枫和小美一起去逛街了", "昨天碰到了枫和阿杰", "昨天和千夏、枫还有凯一起散步了"],
)
async def test_a_stranger_anywhere_in_a_list_is_never_claimed(
    sqlite_history: HistoryStore, answer: str
) -> None:
    repo = EpisodeRepo(sqlite_history)
    await repo.ensure()
    check = PeopleCheck(repo, "yuiju", {"kaede": ("枫", "小枫"), "chika": ("千夏",)})
    found = await check.check(answer, char=make_character(), now=NOW)
    assert found is not None and "不认识" in found, (answer, found)


async def test_a_list_of_people_she_all_met_passes(sqlite_history: HistoryStore) -> None:
    repo = EpisodeRepo(sqlite_history)
    await repo.ensure()
    await repo.put(met_kaede("2026-09-02 12:10"))
    await repo.put(met_chika("2026-09-02 16:00"))
    check = PeopleCheck(repo, "yuiju", {"kaede": ("枫", "小枫"), "chika": ("千夏",)})
    for answer in ("昨天碰到枫和千夏了", "昨天和枫、千夏都见过面了", "千夏和枫昨天一起去了海边"):
        assert await check.check(answer, char=make_character(), now=NOW) is None, answer
