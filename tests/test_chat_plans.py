"""Chat → her plans, through the world (issue 22): what people say in chat proposes (an
invitation, a reminder, a promise, a gift), the chat side queues it as a world command naming who
asked, the world reviews it at its next tick and applies or declines it, and the record says so;
she goes, or the record says why not."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from nonebot_plugin_yuiju.onebot import normalize
from tests.chatkit import make_service
from tests.conftest import TZ, EngineKit, at_time, make_character, make_ctx, make_engine
from tests.openai_stub import OpenAIStub, StubToolCall
from tests.spies import record_reads
from tests.test_message_service import LEXICON
from yuiju.config import ChatConfig, GroupPolicy, load_config
from yuiju.llm import FunctionChatModel, OpenAIChatModel, ToolCall
from yuiju.memory.episodes import Episode, EpisodeRepo
from yuiju.message.service import ChatService
from yuiju.storage.history import HistoryStore
from yuiju.world.clock import SimClock
from yuiju.world.policies.llm import render_moment_prompt
from yuiju.world.policy import DecisionRequest

BOT = 10001
GROUP = 100
ADMIN = 1
XIAOLIN = 5
THURSDAY_EVENING = "2026-09-03 20:00"  # tomorrow is a school day: class until 16:30


@dataclass
class Town:
    """Her world (a real engine under a simulated clock) and her chat, on the same stores."""

    world: EngineKit
    chat: ChatService
    model: Any
    n: int = 0

    def entry(self, text: str, *, user: int = XIAOLIN, name: str = "小林", group: int = GROUP):
        self.n += 1
        now = self.world.clock.now()
        return normalize(
            {
                "message_type": "group" if group else "private",
                "message_id": self.n,
                "user_id": user,
                "group_id": group or None,
                "sender": {"nickname": name},
                "message": [
                    {"type": "at", "data": {"qq": str(BOT)}},
                    {"type": "text", "data": {"text": text}},
                ],
                "time": int(now.timestamp()),
            },
            self_id=BOT,
            tz=TZ,
            bot_name="悠酱",
        )

    async def say(self, text: str, **kw: Any) -> Any:
        return await self.chat.handle(self.entry(text, **kw))

    async def tick(self, minutes: int = 1) -> datetime:
        """The world's next tick: queued commands are reviewed and applied."""
        now = self.world.clock.now() + timedelta(minutes=minutes)
        await self.world.clock.sleep_until(now)
        await self.world.ticker.tick(now)
        await self.world.engine.flush_outbox(force=True)
        return now

    async def her(self) -> Any:
        state = await self.world.character(self.chat.deps.card.id)
        assert state is not None
        return state


NEIGHBOURS = {"kaede": ("枫", "小枫", "kaede"), "chika": ("千夏", "chika")}
"""Her classmates as `message.bot.build_service` reads them from the cards."""


async def town(
    redis: aioredis.Redis,
    history: HistoryStore,
    model: Any,
    *,
    start: str = THURSDAY_EVENING,
    kit: EngineKit | None = None,
    character_id: str = "yuiju",
    neighbours: dict[str, tuple[str, ...]] = NEIGHBOURS,
) -> Town:
    if kit is None:
        kit = await make_engine(redis, history, start=start)
        await kit.loop.ensure_character()
        await kit.ticker.tick(at_time(start))
    chat = make_service(
        redis,
        cfg=ChatConfig(
            admins=[ADMIN],
            groups={str(GROUP): GroupPolicy(reply="mention")},
            max_pause_seconds=0,
        ),
        clock=kit.clock,
        keys=kit.keys,
        model=model,
        history=history,
        world=kit.store,
        lexicon=LEXICON,
        character_id=character_id,
        neighbours=neighbours,
    )
    await chat.ensure()
    return Town(kit, chat, model)


def scripted(*answers: Any) -> FunctionChatModel:
    queue = list(answers)
    return FunctionChatModel(lambda messages, schema: queue.pop(0) if queue else "嗯嗯")


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=f"c-{name}", name=name, arguments=json.dumps(arguments, ensure_ascii=False))


