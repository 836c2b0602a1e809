"""OneBot v11: malformed frames cost one log line each, never a traceback or the connection.

The OneBot v11 adapter logs every frame it cannot parse as an ERROR with the whole raw frame and
a traceback, and a frame that is not JSON at all ends the WebSocket (the implementation
reconnects; what it sent meanwhile is lost). `install` guards the two places where the adapter
reads a frame, both looked up when a frame arrives (its routes were registered before any plugin
loads, so its methods cannot be swapped): the ``json`` its module reads frames with answers None
for a frame it cannot decode (the adapter then skips it, as it skips any non-event), and its
event parser reports an event it cannot parse instead of raising, after skipping the segments
of a message that the adapter would crash on (`normalise_segments`) and keeping the rest. (The
same ``json`` reads the answers of HTTP API calls, which this plugin does not use: one that is
not JSON then reads as an empty result instead of a `NetworkError`.) An API result for a call
given up a moment before (its reply cancelled by a newer message) is dropped: the adapter's
result store would raise out of the WebSocket loop and close the connection.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any

from nonebot_plugin_yuiju.frames import FrameReports, GuardedJson, fix_surrogates, why

log = logging.getLogger(__name__)
REPORTS = FrameReports("OneBot", log)
REPORT = REPORTS.frames
"""One line per bad frame, at most ten a minute."""
SEGMENTS = REPORTS.elements
"""One line per message with bad segments, at most ten a minute."""
_SURROGATE = re.compile(r"[\ud800-\udfff]")
"""Half of a UTF-16 pair: JSON may escape one alone; no store or encoder takes it."""
REQUIRED = {"text": "text", "at": "qq", "reply": "id"}
"""The field of a segment type that the adapter reads unguarded, before any plugin sees it."""
_why = why


def report(problem: str, frame: Any) -> None:
    """One short line about a bad frame (the frame quoted to 120 characters)."""
    REPORTS.frame(problem, frame)


def install() -> None:
    """Guard the OneBot v11 adapter's frame reading (idempotent)."""
    from nonebot.adapters.onebot.v11 import Adapter
    from nonebot.adapters.onebot.v11 import adapter as adapter_module

    if getattr(Adapter, "_yuiju_frames_guarded", False):
        return
    parse = Adapter.json_to_event.__func__  # type: ignore[attr-defined]

    def json_to_event(cls: Any, json_data: Any) -> Any:
        if json_data is None:
            return None  # not JSON: reported by `GuardedJson`
        if not isinstance(json_data, dict):
            report(f"JSON {type(json_data).__name__}, not an object", json_data)
            return None
        if "post_type" not in json_data:  # an API result: the adapter's result store takes it
            try:
                return parse(cls, json_data)
            except asyncio.InvalidStateError:
                # the call it answers was cancelled (a newer message superseded the reply) and
                # has not cleaned up yet: nobody waits for it, and the raise would end the loop
                log.debug("API result for a call given up: %.80r", json_data.get("echo"))
                return None
        return parse_event(cls, json_data)

    adapter_module.json = GuardedJson(report)
    Adapter.json_to_event = classmethod(json_to_event)  # type: ignore[assignment]
    Adapter._yuiju_frames_guarded = True  # type: ignore[attr-defined]
    install_server_guard()


def install_server_guard() -> None:
    """uvicorn's WebSocket server hands a text frame that is not UTF-8 to the app as bytes
    (`frames.server`), instead of closing the connection with 1007 and a traceback before any
    guard sees it: the adapter's ``json`` (`GuardedJson`) then reports it in one line and reads
    on. Applies to every server started after this (`yuiju bot`, `yuiju run`, a host app) that
    leaves uvicorn's WebSocket protocol at "auto"."""
    from uvicorn.protocols.websockets import auto

    try:
        from nonebot_plugin_yuiju.frames.server import Utf8GuardedProtocol
    except ImportError:  # uvicorn before 0.35: no sans-I/O protocol to guard
        return
    if auto.AutoWebSocketsProtocol is Utf8GuardedProtocol.__base__:
        auto.AutoWebSocketsProtocol = Utf8GuardedProtocol


