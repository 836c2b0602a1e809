"""Two chat-side edges of the issue-30 rerun: an admin's diagnostic is for the admin, never her
line in the group; and a line that acknowledges what a tool refused is not sent."""

from __future__ import annotations

from typing import Any

from tests.chatkit import RecordingSender
from tests.test_message_service import ADMIN, GROUP, make_kit
from yuiju.config import ProactiveConfig
from yuiju.message.channel import SendFailed
from yuiju.message.model import Conversation, Entry, Outgoing
from yuiju.storage.keys import Keys

SESSION = f"group:qq:{GROUP}"


async def failed_force(redis: Any, history: Any, **kw: Any) -> Any:
    """A kit whose proactive model never answers usably, with one shareable event waiting."""
    from tests.test_proactive import emit

    kit = await make_kit(
        redis,
        history,
        fn=lambda m, s: '{"shouldSend": "maybe", "message": 5}',
        proactive=ProactiveConfig(groups={str(GROUP): {}}),
        keys=Keys(),  # the stream `emit` writes to
        **kw,
    )
    proactive = kit.service.proactive
    assert proactive is not None
    proactive.block_ms = 10
    await proactive.ensure()
    await emit(redis, kit.service.now())
    await proactive.run_once(block=False)
    return kit


async def test_an_admin_diagnostic_goes_to_the_admin_privately_and_is_never_her_line(
    redis: Any, sqlite_history: Any
) -> None:
    kit = await failed_force(redis, sqlite_history)
    out = await kit.say("/proactive force 100", user=ADMIN, at=True)
    [answer] = out.replies
    assert "llm_invalid" in answer
    assert kit.sent == [("private", ADMIN, answer)]
    recent = await kit.service.sessions.recent(SESSION, 50)
    assert not any(e.from_bot for e in recent), recent
    proactive = kit.service.proactive
    said = await proactive.group_context.recent_messages(Conversation.group("qq", GROUP), 50)
    assert not any(m["from_bot"] for m in said)


class NoPrivateChat(RecordingSender):
    """A platform (or a bot that is not the admin's friend) where private messages fail."""

    async def send(self, message: Outgoing) -> str | None:
        if message.conversation.scene == "private":
            raise SendFailed("not friends")
        return await super().send(message)


async def test_without_a_private_chat_the_diagnostic_is_said_in_the_group_but_not_recorded(
    redis: Any, sqlite_history: Any
) -> None:
    sender = NoPrivateChat()
    kit = await failed_force(redis, sqlite_history, sender=sender)
    out = await kit.say("/proactive force 100", user=ADMIN, at=True)
    [answer] = out.replies
    assert sender.sent == [("group", GROUP, answer)]
    recent = await kit.service.sessions.recent(SESSION, 50)
    assert not any(e.from_bot for e in recent), recent
    _, items = await kit.service.sessions.context(SESSION)
    assert not any(answer in str(i.get("content")) for i in items)


async def test_admin_lines_stored_before_are_not_her_lines_in_a_post_s_prompt(
    redis: Any, sqlite_history: Any
) -> None:
    kit = await failed_force(redis, sqlite_history)
    group = Conversation.group("qq", GROUP)
    entry = Entry(
        id="bot-old",
        conversation=group,
        user_id="qq:999",
        sender_name="悠酱",
        time=kit.service.now(),
        text="没有发出（llm_invalid）：模型没有给出可用的回答",
        from_bot=True,
        source="admin",
    )
    await kit.service.sessions.record_many([(entry, None)])
    proactive = kit.service.proactive
    said = await proactive.group_context.recent_messages(group, 50)
    assert all("llm_invalid" not in m["text"] for m in said)


# -- a refused tool call: her line that acknowledges it as done does not go out -----------------


async def refused(
    redis: Any, history: Any, tool: str, argument: dict[str, str], *answers: str
) -> tuple[Any, Any]:
    from tests.test_chat_plans import call, scripted, town

    yuiju = await town(redis, history, scripted(call(tool, **argument), *answers))
    out = await yuiju.chat.handle(yuiju.entry("今天好冷啊"))
    return yuiju, out


async def test_after_refused_news_an_acknowledgement_is_sent_back_once_with_the_reason(
    redis: Any, sqlite_history: Any
) -> None:
    yuiju, out = await refused(
        redis,
        sqlite_history,
        "remember_news",
        {"text": "小林在听喜欢的歌，心情很好"},
        "好的，我记住啦",
        "是啊，今天好冷",
    )
    assert out.replies == ["是啊，今天好冷"]
    back = yuiju.model.calls[2][-1]
    assert back["role"] == "system" and "没有说过" in back["content"], back


async def test_a_second_acknowledgement_of_a_refused_gift_is_dropped(
    redis: Any, sqlite_history: Any
) -> None:
    _, out = await refused(
        redis,
        sqlite_history,
        "receive_gift",
        {"item": "铜锣烧"},
        "谢谢你～",
        "谢谢你的铜锣烧！今天确实好冷",
    )
    assert out.replies == ["今天确实好冷"]


async def test_an_answer_that_acknowledges_nothing_goes_out_after_a_refusal(
    redis: Any, sqlite_history: Any
) -> None:
    yuiju, out = await refused(
        redis, sqlite_history, "remember_news", {"text": "小林要转学"}, "是啊，今天好冷"
    )
    assert out.replies == ["是啊，今天好冷"] and len(yuiju.model.calls) == 2


async def test_news_that_was_said_may_be_acknowledged(redis: Any, sqlite_history: Any) -> None:
    from tests.test_chat_plans import call, scripted, town

    yuiju = await town(
        redis,
        sqlite_history,
        scripted(call("remember_news", text="小林下周要转学"), "好的，我记住啦"),
    )
    out = await yuiju.chat.handle(yuiju.entry("跟你说个事，我下周要转学了"))
    assert out.replies == ["好的，我记住啦"]


async def test_when_all_she_said_thanks_for_a_refused_gift_she_still_answers(
    redis: Any, sqlite_history: Any
) -> None:
    """A held-out rerun: both answers only thanked for a gift nobody gave, and the person got no
    answer at all. She says honestly that she did not follow instead."""
    from yuiju.message.agent import NOT_FOLLOWED_LINE

    _, out = await refused(
        redis, sqlite_history, "receive_gift", {"item": "青苹果"}, "谢谢你～", "谢谢！"
    )
    assert out.replies == [NOT_FOLLOWED_LINE]
