"""Messages taken back (撤回), from every adapter that reports it, as the core's `Retraction` →
`ChatService.retract`: OneBot v11's ``group_recall`` / ``friend_recall`` notices (`onebot_recalls`),
and Satori's ``message-deleted`` (`satori_deletions`, when nonebot-adapter-satori is installed).

Another adapter with a deletion event adds a matcher here the same way: its event's conversation,
message id and sender as a `Retraction` (alconna's universal layer has no deletion event; Telegram's
Bot API reports none for ordinary chats).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from nonebot import get_plugin_config, on_notice
from nonebot.adapters import Event
from nonebot.adapters.onebot.v11 import Bot, FriendRecallNoticeEvent, GroupRecallNoticeEvent
from nonebot.rule import Rule
from redis.exceptions import RedisError

from nonebot_plugin_yuiju.config import Config
from nonebot_plugin_yuiju.matchers import FAILURES
from nonebot_plugin_yuiju.onebot import retraction
from nonebot_plugin_yuiju.platforms import platform_of
from nonebot_plugin_yuiju.runtime import ServiceDep
from yuiju.message.model import Conversation, Retraction
from yuiju.message.service import ChatService

if TYPE_CHECKING:
    from nonebot.adapters.satori import Bot as SatoriBot
    from nonebot.adapters.satori.event import MessageDeletedEvent

log = logging.getLogger(__name__)
plugin_config = get_plugin_config(Config)


async def take_back(what: Retraction, service: ChatService) -> None:
    """Hand ``what`` to the chat service; a store that is down is one line, never a traceback."""
    if not plugin_config.yuiju_chat_enabled:
        return
    try:
        done = await service.retract(what)
    except (RedisError, OSError) as exc:
        FAILURES(
            logging.ERROR,
            "message %s taken back in %s, but a store is unavailable: %s: %.200s",
            what.message_id,
            what.conversation,
            type(exc).__name__,
            exc,
        )
        return
    except Exception as exc:  # one notice must never stop the bot, nor fill the log
        FAILURES(
            logging.ERROR,
            "message %s taken back in %s, not handled: %s: %.200s",
            what.message_id,
            what.conversation,
            type(exc).__name__,
            exc,
            exc_info=True,
        )
        return
    log.info("message %s taken back in %s: %s", what.message_id, what.conversation, done)


def _is_onebot_recall(event: Event) -> bool:
    return isinstance(event, GroupRecallNoticeEvent | FriendRecallNoticeEvent)


# the rule keeps every other notice (pokes, joins, a fuzzer's empty ones) from running it at all,
# and from NoneBot's two log lines per matcher run
onebot_recalls = on_notice(rule=Rule(_is_onebot_recall), priority=50, block=False)


@onebot_recalls.handle()
async def on_onebot_recall(
    bot: Bot, event: GroupRecallNoticeEvent | FriendRecallNoticeEvent, service: ServiceDep
) -> None:
    what = retraction(event.model_dump(), tz=service.deps.tz, self_id=bot.self_id)
    if what is not None:
        await take_back(what, service)


def satori_retraction(
    event: MessageDeletedEvent, *, platform: str, self_id: str | None = None
) -> Retraction:
    """A Satori ``message-deleted`` event as a `Retraction` (a direct channel is the private chat
    with its user; any other, the channel as a group, as alconna's target names it)."""
    from nonebot.adapters.satori.models import ChannelType

    user = f"{platform}:{event.user.id}"
    conversation = (
        Conversation.private(user)
        if event.channel.type == ChannelType.DIRECT
        else Conversation.group(platform, event.channel.id)
    )
    operator = getattr(getattr(event, "operator", None), "id", None)
    return Retraction(
        conversation=conversation,
        message_id=str(event.message.id),
        mine=self_id is not None and event.user.id == self_id,
        user_id=user,
        operator_id=f"{platform}:{operator}" if operator else None,
        time=event.timestamp.astimezone(),  # the adapter reads it as naive local time
    )


async def on_satori_deletion(
    bot: SatoriBot, event: MessageDeletedEvent, service: ChatService
) -> None:
    login = getattr(bot, "_self_info", None)  # the adapter keeps the login's user there
    self_id = getattr(getattr(login, "user", None), "id", None)
    await take_back(satori_retraction(event, platform=platform_of(bot), self_id=self_id), service)


try:
    from nonebot.adapters.satori import Bot as _SatoriBot
    from nonebot.adapters.satori.event import MessageDeletedEvent as _Deleted
except ImportError:  # no Satori adapter installed: nothing of Satori's can arrive
    satori_deletions = None
else:

    async def _satori(bot: _SatoriBot, event: _Deleted, service: ServiceDep) -> None:
        await on_satori_deletion(bot, event, service)

    def _is_satori_deletion(event: Event) -> bool:
        return isinstance(event, _Deleted)

    satori_deletions = on_notice(
        rule=Rule(_is_satori_deletion), priority=50, block=False, handlers=[_satori]
    )
