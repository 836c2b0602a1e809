"""Telegram: an answer or an update the adapter cannot read is skipped with one line.

The adapter polls ``getUpdates`` and validates the whole batch at once: an answer that is not
JSON, nested too deep or of the wrong shape is logged with a traceback (then it waits 5 s), and
one update it cannot validate (an entity type from a newer Bot API, a field of the wrong type)
fails the whole batch, again at every poll, because the offset that would confirm it never
moves: every message after it is lost. An update it validates can still fail in its handler (an
update of a kind it does not know, an entity that ends inside a UTF-16 pair, a lone surrogate),
each with a traceback. `install` guards two seams, both looked up at every call:

- the bot's ``get_updates`` (``Bot.call_api`` for that one API): the answer is read as the
  adapter reads any answer; one it cannot read is reported and answers no updates after a pause
  of `PAUSE` s; the updates are validated one by one, after `normalise_update`, and one that still
  does not validate is reported and passed on as its bare ``update_id``, so the next poll
  confirms it;
- the adapter's per-update handler: it builds the event (after `normalise_update`, for updates
  posted to a webhook) and hands it to the bot; an update it cannot build is reported, a bare
  ``update_id`` (reported when it was read, or a kind of update this adapter does not know) and
  an event nonebot could not log (a pin of a message the bot cannot see, Telegram's
  "inaccessible message": the adapter keeps it a dict) are skipped with a debug line.

A Bot API server that goes away (stopped, a proxy down) is one warning while the adapter polls
again every 5 s, not an error with a traceback at each poll (`frames.Outages`, in place of the
adapter module's ``log``; an answered poll ends the outage); one that does not answer when she
starts is that same warning, and the bot's start is tried again (`polling_until_it_starts`).

Entities are what `normalise_update` fixes: one that is not an object, of an unknown type, out
of the text or cutting a UTF-16 pair is dropped (its text stays, as plain text), and a lone
surrogate in the text becomes U+FFFD.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import typing
from collections.abc import Awaitable, Callable
from typing import Any, TypeGuard

from nonebot_plugin_yuiju.frames import (
    START_RETRY_SECONDS,
    UNREADABLE,
    FrameReports,
    Outages,
    fix_surrogates,
    lost_connection,
    why,
)

log = logging.getLogger(__name__)
REPORTS = FrameReports("Telegram", log)
PAUSE = 1.0
"""Seconds to wait after an answer that could not be read, before polling again: a proxy that
answers every poll with an error page is asked once a second, not in a busy loop."""
MESSAGES = (
    "message",
    "edited_message",
    "channel_post",
    "edited_channel_post",
    "business_message",
    "edited_business_message",
)
"""The fields of an update that carry a message (with text and entities)."""


def install() -> None:
    """Guard the Telegram adapter's update reading (idempotent)."""
    from nonebot.adapters.telegram import Adapter, Bot
    from nonebot.adapters.telegram import adapter as adapter_module

    if getattr(Adapter, "_yuiju_frames_guarded", False):
        return
    call_api = Bot.call_api
    outages = Outages("Telegram", log, adapter_module.log)

    async def guarded_call_api(self: Any, api: str, *args: Any, **kwargs: Any) -> Any:
        if api != "get_updates" or args:
            return await call_api(self, api, *args, **kwargs)
        updates = await read_updates(self, kwargs)
        outages.back()  # the Bot API answered (a network error raised past this)
        return updates

    Bot.call_api = guarded_call_api  # type: ignore[method-assign]
    adapter_module.log = outages
    Adapter.poll = polling_until_it_starts(Adapter.poll)  # type: ignore[method-assign]
    Adapter._Adapter__handle_update = handle_update  # type: ignore[attr-defined]
    Adapter._yuiju_frames_guarded = True  # type: ignore[attr-defined]


def polling_until_it_starts(poll: Callable[[Any, Any], Awaitable[None]]) -> Any:
    """The adapter's ``poll(bot)`` task, which first asks the Bot API who the bot is: when the
    server does not answer then, the adapter logged it and its task ended, and the bot stayed
    off until a restart. Now it is tried again (`START_RETRY_SECONDS`), quietly after the one
    warning of the outage (`Outages`); an answer that is an error (a revoked token) still ends it
    as before. (Once polling, the adapter's own loop retries every 5 s.)"""

    async def guarded(self: Any, bot: Any) -> None:
        tries = 0
        while True:
            try:
                await poll(self, bot)
                return
            except Exception as exc:
                if not lost_connection(exc):
                    raise
            await asyncio.sleep(START_RETRY_SECONDS[min(tries, len(START_RETRY_SECONDS) - 1)])
            tries += 1

    return guarded


async def read_updates(bot: Any, params: dict[str, Any]) -> list[Any]:
    """``getUpdates`` as the adapter's poll wants it: the updates that validate, a bare
    ``update_id`` in place of each one that does not (reported); no updates, after a pause,
    for an answer that cannot be read (reported)."""
    from nonebot.adapters import Bot as BaseBot

    try:  # the adapter's own request and JSON reading, without its validation of the batch
        answer = await BaseBot.call_api(bot, "get_updates", **params)
    except UNREADABLE as exc:
        REPORTS.frame(f"getUpdates answer unreadable ({why(exc)})")  # the adapter read it
        await asyncio.sleep(PAUSE)
        return []
    if not isinstance(answer, list):
        REPORTS.frame("getUpdates result not a list", answer)
        await asyncio.sleep(PAUSE)
        return []
    updates = [u for u in (read_update(item) for item in answer) if u is not None]
    if answer and not updates:  # none can be confirmed: the next poll would answer them at once
        await asyncio.sleep(PAUSE)
    return updates


