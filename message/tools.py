"""Built-in tools: her life (episodes, state, plans, diary, memory, people), the conversation,
files in one folder, and group management where the platform has it. Every tool reaches the world
through ``ctx.deps`` (`message.deps.ChatDeps`); admin-only ones say so and the authorizer
enforces it."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeAlias

from yuiju.memory.distill import DistillReport
from yuiju.memory.semantic import render_memories
from yuiju.message.agent import RunContext, Tool, ToolResult, tool
from yuiju.message.channel import SendFailed
from yuiju.message.deps import ChatDeps
from yuiju.message.model import BadPersonId, legacy_forms, qualify, split_id

Ctx: TypeAlias = RunContext[ChatDeps]

_INT = {"type": "integer"}
_STR = {"type": "string"}


def _fmt_time(deps: ChatDeps, when: datetime) -> str:
    return f"{when.astimezone(deps.tz):%H:%M}"


def distill_text(report: DistillReport) -> str:
    """A `memory.distill.DistillReport` as an admin (or the model) reads it."""
    if report.waiting_without_model:
        return (
            f"有 {report.waiting_without_model} 条聊天记忆等着整理，但没有配置模型"
            "（[llm] base_url），整理不了。"
        )
    if not report.users:
        return "没有要整理的聊天记忆。"
    text = (
        f"整理了 {report.users} 个人的 {report.processed} 条聊天：新记下 {report.facts_added} 条，"
        f"更新 {report.facts_updated} 条，删掉 {report.deleted} 条。"
    )
    if report.failed_users:
        text += f"这些人的没整理成功：{'、'.join(map(str, report.failed_users))}。"
    return text


async def recall_scope(ctx: Ctx) -> tuple[list[str], list[str]]:
    """Whose and which group's memories this turn may recall: every account of the speaker (and
    the plain ids old records used), and the group in both its forms."""
    users = await ctx.deps.people.scopes(ctx.user_id)
    groups = legacy_forms(ctx.conversation.key) if ctx.in_group else []
    return users, groups


# -- her life ---------------------------------------------------------------------------------


@tool(
    "today_events",
    "查今天（从零点到现在）你做过的事的记录，可按小时范围过滤。问到你今天做了什么时必须先用它。",
    start_hour={**_INT, "description": "开始小时 0-23", "default": 0},
    end_hour={**_INT, "description": "结束小时 1-24", "default": 24},
)
async def today_events(ctx: Ctx, args: dict[str, Any]) -> str:
    s = ctx.deps
    if s.memory is None:
        return "（生活记录暂时查不到）"
    found = await s.memory.today_events(
        s.now(), start_hour=int(args.get("start_hour", 0)), end_hour=int(args.get("end_hour", 24))
    )
    if not found:
        return "今天这个时间段没有记录。"
    return "\n".join(f"- {_fmt_time(s, e.time)} {e.summary}" for e in found)


@tool("current_state", "查你现在的状态：在哪、在做什么、是否在睡觉、身体和心情的大致感觉、天气。")
async def current_state(ctx: Ctx, args: dict[str, Any]) -> str:
    return await ctx.deps.situation_text()


@tool("my_plans", "查你的计划（长期计划和接下来的短期计划）。")
async def my_plans(ctx: Ctx, args: dict[str, Any]) -> str:
    char = await ctx.deps.character_state()
    if char is None:
        return "（计划暂时查不到）"
    return "\n".join(char.plans.lines()) or "现在没有计划。"


@tool(
    "diary_search",
    "查你的日记：给 query 按内容找，或给 days_ago 查最近几天的日记。",
    query={**_STR, "default": ""},
    days_ago={**_INT, "default": 3},
)
async def diary_search(ctx: Ctx, args: dict[str, Any]) -> str:
    s = ctx.deps
    if s.memory is None:
        return "（日记暂时查不到）"
    now = s.now()
    if args.get("query"):
        found = await s.memory.memory_search(
            str(args["query"]), now=now, kinds=["diary"], limit=3, token_budget=None
        )
        return render_memories(found, s.tz, name=s.card.name) or "没找到相关的日记。"
    start = now.date() - timedelta(days=max(1, min(30, int(args.get("days_ago", 3)))))
    diaries = await s.memory.diary.find(s.memory.character_id, start=start, end=now.date(), limit=5)
    return "\n\n".join(f"{d.date}：{d.text}" for d in diaries) or "这几天没有日记。"


@tool("memory_search", "在你的回忆里按内容查找（经历、聊过的事、别人让你记住的事）。", query=_STR)
async def memory_search(ctx: Ctx, args: dict[str, Any]) -> str:
    s = ctx.deps
    if s.memory is None:
        return "（回忆暂时查不到）"
    users, groups = await recall_scope(ctx)
    found = await s.memory.memory_search(
        str(args["query"]), now=s.now(), user_id=users, group_id=groups
    )
    return render_memories(found, s.tz, name=s.card.name) or "没有相关的回忆。"


@tool("memory_store", "记住对方明确让你记住的一件事（一句话）。", content=_STR)
async def memory_store(ctx: Ctx, args: dict[str, Any]) -> str:
    s = ctx.deps
    content = str(args.get("content", "")).strip()[:200]
    if not content:
        return "Error: content 是空的。"
    if s.memory is None:
        return "（现在记不住）"
    person = await s.people.canonical(ctx.user_id)
    await s.memory.memory_store(content, user_id=person, now=s.now())
    return "已记住。"


@tool("memory_distill", "立刻整理最近的聊天记忆（管理员）。", admin_only=True)
async def memory_distill(ctx: Ctx, args: dict[str, Any]) -> str:
    s = ctx.deps
    if s.memory is None:
        return "（记忆系统没开）"
    return distill_text(await s.memory.distiller.run(s.now()))


@tool(
    "person_profile",
    "查你对某个人的印象档案；不给 user_id 就是正在说话的人（user_id 写成消息里的 id，如 qq:12345）。",
    user_id={**_STR, "default": ""},
)
async def person_profile(ctx: Ctx, args: dict[str, Any]) -> str:
    s = ctx.deps
    try:
        uid = qualify(args.get("user_id") or ctx.user_id, platform=ctx.conversation.platform)
    except BadPersonId as exc:
        return f"Error: {exc}"
    person = await s.people.canonical(uid)
    if person != await s.people.canonical(ctx.user_id) and not ctx.is_admin:
        return "只能查正在和你说话的人自己的档案。"  # profiles hold what people told her, some in private
    if s.memory is None:
        return "（档案暂时查不到）"
    profile = await s.memory.person_profile(*split_id(person))
    return profile.render() if profile else "对这个人还没有印象档案。"


# -- the conversation -------------------------------------------------------------------------


@tool(
    "recent_group_messages",
    "看这个聊天里最近的消息（包括没@你的）。",
    limit={**_INT, "default": 15},
)
async def recent_group_messages(ctx: Ctx, args: dict[str, Any]) -> str:
    s = ctx.deps
    entries = await s.sessions.recent(ctx.session_id, max(1, min(50, int(args.get("limit", 15)))))
    return "\n".join(s.render_entry(e) for e in entries) or "没有消息。"


def _member(ctx: Ctx, args: dict[str, Any]) -> str:
    return qualify(args["user_id"], platform=ctx.conversation.platform)


@tool("group_member_info", "查群成员的信息（群名片、昵称、头衔）。", user_id=_STR)
async def group_member_info(ctx: Ctx, args: dict[str, Any]) -> str:
    s = ctx.deps
    if not ctx.in_group or s.groups is None:
        return "Error: 只能在群里用。"
    try:
        info = await s.groups.member_info(ctx.conversation, _member(ctx, args))
    except (SendFailed, BadPersonId) as exc:
        return f"Error: {exc}"
    return ", ".join(f"{k}={v}" for k, v in info.items()) or "查不到。"


@tool("clear_context", "清空这个聊天的对话上下文（管理员）。", admin_only=True)
async def clear_context(ctx: Ctx, args: dict[str, Any]) -> ToolResult:
    await ctx.deps.sessions.clear(ctx.session_id)
    return ToolResult("已清空。", user_reply="（上下文已清空）", end_turn=True)


@tool(
    "mute_member",
    "禁言群成员若干分钟，0 为解除（管理员）。",
    admin_only=True,
    user_id=_STR,
    minutes={**_INT, "default": 10},
)
async def mute_member(ctx: Ctx, args: dict[str, Any]) -> str:
    s = ctx.deps
    if not ctx.in_group or s.groups is None:
        return "Error: 只能在群里用。"
    minutes = max(0, min(60 * 24, int(args.get("minutes", 10))))
    await s.groups.mute(ctx.conversation, _member(ctx, args), minutes * 60)
    return f"已禁言 {minutes} 分钟。" if minutes else "已解除禁言。"


# -- files, confined to one folder --------------------------------------------------------------


def _folder(ctx: Ctx) -> Path:
    if ctx.deps.cfg.file_folder is None:
        raise PermissionError("no files folder is configured ([chat] file_folder)")
    return ctx.deps.cfg.file_folder


def _inside(folder: Path, name: str) -> Path:
    root = folder.resolve()
    path = (root / name).resolve()
    if path != root and root not in path.parents:
        raise PermissionError(f"{name!r} is outside the files folder")
    return path


@tool("file_list", "列出文件夹里的文件（管理员）。", admin_only=True, path={**_STR, "default": "."})
async def file_list(ctx: Ctx, args: dict[str, Any]) -> str:
    folder = _inside(_folder(ctx), str(args.get("path", ".")))
    return (
        "\n".join(sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir()))
        or "（空）"
    )


@tool("file_read", "读文件夹里的一个文本文件（管理员）。", admin_only=True, path=_STR)
async def file_read(ctx: Ctx, args: dict[str, Any]) -> str:
    path = _inside(_folder(ctx), str(args["path"]))
    return path.read_text(encoding="utf-8", errors="replace")[:4000]


@tool(
    "file_write",
    "把文本写进文件夹里的一个文件（管理员）。",
    admin_only=True,
    path=_STR,
    content=_STR,
)
async def file_write(ctx: Ctx, args: dict[str, Any]) -> str:
    path = _inside(_folder(ctx), str(args["path"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(str(args["content"])[:100_000], encoding="utf-8")
    return f"已写入 {path.name}。"


LIFE_TOOLS = (today_events, current_state, my_plans, diary_search, memory_search, person_profile)
MEMORY_TOOLS = (memory_store, memory_distill)
GROUP_TOOLS = (recent_group_messages, group_member_info, clear_context, mute_member)
FILE_TOOLS = (file_list, file_read, file_write)


GROUNDED_ARGUMENTS = {"remember_news": "text", "receive_gift": "item"}
"""Tools that record what someone told or gave her, and the argument the speaker must have said
(`message.grounding.grounded_tool`)."""


ACKNOWLEDGED = {
    "remember_news": r"记住|记下|记好|记着|会记得|记得了|转告|我会告诉|帮你(?:说|传)|收到",
    "receive_gift": r"谢谢|多谢|感谢|谢啦|收下|收到|我会(?:好好)?(?:珍惜|吃|用|收)|送我",
}
"""How a line of hers says a grounded tool's work was done: after the tool refused, such a line
is sent back once, then left out."""


def builtin_tools(*, files: bool) -> list[Tool[ChatDeps]]:
    from yuiju.message.grounding import grounded_tool
    from yuiju.message.proposals import PROPOSAL_TOOLS

    proposals = [
        grounded_tool(t, GROUNDED_ARGUMENTS[t.name], ACKNOWLEDGED[t.name])
        if t.name in GROUNDED_ARGUMENTS
        else t
        for t in PROPOSAL_TOOLS
    ]
    return [
        *LIFE_TOOLS,
        *proposals,
        *MEMORY_TOOLS,
        *GROUP_TOOLS,
        *(FILE_TOOLS if files else ()),
    ]
