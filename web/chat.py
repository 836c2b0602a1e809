"""The web chat on the observer page: talk to her in the browser (`message.local.LocalChat`, the
same chat core as her groups), one conversation per visitor name, people ``web:<name>``.

Routes (each guarded by the page's token, as every route of the page):

- ``GET  /chat/history?name=N``  the conversation so far (her session's recent messages), and
  whether she can answer here at all (and why not)
- ``POST /chat/send``            ``{"name": N, "text": …}`` (JSON): her answer once she is done;
  her lines also arrive one by one, paced as in a group, on the event stream
- ``GET  /chat/events?name=N``   server-sent events of the conversation: ``typing``, ``line``
  (with ``sticker``, its name, when the line is her sticker), ``done``
- ``GET  /chat/stickers/NAME``   her sticker's image, by its name among the stickers the chat
  service was given (never a path: any other name is 404); cached privately, as it is behind
  the token

Her stickers reach the page by name, in her lines and in the conversation read back (her context
keeps them as ``[表情包：开心]``), and the page shows the image; everything else she says is text.

Bad input is refused with a readable reason and nothing recorded, so the page puts the text back
in the box: a bad name or an empty message (400), too long (413, `[chat] max_input_chars`), not
JSON (415), sent by another site's page (403: a cross-site form or script cannot speak for a
visitor), too fast (429 with ``Retry-After``: a visitor past `[chat] user_messages_per_minute`,
an address past `[web] chat_per_minute`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import unicodedata
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from stat import S_ISREG
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, HTTPException, Request
from fastapi.params import Depends
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from redis.exceptions import RedisError

from yuiju.message.local import NOTES, BadName, ChatEvent, LocalChat, web_person
from yuiju.message.model import Conversation, Entry, clean_text

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
"""A send request's body at most (the text itself is bounded by `[chat] max_input_chars`)."""
KEEP_ALIVE_SECONDS = 15.0
HISTORY_LIMIT = 60
"""Messages the page shows of a conversation (her session keeps up to 200)."""
STICKER_CACHE = "private, max-age=86400"
"""A sticker's image is the same file while the chat runs (the folder is read at start), but
only for whoever holds the page's token: no shared cache keeps it; a day, then the ETag."""


class RateLimit:
    """At most ``per_minute`` hits per key in any 60 seconds; bounded memory for any number of
    keys (the oldest idle ones are forgotten first)."""

    def __init__(
        self,
        per_minute: int,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        max_keys: int = 10_000,
    ) -> None:
        self.per_minute = per_minute
        self.monotonic = monotonic
        self.max_keys = max_keys
        self._hits: dict[str, deque[float]] = {}

    def wait(self, key: str) -> float:
        """Seconds until ``key`` may hit again (0: now)."""
        hits = self._hits.get(key)
        if hits is None:
            return 0.0
        now = self.monotonic()
        while hits and now - hits[0] >= 60:
            hits.popleft()
        return 0.0 if len(hits) < self.per_minute else 60 - (now - hits[0])

    def hit(self, key: str) -> None:
        if key not in self._hits and len(self._hits) >= self.max_keys:
            del self._hits[next(iter(self._hits))]
        hits = self._hits.pop(key, None) or deque()
        hits.append(self.monotonic())
        self._hits[key] = hits  # re-inserted: the dict's order is the order of last use


