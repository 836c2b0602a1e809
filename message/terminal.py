"""`yuiju chat`: a conversation with her in the terminal, in private, as ``term:<os user>``.

Where the conversation runs. The daemon (`yuiju run`, `yuiju world`) holds the embedded memory
store, which one process at a time may open, and without her memory she could not say what she
did today (her life tools and the check of her claims read it). So while a daemon runs on this
data dir, `yuiju chat` talks to the daemon's own in-process chat (`message.local`) over a unix
socket next to the embedded Redis's, ``<data dir>/chat.sock`` (`TerminalServer`): owner-only,
so whoever connects is the user who owns her data (or root), and on Linux the daemon reads the
peer's user from the socket itself. Without a daemon, `open_here` builds the same chat in the
terminal's own process on the same stores; when the memory store is held anyway (`yuiju bot`
alone on the embedded store), she chats without it and the terminal says so.

The socket speaks JSON lines: the client sends ``{"user": …}``, the server answers ``{"hello":
Hello}``; then each ``{"text": …}`` gets the turn's `ChatEvent` lines, the last a ``done``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import socket
import struct
import uuid
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from yuiju.config import YuijuConfig
from yuiju.message.local import ChatEvent, LocalChat, build_local_chat, term_person

if TYPE_CHECKING:
    from yuiju.message.bot import Closer

log = logging.getLogger(__name__)

SOCKET_NAME = "chat.sock"
MAX_SOCKET_PATH = 100
"""Bytes of a unix socket's path at most (the system's limit is 104 to 108)."""
LINE_LIMIT = 256 * 1024
"""The longest JSON line either side reads."""
_TURN_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def socket_path(cfg: YuijuConfig) -> Path:
    """Where the daemon serves the terminal chat: in its data dir."""
    return cfg.data_path(SOCKET_NAME).absolute()


@dataclass(frozen=True)
class Hello:
    """Who talks to whom, and what she can do here."""

    her: str
    """Her name."""
    person: str
    """The terminal's person (``term:alice``)."""
    name: str
    available: bool
    """A chat model answers; otherwise ``why``."""
    why: str | None
    memory: bool
    """She remembers (and what is said here becomes memory)."""
    daemon: bool = False
    """The conversation runs in the daemon (True) or in this process."""
    memory_note: str = ""
    """Why she has no memory here, when she has none though it is enabled."""

    @classmethod
    def of(
        cls, chat: LocalChat, person: str, name: str, *, daemon: bool, memory_note: str = ""
    ) -> Hello:
        return cls(
            chat.card.name, person, name, chat.available, chat.why, chat.memory, daemon, memory_note
        )


class ChatLink(Protocol):
    """A terminal's conversation, wherever it runs."""

    hello: Hello

    def turn(self, text: str) -> AsyncIterator[ChatEvent]:
        """Say ``text``; her events until this turn's ``done``."""
        ...

    async def close(self) -> None: ...


class InProcessLink:
    """The conversation in this process (no daemon runs): the chat and the stores it opened."""

    def __init__(self, chat: LocalChat, hello: Hello, closers: list[Closer]) -> None:
        self.chat = chat
        self.hello = hello
        self.closers = closers

    def turn(self, text: str) -> AsyncIterator[ChatEvent]:
        return self.chat.turn(self.hello.person, self.hello.name, text)

    async def close(self) -> None:
        await _close_all(self.closers)


async def _close_all(closers: list[Closer]) -> None:
    """Run ``closers`` last-first, each bounded (a store that hangs never holds the exit)."""
    from yuiju.tasks import bounded

    while closers:
        closer = closers.pop()
        await bounded(
            closer, seconds=2.0, what=f"closing {getattr(closer, '__qualname__', closer)}"
        )


class SocketLink:
    """The conversation in the running daemon, over its socket."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, hello: Hello
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.hello = hello

    async def turn(self, text: str) -> AsyncIterator[ChatEvent]:
        turn_id = uuid.uuid4().hex[:16]
        self.writer.write(_line({"text": text, "id": turn_id}))
        await self.writer.drain()
        while True:
            raw = await self.reader.readline()
            if not raw:
                raise ConnectionError("the daemon ended the conversation (it is stopping?)")
            event = ChatEvent.from_json(raw)
            yield event
            if event.kind == "done" and event.ref == f"term-{turn_id}":
                return

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


def _line(data: dict[str, Any]) -> bytes:
    return (json.dumps(data, ensure_ascii=False) + "\n").encode()


async def connect(path: Path, user: str, *, wait_seconds: float = 5.0) -> SocketLink | None:
    """The daemon's conversation for ``user``, or None when no daemon serves ``path``."""
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        return None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(str(path), limit=LINE_LIMIT), wait_seconds
        )
    except (OSError, TimeoutError):
        return None  # a socket left by a daemon that died: nobody listens
    try:
        writer.write(_line({"user": user}))
        await writer.drain()
        raw = await asyncio.wait_for(reader.readline(), wait_seconds)
        hello = Hello(**json.loads(raw)["hello"])
    except (OSError, TimeoutError, ValueError, KeyError, TypeError) as exc:
        log.warning("the daemon's chat socket %s did not greet (%s); chatting here", path, exc)
        writer.close()
        return None
    return SocketLink(reader, writer, hello)


