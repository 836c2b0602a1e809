"""A held-out rerun (issue 30): a different inventing model, a QQ group over OneBot against
`yuiju run`, her card's default single-character town, questions at about 19:30 on a cool, cloudy
evening. Her record: school, lunch at school (咖喱饭, 亲子丼), 薄暮咖啡 (维也纳咖啡, her phone,
songs), 日和食堂 (乌冬面), the supermarket at 18:29 (速冻乌冬、味噌、鸡蛋), resting at home now; no
day before today. What got through then is never sent; what was true is sent unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from tests.chatkit import RecordingSender
from tests.conftest import at_time, make_character
from tests.test_chat_closed_world import DaysMemory, WeatherWorld, running
from tests.test_chat_grounding import done
from tests.test_chat_people_grounding import met_chika, met_kaede
from tests.test_chat_plans import GROUP, THURSDAY_EVENING, call, town
from tests.test_chat_plans import scripted as model_of
from tests.test_message_service import make_kit, scripted
from yuiju.config import ChatConfig, GroupPolicy, YuijuConfig
from yuiju.memory.episodes import EpisodeRepo
from yuiju.message.bot import build_service
from yuiju.message.model import Conversation, Entry
from yuiju.message.people_grounding import PeopleCheck
from yuiju.storage.history import HistoryStore
from yuiju.world.clock import SimClock

EVENING = at_time("2026-09-01 19:30")
HER_DAY = [
    done("wake_up", "06:50", 10),
    done("go_to_school", "07:30", 20),
    done("attend_class", "08:00", 240),
    done("school_lunch", "12:00", 30, "午饭吃了咖喱饭和亲子丼"),
    done("attend_class", "13:00", 210),
    done("go_from_school_to_cafe", "16:30", 10),
    done("drink_coffee", "16:40", 30, "点了一杯维也纳咖啡"),
    done("use_phone", "17:10", 30, "用手机听了几首歌"),
    done("go_from_cafe_to_diner", "17:40", 5),
    done("eat_at_diner", "17:45", 30, "吃了乌冬面"),
    done("go_from_diner_to_supermarket", "18:20", 5),
    done("buy_ingredients", "18:29", 15, "买了速冻乌冬、味噌、鸡蛋"),
    done("go_home_from_supermarket", "18:45", 10),
]
OTHER_GROUP = 200
HONEST = "今天上学、喝了咖啡，现在在家休息"


async def evening(redis: Any, *answers: str, question: str = "你今天干嘛了") -> Any:
    kit = await make_kit(
        redis,
        fn=scripted(*answers),
        memory=DaysMemory(events=list(HER_DAY)),
        world=WeatherWorld(
            make_character(running=running("rest_at_home", "19:00")), ("阴", "清凉")
        ),
        clock=SimClock(EVENING),
    )
    return kit, await kit.say("悠酱，" + question, minutes=9 * 60 + 30)


SLIPS = {
    "a temperature with no weather word": "三十多度，好想吃冰呀",
    "a lunch said as X是Y (in a list)": "午饭是关东煮，超好吃",
    "a lunch said as X是Y": "午饭是鲷鱼烧，超好吃～",
    "把 a novel 买回家 after 忍不住": "忍不住把一本新小说买回家了！",
    "把 pencils 买回家": "忍不住把一盒彩色铅笔买回家了",
    "上周末 and V过一次": "上周末在游乐园待了好久，下午三点多画水彩画过一次。",
    "前几天 working at a shop": "前几天一直在在便利店打工啦",
    "把 clothes washed at a time": "下午三点多把衣服洗好了",
    "上周末 a comic": "上周末在商店街买到了漫画第12卷",
    "上个月 and 入手": "上个月跑了三公里过一次…中午入手了一盆多肉呀",
    "上个月 alone": "上个月跑了三公里过一次",
    "上周末 把 and 啃": "上周末把吉他谱练熟了，早饭随便啃了个鲷鱼烧",
    "早饭随便啃了个X": "早饭随便啃了个鲷鱼烧",
    "上周末 a friend's home": "哈哈，上周末跑去朋友家啦",
    "前几天 a plant": "前几天买了一盆多肉。",
    "以前 V过一次": "Hmm，以前练钢琴过一次!",
    "前几天 把": "诶，前几天把衣服洗好了～",
    "以前 刚…完": "以前刚洗了一堆衣服完!",
}


@pytest.mark.parametrize("answer", list(SLIPS.values()), ids=list(SLIPS))
async def test_what_got_through_the_held_out_run_is_never_sent(redis: Any, answer: str) -> None:
    kit, out = await evening(redis, answer, HONEST)
    assert out.replies == [HONEST], kit.model.calls[-1][-1]


TRUE_THEN = [
    "现在正在家休息呢",
    "这会儿在家休息中",
    "今天还没遇到什么人",
    "午饭是咖喱饭，超好吃",
    "午饭吃了亲子丼",
    "晚饭在日和食堂吃了乌冬面",
    "下午在薄暮咖啡点了维也纳咖啡",
    "傍晚去超市买了速冻乌冬和鸡蛋",
    "今天阴阴的，有点凉快",
    "十几度吧，凉凉的",
    "忍不住又玩了会儿手机",
    "午饭是在学校食堂吃的",
    "午饭吃的是咖喱饭",
]


@pytest.mark.parametrize("answer", TRUE_THEN)
async def test_what_was_true_then_goes_out_unchanged(redis: Any, answer: str) -> None:
    kit, out = await evening(redis, answer)
    assert out.replies == [answer] and len(kit.model.calls) == 1, kit.model.calls[-1][-1]


async def test_what_she_gnawed_at_a_meal_she_had_is_checked_too(redis: Any) -> None:
    kit = await make_kit(
        redis,
        fn=scripted("早饭随便啃了个鲷鱼烧", "早饭在家吃的"),
        memory=DaysMemory(events=[done("eat_breakfast", "07:10", 20), *HER_DAY]),
        world=WeatherWorld(
            make_character(running=running("rest_at_home", "19:00")), ("阴", "清凉")
        ),
        clock=SimClock(EVENING),
    )
    out = await kit.say("悠酱，早饭吃的什么", minutes=9 * 60 + 30)
    assert out.replies == ["早饭在家吃的"], kit.model.calls[-1][-1]


# it is Tuesday 2026-09-01 10:00: last month is August
@pytest.mark.parametrize(
    ("answer", "sent"),
    [
        ("上个月去过游乐园", False),
        ("上个月在海边散过步", True),  # 08-20
        ("上个月去海边散步了", True),
        ("上个月去神社参拜了", False),
    ],
)
async def test_last_month_is_a_span_of_her_record(redis: Any, answer: str, sent: bool) -> None:
    from tests.test_chat_closed_world import LONGER_AGO, ask

    kit, out = await ask(redis, answer, "早上去公园散步了", past=LONGER_AGO)
    assert (out.replies == [answer]) is sent, kit.model.calls[-1][-1]


# -- people ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer", ["今天还没遇到什么人", "今天没碰到谁", "今天没见到任何人呢", "今天没遇到别的人"]
)
async def test_nobody_is_not_someone_she_does_not_know(
    sqlite_history: HistoryStore, answer: str
) -> None:
    repo = EpisodeRepo(sqlite_history)
    await repo.ensure()
    check = PeopleCheck(repo, "yuiju", {})
    assert await check.check(answer, char=make_character(), now=EVENING) is None


async def test_the_people_her_card_names_are_people_she_knows_in_a_town_of_her_alone(
    redis: Any, sqlite_history: HistoryStore
) -> None:
    cfg = YuijuConfig(
        chat=ChatConfig(max_pause_seconds=0, groups={str(GROUP): GroupPolicy(reply="mention")})
    )
    assert cfg.world.characters == ["yuiju"]  # her card's [relations] name kaede and chika
    model = model_of("今天还没见到千夏呢", "今天和千夏一起去海边了", "今天没见到千夏")
    service = await build_service(
        cfg,
        sender=RecordingSender(),
        on_stop=[],
        redis=redis,
        history=sqlite_history,
        clock=SimClock(EVENING),
        model=model,
    )
    assert {"kaede", "chika"} <= set(service.deps.neighbours)
    out = await service.handle(ask_in_group("今天见到千夏了吗"))
    assert out.replies == ["今天还没见到千夏呢"] and len(model.calls) == 1, model.calls[-1][-1]

    out = await service.handle(ask_in_group("今天和千夏玩了吗"))  # an invented meeting
    assert out.replies == ["今天没见到千夏"]
    assert "没有和千夏见过面" in str(model.calls[-1][-1]["content"])


def ask_in_group(text: str) -> Entry:
    return Entry(
        id=text,
        conversation=Conversation.group("qq", GROUP),
        user_id="qq:5",
        sender_name="小林",
        time=EVENING,
        text="@悠酱 " + text,
        mentions_me=True,
    )


@pytest.mark.parametrize("where", [GROUP, OTHER_GROUP])
async def test_news_queued_from_a_person_s_own_words_backs_passing_it_on(
    redis: Any, sqlite_history: HistoryStore, where: int
) -> None:
    yuiju = await town(
        redis,
        sqlite_history,
        model_of(
            "你好呀Ken",
            call("remember_news", text="Ken下周要去北海道旅行"),
            "哇，好羡慕！",
            "Ken说他下周要去北海道旅行！",
            "Ken说他要转学了",
        ),
    )
    yuiju.chat.deps.cfg.groups[str(OTHER_GROUP)] = GroupPolicy(reply="mention")
    await yuiju.say("你好", user=7, name="Ken")
    await yuiju.tick()  # she knows Ken now (a relation), and his news waits for the next tick
    await yuiju.say("我下周要去北海道旅行！", user=7, name="Ken")
    out = await yuiju.say("悠酱最近有什么新鲜事吗", group=where)
    assert out.replies == ["Ken说他下周要去北海道旅行！"], yuiju.model.calls[-1][-1]
    out = await yuiju.say("还有呢", group=where)
    assert out.replies != ["Ken说他要转学了"]


async def test_a_meeting_a_few_days_ago_is_not_one_of_today(sqlite_history: HistoryStore) -> None:
    repo = EpisodeRepo(sqlite_history)
    await repo.ensure()
    await repo.put(met_chika("2026-09-03 08:00"))  # today, at school
    check = PeopleCheck(repo, "yuiju", {"kaede": ("枫", "小枫"), "chika": ("千夏",)})
    now = at_time(THURSDAY_EVENING)
    for made_up in ("前几天千夏来找我了", "刚才在家休息~ 前几天千夏来找我了"):
        found = await check.check(made_up, char=make_character(), now=now)
        assert found is not None and "千夏" in found, made_up
    assert await check.check("今天见到千夏了", char=make_character(), now=now) is None


@pytest.mark.parametrize(
    "answer",
    [
        "前几天千夏来找我了，她养了一只小仓鼠",
        "今天见到千夏了，她养了一只小仓鼠",
        "千夏养了一只小仓鼠",
        "枫昨天考了满分",
    ],
)
async def test_what_someone_did_needs_her_to_have_heard_it(
    sqlite_history: HistoryStore, answer: str
) -> None:
    repo = EpisodeRepo(sqlite_history)
    await repo.ensure()
    await repo.put(met_chika("2026-09-03 08:00"))  # today, a greeting at school
    check = PeopleCheck(repo, "yuiju", {"kaede": ("枫", "小枫"), "chika": ("千夏",)})
    found = await check.check(answer, char=make_character(), now=at_time(THURSDAY_EVENING))
    assert found is not None and "没说过" in found, found


@pytest.mark.parametrize(
    "answer",
    [
        "今天见到千夏了，她说下周要去钓鱼比赛",  # what she said, in the record
        "枫下周六要去钓鱼比赛",  # a plan of theirs she heard
        "千夏今天和我打了招呼",  # with her: a meeting, and it happened
        "千夏和枫昨天一起去了海边",  # others' meeting, not hers
        "千夏没来找我",
        "千夏好像很忙",
        "今天见到千夏了，她也来了",  # too thin to be a claim of its own
    ],
)
async def test_what_she_heard_of_someone_or_others_together_passes(
    sqlite_history: HistoryStore, answer: str
) -> None:
    repo = EpisodeRepo(sqlite_history)
    await repo.ensure()
    await repo.put(met_kaede("2026-09-03 12:10"))  # 枫: 下周六我要去钓鱼比赛！
    await repo.put(met_chika("2026-09-03 08:00"))
    check = PeopleCheck(repo, "yuiju", {"kaede": ("枫", "小枫"), "chika": ("千夏",)})
    found = await check.check(answer, char=make_character(), now=at_time(THURSDAY_EVENING))
    assert found is None, found


def test_a_diary_line_of_what_someone_did_needs_the_record_to_say_it() -> None:
    from tests.test_diary_grounding import CHECK, DAY, THE_DAY, met

    day = [*THE_DAY, met("chika", "千夏", "16:30")]  # 悠酱和千夏一起在月汐海岸散步

    def verdict(line: str) -> dict[int, str]:
        return CHECK.unbacked(
            character_id="yuiju", start=DAY, end=DAY, episodes=day, sentences=[line]
        )

    assert list(verdict("千夏养了一只小仓鼠。")) == [0]
    assert verdict("千夏在月汐海岸散步了。") == {}  # she was there
