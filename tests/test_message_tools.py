"""Built-in tools and admin paths not covered elsewhere: the file tools' confinement to one folder,
group member info, /proactive against a real ProactiveService, and debug output to admins."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.chatkit import RecordingSender
from tests.test_message_service import ADMIN, GROUP, FakeMemory, episode, make_kit, scripted
from tests.test_proactive import emit, writer
from yuiju.config import ProactiveConfig
from yuiju.llm import ToolCall, ToolChatResult
from yuiju.message.agent import RunContext
from yuiju.message.channel import SendFailed
from yuiju.message.debug import AdminDebugSink
from yuiju.message.model import Conversation, Outgoing
from yuiju.message.tools import file_list, file_read, file_write

# -- files, confined to one folder ------------------------------------------------------------------


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """``files/`` with a note, a subfolder, and links: one inside, one out, one dangling out; next to
    it ``secret.txt`` and a sibling folder whose name starts like the files folder."""
    files = tmp_path / "files"
    (files / "sub").mkdir(parents=True)
    (files / "note.txt").write_text("备忘：周六去海边", encoding="utf-8")
    (files / "sub" / "deep.txt").write_text("深处", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("SECRET", encoding="utf-8")
    (tmp_path / "files-evil").mkdir()
    (tmp_path / "files-evil" / "x.txt").write_text("SECRET2", encoding="utf-8")
    os.symlink(files / "note.txt", files / "ok-link.txt")
    os.symlink(tmp_path / "secret.txt", files / "out-link.txt")
    os.symlink(tmp_path, files / "out-dir")
    os.symlink(tmp_path / "created-outside.txt", files / "dangling")
    return files


class _Deps:
    def __init__(self, folder: Path) -> None:
        self.cfg = type("Cfg", (), {"file_folder": folder})()


def _ctx(folder: Path) -> RunContext[Any]:
    return RunContext(
        deps=_Deps(folder),
        user_id=f"qq:{ADMIN}",
        conversation=Conversation.private(f"qq:{ADMIN}"),
        is_admin=True,
    )


OUTSIDE = [
    "../secret.txt",
    "/etc/passwd",
    "out-link.txt",
    "out-dir/secret.txt",
    "sub/../../secret.txt",
    "../files-evil/x.txt",
]


@pytest.mark.parametrize("path", OUTSIDE)
async def test_file_read_refuses_every_way_out_of_the_folder(folder: Path, path: str) -> None:
    with pytest.raises(PermissionError):
        await file_read.run(_ctx(folder), {"path": path})


@pytest.mark.parametrize("path", [*OUTSIDE, "dangling", "out-dir/new.txt"])
async def test_file_write_refuses_every_way_out_and_writes_nothing_there(
    folder: Path, path: str
) -> None:
    outside = {
        p: p.read_bytes()
        for p in folder.parent.rglob("*")
        if p.is_file() and folder not in p.parents
    }
    with pytest.raises(PermissionError):
        await file_write.run(_ctx(folder), {"path": path, "content": "pwned"})
    assert (
        not (folder.parent / "created-outside.txt").exists()
        and not (folder.parent / "new.txt").exists()
    )
    assert {
        p: p.read_bytes()
        for p in folder.parent.rglob("*")
        if p.is_file() and folder not in p.parents
    } == outside


@pytest.mark.parametrize("path", ["..", "/", "out-dir", "../files-evil"])
async def test_file_list_refuses_folders_outside(folder: Path, path: str) -> None:
    with pytest.raises(PermissionError):
        await file_list.run(_ctx(folder), {"path": path})


async def test_files_inside_the_folder_work(folder: Path) -> None:
    ctx = _ctx(folder)
    assert await file_read.run(ctx, {"path": "note.txt"}) == "备忘：周六去海边"
    assert (
        await file_read.run(ctx, {"path": "ok-link.txt"}) == "备忘：周六去海边"
    )  # a link that stays inside
    assert await file_read.run(ctx, {"path": "sub/../sub/deep.txt"}) == "深处"
    assert (
        await file_write.run(ctx, {"path": "new/plan.txt", "content": "去钓鱼"})
        == "已写入 plan.txt。"
    )
    assert (folder / "new" / "plan.txt").read_text(encoding="utf-8") == "去钓鱼"
    assert (await file_list.run(ctx, {"path": "."})).splitlines() == [
        "dangling",
        "new/",
        "note.txt",
        "ok-link.txt",
        "out-dir/",
        "out-link.txt",
        "sub/",
    ]


async def test_a_refused_path_reaches_the_model_as_an_error_never_the_user(
    redis: Any, folder: Path
) -> None:
    fn = scripted(
        ToolCall(id="f", name="file_read", arguments='{"path": "../secret.txt"}'),
        "读不了那个文件呢",
    )
    kit = await make_kit(redis, fn=fn, file_folder=folder)
    out = await kit.say("悠酱 读一下 ../secret.txt", user=ADMIN)
    tool_msg = kit.model.calls[1][-1]
    assert tool_msg["role"] == "tool" and "PermissionError" in tool_msg["content"]
    assert "SECRET" not in str(kit.model.calls) and out.replies == ["读不了那个文件呢"]
    assert [t for _, _, t in kit.sent] == ["读不了那个文件呢"]


# -- group member info -------------------------------------------------------------------------------


async def test_group_member_info_asks_the_platform_about_this_group(redis: Any) -> None:
    calls: list[tuple[str, str]] = []

    class Groups:
        async def member_info(self, conversation: Conversation, person: str) -> dict[str, str]:
            calls.append((conversation.key, person))
            if person == "qq:6":
                return {"user_id": "6", "card": "红红", "title": "书虫"}
            raise SendFailed("the implementation knows nothing")

        async def mute(self, conversation: Conversation, person: str, seconds: int) -> None:
            raise AssertionError("not asked")

    fn = scripted(
        ToolCall(id="m", name="group_member_info", arguments='{"user_id": 6}'),
        "她是书虫红红",
        ToolCall(id="n", name="group_member_info", arguments='{"user_id": "qq:99"}'),
        "不认识",
        ToolCall(id="p", name="group_member_info", arguments='{"user_id": 6}'),
        "私聊里查不了",
    )
    kit = await make_kit(redis, fn=fn, manager=Groups())
    await kit.say("悠酱 6号是谁")
    assert calls == [(f"qq:{GROUP}", "qq:6")]
    assert kit.model.calls[1][-1]["content"] == "user_id=6, card=红红, title=书虫"
    await kit.say("悠酱 99号呢")
    assert kit.model.calls[3][-1]["content"] == "Error: the implementation knows nothing"
    await kit.say("6号是谁", group=None, user=2)  # a private chat has no group
    assert kit.model.calls[5][-1]["content"] == "Error: 只能在群里用。" and len(calls) == 2


# -- /proactive against the real ProactiveService ------------------------------------------------------


def chat_and_posts(messages: list[dict[str, Any]], schema: Any) -> Any:
    """Her model for chat ('嗯嗯，我在') and for proactive posts (a JSON answer, as `writer`)."""
    if schema is not None or "shouldSend" in str(messages):
        return POSTS.fn(messages, schema)
    return "嗯嗯，我在"


POSTS = writer()


async def test_proactive_admin_commands_drive_the_real_service(
    redis: Any, sqlite_history: Any
) -> None:
    kit = await make_kit(
        redis,
        sqlite_history,
        fn=chat_and_posts,
        proactive=ProactiveConfig(groups={str(GROUP): {}}),
    )
    proactive = kit.service.proactive
    assert proactive is not None
    proactive.block_ms = 10

    async def admin(command: str, **kw: Any) -> str:
        out = await kit.say(command, user=ADMIN, at=True, **kw)
        assert out.reason == "admin command"
        return "\n".join(out.replies)

    def posts() -> list[str]:
        return [t for scene, _, t in kit.sent if t.startswith("刚去公园散了步")]

    group = Conversation.group("qq", GROUP)
    assert "还没有可以分享的事" in await admin("/proactive preview 100")
    assert "没有发出（no_event）" in await admin("/proactive force 100")
    assert "已关闭" in await admin("/proactive off 100")
    assert not await proactive.is_enabled(group)
    records = await proactive.handle(*await emit(redis, kit.service.now()))
    assert [(r["group_id"], r["code"]) for r in records] == [("qq:100", "disabled")]

    preview = await admin("/proactive preview 100")
    assert "主动发言关" in preview and "在公园散步" in preview and "草稿：刚去公园散了步" in preview
    assert "不会发" in preview and posts() == []
    assert "已开启" in await admin("/proactive on 100")
    forced = await admin("/proactive force 100")
    assert forced.startswith("已在群 qq:100 发出：刚去公园散了步") and len(posts()) == 1
    # the forced post entered the group's conversation (continuity), the admin's commands did not
    _, items = await kit.service.sessions.context(f"group:qq:{GROUP}")
    assert items[-1]["role"] == "assistant" and items[-1]["content"].startswith("刚去公园散了步")
    assert "用法" in await admin("/proactive dance 100")
    assert (await kit.say("/proactive force 100", user=5, at=True)).reason != "admin command"
    assert len(posts()) == 1


async def test_proactive_without_a_group_in_private_asks_for_one(
    redis: Any, sqlite_history: Any
) -> None:
    kit = await make_kit(redis, sqlite_history)
    out = await kit.say("/proactive preview", group=None, user=ADMIN)
    assert out.replies == ["主动发言没有配置（[proactive]）。"]
    kit = await make_kit(redis, sqlite_history, proactive=ProactiveConfig(groups={str(GROUP): {}}))
    assert (await kit.say("/proactive preview", group=None, user=ADMIN)).replies == ["请给出群号。"]


# -- debug and thinking output -------------------------------------------------------------------------


def thinking() -> Any:
    return scripted(
        ToolChatResult(
            text="先查一下今天的记录",
            model="f",
            prompt_tokens=0,
            completion_tokens=0,
            latency_ms=0,
            tool_calls=(ToolCall(id="t", name="today_events", arguments="{}"),),
        ),
        "早上去公园散步啦",
    )


@pytest.mark.parametrize("enabled", [True, False])
async def test_thinking_goes_privately_to_admins_only_when_enabled_never_to_the_group(
    redis: Any, enabled: bool
) -> None:
    sunk: list[tuple[str, str, str]] = []
    sender = RecordingSender()
    admins = AdminDebugSink([f"qq:{ADMIN}", "qq:7"], sender)

    async def sink(kind: str, sid: str, text: str) -> None:
        sunk.append((kind, sid, text))
        if enabled:  # as `message.bot.build_service` connects it
            await admins(kind, sid, text)

    kit = await make_kit(
        redis,
        fn=thinking(),
        memory=FakeMemory(events=[episode("在公园散步")]),
        admins=[ADMIN, 7],
        debug_to_admins=enabled,
        sender=sender,
        sink=sink,
    )
    out = await kit.say("悠酱今天干嘛了")
    assert out.replies == ["早上去公园散步啦"]
    group_lines = [t for scene, _, t in kit.sent if scene == "group"]
    assert group_lines == ["早上去公园散步啦"]
    private = [(target, t) for scene, target, t in kit.sent if scene == "private"]
    if enabled:
        assert [p for p in private if p[1].startswith("[think")] == [
            (ADMIN, f"[think group:qq:{GROUP}] 先查一下今天的记录"),
            (7, f"[think group:qq:{GROUP}] 先查一下今天的记录"),
            (ADMIN, f"[think group:qq:{GROUP}] Use Tool: today_events"),
            (7, f"[think group:qq:{GROUP}] Use Tool: today_events"),
        ]
        assert all(
            t.startswith((f"[think group:qq:{GROUP}]", f"[debug group:qq:{GROUP}]"))
            for _, t in private
        )
    else:
        assert private == []
    kinds = {k for k, _, _ in sunk}
    assert {"think", "debug"} <= kinds  # the sink sees everything, whatever the setting


async def test_an_admin_that_cannot_be_reached_does_not_stop_the_reply(redis: Any) -> None:
    recording = RecordingSender()

    class Unfriendly:
        async def send(self, message: Outgoing) -> str | None:
            if message.conversation == Conversation.private("qq:7"):
                raise SendFailed("not a friend")
            return await recording.send(message)

    sender = Unfriendly()
    kit = await make_kit(
        redis,
        fn=thinking(),
        memory=FakeMemory(events=[episode("在公园散步")]),
        admins=[ADMIN, 7],
        debug_to_admins=True,
        sender=sender,
        sink=AdminDebugSink(["qq:1", "qq:7"], sender),
    )
    kit.sent = recording.sent
    out = await kit.say("悠酱今天干嘛了")
    assert out.replies == ["早上去公园散步啦"]
    assert [
        t for scene, target, t in kit.sent if scene == "private" and t.startswith("[think")
    ] == [
        f"[think group:qq:{GROUP}] 先查一下今天的记录",
        f"[think group:qq:{GROUP}] Use Tool: today_events",
    ]


async def test_diary_search_reads_her_diary_by_meaning_or_by_days(redis: Any) -> None:
    from datetime import date

    asked: list[tuple[str, Any]] = []

    class Diary:
        async def find(self, character_id: str, **kw: Any) -> list[Any]:
            asked.append(("find", (character_id, kw["start"], kw["end"])))
            return [type("D", (), {"date": date(2026, 8, 31), "text": "去了海边"})()]

    class Memory(FakeMemory):
        character_id = "yuiju"
        diary = Diary()

        async def memory_search(self, query: str, **kw: Any) -> list[Any]:
            asked.append(("search", (query, kw["kinds"])))
            return []

    fn = scripted(
        ToolCall(id="d", name="diary_search", arguments='{"query": "海边"}'),
        "没找到",
        ToolCall(id="e", name="diary_search", arguments='{"days_ago": 2}'),
        "去了海边",
    )
    kit = await make_kit(redis, fn=fn, memory=Memory())
    await kit.say("悠酱 日记里写过海边吗")
    assert kit.model.calls[1][-1]["content"] == "没找到相关的日记。"
    await kit.say("悠酱 最近两天的日记呢")
    assert kit.model.calls[3][-1]["content"] == "2026-08-31：去了海边"
    assert asked[0] == ("search", ("海边", ["diary"]))
    assert asked[1][1][0] == "yuiju" and str(asked[1][1][1]) == "2026-08-30"


def test_tools_are_typed_by_the_deps_they_read() -> None:
    """A tool declares its dependencies (``Tool[ChatDeps]``, as pydantic-ai's ``Tool[Deps]``):
    nothing on the way from the tool list to the agent erases them to ``Any``."""
    from typing import get_type_hints

    from yuiju.message import agent, service, tools
    from yuiju.message.agent import Tool, ToolRegistry
    from yuiju.message.deps import ChatDeps

    assert get_type_hints(tools.builtin_tools)["return"] == list[Tool[ChatDeps]]
    hints = get_type_hints(service.ChatService.__init__)
    assert "Tool[yuiju.message.deps.ChatDeps]" in str(hints["tools"])
    assert get_type_hints(agent.Agent.__init__)["registry"] == ToolRegistry[agent.DepsT]
    assert "Any" not in str(get_type_hints(agent.Agent.run)["ctx"])
