"""What every fake platform shares: a Starlette app served by uvicorn on 127.0.0.1 in the test's
own event loop, the log of API calls the bot made, and the records tests assert on."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from email import policy
from email.parser import BytesParser
from types import TracebackType
from typing import Any, ClassVar, Literal, Self

import uvicorn
from starlette.applications import Starlette
from starlette.routing import BaseRoute

BadFrame = Literal["truncated", "garbage", "malformed", "unknown", "deep", "shape", "elements"]
"""What a misbehaving server (or a proxy in front of it) sends instead of a good event:

- ``truncated``: JSON cut off mid-object;
- ``garbage``: not JSON at all (an HTML error page, control bytes);
- ``malformed``: valid JSON in the right envelope, but the event inside lacks required fields;
- ``unknown``: a well-formed event of a type the adapter does not know;
- ``deep``: JSON nested 100,000 deep (past the decoder's recursion limit);
- ``shape``: JSON of the wrong shape where the envelope or the answer should be;
- ``elements``: a message from `DEFAULT_USER` in the group that @-mentions the bot and says
  `ELEMENTS_TEXT`, between message elements (segments, entities, post tags) the adapter cannot
  read: the readable rest is what a guarded adapter keeps.
"""

BAD_FRAMES: tuple[BadFrame, ...] = ("truncated", "garbage", "malformed", "unknown")
EDGE_FRAMES: tuple[BadFrame, ...] = ("garbage", "truncated", "deep", "shape", "malformed")
"""Frames that cannot become an event at all (`elements` is sent apart: it should be answered)."""
ELEMENTS_TEXT = "坏元素之外的话"
"""What the readable part of an ``elements`` frame says."""
DEEP = 100_000


def deep_json(depth: int = DEEP) -> str:
    """A JSON text nested ``depth`` arrays deep: valid, but past what ``json.loads`` recurses."""
    return "[" * depth + "]" * depth


@dataclass(frozen=True)
class Person:
    """Someone who writes to the bot, as the platform names them."""

    id: str
    """The platform's user id (``"20002"``, an open_id ``"ou_..."``)."""
    name: str
    """Display name."""


@dataclass(frozen=True)
class Sent:
    """A message the bot sent, in the terms every platform shares."""

    chat: str
    """Where it went, as the platform names the conversation (channel id, chat id, open_id)."""
    text: str
    """Its plain text (caption for media), mentions and quotes left out."""
    message_id: str
    """The id the fake gave it: reply to it with ``reply_to=``."""
    reply_to: str | None = None
    """The message it quotes, if any."""
    mentions: tuple[str, ...] = ()
    """Whom it mentions (@): user ids (on Telegram, ``@username`` for a mention by name)."""
    media: tuple[str, ...] = ()
    """Kinds of media it carries: ``"image"``, ``"sticker"``."""


@dataclass(frozen=True)
class ApiCall:
    """One API call the bot made, as the fake understood it."""

    name: str
    """The platform's name for it: ``message.create``, ``sendMessage``, ``POST im/v1/messages``."""
    params: dict[str, Any]
    """Its parameters, decoded as the platform types them."""
    files: dict[str, bytes] = field(default_factory=dict)
    """Uploaded files by form field name."""
    sent: Sent | None = None
    """The message it sent, when it sent one."""


class CallLog:
    """Every API call in arrival order; ``until_quiet`` hands out the ones not read yet."""

    def __init__(self) -> None:
        self.all: list[ApiCall] = []
        self._read = 0
        self._arrived = asyncio.Event()

    def record(self, call: ApiCall) -> None:
        self.all.append(call)
        self._arrived.set()

    async def until_quiet(self, quiet: float, first_within: float | None = None) -> list[ApiCall]:
        """The calls not read yet, once none has arrived for ``quiet`` seconds.

        ``first_within`` waits longer for the first new call (a bot that retries after a bad
        frame, a slow model); by default it is ``quiet`` too.
        """
        wait = quiet if first_within is None else first_within
        while True:
            self._arrived.clear()
            seen = len(self.all)
            try:
                await asyncio.wait_for(self._arrived.wait(), wait)
            except TimeoutError:
                if len(self.all) == seen:
                    break
            wait = quiet
        new, self._read = self.all[self._read :], len(self.all)
        return new

    async def wait_for(self, match: Callable[[ApiCall], bool], within: float) -> ApiCall:
        """The first call (read or not) that ``match`` accepts, waiting up to ``within`` s."""
        deadline = time.monotonic() + within
        while True:
            for call in self.all:
                if match(call):
                    return call
            left = deadline - time.monotonic()
            if left <= 0:
                names = [c.name for c in self.all]
                raise TimeoutError(f"no matching API call within {within} s; calls were {names}")
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), left)


