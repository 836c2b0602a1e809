"""Satori: a frame the adapter cannot read is skipped with one line and the connection stays.

The adapter reads every frame through ``Adapter.receive_payload`` (JSON, then its payload
models, then the event's ``sn``); anything that raises there ends the WebSocket with a traceback
and it reconnects. An event that fits no model is logged with a traceback, and one without a
``type``, or a message that cannot take its channel's shape, ends the connection too. `install`
wraps ``receive_payload`` (looked up on the class at every frame): a frame that is no payload is
reported and the next frame read, and an event is built once before it is handed on, so one
that cannot be built is reported and skipped instead (it is built again by the adapter: a few
microseconds). A message whose content has elements the adapter cannot read (an image whose width
is no number, a link without its href) loses those elements and keeps the rest
(`normalise_content`). A quote of a message the server cannot fetch is one line, and the message
is answered without it (`guard_check_reply`: the adapter's ``_check_reply``, looked up by name at
every message). A server that goes away (stopped, restarting) is one warning while the adapter
tries to reconnect every 3 s, not an error with a traceback at each try (`frames.Outages`, in
place of the adapter module's ``log``; a payload read ends the outage).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from nonebot_plugin_yuiju.frames import UNREADABLE, FrameReports, Outages, why

log = logging.getLogger(__name__)
REPORTS = FrameReports("Satori", log)


class _Remembering:
    """The adapter's WebSocket as ``receive_payload`` reads it, keeping the last frame for the
    report of a frame it could not read."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.last: Any = None

    async def receive(self) -> Any:
        self.last = await self.ws.receive()
        return self.last


def install() -> None:
    """Guard the Satori adapter's frame reading (idempotent)."""
    from nonebot.adapters.satori import Adapter
    from nonebot.adapters.satori import adapter as adapter_module
    from nonebot.adapters.satori import bot as bot_module
    from nonebot.adapters.satori.models import EventPayload

    if getattr(Adapter, "_yuiju_frames_guarded", False):
        return
    receive = Adapter.receive_payload
    outages = Outages("Satori", log, adapter_module.log)

    async def receive_payload(self: Any, info: Any, ws: Any) -> Any:
        while True:
            frame = _Remembering(ws)
            try:
                payload = await receive(self, info, frame)  # type: ignore[arg-type]
            except UNREADABLE as exc:  # a closed socket raises something else: reconnect
                REPORTS.frame(f"not a payload ({why(exc)})", frame.last)
                continue
            outages.back()
            if isinstance(payload, EventPayload):
                body = readable_body(self, payload.body)
                if body is None:
                    continue
                payload.body = body
            return payload

    Adapter.receive_payload = receive_payload  # type: ignore[method-assign]
    adapter_module.log = outages
    bot_module._check_reply = guard_check_reply(bot_module._check_reply)
    Adapter._yuiju_frames_guarded = True  # type: ignore[attr-defined]


def guard_check_reply(check_reply: Callable[[Any, Any], Awaitable[None]]) -> Any:
    """The bot's reading of a quote, which fetches the quoted message from the server: one that
    cannot be fetched (the server no longer has it, or answers an error) failed the whole
    message in a task nobody awaits. Now it is one line and the message goes on without it (the
    quote is already out of the message then; an @ of her after it is still read as one)."""

    async def guarded(bot: Any, event: Any) -> None:
        try:
            await check_reply(bot, event)
        except Exception as exc:  # the fetch raises the adapter's errors, its parse any other
            reply = getattr(event, "reply", None)
            REPORTS.elements(
                logging.WARNING,
                "Satori quote %.40s in message %.24s could not be fetched (%s); the message is "
                "kept without it",
                reply.data.get("id") if reply is not None else None,
                getattr(getattr(event, "message", None), "id", None),
                why(exc)[:80],
            )

    return guarded


def readable_body(adapter: Any, body: dict[str, Any]) -> dict[str, Any] | None:
    """``body`` (its message's content without the elements the adapter cannot read, attribute
    values quoted) when the adapter can build its event; None, reported, when it cannot."""
    body = quote_attributes(body)
    try:
        build(adapter, body)
        return body
    except Exception as exc:  # the adapter's validators raise KeyError as well as ValueError
        problem: Exception = exc
    fixed = normalise_content(body)
    if fixed is not None:
        try:
            build(adapter, fixed)
            return fixed
        except Exception as exc:
            problem = exc
    REPORTS.frame(f"not an event ({why(problem)})", body)
    return None


def build(adapter: Any, body: dict[str, Any]) -> None:
    """Build the event from ``body`` as the adapter's reading loop does, raising where it would."""
    from nonebot.adapters.satori.event import (
        EVENT_CLASSES,
        Event,
        InteractionEvent,
        MessageEvent,
    )
    from nonebot.compat import type_validate_python

    if not isinstance(body.get("type"), str):
        raise ValueError("an event without a type")
    event = type_validate_python(Event, body)
    if body["type"] not in EVENT_CLASSES:
        return  # the adapter reports an unknown type itself, in one line
    event = adapter.payload_to_event(event)
    if isinstance(event, MessageEvent | InteractionEvent):
        event.convert()


def normalise_content(body: dict[str, Any]) -> dict[str, Any] | None:
    """``body`` with its message's content rebuilt from the top-level elements the adapter can
    read (one rate-limited line); None when there is no content to rebuild or nothing was left
    out."""
    from nonebot.adapters.satori.element import parse
    from nonebot.adapters.satori.message import Message

    message = body.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("content"), str):
        return None
    content: str = message["content"]
    try:
        elements = parse(content)
    except Exception:
        return None
    kept: list[str] = []
    problems: list[str] = []
    for element in elements:
        try:
            Message.from_satori_element([element])
        except Exception as exc:
            problems.append(f"<{element.type}> {why(exc)}"[:80])
            continue
        kept.append(element.dumps())
    if not problems:
        return None
    REPORTS.dropped("elements", message.get("id"), len(kept), len(elements), problems)
    return {**body, "message": {**message, "content": "".join(kept)}}


_TAG = re.compile(r"<[A-Za-z][^<>]*>")
_BARE_VALUE = re.compile(r"""(\s[^\s=<>/"']+)=([^\s"'<>`]+?)(?=\s|/?>)""")
"""An attribute value without quotes (``id=10001``), which HTML allows and some servers write:
the adapter's parser reads ``id=10001`` as two flags (``id`` and ``10001`` both True)."""


def quote_attributes(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with the attribute values of its message's elements in quotes."""
    message = body.get("message")
    if not isinstance(message, dict):
        return body
    content = message.get("content")
    if not isinstance(content, str) or "=" not in content:
        return body
    fixed = _TAG.sub(lambda tag: _BARE_VALUE.sub(r'\1="\2"', tag.group(0)), content)
    return body if fixed == content else {**body, "message": {**message, "content": fixed}}
