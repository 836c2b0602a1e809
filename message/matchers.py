"""Thin nonebot matchers: an OneBot v11 message event → `normalize` → `ChatService.handle`."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from nonebot import get_bots, get_driver, get_plugin_config, on_message
from nonebot.adapters.onebot.v11 import Bot, MessageEvent
from redis.exceptions import RedisError

from yuiju.message import frames
from yuiju.message.channel import send_text
from yuiju.message.config import Config
from yuiju.message.entry import normalize
from yuiju.message.ratelog import RateLimitedLog
from yuiju.message.runtime import RUNTIME

log = logging.getLogger(__name__)
plugin_config = get_plugin_config(Config)
driver = get_driver()
frames.install()
FAILURES = RateLimitedLog(log, burst=5)
"""A message the chat side could not handle: one line each (the first of a kind with its traceback)."""
_seen_failures: set[str] = set()
STOPPING = asyncio.Event()
"""Set when the bot begins to stop: a reply in flight is given up. nonebot runs matchers shielded
from cancellation, so without it a turn waiting on the model held the stop until it finished."""


def current_bot() -> Any:
    return next(iter(get_bots().values()), None)


async def _outlet(scene: str, target: int, text: str) -> int | None:
    return await send_text(current_bot(), scene, target, text)


async def _api(action: str, **params: Any) -> Any:
    bot = current_bot()
    if bot is None:
        raise RuntimeError("no OneBot connection")
    return await bot.call_api(action, **params)


@driver.on_startup
async def _start() -> None:
    STOPPING.clear()  # a new start of the app in this process
    if RUNTIME.service is None and RUNTIME.factory is not None:
        RUNTIME.service = await RUNTIME.factory()
    if RUNTIME.service is not None:
        RUNTIME.service.outlet = RUNTIME.service.outlet or _outlet
        RUNTIME.service.api = RUNTIME.service.api or _api


async def _unless_stopping(work: Any) -> bool:
    """Run ``work`` unless the bot stops first (then it is cancelled); True when it finished."""
    task = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(STOPPING.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=0.5)
        return False
    task.result()  # what it raised, for the handler's own reporting
    return True


@driver.on_shutdown
async def _stop() -> None:
    """Run the closers last-first (archiving and proactive posts end before the stores close),
    each within `CLOSER_SECONDS`: a stop never waits on a model call or a store that hangs."""
    from yuiju.tasks import bounded

    STOPPING.set()
    for closer in reversed(RUNTIME.on_stop):
        await bounded(
            closer,
            seconds=CLOSER_SECONDS,
            what=f"shutdown step {getattr(closer, '__qualname__', closer)}",
        )
    RUNTIME.on_stop.clear()


CLOSER_SECONDS = 0.5
"""The most one shutdown step waits (archiving a conversation cut short stays in its window)."""


def event_payload(event: MessageEvent) -> dict[str, Any]:
    """The event as plain OneBot v11 JSON, with the quoted message the adapter resolved."""
    payload: dict[str, Any] = {
        "message_type": event.message_type,
        "message_id": event.message_id,
        "user_id": event.user_id,
        "group_id": getattr(event, "group_id", None),
        "time": event.time,
        "sender": {"nickname": event.sender.nickname, "card": getattr(event.sender, "card", None)},
        "message": [{"type": seg.type, "data": dict(seg.data)} for seg in event.original_message],
    }
    if event.reply is not None:
        payload["reply"] = {
            "message_id": event.reply.message_id,
            "sender_id": event.reply.sender.user_id,
            "sender_name": event.reply.sender.card or event.reply.sender.nickname,
            "text": event.reply.message.extract_plain_text(),
        }
    return payload


chat = on_message(priority=50, block=False)


@chat.handle()
async def _(bot: Bot, event: MessageEvent) -> None:
    service = RUNTIME.service
    if service is None or not plugin_config.yuiju_chat_enabled:
        return
    try:
        self_id = int(bot.self_id)
    except ValueError:
        self_id = None
    service.self_id = self_id
    try:
        entry = normalize(
            event_payload(event),
            self_id=self_id,
            tz=service.tz,
            bot_name=service.card.name,
            max_chars=service.cfg.max_input_chars,
        )
        if entry is not None and not await _unless_stopping(service.handle(entry)):
            log.info(
                "message %s: reply given up, the bot is stopping (the message is recorded)",
                event.message_id,
            )
    except (RedisError, OSError) as exc:  # a store that is down is not a bug: no traceback
        FAILURES(
            logging.ERROR,
            "message %s not handled, a store is unavailable: %s: %.200s",
            event.message_id,
            type(exc).__name__,
            exc,
        )
    except Exception as exc:  # one message must never stop the bot, nor fill the log
        kind = type(exc).__name__
        first = kind not in _seen_failures
        _seen_failures.add(kind)
        FAILURES(
            logging.ERROR,
            "message %s not handled: %s: %.200s",
            event.message_id,
            kind,
            exc,
            exc_info=first,
        )