def read_update(item: Any) -> Any:
    """The adapter's ``Update`` for one item of a getUpdates answer, normalised; a bare
    ``Update(update_id=...)`` when it does not validate; None when it has no ``update_id``."""
    from nonebot.adapters.telegram.model import Update

    if not isinstance(item, dict):
        REPORTS.frame(f"an update that is a {type(item).__name__}", item)
        return None
    fixed = normalise_update(item)
    try:
        return Update.model_validate(fixed)
    except UNREADABLE as exc:
        REPORTS.frame(f"not an update ({why(exc)})", item)
    update_id = item.get("update_id")
    if isinstance(update_id, int) and not isinstance(update_id, bool):
        return Update(update_id=update_id)
    return None


async def handle_update(self: Any, bot: Any, update: Any) -> None:
    """The adapter's handler of one update (polled or posted to its webhook): build the event and
    hand it to the bot; report an update it cannot build instead of its traceback."""
    from nonebot.adapters.telegram.event import Event

    if not isinstance(update, dict):
        REPORTS.frame(f"an update that is a {type(update).__name__}", update)
        return
    if len(update.keys() - {"update_id"}) == 0:
        log.debug("Telegram update %s has nothing this adapter reads", update.get("update_id"))
        return
    from nonebot.exception import NoLogException

    fixed = normalise_update(update)
    try:
        event = Event.parse_event(fixed)
    except Exception as exc:  # its parsers index and decode unguarded
        REPORTS.frame(f"not an event ({why(exc)})", update)
        return
    try:  # nonebot logs every event it handles: one whose line raises is lost in a task
        event.get_log_string()  # (a pin of a message she cannot see keeps its chat a dict)
    except NoLogException:
        pass
    except Exception as exc:
        log.debug("Telegram update %s skipped: %s", update.get("update_id"), why(exc))
        return
    await bot.handle_event(event)


def normalise_update(update: dict[str, Any]) -> dict[str, Any]:
    """``update`` with the entities of its messages (and of the messages they reply to) in the
    shape the adapter reads: bad entities dropped, their text kept; one line per message."""
    changed = {
        key: fixed
        for key in MESSAGES
        if isinstance(update.get(key), dict) and (fixed := _message(update[key])) is not update[key]
    }
    return {**update, **changed} if changed else update


def _message(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with its text and entities fixed (the same object when nothing was wrong)."""
    fixed = dict(message)
    problems: list[str] = []
    total = kept = 0
    for text_key, entities_key in (("text", "entities"), ("caption", "caption_entities")):
        text = message.get(text_key)
        if isinstance(text, str) and (clean := fix_surrogates(text)) != text:
            fixed[text_key] = text = clean
            problems.append("a lone surrogate in the text (replaced by U+FFFD)")
        entities = message.get(entities_key)
        if entities is None:
            continue
        good, bad = _entities(text if isinstance(text, str) else "", entities)
        total += len(entities) if isinstance(entities, list) else 1
        kept += len(good)
        if bad:
            fixed[entities_key] = good
            problems += bad
    reply = message.get("reply_to_message")
    fixed_reply = _message(reply) if isinstance(reply, dict) else reply
    if fixed_reply is reply and not problems:
        return message
    fixed["reply_to_message"] = fixed_reply
    if reply is None:
        del fixed["reply_to_message"]
    if problems:
        REPORTS.dropped("entities", message.get("message_id"), kept, total, problems)
    return fixed


def _entities(text: str, entities: Any) -> tuple[list[Any], list[str]]:
    """The entities the adapter can read in ``text``, and what was wrong with the others."""
    if not isinstance(entities, list):
        return [], [f"entities a {type(entities).__name__}, not a list"]
    units = text.encode("utf-16-le", "surrogatepass")
    size = len(units) // 2

    def low_surrogate(at: int) -> bool:  # a boundary there cuts a character in two
        return at < size and 0xDC00 <= int.from_bytes(units[at * 2 : at * 2 + 2], "little") < 0xE000

    good: list[Any] = []
    bad: list[str] = []
    for entity in entities:
        if not isinstance(entity, dict):
            bad.append(f"a {type(entity).__name__}, not an entity")
            continue
        kind, offset, length = entity.get("type"), entity.get("offset"), entity.get("length")
        if kind not in _entity_types():
            bad.append(f"an entity of unknown type {str(kind)[:24]!r}")
        elif not (_number(offset) and _number(length)):
            bad.append("an entity without a numeric offset and length")
        elif offset < 0 or length <= 0 or offset + length > size:
            bad.append("an entity outside the text")
        elif low_surrogate(offset) or low_surrogate(offset + length):
            bad.append("an entity cutting a character in two")
        else:
            good.append(entity)
    return good, bad


def _number(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


@functools.cache
def _entity_types() -> frozenset[str]:
    """The entity types the adapter's model takes (its ``MessageEntity.type`` literal)."""
    from nonebot.adapters.telegram.model import MessageEntity

    return frozenset(typing.get_args(MessageEntity.model_fields["type"].annotation))
