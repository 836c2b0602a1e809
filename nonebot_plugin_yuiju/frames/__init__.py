"""A frame an adapter cannot read costs one short log line, never a traceback, the connection or
the messages after it: one guard per adapter, installed when the plugin loads (`install`), so it
also holds inside an existing NoneBot project.

Each adapter logs what it cannot decode with a traceback, and some give up more than the frame.
Each guard patches the narrowest place where that adapter reads a frame, looked up when a frame
arrives, once (idempotent), and leaves the adapter's own handling of good frames alone:

- ``onebot`` (OneBot v11, WebSocket): the ``json`` its module reads frames with, and its event
  parser; segments it would crash on are skipped, the rest of the message kept.
- ``satori`` (Satori, a WebSocket client): ``Adapter.receive_payload``, which every frame goes
  through; a frame that is no payload, or an event no model fits, is skipped and the next frame
  read, where the adapter dropped the connection and reconnected. Message elements it cannot read
  are left out, the rest of the message kept.
- ``telegram`` (long polling of getUpdates): the bot's ``get_updates`` call, which validated the
  whole batch at once (one bad update failed every poll after it: the same batch came back), and
  the adapter's per-update handler; entities it would crash on are dropped, the text kept.
- ``feishu`` (Feishu/Lark HTTP callbacks, and its WebSocket mode): the callback route and the
  event parser; post nodes and mentions it cannot read are left out, the rest of the post kept.

A report names the platform, what was wrong and the frame quoted to 120 characters; each
platform's reports are at most a burst a minute (`yuiju.message.ratelog.RateLimitedLog`), then
one line says how many were left out.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any

from pydantic import ValidationError

from yuiju.message.ratelog import RateLimitedLog

UNREADABLE: tuple[type[Exception], ...] = (ValueError, RecursionError, LookupError, TypeError)
"""What decoding or validating a frame raises when the frame is bad: not JSON or not UTF-8
(ValueError, pydantic's ValidationError among them), nested past the stack (RecursionError), a
field missing (KeyError) or of the wrong type (TypeError). Never an adapter's network error."""


class FrameReports:
    """One platform's lines about bad frames and bad elements: one short line each, at most
    ``burst`` of each kind a minute."""

    def __init__(self, platform: str, logger: logging.Logger, *, burst: int = 10) -> None:
        self.platform = platform
        self.frames = RateLimitedLog(logger, burst=burst)
        self.elements = RateLimitedLog(logger, burst=burst)

    def frame(self, problem: str, frame: Any = None) -> None:
        """A frame skipped because of ``problem`` (quoted when the guard has it)."""
        if frame is None:
            self.frames(logging.WARNING, "bad %s frame skipped: %s", self.platform, problem[:160])
            return
        self.frames(
            logging.WARNING,
            "bad %s frame skipped: %s; frame %.120r",
            self.platform,
            problem[:160],
            frame,
        )

    def dropped(self, what: str, where: Any, kept: int, total: int, problems: list[str]) -> None:
        """Parts of one message (``what``: segments, elements, entities, nodes) left out."""
        self.elements(
            logging.WARNING,
            "bad %s %s skipped in message %s (%d of %d kept): %s",
            self.platform,
            what,
            str(where)[:24],
            kept,
            total,
            "; ".join(dict.fromkeys(problems))[:160],
        )

    def reset(self) -> None:
        self.frames.reset()
        self.elements.reset()


def why(exc: BaseException) -> str:
    """An exception in one short clause (a validation error by its first field)."""
    if isinstance(exc, ValidationError):
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "frame"
        return f"{exc.error_count()} invalid fields, first {where}: {first.get('msg', '')}"[:160]
    return f"{type(exc).__name__}: {exc}"[:160]


class GuardedJson(ModuleType):
    """The ``json`` module, except that ``loads`` answers None (reported) for text it cannot
    decode instead of raising: not JSON, not UTF-8, or nested deeper than the decoder recurses
    (a `RecursionError` would end a connection like any other exception)."""

    def __init__(self, report: Callable[[str, Any], None]) -> None:
        super().__init__("json")
        self._report = report

    def __getattr__(self, name: str) -> Any:
        return getattr(json, name)

    def loads(self, data: Any, **kw: Any) -> Any:
        try:
            return json.loads(data, **kw)
        except (ValueError, RecursionError) as exc:  # binary garbage, or nested past the stack
            self._report(f"not JSON ({type(exc).__name__})", data)
            return None


START_RETRY_SECONDS = (2.0, 5.0, 10.0, 30.0)
"""Pauses between tries to start a platform whose server did not answer at start-up (Feishu,
Telegram), the last one repeated."""


def lost_connection(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what caused it) says the platform's server is away: a refused or
    dropped connection, a WebSocket closed, a network error of an adapter, a timeout."""
    import httpx
    import websockets
    from nonebot.exception import NetworkError, WebSocketClosed

    kinds = (
        OSError,
        TimeoutError,
        WebSocketClosed,
        NetworkError,
        httpx.TransportError,
        websockets.WebSocketException,
    )
    for _ in range(8):  # adapters wrap the transport's error ("raise NetworkError() from e")
        if exc is None:
            return False
        if isinstance(exc, kinds):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class Outages:
    """An adapter's log function (nonebot's ``logger_wrapper``: ``log(level, message, exc)``),
    except for the lines of a lost connection: the adapter logs each try to reconnect as an
    ERROR with the whole traceback, every few seconds for as long as the server is away (a
    platform restarting, or stopped before her). Here the first line of an outage is one short
    warning, the tries after it debug lines, until `back` (the adapter read from the server
    again) ends the outage; the next one is a warning again."""

    def __init__(
        self, platform: str, logger: logging.Logger, adapter_log: Callable[..., None]
    ) -> None:
        self.platform = platform
        self.logger = logger
        self.adapter_log = adapter_log
        self.down = False

    def __call__(self, level: str, message: str, exception: BaseException | None = None) -> None:
        if exception is not None and level in ("ERROR", "WARNING") and lost_connection(exception):
            if self.down:
                self.logger.debug("%s still away: %s", self.platform, why(exception))
                return
            self.down = True
            self.logger.warning(
                "%s: connection to the server lost (%s); retrying quietly until it is back",
                self.platform,
                why(exception)[:120],
            )
            return
        self.adapter_log(level, message, exception)

    def back(self) -> None:
        """The adapter read from the server: an outage, if any, is over."""
        if self.down:
            self.down = False
            self.logger.info("%s: connected to the server again", self.platform)


def fix_surrogates(text: str) -> str:
    """``text`` with each lone half of a UTF-16 pair (JSON may escape one alone; no store or
    encoder takes it) replaced by U+FFFD."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def install() -> None:
    """Guard every adapter's frame reading (idempotent)."""
    from nonebot_plugin_yuiju.frames import feishu, onebot, satori, telegram

    onebot.install()
    satori.install()
    telegram.install()
    feishu.install()