def parse_event(adapter: Any, data: dict[str, Any]) -> Any:
    """The adapter's own event models in its own order, then its base event; None (reported)
    when none fits. A message's segments are normalised first (`normalise_segments`). A frame that says it is a message but fits no message model is skipped too:
    as a base event it would reach nonebot's command parsing, which asks it for its message."""
    from nonebot.adapters.onebot.v11 import Event, MessageEvent
    from nonebot.compat import type_validate_python
    from pydantic import BaseModel

    if data.get("post_type") in ("message", "message_sent"):
        data = complete_message(normalise_segments(data))
    try:
        models = list(adapter.get_event_model(data))
        if data.get("post_type") == "message":  # the lookup ends with the base events
            models = [m for m in models if issubclass(m, MessageEvent)]
    except Exception as exc:  # the lookup joins the type fields: a field of the wrong type raises
        report(f"not an event ({_why(exc)})", data)
        return None
    problem: Exception | None = None
    for model in models:
        try:  # a pydantic model validates itself (nonebot's helper builds a TypeAdapter a call)
            if isinstance(model, type) and issubclass(model, BaseModel):
                return model.model_validate(data)
            return type_validate_python(model, data)
        except Exception as exc:
            problem = problem or exc
            continue
    if data.get("post_type") == "message":
        report(f"not a message event ({_why(problem) if problem else 'no model fits'})", data)
        return None
    try:
        return type_validate_python(Event, data)
    except Exception as exc:
        report(f"not an event ({_why(exc)})", data)
        return None


MESSAGE_DEFAULTS: dict[str, Any] = {"font": 0, "raw_message": ""}
"""Fields of a message event the adapter requires and nobody reads: an implementation may leave
them out (the sender, the conversation and the content are what the message is)."""
SUB_TYPES = {"group": "normal", "private": "friend"}


def complete_message(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with what a message event may leave out filled in, so that a message whose
    sender (``user_id``), conversation and content can be read is kept: ``font`` and
    ``raw_message``, the ``sub_type`` of its kind, a ``sender`` of its ``user_id`` alone, the
    ``time`` it arrived and ``self_id`` 0 (the connection says whose it is; nothing reads the
    event's)."""
    missing = {k: v for k, v in MESSAGE_DEFAULTS.items() if k not in data}
    if "sub_type" not in data and data.get("message_type") in SUB_TYPES:
        missing["sub_type"] = SUB_TYPES[data["message_type"]]
    if not isinstance(data.get("sender"), dict) and "user_id" in data:
        missing["sender"] = {"user_id": data["user_id"]}
    if "time" not in data:
        missing["time"] = int(time.time())
    if "self_id" not in data:
        missing["self_id"] = 0
    return {**data, **missing} if missing else data


def normalise_segments(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its message's segments in the shape the adapter reads: a bad segment is
    skipped and the rest of the message kept (one rate-limited line per message).

    The adapter validates only that a segment has a type, then reads ``data["text"]`` of a text
    segment (a `KeyError` in a task nobody awaits: the whole message lost, a traceback logged),
    ``data["id"]`` of a reply, the ``qq`` of an at; and one segment that is not an object fails
    the whole message. Skipped: what is not an object or has no type, a text without its text,
    an at without whom, a reply without a message id. A number as text becomes its digits; data
    that is not an object becomes empty; a lone UTF-16 surrogate in a text becomes U+FFFD (the
    chat side would clean it too, silently)."""
    message = data.get("message")
    segments = [message] if isinstance(message, dict) else message
    if not isinstance(segments, list):
        return data  # a CQ-code string, or nothing the adapter reads as segments
    kept: list[dict[str, Any]] = []
    problems: list[str] = []
    for segment in segments:
        fixed, problem = _segment(segment)
        if problem:
            problems.append(problem)
        if fixed is not None:
            kept.append(fixed)
    if problems:
        REPORTS.dropped("segments", data.get("message_id"), len(kept), len(segments), problems)
    # a fixed segment may differ without a problem (``data: null`` read as empty data, which
    # nonebot's log line of the event would crash on): the message is always the kept list
    return {**data, "message": kept}


def _segment(segment: Any) -> tuple[dict[str, Any] | None, str]:
    """The segment as the adapter can read it (None: skip it), and what was wrong ("" if nothing)."""
    if not isinstance(segment, dict):
        return None, f"a {type(segment).__name__}, not a segment"
    kind = segment.get("type")
    if not isinstance(kind, str) or not kind:
        return None, "a segment without a type"
    raw = segment.get("data")
    fields: dict[str, Any] = raw if isinstance(raw, dict) else {}
    problem = "" if raw is None or isinstance(raw, dict) else f"{kind} data not an object"
    need = REQUIRED.get(kind)
    value = fields.get(need) if need else None
    if kind == "text" and isinstance(value, int | float) and not isinstance(value, bool):
        return {"type": kind, "data": {**fields, "text": str(value)}}, "text as a number"
    if kind == "text" and not isinstance(value, str):
        return None, "a text without its text"
    if kind == "text" and isinstance(value, str) and _SURROGATE.search(value):
        text = fix_surrogates(value)
        lone = text.count("\ufffd") > value.count("\ufffd")
        fixed = {"type": kind, "data": {**fields, "text": text}}
        return fixed, "a text with a lone surrogate (replaced by U+FFFD)" if lone else problem
    if kind == "at" and (value is None or str(value) == ""):
        return None, "at without a qq"
    if kind == "reply" and not str(value).strip().lstrip("-").isdigit():
        return None, "reply without a message id"
    return {"type": kind, "data": fields}, problem
