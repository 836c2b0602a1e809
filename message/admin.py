"""Admin commands (admin list only, checked by the service before dispatch):

/status · /weather <晴|多云|雨|...> [温度] · /give <物品> [数量] · /pause · /resume · /distill ·
/clear [group|private <id>] · /proactive preview|force|on|off [群号] · /tools ·
/link <账号> <账号>（如 /link qq:123 tg:456：同一个人）· /unlink <账号>
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from yuiju.message.agent import Mode, ToolRegistry
from yuiju.message.deps import ChatDeps
from yuiju.message.model import BadPersonId, Conversation, Entry, qualify
from yuiju.message.people import describe
from yuiju.message.recorder import Recorder
from yuiju.message.tools import distill_text
from yuiju.world.commands import CommandRejected

if TYPE_CHECKING:
    from yuiju.message.proactive import ProactiveService

log = logging.getLogger(__name__)

HELP = __doc__.split("\n\n", 1)[1].strip() if __doc__ else ""


class AdminCommands:
    """Runs one admin command over the chat side's parts; the answer is a short text."""

    def __init__(
        self,
        deps: ChatDeps,
        *,
        recorder: Recorder,
        registry: ToolRegistry[ChatDeps],
        mode: Mode,
        proactive: ProactiveService | None = None,
    ) -> None:
        self.deps = deps
        self.recorder = recorder
        self.registry = registry
        self.mode = mode
        self.proactive = proactive

    async def run(self, entry: Entry, command: str) -> str:
        deps = self.deps
        words = command.split()
        if not words:
            return HELP
        name, args = words[0].lower(), words[1:]
        try:
            if name == "status":
                return await self._status()
            if name == "weather" and args:
                cmd: dict[str, object] = {"type": "set_weather", "weather": args[0]}
                if len(args) > 1:
                    cmd["temperature"] = args[1]
                await deps.commands.enqueue(cmd)
                return f"天气将在下一个世界刻变为 {args[0]}。"
            if name == "give" and args:
                qty = int(args[1]) if len(args) > 1 else 1
                await deps.commands.enqueue(
                    {
                        "type": "give_item",
                        "character_id": deps.card.id,
                        "item": args[0],
                        "quantity": qty,
                    }
                )
                return f"已排队：给 {deps.card.name} {args[0]}×{qty}。"
            if name in ("pause", "resume"):
                await deps.commands.enqueue({"type": name})
                return "世界将暂停。" if name == "pause" else "世界将继续。"
            if name == "distill":
                if deps.memory is None:
                    return "记忆系统没开。"
                archived = await self.recorder.flush_windows()
                report = await deps.memory.distiller.run(deps.now())
                return f"归档了 {archived} 段对话。{distill_text(report)}"
            if name == "clear":
                sid = (
                    _conversation(entry, args[0], args[1]).session_id
                    if len(args) >= 2
                    else entry.session_id
                )
                await deps.sessions.clear(sid)
                return f"已清空 {sid} 的上下文。"
            if name == "tools":
                return "\n".join(
                    f"{t.name}{'（管理员）' if t.admin_only else ''}"
                    for t in self.registry.snapshot()
                )
            if name == "proactive":
                return await self._proactive(entry, args)
            if name == "link" and len(args) == 2:
                accounts = await deps.people.link(
                    qualify(args[0], platform=entry.platform),
                    qualify(args[1], platform=entry.platform),
                )
                return f"记住了，这些账号是同一个人：{describe(accounts)}。"
            if name == "unlink" and args:
                gone = await deps.people.unlink(qualify(args[0], platform=entry.platform))
                return f"{args[0]} 已单独算一个人。" if gone else f"{args[0]} 没有和别人关联。"
        except CommandRejected as exc:
            return f"命令无效：{exc}"
        except (ValueError, IndexError) as exc:
            return f"参数不对：{exc}"
        return HELP

    async def _status(self) -> str:
        deps = self.deps
        char = await deps.character_state()
        lines = [await deps.situation_text(char)]
        if char is not None:
            lines.append(
                f"数值：体力 {char.stamina:.0f} 饱腹 {char.satiety:.0f} 心情 {char.mood:.0f} 金币 {char.money}"
            )
        sessions = await deps.sessions.sessions()
        model = deps.model.name if deps.model is not None else "无"
        lines.append(f"会话 {len(sessions)} 个；模式 {self.mode.name}；模型 {model}")
        return "\n".join(lines)

    async def _proactive(self, entry: Entry, args: list[str]) -> str:
        if self.proactive is None:
            return "主动发言没有配置（[proactive]）。"
        if not args:
            return "用法：/proactive preview|force|on|off [群号]"
        if len(args) > 1:
            group = _conversation(entry, "group", args[1])
        elif entry.scene == "group":
            group = entry.conversation
        else:
            return "请给出群号。"
        action = args[0]
        if action == "preview":
            return preview_text(await self.proactive.preview(group))
        if action == "force":
            return force_text(await self.proactive.force(group))
        if action in ("on", "off"):
            await self.proactive.set_enabled(group, action == "on")
            return f"群 {group.key} 的主动发言已{'开启' if action == 'on' else '关闭'}。"
        return "用法：/proactive preview|force|on|off [群号]"


def _conversation(entry: Entry, scene: str, ident: str) -> Conversation:
    """``group 123`` / ``private tg:678`` as a conversation; a plain id is on the admin's platform."""
    if scene not in ("group", "private"):
        raise ValueError(f"{scene!r}: write group or private")
    try:
        key = qualify(ident, platform=entry.platform)
    except BadPersonId as exc:
        raise ValueError(str(exc)) from None
    return Conversation.from_key(key, "group" if scene == "group" else "private")


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