async def open_here(cfg: YuijuConfig, user: str) -> InProcessLink:
    """The conversation in this process, on the stores of ``cfg`` (no daemon serves it)."""
    from yuiju.memory.vectors import VectorStoreError
    from yuiju.storage.keys import Keys
    from yuiju.world.runtime import configured_model, open_stores, world_clock
    from yuiju.world.store import StateStore

    closers: list[Closer] = []
    handle, history = await open_stores(cfg)
    closers += [handle.aclose, history.close]
    try:
        keys = Keys(cfg.redis.prefix)
        clock = await world_clock(cfg, StateStore(handle.client, keys))
        model = configured_model(cfg, redis=handle.client, keys=keys, clock=clock)
        if model is not None:
            closers.append(model.aclose)
        memory, memory_note = None, ""
        if cfg.memory.enabled:
            from yuiju.memory.service import build_memory, open_semantic

            try:
                semantic = await open_semantic(cfg)
            except VectorStoreError as exc:
                memory_note = str(exc)
            else:
                closers.append(semantic.store.close)
                memory = await build_memory(
                    cfg,
                    history,
                    semantic,
                    character_id=cfg.chat.character_id or cfg.world.characters[0],
                    chat_model=model,
                )
        chat = await build_local_chat(
            cfg,
            clock=clock,
            web_token=cfg.web.token is not None,
            on_stop=closers,
            redis=handle.client,
            history=history,
            memory=memory,
            model=model,
        )
    except BaseException:
        await _close_all(closers)
        raise
    person, name = term_person(user)
    hello = Hello.of(chat, person, name, daemon=False, memory_note=memory_note)
    return InProcessLink(chat, hello, closers)


class TerminalServer:
    """The daemon's side of `yuiju chat`: the in-process chat on ``<data dir>/chat.sock``."""

    def __init__(self, chat: LocalChat, path: Path) -> None:
        self.chat = chat
        self.path = path
        self._server: asyncio.Server | None = None
        self._inode: int | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> bool:
        """Serve, or say in the log why not (False): a path too long for a socket, or another
        daemon serving it already."""
        if len(os.fsencode(self.path)) > MAX_SOCKET_PATH:
            log.warning(
                "`yuiju chat` cannot reach this daemon: the socket path %s is too long for the "
                "system; a shorter [app] data_dir fixes it",
                self.path,
            )
            return False
        if self.path.exists():
            other = await connect(self.path, "probe", wait_seconds=1.0)
            if other is not None:
                await other.close()
                log.warning(
                    "another daemon serves `yuiju chat` at %s; this one does not", self.path
                )
                return False
            self.path.unlink(missing_ok=True)  # left by a daemon that died
        # bound under a temporary name, made owner-only, then moved into place: the socket is
        # never reachable by others, even for a moment
        staging = self.path.with_name(f".{SOCKET_NAME}.{os.getpid()}")
        staging.unlink(missing_ok=True)
        self._server = await asyncio.start_unix_server(
            self._serve, path=str(staging), limit=LINE_LIMIT
        )
        os.chmod(staging, 0o600)
        os.replace(staging, self.path)
        self._inode = self.path.stat().st_ino
        return True

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        with contextlib.suppress(OSError):
            if self.path.stat().st_ino == self._inode:  # still ours, not a newer daemon's
                self.path.unlink()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._conversation(reader, writer)
        except (
            ConnectionError,
            asyncio.IncompleteReadError,
            ValueError,
            TypeError,
            KeyError,
        ) as exc:
            log.debug("terminal chat connection ended: %s", exc)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _conversation(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        first = json.loads(await reader.readline() or b"{}")
        claimed = str(first.get("user") or "user")
        person, name = term_person(_peer_user(writer) or claimed)
        hello = Hello.of(self.chat, person, name, daemon=True)
        writer.write(_line({"hello": asdict(hello)}))
        await writer.drain()
        while raw := await reader.readline():
            turn_id = ""
            try:
                request = json.loads(raw)
                text, turn_id = request["text"], str(request.get("id", ""))
                if not isinstance(text, str) or not _TURN_ID.fullmatch(turn_id):
                    raise TypeError('a turn is {"text": str, "id": [A-Za-z0-9_-]{1,64}}')
            except (ValueError, KeyError, TypeError) as exc:
                bad = ChatEvent("done", ref=f"term-{turn_id}", reason=f"bad request: {exc}")
                writer.write(bad.to_json().encode() + b"\n")
                await writer.drain()
                continue
            # closed at once when the terminal goes away (Ctrl-C): its turn ends with it
            events = self.chat.turn(person, name, text, message_id=f"term-{turn_id}")
            async with contextlib.aclosing(events):
                async for event in events:
                    writer.write(event.to_json().encode() + b"\n")
                    await writer.drain()


def _peer_user(writer: asyncio.StreamWriter) -> str | None:
    """The connecting process's user, from the socket (Linux: ``SO_PEERCRED``); None elsewhere."""
    sock = writer.get_extra_info("socket")
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or option is None:
        return None
    try:
        import pwd

        raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", raw)
        return pwd.getpwuid(uid).pw_name
    except (OSError, KeyError, ImportError):
        return None
