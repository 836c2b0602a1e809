"""What admins and the model read (issue 11 item 12): the debug sink is connected in production,
/distill answers in plain Chinese, and her situation names places, never place ids."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.chatkit import RecordingSender
from tests.conftest import at_time, make_character
from tests.test_message_service import ADMIN, GROUP, FakeMemory, FakeWorld, make_kit
from yuiju.config import ChatConfig, GroupPolicy, YuijuConfig
from yuiju.llm import FunctionChatModel
from yuiju.memory.distill import DistillReport
from yuiju.message.bot import build_service
from yuiju.storage.keys import Keys
from yuiju.world.clock import SimClock
from yuiju.world.state import RunningAction


async def test_debug_output_reaches_admins_privately_in_the_production_build(
    redis: Any, sqlite_history: Any
) -> None:
    cfg = YuijuConfig(
        chat=ChatConfig(
            admins=[ADMIN, 7],
            debug_to_admins=True,
            max_pause_seconds=0,
            groups={str(GROUP): GroupPolicy()},
        )
    )
    sender = RecordingSender()
    service = await build_service(
        cfg,
        sender=sender,
        on_stop=[],
        redis=redis,
        history=sqlite_history,
        clock=SimClock(at_time("2026-09-01 10:00")),
        model=FunctionChatModel(lambda m, s: "嗯嗯，我在"),
    )
    sent = sender.sent
    kit = await make_kit(redis)  # only for its message factory
    out = await service.handle(kit.entry("在吗", at=True))
    assert out.replies == ["嗯嗯，我在"]
    assert [t for scene, _, t in sent if scene == "group"] == ["嗯嗯，我在"]
    private = [(target, t) for scene, target, t in sent if scene == "private"]
    assert {target for target, _ in private} == {ADMIN, 7}
    assert all(
        t.startswith(f"[debug group:qq:{GROUP}]") or t.startswith(f"[think group:qq:{GROUP}]")
        for _, t in private
    )


async def test_distill_answers_in_plain_chinese(redis: Any) -> None:
    class Distiller:
        async def run(self, now: Any) -> DistillReport:
            return DistillReport(
                users=2, processed=5, facts_added=3, facts_updated=1, deleted=0, failed_users=["7"]
            )

    memory = FakeMemory()
    memory.distiller = Distiller()  # type: ignore[attr-defined]
    kit = await make_kit(redis, memory=memory)
    out = await kit.say("/distill", group=None, user=ADMIN)
    [answer] = out.replies
    assert "DistillReport" not in answer and "=" not in answer and "[" not in answer
    assert (
        "2 个人" in answer
        and "5 条" in answer
        and "新记下 3 条" in answer
        and "更新 1 条" in answer
    )
    assert "7" in answer  # whose messages failed


async def test_her_situation_names_the_place_not_its_id(redis: Any) -> None:
    now = at_time("2026-09-01 10:00")
    running = RunningAction(
        action_id="read_at_home",
        name="在家看书",
        started_at=now - timedelta(minutes=5),
        ends_at=now + timedelta(minutes=25),
        episode_id="e",
        place="home",
        reason="",
        decided_by="x",
    )
    kit = await make_kit(redis, world=FakeWorld(make_character(running=running)))
    out = await kit.say("/status", group=None, user=ADMIN)
    assert "你正在家：在家看书（09:55 开始）" in out.replies[0] and "home" not in out.replies[0]
    kit = await make_kit(redis, world=FakeWorld(make_character(location="park")))
    await kit.say("悠酱在哪")
    situation = kit.model.calls[-1][1]["content"]
    assert "你在南风公园。" in situation and "park" not in situation


async def test_status_lines_stay_apart_when_they_outnumber_her_chat_lines(redis: Any) -> None:
    kit = await make_kit(redis, world=FakeWorld(make_character(money=300)))
    await kit.say("/status", group=None, user=ADMIN)
    sent = [t for _, _, t in kit.sent]
    joined = "\n".join(sent)
    assert "金币 300\n会话" in joined or ("金币 300" in sent[-2] and sent[-1].startswith("会话"))
    assert "300会话" not in joined


def test_lines_past_the_limit_join_the_last_message_on_their_own_lines() -> None:
    from yuiju.message.output import split_lines

    text = "\n".join(f"第{i}行：这一行足够长，不会和别的行合在一起" for i in range(5))
    lines = split_lines(text, max_lines=3)
    assert len(lines) == 3
    assert (
        lines[2]
        == "第2行：这一行足够长，不会和别的行合在一起\n第3行：这一行足够长，不会和别的行合在一起\n第4行：这一行足够长，不会和别的行合在一起"
    )
    assert split_lines("好\n今天去了公园，风很舒服，还看到了小猫", max_lines=3) == [
        "好\n今天去了公园，风很舒服，还看到了小猫"
    ]


def recalled(text: str, character_id: str = "yuiju") -> Any:
    from yuiju.memory.semantic import Recalled

    return Recalled(
        id="m1",
        kind="episode",
        text=text,
        time=at_time("2026-08-31 12:00"),
        score=1.0,
        relevance=1.0,
        importance=0.5,
        user_id="",
        group_id="",
        payload={"character_id": character_id, "kind": "episode"},
        tokens=10,
    )


def test_a_recalled_memory_names_her_by_her_name_not_her_id() -> None:
    from yuiju.memory.semantic import render_memories

    found = [recalled("yuiju在日和食堂吃了午饭"), recalled("yuiju@17在海边散步", "yuiju@17")]
    text = render_memories(found, name="悠酱")
    assert "悠酱在日和食堂吃了午饭" in text and "悠酱在海边散步" in text
    assert "yuiju" not in text


async def test_memories_she_recalls_in_chat_name_her_by_her_name(redis: Any) -> None:
    class Remembering(FakeMemory):
        async def memory_search(self, query: str, **kw: Any) -> list[Any]:
            return [recalled("yuiju在日和食堂吃了午饭")]

    kit = await make_kit(redis, memory=Remembering())
    await kit.say("悠酱昨天中午吃了什么")
    prompt = "\n".join(str(m["content"]) for m in kit.model.calls[0] if m["role"] == "system")
    assert "悠酱在日和食堂吃了午饭" in prompt and "yuiju在" not in prompt


async def test_memories_her_recall_tool_finds_name_her_by_her_name(redis: Any) -> None:
    from tests.test_message_service import scripted
    from yuiju.llm import ToolCall

    class Remembering(FakeMemory):
        async def memory_search(self, query: str, **kw: Any) -> list[Any]:
            return [recalled("yuiju在日和食堂吃了午饭")]

    call = ToolCall(id="c1", name="memory_search", arguments='{"query": "午饭"}')
    kit = await make_kit(redis, fn=scripted(call, "吃了午饭～"), memory=Remembering())
    await kit.say("悠酱昨天中午吃了什么")
    [result] = [m["content"] for m in kit.model.calls[1] if m["role"] == "tool"]
    assert "悠酱在日和食堂" in result and "yuiju" not in result


async def test_a_failed_forced_post_says_why_in_one_short_line(
    redis: Any, sqlite_history: Any
) -> None:
    from tests.test_proactive import emit
    from yuiju.config import ProactiveConfig

    kit = await make_kit(
        redis,
        sqlite_history,
        fn=lambda m, s: '{"shouldSend": "maybe", "message": 5}',
        proactive=ProactiveConfig(groups={str(GROUP): {}}),
        keys=Keys(),  # the stream `emit` writes to
    )
    proactive = kit.service.proactive
    assert proactive is not None
    proactive.block_ms = 10
    await proactive.ensure()
    await emit(redis, kit.service.now())
    await proactive.run_once(block=False)
    out = await kit.say("/proactive force 100", user=ADMIN, at=True)
    [answer] = out.replies
    assert answer.startswith("没有发出") and [t for _, _, t in kit.sent] == [answer]
    assert "\n" not in answer and len(answer) <= 80, answer
    assert not any(w in answer for w in ("validation", "pydantic", "type=", "input_value")), answer
    assert "shouldSend" in answer  # which field was wrong