@dataclass
class WebChat:
    """The web chat of one page: the chat, which character it is, and its limits."""

    chat: LocalChat
    per_address: RateLimit
    """`[web] chat_per_minute`, by the client's address."""
    per_visitor: RateLimit = field(init=False)
    """`[chat] user_messages_per_minute`, by person: the gate's own limit, refused up front."""

    def __post_init__(self) -> None:
        cfg = self.chat.service.cfg
        self.per_visitor = RateLimit(cfg.user_messages_per_minute)

    @classmethod
    def of(cls, chat: LocalChat, *, per_minute: int) -> WebChat:
        return cls(chat, RateLimit(per_minute))

    @property
    def character_id(self) -> str:
        return self.chat.card.id

    @property
    def max_chars(self) -> int:
        return self.chat.service.cfg.max_input_chars

    def box(self) -> dict[str, Any]:
        """What the page's chat box is drawn from."""
        card = self.chat.card
        return {
            "her": card.name,
            "available": self.chat.available,
            "why": self.chat.why or "",
            "max_chars": self.max_chars,
        }

    def person(self, name: object) -> tuple[str, str]:
        if not isinstance(name, str):
            raise _refuse(400, "先告诉她你的名字 / a visitor name is required (name)")
        try:
            return web_person(name, self.chat.card)
        except BadName as exc:
            raise _refuse(400, str(exc)) from None

    def message(self, text: object) -> str:
        """The visitor's text, cleaned; refused when empty or too long."""
        if not isinstance(text, str):
            raise _refuse(400, "消息要是文字 / text must be a string")
        text = "".join(
            c for c in clean_text(text, drop=True) if c in "\n\t" or unicodedata.category(c) != "Cc"
        ).strip()
        if not text:
            raise _refuse(400, "消息是空的，说点什么吧 / the message is empty")
        if len(text) > self.max_chars:
            raise _refuse(
                413,
                f"太长了：最多 {self.max_chars} 个字，现在 {len(text)} 个 / "
                f"the message is longer than {self.max_chars} characters",
            )
        return text

    def row(self, entry: Entry) -> dict[str, Any]:
        """One message as the page shows it; a line of hers that is one sticker's marker is that
        sticker (its name, and the text a live line carries); a visitor's text stays as typed."""
        when = entry.time.astimezone(self.chat.service.deps.tz)
        sticker = self.chat.stickers.line_sticker(entry.text) if entry.from_bot else None
        return {
            "id": entry.id,
            "me": not entry.from_bot,
            "name": entry.sender_name,
            "text": entry.text if sticker is None else sticker.fallback,
            "sticker": None if sticker is None else sticker.name,
            "time": when.strftime("%H:%M"),
            "day": when.strftime("%m-%d"),
        }


def _refuse(status: int, reason: str, **headers: str) -> HTTPException:
    return HTTPException(status, reason, headers=headers or None)


def _stores_down(exc: BaseException) -> HTTPException:
    log.warning("web chat: Redis is unavailable: %s", exc)
    return _refuse(
        503,
        f"存储暂时不可用，稍后再发 / Redis is unavailable: {type(exc).__name__}",
        **{"Retry-After": "5"},
    )


def _same_origin(request: Request) -> bool:
    """A browser names the page a request comes from (``Origin``); a request without one is not
    a cross-site page's (curl, the tests)."""
    origin = request.headers.get("origin")
    if not origin:
        return True
    return urlsplit(origin).netloc == request.headers.get("host", "")


