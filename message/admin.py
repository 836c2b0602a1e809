"""Admin commands (admin list only, checked by the service before dispatch):

/status · /weather <晴|多云|雨|...> [温度] · /give <物品> [数量] · /pause · /resume · /distill ·
/clear [group <id>|private <id>] · /proactive preview|force|on|off [群号] · /tools
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from yuiju.world.commands import CommandRejected, enqueue_command

if TYPE_CHECKING:
    from yuiju.message.entry import Entry
    from yuiju.message.service import ChatService

log = logging.getLogger(__name__)

HELP = __doc__.split("\n\n", 1)[1].strip() if __doc__ else ""


async def run_admin(service: ChatService, entry: Entry, command: str) -> str:
    """Run one admin command; the answer is a short text for the admin."""
    words = command.split()
    if not words:
        return HELP
    name, args = words[0].lower(), words[1:]
    try:
        if name == "status":
            return await _status(service)
        if name == "weather" and args:
            cmd: dict[str, object] = {"type": "set_weather", "weather": args[0]}
            if len(args) > 1:
                cmd["temperature"] = args[1]
            await enqueue_command(service.command_redis, service.keys, cmd)
            return f"天气将在下一个世界刻变为 {args[0]}。"
        if name == "give" and args:
            qty = int(args[1]) if len(args) > 1 else 1
            await enqueue_command(
                service.command_redis,
                service.keys,
                {
                    "type": "give_item",
                    "character_id": service.card.id,
                    "item": args[0],
                    "quantity": qty,
                },
            )
            return f"已排队：给 {service.card.name} {args[0]}×{qty}。"
        if name in ("pause", "resume"):
            await enqueue_command(service.command_redis, service.keys, {"type": name})
            return "世界将暂停。" if name == "pause" else "世界将继续。"
        if name == "distill":
            if service.memory is None:
                return "记忆系统没开。"
            archived = await service.recorder.flush_windows()
            report = await service.memory.distiller.run(service.now())
            return f"归档了 {archived} 段对话。{distill_text(report)}"
        if name == "clear":
            sid = f"{args[0]}:{args[1]}" if len(args) >= 2 else entry.session_id
            await service.sessions.clear(sid)
            return f"已清空 {sid} 的上下文。"
        if name == "tools":
            return "\n".join(
                f"{t.name}{'（管理员）' if t.admin_only else ''}"
                for t in service.registry.snapshot()
            )
        if name == "proactive":
            return await _proactive(service, entry, args)
    except CommandRejected as exc:
        return f"命令无效：{exc}"
    except (ValueError, IndexError) as exc:
        return f"参数不对：{exc}"
    return HELP


async def _status(service: ChatService) -> str:
    char = await service.context.character_state()
    lines = [await service.context.situation_text(char)]
    if char is not None:
        lines.append(
            f"数值：体力 {char.stamina:.0f} 饱腹 {char.satiety:.0f} 心情 {char.mood:.0f} 金币 {char.money}"
        )
    sessions = await service.sessions.sessions()
    lines.append(
        f"会话 {len(sessions)} 个；模式 {service.context.mode.name}；模型 {getattr(service.model, 'name', '无')}"
    )
    return "\n".join(lines)


async def _proactive(service: ChatService, entry: Entry, args: list[str]) -> str:
    if service.proactive is None:
        return "主动发言没有配置（[proactive]）。"
    if not args:
        return "用法：/proactive preview|force|on|off [群号]"
    group = int(args[1]) if len(args) > 1 else entry.group_id
    if group is None:
        return "请给出群号。"
    action = args[0]
    if action == "preview":
        return preview_text(await service.proactive.preview(group))
    if action == "force":
        return force_text(await service.proactive.force(group))
    if action in ("on", "off"):
        await service.proactive.set_enabled(group, action == "on")
        return f"群 {group} 的主动发言已{'开启' if action == 'on' else '关闭'}。"
    return "用法：/proactive preview|force|on|off [群号]"


def distill_text(report: Any) -> str:
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


def preview_text(p: dict[str, Any]) -> str:
    """`ProactiveService.preview` for an admin, in three short lines."""
    head = f"群 {p['group_id']}（主动发言{'开' if p.get('enabled') else '关'}）"
    event = p.get("event")
    if event is None:
        return f"{head}：{p.get('reason', '还没有可以分享的事')}"
    decided = p.get("already_decided")
    lines = [
        f"{head}下一件：{event['name']}"
        + (f"（这件已处理过：{decided.get('code')}）" if decided else "")
    ]
    answer = p.get("answer")
    lines.append(f"草稿：{answer['message']}" if answer and answer.get("message") else "没有草稿")
    lines.append("会发出去" if p.get("would_send") else f"不会发：{p.get('reason', '')}")
    return "\n".join(lines)


def force_text(record: dict[str, Any]) -> str:
    """`ProactiveService.force`'s outbox record for an admin."""
    if record.get("status") == "sent":
        return f"已在群 {record['group_id']} 发出：{record.get('message', '')}"
    return f"没有发出（{record.get('code')}）：{record.get('reason', '')}"
