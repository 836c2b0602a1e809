"""What she remembers about you, in chat: ``/memory me`` (or 你都记得我什么), ``/memory forget``
(or 忘掉我吧) with a confirmation, and for admins ``/memory forget qq:777`` or
``/memory forget group qq:5000``. One's own facts can be forgotten or corrected by id
(``/memory forget fact_…``, ``/memory correct fact_… 新内容``).

Answers go privately where the platform can (a group's request is answered in a private chat;
when that cannot be sent, the group hears only where to ask). Only the person themself or an
admin may ask; each person may ask `REQUESTS_PER_HOUR` times an hour. A forget goes through the
world (`ForgetPerson`, applied by the engine, the stores erased by the memory worker).
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from dataclasses import dataclass
from typing import Literal

from yuiju.memory.distill import FACTS
from yuiju.memory.governance import Governance, GovernanceDeps, Subject
from yuiju.message.deps import ChatDeps
from yuiju.message.memory_requests import forget_command, subject_of
from yuiju.message.model import Conversation, Entry, Outgoing
from yuiju.world.forgetting import kept_about

log = logging.getLogger(__name__)

REQUESTS_PER_HOUR = 5
CONFIRM_SECONDS = 300
"""How long a forget waits for its confirmation."""
_END = r"(吧|吗|呀|啊|呢)?[。！!？?~～]*$"
_ME = re.compile(r"^(你|妳)(都|还|到底)?记(得|住了)(关于)?我(的)?(什么|啥|哪些)(事|东西)?" + _END)
"""The whole message asks what she keeps about the speaker (你都记得我什么), not a question
about one thing they said (你还记得我上次说的什么吗: the conversation answers that)."""
_FORGET = re.compile(
    r"^(请|麻烦)?(你)?(把我|把关于我的(一切|事|记忆|数据|聊天记录))(都|全部)?(忘掉|忘了|删掉|删了|删除)"
    + _END
    + r"|^(请|麻烦)?(你)?(忘掉|忘了|删掉|删除)(我|关于我的(一切|事|记忆|数据|聊天记录))"
    + _END
)
"""The whole message asks her to forget the speaker (忘掉我吧, 把关于我的记忆删掉); 别忘了我 does not."""
_SLASH = re.compile(r"^\s*/memory\b\s*(.*)$", re.S)


@dataclass(frozen=True)
class MemoryAnswer:
    text: str
    private: bool
    """Send it in a private chat with the asker (a group's request)."""


class MemoryChat:
    """Recognises a memory request and answers it (`message.service.ChatService` asks first)."""

    def __init__(self, deps: ChatDeps) -> None:
        self.deps = deps

    def request(self, entry: Entry) -> str | None:
        """The request in ``entry`` (``me``, ``forget …``, ``correct …``), or None."""
        if entry.from_bot:
            return None
        text = entry.text
        for name in (self.deps.card.name, *self.deps.card.nicknames):
            text = re.sub(rf"^\s*@{re.escape(name)}\s*", "", text)
        if found := _SLASH.match(text):
            return found.group(1).strip() or "help"
        if entry.scene == "group" and not entry.mentions_me:
            return None
        if _ME.search(text):
            return "me"
        if _FORGET.search(text):
            return "forget"
        return None

    def governance(self) -> Governance | None:
        deps = self.deps
        if deps.history is None:
            return None
        return Governance(
            GovernanceDeps(
                history=deps.history,
                semantic=deps.memory.semantic if deps.memory is not None else None,
                redis=deps.redis,
                keys=deps.keys,
                character_ids=[deps.card.id],
                tz=deps.tz,
            )
        )

    async def answer(self, entry: Entry, request: str) -> MemoryAnswer:
        words = request.split()
        private = entry.scene == "group"
        if not await self._allowed(entry.user_id):
            return MemoryAnswer("问得太频繁啦，过一个小时再来吧。", private=False)
        gov = self.governance()
        if gov is None:
            return MemoryAnswer("我现在没有记忆存储，没什么可以给你看的。", private=False)
        verb, args = (words[0].lower(), words[1:]) if words else ("help", [])
        try:
            if verb == "me":
                return MemoryAnswer(await self._me(gov, entry), private=private)
            if verb == "forget" and args and args[0] == "confirm":
                return MemoryAnswer(await self._confirm(gov, entry, args[1:]), private=False)
            if verb == "forget" and args and args[0].startswith(("fact_", "chat_")):
                return MemoryAnswer(await self._forget_item(gov, entry, args[0]), private=private)
            if verb == "forget":
                return MemoryAnswer(await self._ask_forget(entry, args), private=False)
            if verb == "correct" and len(args) >= 2:
                return MemoryAnswer(
                    await self._correct(gov, entry, args[0], " ".join(args[1:])), private=private
                )
        except ValueError as exc:
            return MemoryAnswer(f"参数不对：{exc}", private=False)
        return MemoryAnswer(
            "/memory me：我记得你什么；/memory forget：让我忘掉你（要确认）；"
            "/memory forget fact_…：忘掉一条；/memory correct fact_… 新内容：纠正一条",
            private=False,
        )

    async def _allowed(self, person: str) -> bool:
        key = self.deps.keys.memory_requests(self.deps.card.id, person)
        count = int(await self.deps.redis.incr(key))
        if count == 1:
            await self.deps.redis.expire(key, 3600)
        return count <= REQUESTS_PER_HOUR

    async def _me(self, gov: Governance, entry: Entry) -> str:
        subject = await subject_of(self.deps.people, "user", entry.user_id)
        kept = await gov.overview(subject)
        lines = ["我记得的关于你的事："]
        for profile in kept.profiles:
            shown = [f"{k}：{v}" for k, v in (profile.get("sections") or {}).items() if v]
            if shown:
                lines.append("档案：" + "；".join(shown))
        lines += [f"{f['_id']}：{f.get('content', '')}" for f in kept.facts[:20]]
        if said := max(kept.chat_memories, kept.log_lines):
            lines.append(f"你说过的话 {said} 条")
        char = await self.deps.character_state()
        if char is not None:
            state = kept_about(char.social, "user", subject.ids, await gov.names(subject))
            if state.get("appointments"):
                lines.append(f"约好的事 {len(state['appointments'])} 件")
            if state.get("notes"):
                lines.append(f"你让我记着的事 {len(state['notes'])} 件")
        if len(lines) == 1:
            return "我好像还没记住关于你的什么事。"
        lines.append("想让我忘掉一条：/memory forget 编号；全部忘掉：/memory forget")
        return "\n".join(lines)

    async def _ask_forget(self, entry: Entry, args: list[str]) -> str:
        deps = self.deps
        if args:  # someone else, or a group: an admin's request
            if not deps.is_admin(entry.user_id):
                return "只有管理员可以让我忘掉别人或者一个群。"
            kind: Literal["user", "group"] = "group" if args[0] == "group" else "user"
            target = args[1] if kind == "group" and len(args) > 1 else args[0]
            subject = await subject_of(deps.people, kind, target)
        else:
            subject = await subject_of(deps.people, "user", entry.user_id)
        code = f"{secrets.randbelow(10_000):04d}"
        await deps.redis.set(
            deps.keys.memory_forget_pending(deps.card.id, entry.user_id),
            json.dumps({"kind": subject.kind, "id": subject.id, "code": code}),
            ex=CONFIRM_SECONDS,
        )
        whom = "你" if subject.id == entry.user_id or not args else subject.id
        return (
            f"要我忘掉关于{whom}的一切吗？聊过的话、记住的事、约定都会删掉，不能恢复。"
            f"确定的话 {CONFIRM_SECONDS // 60} 分钟内发：/memory forget confirm {code}"
        )

    async def _confirm(self, gov: Governance, entry: Entry, args: list[str]) -> str:
        deps = self.deps
        key = deps.keys.memory_forget_pending(deps.card.id, entry.user_id)
        raw = await deps.redis.get(key)
        pending = json.loads(raw) if raw else None
        if pending is None or not args or args[0] != pending["code"]:
            return "没有等待确认的遗忘请求，或者确认码不对。"
        await deps.redis.delete(key)
        subject = await subject_of(deps.people, pending["kind"], pending["id"])
        by = entry.user_id if subject.id == entry.user_id else f"admin:{entry.user_id}"
        command = forget_command(subject, await gov.names(subject), by)
        await deps.commands.enqueue(command.model_dump(mode="json"))
        log.info("forget of a %s asked in chat (request %s)", subject.kind, command.request_id)
        return "好，我会把这些都忘掉。" if subject.kind == "user" else "好，这个群的事我都会忘掉。"

    async def _own_fact(self, gov: Governance, entry: Entry, item: str) -> Subject | None:
        """The asker, when ``item`` is theirs (or they are an admin)."""
        subject = await subject_of(self.deps.people, "user", entry.user_id)
        await gov.ensure()
        for collection in (FACTS.name, "chat_memories"):
            doc = await gov.history.get(collection, item)
            if doc is not None:
                mine = str(doc.get("user_id", "")) in subject.ids
                return subject if mine or self.deps.is_admin(entry.user_id) else None
        return None

    async def _forget_item(self, gov: Governance, entry: Entry, item: str) -> str:
        if await self._own_fact(gov, entry, item) is None:
            return f"没有找到你的 {item}。"
        await gov.forget_item(item, requested_by=entry.user_id, now=self.deps.now())
        return "好，这条我忘掉了。"

    async def _correct(self, gov: Governance, entry: Entry, item: str, content: str) -> str:
        if not item.startswith("fact_") or await self._own_fact(gov, entry, item) is None:
            return f"没有找到你的 {item}。"
        new = await gov.correct_fact(item, content, requested_by=entry.user_id, now=self.deps.now())
        return f"记下了：{new['content']}（{new['_id']}）"


def private_chat(entry: Entry) -> Conversation:
    """The private chat with whoever sent ``entry``."""
    return Conversation.private(entry.user_id)


def private_text(entry: Entry, text: str) -> Outgoing:
    return Outgoing.text(private_chat(entry), text)