def add_chat_routes(
    app: FastAPI, web: WebChat, *, guarded: list[Depends], stopping: asyncio.Event
) -> None:
    """The web chat's routes on the observer app (``guarded``: the page's token check)."""
    chat = web.chat

    @app.exception_handler(HTTPException)
    async def readable(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse(
            {"error": exc.detail}
            if request.url.path.startswith("/chat/")
            else {"detail": exc.detail},
            status_code=exc.status_code,
            headers=exc.headers,
        )

    @app.get("/chat/history", dependencies=guarded)
    async def history(name: str = "") -> dict[str, Any]:
        person, shown = web.person(name)
        try:
            entries = await chat.history(person, HISTORY_LIMIT)
        except (RedisError, OSError) as exc:
            raise _stores_down(exc) from exc
        return {
            "person": person,
            "name": shown,
            "her": chat.card.name,
            "available": chat.available,
            "why": chat.why,
            "messages": [web.row(e) for e in entries],
        }

    @app.post("/chat/send", dependencies=guarded)
    async def send(request: Request) -> dict[str, Any]:
        if not _same_origin(request):
            raise _refuse(403, "只能从观察页面本身发消息 / only the page itself may send")
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            raise _refuse(415, '要用 JSON 发送 / send JSON: {"name": ..., "text": ...}')
        size = request.headers.get("content-length")
        if size is not None and (not size.isdigit() or int(size) > MAX_BODY_BYTES):
            raise _refuse(413, f"请求太大 / the request is over {MAX_BODY_BYTES} bytes")
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            raise _refuse(413, f"请求太大 / the request is over {MAX_BODY_BYTES} bytes")
        try:
            data = json.loads(body)
        except ValueError:
            raise _refuse(400, "不是 JSON / the body is not JSON") from None
        if not isinstance(data, dict):
            raise _refuse(400, '要一个 JSON 对象 / send a JSON object {"name", "text"}')
        person, shown = web.person(data.get("name"))
        text = web.message(data.get("text"))
        address = request.client.host if request.client else "?"
        wait = max(web.per_visitor.wait(person), web.per_address.wait(address))
        if wait > 0:
            seconds = max(1, round(wait + 0.5))
            raise _refuse(
                429,
                f"发得太快了，{seconds} 秒后再发 / too many messages, try again in {seconds} s",
                **{"Retry-After": str(seconds)},
            )
        said_at = chat.service.deps.now().astimezone(chat.service.deps.tz)
        web.per_visitor.hit(person)
        web.per_address.hit(address)
        turn = asyncio.ensure_future(chat.say(person, shown, text))
        halt = asyncio.ensure_future(stopping.wait())
        try:
            # the turn goes on if the visitor leaves (a reload): what she says is recorded
            await asyncio.wait({turn, halt}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            halt.cancel()
        if not turn.done():
            turn.cancel()
            raise _refuse(503, "页面正在停止 / the page is stopping", **{"Retry-After": "5"})
        try:
            out = turn.result()
        except (RedisError, OSError) as exc:  # before anything was said: the page keeps the text
            raise _stores_down(exc) from exc
        return {
            "answered": out.answered,
            "replies": out.replies,
            "reason": out.reason,
            "note": "" if out.answered else NOTES.get(out.reason, ""),
            "time": said_at.strftime("%H:%M"),
        }

    @app.get("/chat/stickers/{name}", dependencies=guarded)
    async def sticker(name: str, request: Request) -> Response:
        found = chat.stickers.get(name)
        if found is None:
            raise _refuse(404, f"她没有叫“{name:.40}”的表情包 / no sticker named {name[:40]!r}")
        try:
            stat = await asyncio.to_thread(found.path.stat)
            if not S_ISREG(stat.st_mode):
                raise OSError("not a file")
        except OSError:
            log.warning("web chat: sticker %s is gone from %s since the start", name, found.path)
            raise _refuse(404, f"表情包“{name}”的文件不见了 / the sticker's file is gone") from None
        image = FileResponse(
            found.path,
            media_type=found.media_type,
            stat_result=stat,
            headers={"Cache-Control": STICKER_CACHE, "X-Content-Type-Options": "nosniff"},
        )
        etag = image.headers["etag"]
        if etag in (
            t.strip().removeprefix("W/")
            for t in request.headers.get("if-none-match", "").split(",")
        ):
            return Response(status_code=304, headers={"ETag": etag, "Cache-Control": STICKER_CACHE})
        return image

    @app.get("/chat/events", dependencies=guarded)
    async def events(name: str = "") -> StreamingResponse:
        person, _ = web.person(name)
        conversation = Conversation.private(person)

        async def feed() -> AsyncIterator[str]:
            with chat.listen(conversation) as queue:
                yield "retry: 3000\n: connected\n\n"
                halt = asyncio.ensure_future(stopping.wait())
                got: asyncio.Future[ChatEvent] | None = None
                try:
                    while not stopping.is_set():
                        got = asyncio.ensure_future(queue.get())
                        await asyncio.wait(
                            {got, halt},
                            timeout=KEEP_ALIVE_SECONDS,
                            return_when=asyncio.FIRST_COMPLETED,
                        )
                        if not got.done():
                            got.cancel()
                            if stopping.is_set():
                                return
                            yield ": keep-alive\n\n"
                            continue
                        yield _sse(got.result())
                finally:  # stopping, or the visitor went away (then we are cancelled)
                    halt.cancel()
                    if got is not None:
                        got.cancel()

        return StreamingResponse(
            feed(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )


def _sse(event: ChatEvent) -> str:
    return f"event: {event.kind}\ndata: {event.to_json()}\n\n"
