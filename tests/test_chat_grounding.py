"""The grounding check (issue 11 item 10): every answer that will be sent is checked, on its claims
about today — actions, places, items, times — against today's episodes; negation is read."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.conftest import at_time, make_character
from tests.test_message_service import FakeMemory, FakeWorld, make_kit, scripted
from yuiju.llm import ToolCall
from yuiju.memory.episodes import Episode
from yuiju.message.agent import Tool, ToolResult
from yuiju.world.loader import load_actions
from yuiju.world.state import RunningAction
from yuiju.world.town import HAURA

ACTIONS = {a.id: a for a in load_actions("yuiju.actions")}


def done(action_id: str, when: str, minutes: int = 30, result: str = "") -> Episode:
    """A behavior episode as the engine writes it."""
    action = ACTIONS[action_id]
    place = action.at or "home"
    start = at_time(f"2026-09-01 {when}")
    return Episode.model_validate(
        {
            "_id": f"{action_id}-{when}",
            "character_id": "yuiju",
            "type": "behavior",
            "time": start,
            "end_time": start + timedelta(minutes=minutes),
            "status": "completed",
            "summary": f"yuiju在{HAURA.place_name(place)}开始{action.name}",
            "data": {
                "action": action_id,
                "name": action.name,
                "place": place,
                "reason": "",
                "decided_by": "utility",
                "result": result,
            },
        }
    )


DAY = [
    done("wake_up", "07:00", 10),
    done("eat_breakfast", "07:10", 20),
    done("walk_in_park", "08:00", 60, "在公园捡到了野莓"),
    done("read_at_home", "09:30", 30),
]


async def ask(
    redis: Any,
    *answers: Any,
    events: list[Episode] = DAY,
    question: str = "悠酱今天干嘛了",
    **cfg: Any,
) -> Any:
    kit = await make_kit(
        redis, fn=scripted(*answers), memory=FakeMemory(events=list(events)), **cfg
    )
    out = await kit.say(question)
    return kit, out


def feedback(kit: Any, call: int = 1) -> str:
    last = kit.model.calls[call][-1]
    assert last["role"] == "system"
    return str(last["content"])


GROUNDED = [
    "今天早上去公园散步了，还捡到了野莓！",
    "今天没去钓鱼，在家看了会儿书",  # a negated claim that the record agrees with
    "今天没去神社哦",
    "早上八点去南风公园散了步",
    "明天想去水音池钓鱼～",  # a plan, not a claim about today
    "昨天去钓鱼了，今天在家看书",
    "你今天去钓鱼了吗？",  # a question
    "今天天气真好呀",
]


@pytest.mark.parametrize("answer", GROUNDED)
async def test_a_grounded_answer_goes_out_unchanged_in_one_call(redis: Any, answer: str) -> None:
    kit, out = await ask(redis, answer)
    assert out.replies == [answer] and len(kit.model.calls) == 1, kit.model.calls[-1][-1]


INVENTED = {
    "an action": ("今天去水音池钓鱼了！", "钓鱼"),
    "a place": ("今天下午去了结灯神社", "结灯神社"),
    "an item": ("今天在公园捡到了海玻璃", "海玻璃"),
    "a time": ("今天下午三点去公园散步了", "15:00"),
    "denying what she did": ("今天没去公园哦，一直在家", "公园"),
}


@pytest.mark.parametrize(("answer", "named"), list(INVENTED.values()), ids=list(INVENTED))
async def test_an_invented_claim_is_sent_back_with_todays_record(
    redis: Any, answer: str, named: str
) -> None:
    kit, out = await ask(redis, answer, "今天早上去公园散步了")
    assert out.replies == ["今天早上去公园散步了"]
    text = feedback(kit)
    assert named in text and "08:00" in text and "生活记录" in text


async def test_a_second_invented_answer_is_checked_too_and_never_sent(redis: Any) -> None:
    kit, out = await ask(redis, "今天去水音池钓鱼了！", "今天还去神社参拜了呢")
    assert len(kit.model.calls) == 2
    sent = " ".join(t for _, _, t in kit.sent)
    assert "钓鱼" not in sent and "参拜" not in sent and "神社" not in sent
    assert len(out.replies) == 1 and out.replies[0]


async def test_without_a_day_word_the_question_sets_the_day(redis: Any) -> None:
    kit, out = await ask(redis, "去水音池钓鱼了", "去公园散步了")
    assert out.replies == ["去公园散步了"] and "钓鱼" in feedback(kit)
    kit, out = await ask(redis, "去水音池钓鱼了", question="悠酱上周末干嘛了")
    assert out.replies == ["去水音池钓鱼了"]  # a memory that cannot read last weekend: unchecked


async def test_a_time_of_day_sets_the_day_and_one_still_ahead_is_a_plan(redis: Any) -> None:
    kit, out = await ask(redis, "早上去水音池钓鱼了", "早上去公园散步了", question="悠酱早上干嘛了")
    assert out.replies == ["早上去公园散步了"] and "钓鱼" in feedback(kit)
    kit, out = await ask(redis, "下午去咖啡店打工", question="悠酱下午干嘛")  # it is 10:00
    assert out.replies == ["下午去咖啡店打工"] and len(kit.model.calls) == 1


async def test_a_silent_mode_reply_is_checked_before_it_goes_out(redis: Any) -> None:
    reply = Tool("reply", "回复", lambda ctx, a: ToolResult("已发送", user_reply=a["text"]))
    kit, out = await ask(
        redis,
        ToolCall(id="1", name="reply", arguments='{"text": "今天去钓鱼了"}'),
        ToolCall(id="2", name="reply", arguments='{"text": "今天去公园散步了"}'),
        "",
        tools=[reply],
        mode="SILENT",
    )
    assert [t for _, _, t in kit.sent] == ["今天去公园散步了"] and out.replies == [
        "今天去公园散步了"
    ]
    tool_result = [m for m in kit.model.calls[1] if m["role"] == "tool"][-1]["content"]
    assert "没有发出" in tool_result and "钓鱼" in tool_result


async def test_what_she_is_doing_right_now_counts_before_the_record_has_it(redis: Any) -> None:
    now = at_time("2026-09-01 10:00")
    running = RunningAction(
        action_id="fish_at_pond",
        name="在水音池钓鱼",
        started_at=now - timedelta(minutes=10),
        ends_at=now + timedelta(minutes=50),
        episode_id="e-now",
        place="pond",
        reason="",
        decided_by="x",
    )
    kit = await make_kit(
        redis,
        fn=scripted("今天在水音池钓鱼呢"),
        memory=FakeMemory(events=list(DAY)),
        world=FakeWorld(make_character(running=running, location="pond")),
    )
    out = await kit.say("悠酱今天在干嘛")
    assert out.replies == ["今天在水音池钓鱼呢"] and len(kit.model.calls) == 1


async def test_saying_she_did_not_go_to_the_park_on_a_day_at_home_is_true(redis: Any) -> None:
    kit, out = await ask(
        redis, "今天没去公园，一直在家看书", events=[done("read_at_home", "09:30")]
    )
    assert out.replies == ["今天没去公园，一直在家看书"] and len(kit.model.calls) == 1


# -- claims whatever the question (issue 21 item 8) ------------------------------------------------

UNDATED_CLAIMS = [
    "我在公园散步，风很舒服。",  # the answer to a question about colours
    "刚去水音池钓鱼了",
    "正在神社参拜呢",
    "去咖啡店打工了，好累",
    "我现在在图书馆",
]
"""What she is doing or just did, said without a day word: about today, whatever was asked."""


@pytest.mark.parametrize("answer", UNDATED_CLAIMS)
async def test_a_claim_about_now_or_just_now_is_checked_whatever_the_question(
    redis: Any, answer: str
) -> None:
    kit, out = await ask(
        redis, answer, "我最喜欢蓝色啦", events=[], question="悠酱，你最喜欢什么颜色？"
    )
    assert out.replies == ["我最喜欢蓝色啦"], kit.model.calls[-1][-1]
    assert "生活记录" in feedback(kit) and "没有记录" in feedback(kit)


NOT_ABOUT_NOW = [
    "我最喜欢蓝色啦，像晴天的天空",
    "我喜欢在公园散步",  # a liking
    "平时经常去水音池钓鱼",  # a habit
    "散步的时候最喜欢看天空了",
    "我去过结灯神社哦",  # ever, not today
    "下次一起去公园散步吧",  # a plan
    "你在公园散步吗？",  # a question
    "小明在公园散步呢",  # someone else
    "我超爱铜锣烧了",  # naming an item
    "甜食的话，最爱吃铜锣烧了",
]


@pytest.mark.parametrize("answer", NOT_ABOUT_NOW)
async def test_likings_habits_plans_and_other_peoples_doings_are_not_checked(
    redis: Any, answer: str
) -> None:
    kit, out = await ask(redis, answer, events=[], question="悠酱，你最喜欢什么颜色？")
    assert out.replies == [answer] and len(kit.model.calls) == 1, kit.model.calls[-1][-1]


async def test_what_she_is_doing_now_must_be_what_the_record_shows_now(redis: Any) -> None:
    # the walk in the park was at 08:00-09:00; at 10:00 she is not walking in the park
    kit, out = await ask(redis, "我正在公园散步呢", "在家看书呢", question="悠酱在干嘛", events=DAY)
    assert out.replies == ["在家看书呢"] and "08:00" in feedback(kit)


# -- proactive posts against their event ---------------------------------------------------------


async def share(service: Any, clock: Any, action_id: str, when: str, *messages: str) -> Any:
    """Her ``action_id`` ends at ``when`` and she shares it; the model writes ``messages``."""
    import json

    from tests.test_proactive import G, qq
    from yuiju.storage.keys import Keys

    await clock.sleep_until(at_time(f"2026-09-01 {when}"))
    action = ACTIONS[action_id]
    fields = {
        "type": "action_completed",
        "character_id": "yuiju",
        "time": clock.now().isoformat(),
        "data": json.dumps(
            {
                "episode_id": f"bhv_{action_id}_{when}",
                "action": action_id,
                "name": action.name,
                "summary": f"yuiju在{HAURA.place_name(action.at or 'home')}{action.name}",
                "share": True,
            },
            ensure_ascii=False,
        ),
    }
    entry_id = await service.redis.xadd(Keys().events, fields)
    records = await service.handle(entry_id, fields)
    return next(r for r in records if r["group_id"] == qq(G).key)


def post_writer(*messages: str) -> Any:
    import json

    from yuiju.llm import FunctionChatModel

    queue = list(messages)

    def fn(msgs: Any, schema: Any) -> str:
        message = queue.pop(0) if queue else "嗯嗯"
        return json.dumps(
            {"shouldSend": True, "reason": "想分享", "message": message}, ensure_ascii=False
        )

    return FunctionChatModel(fn)


async def test_a_proactive_post_is_checked_against_the_event_it_shares(
    redis: Any, sqlite_history: Any
) -> None:
    from tests.test_message_service import LEXICON
    from tests.test_proactive import G, make_service
    from yuiju.world.clock import SimClock

    clock = SimClock(at_time("2026-09-01 09:00"))
    model = post_writer("我在公园散步，风很舒服。", "刚上完课，终于可以休息一下啦～")
    service, sender, _ = await make_service(
        redis, sqlite_history, clock=clock, model=model, lexicon=LEXICON
    )
    record = await share(service, clock, "attend_class", "12:00")
    assert sender.sent == [(G, "刚上完课，终于可以休息一下啦～")], record
    retry = model.calls[1][-1]["content"]
    assert "公园" in retry and "在学校上课" in retry, retry


async def test_a_proactive_post_true_to_its_event_goes_out_in_one_call(
    redis: Any, sqlite_history: Any
) -> None:
    from tests.test_message_service import LEXICON
    from tests.test_proactive import G, make_service
    from yuiju.world.clock import SimClock

    clock = SimClock(at_time("2026-09-01 09:00"))
    model = post_writer("刚在公园散完步，风好舒服～")
    service, sender, _ = await make_service(
        redis, sqlite_history, clock=clock, model=model, lexicon=LEXICON
    )
    await share(service, clock, "walk_in_park", "10:00")
    assert sender.sent == [(G, "刚在公园散完步，风好舒服～")] and len(model.calls) == 1


async def test_a_proactive_post_may_name_what_today_s_record_shows(
    redis: Any, sqlite_history: Any
) -> None:
    from tests.test_message_service import LEXICON
    from tests.test_proactive import G, make_service
    from yuiju.memory.episodes import EpisodeRepo
    from yuiju.world.clock import SimClock

    clock = SimClock(at_time("2026-09-01 09:00"))
    episodes = EpisodeRepo(sqlite_history)
    await episodes.ensure()
    await episodes.put(done("walk_in_park", "08:00", 60))
    model = post_writer("早上去公园散了步，刚上完课～")
    service, sender, _ = await make_service(
        redis, sqlite_history, clock=clock, model=model, lexicon=LEXICON
    )
    await share(service, clock, "attend_class", "12:00")
    assert sender.sent == [(G, "早上去公园散了步，刚上完课～")] and len(model.calls) == 1