class _LoopbackServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The test process owns its signals (pytest's Ctrl-C); a fake must not take them.
        yield


class FakePlatform:
    """Base of every fake: serves ``routes()`` on a free loopback port while the context is open.

    A subclass is one platform: its ``routes()`` speak the protocol, ``nonebot_config()`` tells the
    adapter where the fake is, and the ``send_*`` methods push events the way that platform does.
    """

    adapter: ClassVar[str]
    """Import path of the NoneBot adapter module that talks to this fake."""
    DEFAULT_USER: ClassVar[Person]
    """Who writes when a test does not say."""

    def __init__(self) -> None:
        self.calls = CallLog()
        self.port = 0
        """Where it listens once entered; set it before to choose (a platform that comes late)."""
        self.closing = asyncio.Event()
        """Set when the fake shuts down, so long-held requests (long polls) end at once."""
        self.app_url = ""
        """Where the NoneBot app listens (NoneBotApp sets it): webhook platforms post there."""
        self._server: _LoopbackServer | None = None
        self._serving: asyncio.Task[None] | None = None
        self._ids = 0

    # -- what a platform provides ---------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        raise NotImplementedError

    def nonebot_config(self) -> dict[str, Any]:
        """Keyword arguments for ``nonebot.init`` that point the adapter at this fake."""
        raise NotImplementedError

    async def wait_connected(self, within: float = 30.0) -> None:
        """Return once the adapter has connected (and can be sent events)."""
        raise NotImplementedError

    async def send_group_message(
        self,
        text: str = "",
        *,
        user: Person | None = None,
        mention_bot: bool = False,
        reply_to: str | None = None,
        image: bool = False,
        sticker: bool = False,
    ) -> str:
        """A message from ``user`` (DEFAULT_USER) in the fake's group, as this platform shapes it:
        an @ of the bot first, a quote of ``reply_to`` (an id a send or a ``Sent`` returned), an
        image, a sticker. Returns the new message's id."""
        raise NotImplementedError

    async def send_private_message(
        self,
        text: str = "",
        *,
        user: Person | None = None,
        reply_to: str | None = None,
        image: bool = False,
        sticker: bool = False,
    ) -> str:
        """The same in ``user``'s private chat with the bot. Returns the message id."""
        raise NotImplementedError

    async def send_bad_frame(self, kind: BadFrame) -> None:
        """Send one bad frame of ``kind`` the way this platform's transport would carry it."""
        raise NotImplementedError

    def successor(self) -> Self:
        """The same platform after a restart, to enter once this one has exited: a fake of the
        same class (default settings) on the same port, its ids going on from this one's (an
        adapter confirms what it has seen by id)."""
        after = type(self)()
        after.port, after.app_url, after._ids = self.port, self.app_url, self._ids
        return after

    # -- shared ---------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``, no trailing slash."""
        return f"http://127.0.0.1:{self.port}"

    def next_id(self) -> int:
        """A fresh number for message, update and event ids."""
        self._ids += 1
        return self._ids

    async def calls_until_quiet(
        self, quiet: float, first_within: float | None = None
    ) -> list[ApiCall]:
        """The API calls not read yet, once the bot has been quiet for ``quiet`` seconds."""
        return await self.calls.until_quiet(quiet, first_within)

    async def sent_until_quiet(self, quiet: float, first_within: float | None = None) -> list[Sent]:
        """The messages the bot sent since the last read, once it has been quiet."""
        return [c.sent for c in await self.calls.until_quiet(quiet, first_within) if c.sent]

    async def __aenter__(self) -> Self:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))  # 0: any free port
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            Starlette(routes=self.routes()),
            log_config=None,  # uvicorn's own would reconfigure logging for the whole test process
            log_level="warning",
            access_log=False,
            lifespan="off",
            http="h11",
            ws="websockets-sansio",
            timeout_graceful_shutdown=2,
        )
        self._server = _LoopbackServer(config)
        self._serving = asyncio.create_task(self._server.serve(sockets=[sock]))
        deadline = time.monotonic() + 5
        while not self._server.started:
            if self._serving.done() or time.monotonic() > deadline:
                raise RuntimeError(f"{type(self).__name__}: uvicorn did not start within 5 s")
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.closing.set()
        if self._server is not None and self._serving is not None:
            self._server.should_exit = True
            await asyncio.wait_for(self._serving, 10)
        self._server = self._serving = None


def tiny_png(rgb: tuple[int, int, int] = (255, 182, 193)) -> bytes:
    """A valid 1x1 PNG: what the fakes serve and accept as an image."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # 1x1, 8-bit RGB
    pixels = zlib.compress(b"\x00" + bytes(rgb))
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def parse_multipart(body: bytes, content_type: str) -> tuple[dict[str, str], dict[str, bytes]]:
    """Form fields and files of a multipart/form-data body (stdlib only: no python-multipart)."""
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = BytesParser(policy=policy.HTTP).parsebytes(head + body)
    fields: dict[str, str] = {}
    files: dict[str, bytes] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):
            payload = b""
        if part.get_filename() is not None:
            files[str(name)] = payload
        else:
            fields[str(name)] = payload.decode()
    return fields, files


def now_ms() -> int:
    return int(time.time() * 1000)
