"""Thin nonebot matchers: an adapter's message event → the core's `Entry` (OneBot v11 through
`onebot.normalize`, every other adapter through `uni.entry_from_event`) → `ChatService.handle`.
Replies go out through the service's sender (`send.NoneBotSender`), never through the matcher."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from nonebot import get_driver, get_plugin_config, on_message
from nonebot.adapters import Bot, Event
from nonebot.adapters.onebot.v11 import MessageEvent as OneBotMessageEvent
from redis.exceptions import RedisError

from nonebot_plugin_yuiju import frames, runtime
from nonebot_plugin_yuiju.config import Config
from nonebot_plugin_yuiju.onebot import event_payload, normalize
from nonebot_plugin_yuiju.platforms import edge_of
from nonebot_plugin_yuiju.runtime import RuntimeDep, ServiceDep
from nonebot_plugin_yuiju.uni import entry_from_event
from yuiju.message.model import Entry
from yuiju.message.ratelog import RateLimitedLog

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


@driver.on_startup
async def _start() -> None:
    """Build the plugin's runtime: with the factory chosen before the start (`yuiju bot`,
    `yuiju run`, the tests), else from the plugin config as inside someone else's NoneBot app."""
    from nonebot_plugin_yuiju.app import host_app_factory

    STOPPING.clear()  # a new start of the app in this process
    factory = runtime.chosen_factory(driver) or await host_app_factory()
    await runtime.start(driver, factory)


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
    edge = runtime.stop(driver)
    for closer in reversed(edge.on_stop if edge is not None else []):
        await bounded(
            closer,
            seconds=CLOSER_SECONDS,
            what=f"shutdown step {getattr(closer, '__qualname__', closer)}",
        )


CLOSER_SECONDS = 0.5
"""The most one shutdown step waits (archiving a conversation cut short stays in its window)."""


chat = on_message(priority=50, block=False)


@chat.handle()
async def _(bot: Bot, event: Event, service: ServiceDep, running: RuntimeDep) -> None:
    if not plugin_config.yuiju_chat_enabled:
        return
    message_id = "?"
    try:
        entry: Entry | None
        if isinstance(event, OneBotMessageEvent):
            message_id = str(event.message_id)
            entry = normalize(
                event_payload(event),
                self_id=bot.self_id,
                tz=service.deps.tz,
                bot_name=service.card.name,
                max_chars=service.cfg.max_input_chars,
            )
        else:
            entry = await entry_from_event(
                bot,
                event,
                tz=service.deps.tz,
                bot_name=service.card.name,
                max_chars=service.cfg.max_input_chars,
            )
            message_id = entry.id if entry is not None else message_id
            if entry is not None and entry.scene == "private":
                channel = edge_of(bot.adapter.get_name()).direct_channel(event)
                if channel is not None:
                    running.edge.direct_channels.note(entry.user_id, channel)
        if entry is not None and not await _unless_stopping(service.handle(entry)):
            log.info(
                "message %s: reply given up, the bot is stopping (the message is recorded)",
                message_id,
            )
    except (RedisError, OSError) as exc:  # a store that is down is not a bug: no traceback
        # the message itself is recorded (its record waits in a queue while Redis is away)
        FAILURES(
            logging.ERROR,
            "message %s recorded, not answered: a store is unavailable: %s: %.200s",
            message_id,
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
            message_id,
            kind,
            exc,
            exc_info=first,
        )