def tool_result(model: Any, request: int) -> str:
    """What the tool answered the model, as the ``request``-th request (0-based) shows it."""
    messages = (
        model.calls[request] if hasattr(model, "calls") else model.requests[request]["messages"]
    )
    return str(next(m for m in reversed(messages) if m["role"] == "tool")["content"])


async def plan_episodes(history: HistoryStore, since: str, days: int = 2) -> list[Any]:
    return await EpisodeRepo(history).between(
        "yuiju", at_time(since), at_time(since) + timedelta(days=days), type_="plan"
    )


async def status_json(redis_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    from yuiju import cli as yuiju_cli

    cfg = load_config(environ={"YUIJU_REDIS__URL": redis_url, "YUIJU_APP__DATA_DIR": str(tmp_path)})
    assert await yuiju_cli._status(cfg, as_json=True) == 0
    return json.loads(capsys.readouterr().out)


INVITE = {"kind": "invite", "place": "南风公园", "when": "明天下午", "what": "一起散步"}


# -- the bar --------------------------------------------------------------------------------------


async def test_an_invitation_in_chat_becomes_her_plan_naming_who_asked_and_she_goes(
    redis: aioredis.Redis,
    redis_url: str,
    sqlite_history: HistoryStore,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with OpenAIStub() as stub:
        stub.reply(StubToolCall("propose_plan", INVITE), "好呀，我看看明天放学后能不能去～")
        model = OpenAIChatModel(base_url=stub.base_url, api_key=None, model="stub")
        yuiju = await town(redis, sqlite_history, model)

        out = await yuiju.say("明天下午一起去南风公园吧")

        assert out.replies == ["好呀，我看看明天放学后能不能去～"]
        offered = [t["function"]["name"] for t in stub.requests[0]["tools"]]
        assert "propose_plan" in offered
        told = tool_result(stub, 1)
        # queued, not promised; the same review on her state says when it would be
        assert "还没定下来" in told and "9月4日 16:30" in told, told

    # before the world's tick: waiting, with who asked
    queued = (await status_json(redis_url, tmp_path, capsys))["social"]["pending"]
    assert [(p["type"], p["source"], p["by"]["name"]) for p in queued] == [
        ("invite", "chat", "小林")
    ]

    await yuiju.tick()

    report = await status_json(redis_url, tmp_path, capsys)
    assert report["social"]["pending"] == []
    (plan,) = report["characters"]["yuiju"]["social"]["appointments"]
    assert (plan["source"], plan["asked_by"]["id"], plan["asked_by"]["name"]) == (
        "chat",
        "qq:5",
        "小林",
    )
    assert plan["place"] == "park" and plan["via"] == "group:qq:100"
    assert datetime.fromisoformat(plan["start"]) == at_time("2026-09-04 16:30")  # after class
    assert (
        "明天 16:30 和小林在南风公园一起散步（小林约的）"
        in report["social"]["appointments"]["yuiju"]
    )
    (decided,) = await plan_episodes(sqlite_history, THURSDAY_EVENING)
    assert decided.data["source"] == "chat" and decided.data["asked_by"]["id"] == "qq:5"
    assert decided.summary.endswith("答应了")

    # her decisions see it (the LLM's prompt, the offline policy's pull)
    ctx = make_ctx("2026-09-04 16:00", **(await yuiju.her()).model_dump(exclude={"id"}))
    assert "约定：今天 16:30 和小林在南风公园一起散步（小林约的）" in render_moment_prompt(
        DecisionRequest(ctx=ctx, candidates=[])
    )

    # the next day, lived: she went, or the record says why not
    await yuiju.world.engine.run(until=at_time("2026-09-04 21:00"))
    await yuiju.world.engine.flush_outbox(force=True)
    her = await yuiju.her()
    (after,) = her.social.appointments
    assert after.status in ("kept", "missed")
    outcome = [
        e
        for e in await plan_episodes(sqlite_history, "2026-09-04 00:00", days=1)
        if e.data.get("status") == after.status
    ]
    assert len(outcome) == 1 and outcome[0].data["asked_by"]["name"] == "小林"
    assert ("赴约" if after.status == "kept" else "没能赴约") in outcome[0].summary


async def test_the_next_turn_shows_what_the_world_decided_and_what_she_did(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(
        redis, sqlite_history, scripted(call("propose_plan", **INVITE), "好呀", "嗯嗯")
    )
    await yuiju.say("明天下午一起去南风公园吧")
    await yuiju.tick()

    await yuiju.say("那说定了哦")

    context = yuiju.model.calls[-1][1]["content"]
    assert "和小林的约定：明天 16:30 和小林在南风公园一起散步（小林约的）" in context
    assert "小林约悠酱9月4日16:30在南风公园一起散步，答应了" in context


async def test_a_yes_in_words_without_the_tool_still_becomes_her_plan(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    """Many models answer an invitation in words and call no tool: what was clearly asked is
    proposed for her all the same, and the world reviews it as any proposal."""
    yuiju = await town(redis, sqlite_history, scripted("好呀，明天见～", "嗯嗯，记住啦"))

    await yuiju.say("明天下午一起去南风公园吧")
    await yuiju.say("别忘了周一考试哦")
    await yuiju.tick()

    her = await yuiju.her()
    (plan,) = her.social.appointments
    assert (plan.place, plan.source, plan.asked_by.name) == ("park", "chat", "小林")
    assert plan.start.astimezone(TZ).date().isoformat() == "2026-09-04"
    (note,) = her.social.notes
    assert (note.text, note.by.name, note.kind) == ("周一考试", "小林", "reminder")


@pytest.mark.parametrize(
    ("said", "answer"),
    [
        ("明天下午一起去南风公园吧", "明天不行哦，下次吧"),  # she turned it down
        ("我明天下午和朋友一起去公园", "好呀，玩得开心"),  # a plan told, nobody invited
        ("一起去南风公园吧", "好呀"),  # no time: the model may ask, nothing to propose
    ],
)
async def test_what_she_turned_down_or_nobody_asked_is_not_proposed(
    redis: aioredis.Redis, sqlite_history: HistoryStore, said: str, answer: str
) -> None:
    yuiju = await town(redis, sqlite_history, scripted(answer))

    await yuiju.say(said)
    await yuiju.tick()

    assert (await yuiju.her()).social.appointments == []


# -- limits ---------------------------------------------------------------------------------------


async def test_a_strangers_third_invitation_is_declined_with_its_reason(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    asks = [
        ("周六下午", "南风公园"),
        ("周日上午", "月汐海岸"),
        ("下周一晚上", "薄暮咖啡"),
    ]
    answers: list[Any] = []
    for when, place in asks:
        answers += [call("propose_plan", kind="invite", place=place, when=when, what="玩"), "好"]
    yuiju = await town(redis, sqlite_history, scripted(*answers))

    for when, place in asks:
        await yuiju.say(f"{when}一起去{place}吧")
        await yuiju.tick()

    her = await yuiju.her()
    assert [a.place for a in her.social.planned()] == ["park", "coast"]
    assert "恐怕不行：已经答应小林好几件事了" in tool_result(yuiju.model, 5)
    declined = [
        e for e in await plan_episodes(sqlite_history, THURSDAY_EVENING) if not e.data["accepted"]
    ]
    (third,) = declined
    assert third.data["reason"] == "已经答应小林好几件事了，先把这些做完"
    assert third.summary.endswith("没答应：已经答应小林好几件事了，先把这些做完")


async def test_an_admin_invitation_is_lenient_but_not_with_the_calendar(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    asks = ["周六下午", "周日下午", "下周一晚上", "明天上午"]  # the last one: class
    answers: list[Any] = []
    for when in asks:
        answers += [call("propose_plan", kind="invite", place="公园", when=when, what="散步"), "好"]
    yuiju = await town(redis, sqlite_history, scripted(*answers))

    for when in asks:
        await yuiju.say(f"{when}去公园吧", user=ADMIN, name="管理员")
        await yuiju.tick()

    her = await yuiju.her()
    assert len(her.social.planned()) == 3  # past the per-person limit
    reasons = [e.data["reason"] for e in await plan_episodes(sqlite_history, THURSDAY_EVENING)]
    assert reasons.count("那时候要上课") == 1


async def test_a_night_invitation_is_read_as_night_and_declined_because_she_sleeps(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    """明天凌晨三点 is 03:00 (never 15:00, when she has class): declined because she sleeps."""
    ask = {"kind": "invite", "place": "公园", "when": "明天凌晨三点", "what": "看星星"}
    yuiju = await town(redis, sqlite_history, scripted(call("propose_plan", **ask), "好"))

    await yuiju.say("明天凌晨三点一起去公园看星星吧")
    await yuiju.tick()

    assert "恐怕不行：那时候在睡觉" in tool_result(yuiju.model, 1)
    (declined,) = await plan_episodes(sqlite_history, THURSDAY_EVENING)
    assert declined.data["reason"].startswith("那时候在睡觉")
    assert declined.data["appointment"]["start"].startswith("2026-09-04T03:00")
    assert (await yuiju.her()).social.appointments == []


# -- reminders, promises, gifts ---------------------------------------------------------------------


async def test_a_reminder_is_in_her_decisions_from_the_day_before(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(
        redis,
        sqlite_history,
        scripted(call("propose_plan", kind="remind", when="下周一", what="考试"), "记住啦"),
    )
    await yuiju.say("别忘了下周一考试")
    await yuiju.tick()

    her = await yuiju.her()
    (note,) = her.social.notes
    assert (note.text, note.by.name, note.all_day, note.kind) == ("考试", "小林", True, "reminder")
    (recorded,) = await plan_episodes(sqlite_history, THURSDAY_EVENING)
    assert recorded.summary == "小林提醒悠酱9月7日：考试，记下了"
    assert recorded.data["source"] == "chat" and recorded.data["asked_by"]["id"] == "qq:5"

    def prompt(at: str) -> str:
        ctx = make_ctx(at, **her.model_dump(exclude={"id"}))
        return render_moment_prompt(DecisionRequest(ctx=ctx, candidates=[]))

    assert "考试" not in prompt("2026-09-05 20:00")
    assert "记着的事：明天：考试（小林提醒的）" in prompt("2026-09-06 20:00")
    assert "记着的事：今天：考试（小林提醒的）" in prompt("2026-09-07 07:00")
    assert "考试" not in prompt("2026-09-08 07:00")


async def test_a_promise_at_a_place_draws_her_there_and_is_done_when_she_is(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(
        redis,
        sqlite_history,
        scripted(
            call(
                "propose_plan",
                kind="promise",
                when="周六下午三点",
                place="月汐海岸",
                what="帮小林捡贝壳",
            ),
            "好，我答应你",
        ),
    )
    await yuiju.say("周六下午三点去海边帮我捡个贝壳吧")
    await yuiju.tick()
    await yuiju.world.engine.run(until=at_time("2026-09-05 18:00"))
    await yuiju.world.engine.flush_outbox(force=True)

    (note,) = (await yuiju.her()).social.notes
    assert note.status == "done", note
    (done,) = [
        e
        for e in await plan_episodes(sqlite_history, "2026-09-05 00:00", 1)
        if e.data.get("status")
    ]
    assert done.summary.startswith("悠酱做到了") and "帮小林捡贝壳（答应小林的）" in done.summary


async def test_a_gift_from_chat_is_a_world_command_within_limits(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(
        redis,
        sqlite_history,
        scripted(
            call("receive_gift", item="苹果"),
            "谢谢你！",
            call("receive_gift", item="铜锣烧"),
            "今天已经收过啦",
            call("receive_gift", item="月汐珍珠"),
            "这个太贵重了",
            call("receive_gift", item="月汐珍珠"),
            "谢谢管理员",
        ),
    )
    before = (await yuiju.her()).inventory

    await yuiju.say("送你一个苹果")
    assert "会在下一刻放进你的背包" in tool_result(yuiju.model, 1)
    await yuiju.tick()
    await yuiju.say("再送你一个铜锣烧", user=XIAOLIN)
    assert "今天已经收过小林的礼物了" in tool_result(yuiju.model, 3)
    await yuiju.say("送你珍珠", user=6, name="小美")
    assert "月汐珍珠太贵重了" in tool_result(yuiju.model, 5)
    await yuiju.say("送你珍珠", user=ADMIN, name="管理员")  # an admin may, like /give
    await yuiju.tick()

    her = await yuiju.her()
    assert her.inventory.get("青苹果", 0) == before.get("青苹果", 0) + 1
    assert her.inventory.get("月汐珍珠", 0) == before.get("月汐珍珠", 0) + 1
    assert "铜锣烧" not in her.inventory
    gifts = [
        e.summary
        for e in await EpisodeRepo(sqlite_history).between(
            "yuiju", at_time(THURSDAY_EVENING), at_time("2026-09-04 00:00"), type_="conversation"
        )
        if "gift" in e.data
    ]
    assert sorted(gifts) == ["小林送给悠酱青苹果×1，收下了", "管理员送给悠酱月汐珍珠×1，收下了"]
    assert her.social.relations["person:qq:5"].closeness > 10  # a gift (and talking) brings closer

    # the next turn with 小林 shows the gift's outcome, read without the windows of chat she
    # archived (a busy group's week holds thousands of them, each with its messages)
    await EpisodeRepo(sqlite_history).put(
        Episode.model_validate(
            {
                "_id": "conv_window",
                "character_id": "yuiju",
                "type": "conversation",
                "time": at_time(THURSDAY_EVENING),
                "summary": "和小林聊天",
                "data": {"messages": [{"speaker": "小林", "text": "在吗"}]},
            }
        )
    )
    read = record_reads(sqlite_history)
    await yuiju.say("收到了吗")
    assert "小林送给悠酱青苹果×1，收下了" in yuiju.model.calls[-1][1]["content"]
    assert "conv_window" not in [d["_id"] for d in read]


async def test_what_is_not_in_her_world_is_not_queued(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(
        redis,
        sqlite_history,
        scripted(
            call("receive_gift", item="一百块钱"),
            "心意收到啦",
            call("propose_plan", kind="invite", place="公园", when="有空的时候", what="玩"),
            "好呀",
        ),
    )
    await yuiju.say("给你一百块钱")
    await yuiju.say("有空一起去公园吧")

    assert "收不到" in tool_result(yuiju.model, 1)
    assert "明天下午" in tool_result(yuiju.model, 3)  # how to say when
    assert [c for c in await yuiju.chat.deps.commands.pending() if c.type != "chat_with"] == []


async def test_an_invitation_to_a_place_her_town_does_not_have_is_refused_and_recorded(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(
        redis,
        sqlite_history,
        scripted(
            call("propose_plan", kind="invite", place="东京塔", when="明天", what="玩"),
            "那是哪里呀",
        ),
    )
    await yuiju.say("明天一起去东京塔吧")
    await yuiju.tick()

    told = tool_result(yuiju.model, 1)
    assert "羽浦町没有「东京塔」这个地方" in told and "南风公园" in told  # what she can offer
    (declined,) = await plan_episodes(sqlite_history, THURSDAY_EVENING)
    assert declined.data["reason"] == "羽浦町没有「东京塔」这个地方"
    assert (await yuiju.her()).social.appointments == []


@pytest.mark.parametrize(
    ("said", "why"),
    [
        ("周六一起去游乐园玩吧", "羽浦町没有「游乐园」这个地方"),
        ("昨天下午一起去公园散步吗", "那个时间已经过去了"),
        ("下个月十号一起去海边吧", "太久以后的事情，现在还定不下来"),
    ],
)
async def test_an_impossible_invitation_in_words_is_refused_with_its_reason_and_recorded(
    redis: aioredis.Redis, sqlite_history: HistoryStore, said: str, why: str
) -> None:
    """The model answered in words and called no tool: what was asked is still recognised,
    refused by the world with its reason, recorded, and in the next turn she knows why."""
    yuiju = await town(redis, sqlite_history, scripted("好呀～", "嗯嗯"))

    out = await yuiju.say(said)
    assert out.replies[-1] == f"啊，等等……{why}，这个约不了呢。"  # told at once, after her yes
    await yuiju.tick()

    her = await yuiju.her()
    assert her.social.appointments == []
    episodes = await plan_episodes(sqlite_history, "2026-09-02 00:00", days=3)
    (declined,) = [e for e in episodes if e.data.get("accepted") is False]
    assert declined.data["reason"] == why and declined.data["asked_by"]["name"] == "小林"
    await yuiju.say("那怎么说")
    assert f"没答应：{why}" in yuiju.model.calls[-1][1]["content"]


@pytest.mark.parametrize(
    ("when", "why"),
    [("昨天下午", "那个时间已经过去了"), ("下个月十号", "太久以后的事情，现在还定不下来")],
)
async def test_the_tool_tells_her_why_a_time_cannot_be_and_the_world_records_it(
    redis: aioredis.Redis, sqlite_history: HistoryStore, when: str, why: str
) -> None:
    ask = {"kind": "invite", "place": "公园", "when": when, "what": "散步"}
    yuiju = await town(redis, sqlite_history, scripted(call("propose_plan", **ask), "好"))

    await yuiju.say(f"{when}一起去公园散步吧")
    await yuiju.tick()

    assert f"恐怕不行：{why}" in tool_result(yuiju.model, 1)
    episodes = await plan_episodes(sqlite_history, "2026-09-02 00:00", days=3)
    (declined,) = [e for e in episodes if e.data.get("accepted") is False]
    assert declined.data["reason"] == why


async def test_an_impossible_invitation_she_turned_down_is_recorded_without_a_correction(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    yuiju = await town(redis, sqlite_history, scripted("游乐园？羽浦町好像没有呢，去不了"))

    out = await yuiju.say("周六一起去游乐园玩吧")
    await yuiju.tick()

    assert out.replies == ["游乐园？羽浦町好像没有呢，去不了"]
    (declined,) = await plan_episodes(sqlite_history, THURSDAY_EVENING)
    assert declined.data["reason"] == "羽浦町没有「游乐园」这个地方"


@pytest.mark.parametrize(
    ("said", "place", "what"),
    [
        ("周六一起去图书馆吗", "school", "一起去图书馆"),
        ("周六下午一起去南风公园野餐吧", "park", "一起野餐"),
        ("周日下午一起去海边散散步好不好", "coast", "一起散散步"),
    ],
)
async def test_an_invitation_in_words_proposes_what_was_asked_at_any_place_of_her_town(
    redis: aioredis.Redis, sqlite_history: HistoryStore, said: str, place: str, what: str
) -> None:
    yuiju = await town(redis, sqlite_history, scripted("好呀～"))

    await yuiju.say(said)
    await yuiju.tick()

    (plan,) = (await yuiju.her()).social.appointments
    assert (plan.place, plan.activity) == (place, what)


# -- she tells them she went ----------------------------------------------------------------------


async def test_a_proactive_post_may_say_she_kept_what_someone_in_that_group_asked(
    redis: aioredis.Redis, sqlite_history: HistoryStore
) -> None:
    from tests.test_proactive import emit, writer
    from tests.test_proactive import make_service as make_proactive
    from yuiju.storage.keys import Keys
    from yuiju.world.relations import Appointment, Party
    from yuiju.world.store import Commit, StateStore

    asker = Party(kind="person", id="qq:5", name="小林")
    kept = Appointment(
        id="apt_test",
        other=asker,
        asked_by=asker,
        source="chat",
        place="park",
        start=at_time("2026-09-04 16:30"),
        activity="一起散步",
        via="group:qq:100",
        status="kept",
        note="16:40到了",
        created_at=at_time(THURSDAY_EVENING),
    )
    elsewhere = kept.model_copy(update={"id": "apt_other", "via": "group:qq:200"})
    her = make_character(location="park")
    her.social.appointments = [kept, elsewhere]
    await StateStore(redis, Keys()).transact(
        lambda snap: (Commit(characters={"yuiju": her}), None), characters=["yuiju"]
    )
    clock = SimClock(at_time("2026-09-04 17:20"))
    model = writer()
    service, sender, _ = await make_proactive(redis, sqlite_history, clock=clock, model=model)

    await service.handle(*await emit(redis, clock.now()))

    prompt = model.calls[0][-1]["content"]
    assert "小林在这个群里约你今天 16:30 来南风公园一起散步，你 16:40到了" in prompt
    assert prompt.count("约你今天") == 1  # the appointment from another group is not this one's
    assert sender.sent
