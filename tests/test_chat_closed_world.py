"""Her words bound to her life (issue 30): the grounding check is closed-world. Everyday doings
outside her world (homework, a cat, music, films, shopping, …), places and food her town does not
have, the weather, what she is doing now and what she did yesterday are all checked against her
record of that time; what it backs goes out unchanged."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from tests.conftest import at_time, make_character, make_world
from tests.test_chat_grounding import ACTIONS, done
from tests.test_message_service import FakeMemory, make_kit, scripted
from yuiju.memory.diary import Diary
from yuiju.memory.episodes import Episode
from yuiju.world.clock import SimClock
from yuiju.world.state import RunningAction, Weather

NOW = at_time("2026-09-01 10:00")

MORNING = [
    done("wake_up", "07:00", 10),
    done("eat_breakfast", "07:10", 20),
    done("go_to_park", "08:00", 10),
    done("walk_in_park", "08:10", 50, "在公园捡到了野莓"),
    done("go_home_from_park", "09:00", 10),
]


def yesterday(episode: Episode) -> Episode:
    return episode.model_copy(
        update={
            "id": "y-" + episode.id,
            "time": episode.time - timedelta(days=1),
            "end_time": (episode.end_time or episode.time) - timedelta(days=1),
        }
    )


@dataclass
class DaysMemory(FakeMemory):
    """A memory whose episodes span several days (today's through `today_events`, the others
    through the repository's `between`)."""

    past: list[Episode] = field(default_factory=list)
    character_id: str = "yuiju"
    diaries: list[Diary] = field(default_factory=list)
    reads: list[tuple[datetime, datetime]] = field(default_factory=list)
    """The time ranges her past episodes were read for."""

    @property
    def episodes(self) -> Any:
        memory = self

        class Repo:
            async def between(
                self, cid: str, start: datetime, end: datetime, **kw: Any
            ) -> list[Episode]:
                memory.reads.append((start, end))
                return [e for e in memory.past if start <= e.time < end]

            async def put(self, ep: Episode) -> None:
                memory.episodes_put.append(ep)

        return Repo()

    @property
    def diary(self) -> Any:
        memory = self

        class Diaries:
            async def find(self, cid: str, **kw: Any) -> list[Diary]:
                return list(memory.diaries)

        return Diaries()


@dataclass
class WeatherWorld:
    character: Any = field(default_factory=make_character)
    weather: tuple[str, str] = ("雨", "严寒")

    async def load_character(self, cid: str) -> Any:
        return self.character

    async def load_world(self) -> Any:
        kind, temperature = self.weather
        return make_world(NOW).model_copy(
            update={
                "weather": Weather(type=kind, temperature=temperature, period_start=NOW)  # type: ignore[arg-type]
            }
        )


def running(action_id: str, started: str = "09:50") -> RunningAction:
    action = ACTIONS[action_id]
    start = at_time(f"2026-09-01 {started}")
    return RunningAction(
        action_id=action_id,
        name=action.name,
        started_at=start,
        ends_at=start + timedelta(minutes=60),
        episode_id=f"now-{action_id}",
        place=action.at or "home",
        reason="",
        decided_by="x",
    )


async def ask(
    redis: Any,
    *answers: str,
    question: str = "悠酱今天干嘛了",
    events: list[Episode] = MORNING,
    past: list[Episode] | None = None,
    doing: str | None = "rest_at_home",
    weather: tuple[str, str] = ("雨", "严寒"),
    now: datetime = NOW,
    memory: DaysMemory | None = None,
) -> Any:
    char = make_character(running=running(doing)) if doing else make_character()
    kit = await make_kit(
        redis,
        fn=scripted(*answers),
        memory=memory or DaysMemory(events=list(events), past=past or []),
        world=WeatherWorld(char, weather),
        clock=SimClock(now),
    )
    return kit, await kit.say(question if "悠" in question else "悠酱，" + question)


def sent_back(kit: Any) -> str:
    last = kit.model.calls[1][-1]
    assert last["role"] == "system", last
    return str(last["content"])


# -- the issue's own examples -----------------------------------------------------------------


async def test_an_answer_of_inventions_about_a_rainy_morning_is_sent_back(redis: Any) -> None:
    invented = "今天天气不错，我在图书馆看书。在听喜欢的歌，心情很好。"
    kit, out = await ask(
        redis, invented, "今天没去超市，早上在家吃了早饭", question="今天去过超市吗？"
    )
    assert out.replies == ["今天没去超市，早上在家吃了早饭"]
    back = sent_back(kit)
    assert "雨" in back and "图书馆" in back and "歌" in back, back


@pytest.mark.parametrize(
    ("now_doing", "answer"),
    [
        ("fish_at_pond", "在咖啡店里写日记呢"),
        ("rest_at_home", "正在复习明天的数学考试"),
        ("rest_at_home", "在听歌呢，心情很好"),
    ],
)
async def test_what_she_says_she_is_doing_now_must_be_what_she_is_doing(
    redis: Any, now_doing: str, answer: str
) -> None:
    kit, out = await ask(redis, answer, "在休息呢", question="在干嘛", doing=now_doing)
    assert out.replies == ["在休息呢"] or len(kit.model.calls) == 2
    assert answer not in " ".join(out.replies)
    assert "现在" in sent_back(kit) or "没有" in sent_back(kit)


# -- everyday doings outside her world, in many phrasings --------------------------------------

OUTSIDE = {
    "homework": "今天上午一直在写数学作业",
    "revision": "刚复习完英语，好累",
    "a cat": "早上喂了楼下的小猫",
    "music": "刚才戴着耳机听了好久的音乐",
    "a film": "今天看了一部超好看的电影",
    "reading a novel": "刚看完一本小说",
    "fruit": "今天买了好多水果",
    "shopping": "上午去逛街了",
    "cooking": "早上自己烤了饼干",
    "games": "刚和朋友打了会儿游戏",
    "drawing": "今天画了一幅水彩画",
    "sport": "早上去跑步了",
    "chores": "刚打扫完房间",
    "a diary at noon": "刚写了日记",
    "an unknown place": "今天去了趟游乐园",
    "a shop not in town": "刚从书店出来",
    "unknown food": "早上吃了一碗热腾腾的拉面",
    "unknown purchase": "刚买了一盒草莓大福",
    "after someone's news": "听说下周要放假，中午去便利店买了新的手机壳",
}


@pytest.mark.parametrize("answer", list(OUTSIDE.values()), ids=list(OUTSIDE))
async def test_a_doing_outside_her_world_is_never_sent(redis: Any, answer: str) -> None:
    kit, out = await ask(redis, answer, "早上去公园散步了")
    assert out.replies == ["早上去公园散步了"], kit.model.calls[-1][-1]
    assert "生活记录" in sent_back(kit)


async def test_a_second_invention_becomes_an_honest_line(redis: Any) -> None:
    _, out = await ask(redis, "今天看了电影", "今天在家打游戏了")
    [line] = out.replies
    assert "电影" not in line and "游戏" not in line


# -- the weather -----------------------------------------------------------------------------


@pytest.mark.parametrize("answer", ["今天天气真好呀", "外面阳光好好", "今天好热啊"])
async def test_weather_the_world_does_not_have_is_sent_back(redis: Any, answer: str) -> None:
    kit, out = await ask(redis, answer, "外面在下雨，好冷")
    assert out.replies == ["外面在下雨，好冷"]
    assert "雨" in sent_back(kit) and "严寒" in sent_back(kit)


@pytest.mark.parametrize("answer", ["外面在下雨，好冷", "今天下雨了，冷死了", "雨一直下呢"])
async def test_true_weather_goes_out(redis: Any, answer: str) -> None:
    kit, out = await ask(redis, answer)
    assert out.replies == [answer] and len(kit.model.calls) == 1


# -- yesterday ---------------------------------------------------------------------------------


async def test_yesterday_is_checked_against_yesterday_s_record(redis: Any) -> None:
    past = [yesterday(done("fish_at_pond", "15:00", 30))]
    kit, out = await ask(
        redis, "昨天去公园散步了", "昨天去水音池钓鱼了", question="昨天去公园了吗", past=past
    )
    assert out.replies == ["昨天去水音池钓鱼了"]
    assert "昨天" in sent_back(kit) and "钓鱼" in sent_back(kit)


async def test_a_true_claim_about_yesterday_goes_out(redis: Any) -> None:
    past = [yesterday(done("walk_in_park", "15:00", 30))]
    kit, out = await ask(
        redis, "去了，下午在南风公园散了会儿步", question="昨天去公园了吗", past=past
    )
    assert out.replies == ["去了，下午在南风公园散了会儿步"] and len(kit.model.calls) == 1


# -- true claims pass, in many phrasings (over-blocking is a failure) --------------------------

TRUE = [
    "早上在家吃了早饭，然后去公园散步了",
    "今天去南风公园散了会儿步",
    "早上八点多在公园散步，还捡到了野莓",
    "吃过早饭了～",
    "现在在家休息呢",
    "刚从公园回家，在休息",
    "今天没去超市哦",
    "正在家里休息",
    "今天一直没出门看电影",  # negated
    "我喜欢听歌",  # a liking
    "明天想去看电影",  # a plan
    "你喜欢猫吗？",  # a question
    "外面在下雨呢",
]


@pytest.mark.parametrize("answer", TRUE)
async def test_true_claims_go_out_unchanged(redis: Any, answer: str) -> None:
    kit, out = await ask(redis, answer)
    assert out.replies == [answer] and len(kit.model.calls) == 1, kit.model.calls[-1][-1]


# -- proactive posts: the event they are about and her record of that hour ---------------------


@pytest.mark.parametrize(
    "post",
    [
        "我在公园散步，风很舒服。",  # she walked in the park at 08:00, not now
        "吃完早饭啦，在听喜欢的歌～",
        "早上好！今天阳光真好",  # it rains
    ],
)
async def test_a_post_is_checked_against_its_event_and_that_hour(
    redis: Any, sqlite_history: Any, post: str
) -> None:
    from tests.test_chat_grounding import post_writer, share
    from tests.test_message_service import LEXICON
    from tests.test_proactive import G, make_service
    from yuiju.memory.episodes import EpisodeRepo
    from yuiju.world.clock import SimClock

    clock = SimClock(at_time("2026-09-01 09:00"))
    episodes = EpisodeRepo(sqlite_history)
    await episodes.ensure()
    await episodes.put(done("walk_in_park", "08:00", 30))
    model = post_writer(post, "刚在家吃完早饭～")
    service, sender, _ = await make_service(
        redis, sqlite_history, clock=clock, model=model, lexicon=LEXICON
    )
    service.states = WeatherWorld(make_character(), ("雨", "严寒"))  # type: ignore[assignment]
    await share(service, clock, "eat_breakfast", "09:30")
    assert sender.sent == [(G, "刚在家吃完早饭～")], model.calls[-1][-1]


async def test_what_she_did_with_someone_and_where_is_checked_not_only_that_they_met(
    redis: Any,
) -> None:
    greeting = yesterday(done("greet", "08:30", 5)).model_copy(
        update={
            "summary": "悠酱和千夏在星见丘高校打了招呼",
            "data": {
                "action": "greet",
                "name": "打招呼",
                "place": "school",
                "reason": "",
                "decided_by": "utility",
            },
        }
    )
    kit, out = await ask(
        redis,
        "昨天我和千夏一起在海边散步了，她还请我喝了咖啡",
        "昨天在学校和千夏打了招呼",
        question="昨天见到千夏了吗",
        past=[greeting],
    )
    assert out.replies == ["昨天在学校和千夏打了招呼"]
    back = sent_back(kit)
    assert "海边" in back and "咖啡" in back and "打了招呼" in back, back


@pytest.mark.parametrize(
    ("answer", "sent"),
    [
        ("上午去了图书馆", False),  # a part of the school she was not in
        ("刚才在学校天台待了好久", False),  # a part her world does not have
        ("现在在学校呢", True),
        ("现在在星见丘高校上课呢", True),
        ("早上去了学校", True),
    ],
)
async def test_a_part_of_a_place_needs_what_happened_there(
    redis: Any, answer: str, sent: bool
) -> None:
    morning = [done("go_to_school", "07:00", 20), done("attend_class", "07:30", 270)]
    kit, out = await ask(redis, answer, "在上课呢", events=morning, doing="attend_class")
    assert (out.replies == [answer]) is sent, kit.model.calls[-1][-1]


@pytest.mark.parametrize("answer", ["在织毛衣呢", "正在做模型", "一直在追新出的剧呢", "在烤曲奇呢"])
async def test_whatever_she_says_she_is_doing_now_must_be_her_running_action(
    redis: Any, answer: str
) -> None:
    kit, out = await ask(redis, answer, "在家休息呢", question="在干嘛")
    assert out.replies == ["在家休息呢"], kit.model.calls[-1][-1]


# -- beyond any word list: a doing her world has no word for is still a claim -------------------

UNNAMED = [
    "其实今儿整理了书架啦",
    "刚才把旧衣服捐了",
    "下午剪了头发",
    "今天晴空万里",  # it rains
    "今儿入手了一盏台灯",
    "中午点了一份酸菜鱼",
]


@pytest.mark.parametrize("answer", UNNAMED)
async def test_a_doing_no_list_names_is_still_checked(redis: Any, answer: str) -> None:
    kit, out = await ask(redis, answer, "早上去公园散步了")
    assert out.replies == ["早上去公园散步了"], kit.model.calls[-1][-1]


@pytest.mark.parametrize(
    "answer",
    ["今天有点累了", "哈哈，被你发现了", "上完课了，好累", "好啦好啦，知道了", "今天的事我记得"],
)
async def test_states_and_chat_are_not_doings(redis: Any, answer: str) -> None:
    kit, out = await ask(redis, answer, doing="attend_class")
    assert out.replies == [answer] and len(kit.model.calls) == 1, kit.model.calls[-1][-1]


@pytest.mark.parametrize("answer", ["今儿帮邻居搬东西", "下雪了"])
async def test_a_named_day_s_doing_without_le_and_the_weather_whatever_day_was_asked(
    redis: Any, answer: str
) -> None:
    kit, out = await ask(redis, answer, "在家休息呢", question="昨天去公园了吗")
    assert out.replies == ["在家休息呢"], kit.model.calls[-1][-1]


@pytest.mark.parametrize("answer", ["今天什么都没买", "今天没买东西哦", "今天没帮别人搬东西"])
async def test_a_denied_doing_is_true_when_the_record_lacks_it(redis: Any, answer: str) -> None:
    kit, out = await ask(redis, answer)
    assert out.replies == [answer] and len(kit.model.calls) == 1, kit.model.calls[-1][-1]


@pytest.mark.parametrize(
    "answer", ["晚上打算早点睡", "下午想去帮邻居搬东西", "如果下午有空就去剪头发"]
)
async def test_plans_with_no_word_of_her_world_are_not_claims(redis: Any, answer: str) -> None:
    kit, out = await ask(redis, answer)
    assert out.replies == [answer] and len(kit.model.calls) == 1, kit.model.calls[-1][-1]


# -- a stranger's model (issue 30, second round): doings in temporal clauses, a time's scope ------

WHILE_DOING = [
    "早上跑步的时候捡到了野莓",
    "跑步的时候捡到了野莓",
    "早上跑步的时候，在公园捡到了野莓",
    "早上跑完步捡到了野莓",
    "早上练完琴去公园散步了",
    "早上遛狗回来的路上捡到了野莓",
    "去书店的路上捡到了野莓",
]


@pytest.mark.parametrize("answer", WHILE_DOING)
async def test_a_doing_in_a_temporal_clause_is_a_claim_about_her_too(
    redis: Any, answer: str
) -> None:
    kit, out = await ask(redis, answer, "早上去公园散步了")
    assert out.replies == ["早上去公园散步了"], kit.model.calls[-1][-1]
    assert "生活记录" in sent_back(kit)


@pytest.mark.parametrize(
    "answer",
    [
        "早上散步的时候捡到了野莓",
        "吃完早饭去公园散步了",
        "散完步就回家了",
        "跑步的时候我喜欢听歌",  # a liking
        "散步的时候心情会变好",  # what happens whenever she walks
    ],
)
async def test_a_true_or_general_temporal_clause_goes_out(redis: Any, answer: str) -> None:
    kit, out = await ask(redis, answer)
    assert out.replies == [answer] and len(kit.model.calls) == 1, kit.model.calls[-1][-1]


NOON = at_time("2026-09-01 13:00")
LUNCHTIME = [
    *(e for e in MORNING if e.data["action"] != "eat_breakfast"),  # her only meal: lunch at 12:00
    done("school_lunch", "12:00", 30),
]


@pytest.mark.parametrize(
    "answer",
    [
        "哈哈，今天7点多的时候起床，午饭吃过了！",
        "今天7点起床，然后吃了午饭",
        "早上七点起的床，中午吃过午饭了",
        "7点起床，午饭在学校食堂吃的",
        "今天7点多起床，去公园散步了",
    ],
)
async def test_a_time_scopes_over_its_own_clause_not_the_next_claim(
    redis: Any, answer: str
) -> None:
    kit, out = await ask(redis, answer, events=LUNCHTIME, now=NOON)
    assert out.replies == [answer], kit.model.calls[-1][-1]
    assert not any(call[-1]["role"] == "system" for call in kit.model.calls)  # never sent back


@pytest.mark.parametrize(
    "answer",
    [
        "中午吃了午饭，还去公园散步了",  # the walk was at 08:10
        "中午十二点，在公园散步",  # a time said alone holds for what follows
        "下午一点左右，去公园散步了",
    ],
)
async def test_a_time_still_holds_for_a_clause_that_continues_it(redis: Any, answer: str) -> None:
    kit, out = await ask(redis, answer, "早上去公园散步了", events=LUNCHTIME, now=NOON)
    assert out.replies == ["早上去公园散步了"], kit.model.calls[-1][-1]


# -- known gaps (issue 30, third round): wider times, a time still ahead, ----------------------


def days_ago(episode: Episode, days: int) -> Episode:
    shift = timedelta(days=days)
    return episode.model_copy(
        update={
            "id": f"{days}d-{episode.id}",
            "time": episode.time - shift,
            "end_time": (episode.end_time or episode.time) - shift,
        }
    )


# it is Tuesday 2026-09-01 10:00: last week is 08-24..08-30, its weekend 08-29..08-30
LONGER_AGO = [
    days_ago(done("fish_at_pond", "15:00", 30), 3),  # Saturday 08-29
    days_ago(done("walk_on_coast", "16:00", 30), 12),  # 08-20
    days_ago(done("library_study", "13:00", 60), 20),  # 08-12
]


@pytest.mark.parametrize(
    "answer",
    [
        "上周末我去海边玩了",  # the coast was 12 days ago
        "最近天天去图书馆",  # the library was 20 days ago
        "前几天在图书馆自习了",
        "上周去海边散步了",
        "上个星期去了趟超市",
        "以前养过一只猫",
        "之前去过游乐园",
        "上次去超市买了草莓",
        "周末在家烤了饼干",
    ],
)
async def test_a_claim_about_a_wider_time_is_checked_against_that_span(
    redis: Any, answer: str
) -> None:
    kit, out = await ask(redis, answer, "早上去公园散步了", past=LONGER_AGO)
    assert out.replies == ["早上去公园散步了"], kit.model.calls[-1][-1]
    assert "生活记录" in sent_back(kit)


@pytest.mark.parametrize(
    "answer",
    [
        "上周末去水音池钓鱼了",
        "上周去水音池钓鱼了",
        "最近去水音池钓过鱼",
        "前几天去钓鱼了",
        "之前去海边散过步",
        "以前在图书馆自习过",
        "上次在图书馆自习了一小时",
        "上周末没去海边",  # denied, and the record agrees
        # not claims: likings, habits, childhood, plans, beyond her record
        "以前喜欢去海边",
        "小时候养过猫",
        "下周要去游乐园",
        "周末打算去游乐园",
        "周末去游乐园玩吧",  # a Tuesday: the coming weekend
        "去年去过游乐园",
        "以前经常去游乐园",
    ],
)
async def test_what_a_wider_time_of_her_record_backs_goes_out(redis: Any, answer: str) -> None:
    kit, out = await ask(redis, answer, past=LONGER_AGO)
    assert out.replies == [answer] and len(kit.model.calls) == 1, kit.model.calls[-1][-1]


async def test_before_today_her_diaries_back_a_claim_too(redis: Any) -> None:
    old = Diary.model_validate(
        {
            "_id": "d1",
            "character_id": "yuiju",
            "period": "day",
            "date": "2026-06-01",
            "end_date": "2026-06-01",
            "text": "今天在公园喂了一只小猫，它好可爱。",
            "source": "factual",
            "written_at": at_time("2026-06-01 22:00"),
        }
    )
    memory = DaysMemory(events=list(MORNING), past=LONGER_AGO, diaries=[old])
    kit, out = await ask(redis, "以前喂过一只猫", memory=memory)
    assert out.replies == ["以前喂过一只猫"] and len(kit.model.calls) == 1, kit.model.calls[-1][-1]


@pytest.mark.parametrize(
    ("answer", "start", "end"),
    [
        ("上周去海边散步了", "2026-08-24 00:00", "2026-08-31 00:00"),
        ("上周末我去海边玩了", "2026-08-29 00:00", "2026-08-31 00:00"),
        ("最近天天去图书馆", "2026-08-25 00:00", "2026-09-01 10:00"),
        ("以前养过一只猫", "2026-08-02 00:00", "2026-09-01 00:00"),
    ],
)
async def test_a_wider_time_is_read_once_for_its_span_and_only_when_claimed(
    redis: Any, answer: str, start: str, end: str
) -> None:
    memory = DaysMemory(events=list(MORNING), past=LONGER_AGO)
    await ask(redis, answer, "早上去公园散步了", memory=memory)
    today = at_time("2026-09-01 00:00")
    spans = {r for r in memory.reads if r[0] != today}  # today's meetings are read as before
    assert spans in (
        {(at_time(start), at_time(end))},
        {(at_time(start), NOW + timedelta(seconds=1))},
    )
    assert len([r for r in memory.reads if r[0] != today]) <= 2, memory.reads  # doings, meetings
    quiet = DaysMemory(events=list(MORNING), past=LONGER_AGO)
    await ask(redis, "早上去公园散步了", memory=quiet)
    assert {r[0] for r in quiet.reads} <= {today}  # a claim about today reads no other span


AFTERNOON = at_time("2026-09-01 14:00")


@pytest.mark.parametrize(
    "answer",
    [
        "下午三点多在帮邻居搬东西",  # 15:00 has not come: nothing can be recorded there
        "下午三点多帮邻居搬东西",
        "晚上在神社参拜",
        "晚上去神社参拜啦",  # 去 + a doing said as done
        "其实帮邻居搬东西啦",  # 啦 = 了 + 啊
        "去水音池钓鱼啦",
        "在神社参拜啦",
        "帮奶奶浇花咯",
    ],
)
async def test_a_doing_said_as_a_fact_at_a_time_still_ahead_or_with_la_is_a_claim(
    redis: Any, answer: str
) -> None:
    kit, out = await ask(redis, answer, "早上去公园散步了", now=AFTERNOON)
    assert out.replies == ["早上去公园散步了"], kit.model.calls[-1][-1]


@pytest.mark.parametrize(
    "answer",
    [
        "下午三点会去帮邻居搬东西",
        "待会儿帮邻居搬东西",
        "傍晚去咖啡店打工",
        "晚上去神社参拜",
        "晚上准备去神社参拜",
        "我先去上课啦",  # leaving for it
        "早上去公园散步啦",
        "吃过早饭咯",
        "好啦好啦，知道啦",
        "没事啦，不用担心",
    ],
)
async def test_plans_at_a_time_still_ahead_and_true_la_claims_go_out(
    redis: Any, answer: str
) -> None:
    kit, out = await ask(redis, answer, now=AFTERNOON)
    assert out.replies == [answer], kit.model.calls[-1][-1]
    assert not any(call[-1]["role"] == "system" for call in kit.model.calls)  # never sent back


@pytest.mark.parametrize(
    ("post", "sent"),
    [
        ("昨天也在公园散了步，今天又吃到好吃的早饭～", True),  # her record of yesterday says so
        ("昨天去海边玩了一下午，今天又吃到好吃的早饭～", False),
        ("上周末和朋友去看了电影，今天又吃到好吃的早饭～", False),
    ],
)
async def test_a_post_about_other_days_is_checked_against_those_days(
    redis: Any, sqlite_history: Any, post: str, sent: bool
) -> None:
    from tests.test_chat_grounding import post_writer, share
    from tests.test_message_service import LEXICON
    from tests.test_proactive import G, make_service
    from yuiju.memory.episodes import EpisodeRepo
    from yuiju.world.clock import SimClock

    clock = SimClock(at_time("2026-09-01 09:00"))
    episodes = EpisodeRepo(sqlite_history)
    await episodes.ensure()
    await episodes.put(yesterday(done("walk_in_park", "16:00", 30)))
    model = post_writer(post, "刚在家吃完早饭～")
    service, sender, _ = await make_service(
        redis, sqlite_history, clock=clock, model=model, lexicon=LEXICON
    )
    service.states = WeatherWorld(make_character(), ("晴", "温暖"))  # type: ignore[assignment]
    await share(service, clock, "eat_breakfast", "09:30")
    assert sender.sent == [(G, post if sent else "刚在家吃完早饭～")], model.calls[-1][-1]


@pytest.mark.parametrize(
    ("hour", "weather", "sent"),
    [
        (
            "00:46",
            ("晴", "寒冷"),
            False,
        ),  # a held-out rerun's post: no sun at night, and it is cold
        ("21:30", ("晴", "温暖"), False),
        ("10:30", ("晴", "温暖"), True),
        ("10:30", ("晴", "寒冷"), False),  # sun-warmed on a cold day
    ],
)
async def test_sunshine_is_checked_against_the_hour_and_warmth_against_the_temperature(
    redis: Any, sqlite_history: Any, hour: str, weather: tuple[str, str], sent: bool
) -> None:
    from tests.test_chat_grounding import post_writer, share
    from tests.test_message_service import LEXICON
    from tests.test_proactive import G, make_service, settings
    from yuiju.memory.episodes import EpisodeRepo
    from yuiju.world.clock import SimClock

    clock = SimClock(at_time(f"2026-09-01 {hour}") - timedelta(minutes=30))
    await EpisodeRepo(sqlite_history).ensure()
    post = "今天阳光超好，晒得暖暖的☀️"
    model = post_writer(post, "看了会儿书～")
    service, sender, _ = await make_service(
        redis,
        sqlite_history,
        clock=clock,
        model=model,
        lexicon=LEXICON,
        groups={G: settings(quiet_hours="")},  # as the held-out rerun's group was set
    )
    service.states = WeatherWorld(make_character(), weather)  # type: ignore[assignment]
    await share(service, clock, "read_at_home", hour)
    assert sender.sent == [(G, post if sent else "看了会儿书～")], model.calls[-1][-1]
