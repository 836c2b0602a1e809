"""The observer page: a read-only FastAPI app over the stores, and its uvicorn server.

Routes (all GET; nothing here changes the world; the web chat adds its own, `web.chat`):

- ``/``            the page (HTML; ``?character=<id>`` for another character of the town)
- ``/panel``       the page's live part alone, which the page's script swaps in on events
- ``/api/state``   the same data as JSON
- ``/events``      server-sent events from the Redis event stream (``Last-Event-ID`` resumes)
- ``/healthz``     whether both stores answer (200 or 503)

With ``[web].token`` set, every route needs it (``?token=``, ``Authorization: Bearer`` or the
``X-Yuiju-Token`` header): without it, 401 and no data. A store that is down gives 503 with a
readable message; the next request tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import re
import socket
from collections.abc import AsyncIterator
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import uvicorn
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from redis.exceptions import RedisError

from yuiju.memory.event_data import parse_event
from yuiju.storage.redis import decoded
from yuiju.web.view import Observer, StoresDown

if TYPE_CHECKING:
    from yuiju.web.chat import WebChat

log = logging.getLogger(__name__)

TEMPLATES = Path(__file__).with_name("templates")
SSE_BLOCK_MS = 2000
"""How long one XREAD waits; also how often a quiet stream sends a keep-alive comment."""
STOP_SECONDS = 1.0
"""The most a stop waits for the page's requests and streams to end."""
_STREAM_ID = re.compile(r"\d+-\d+\Z")

_env = Environment(
    loader=FileSystemLoader(TEMPLATES),
    autoescape=select_autoescape(["html", "j2"]),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if hasattr(value, "__dict__"):
        return {k: v for k, v in vars(value).items() if not k.startswith("_")}
    return str(value)


def create_app(
    observer: Observer, *, token: str | None = None, chat: WebChat | None = None
) -> FastAPI:
    """The observer app on these read handles; ``token`` guards every route when set; ``chat``
    adds the web chat (its box on the page of the character she is, and its routes)."""
    app = FastAPI(title="yuiju observer", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.observer = observer
    app.state.stopping = asyncio.Event()
    app.state.event_streams = 0
    """Event streams opened so far (the browser test checks the page's script connected)."""

    def authorize(request: Request) -> None:
        if token is None:
            return
        given = request.query_params.get("token") or request.headers.get("x-yuiju-token") or ""
        auth = request.headers.get("authorization", "")
        if not given and auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        if not hmac.compare_digest(given.encode(), token.encode()):
            raise HTTPException(
                401,
                "需要正确的访问令牌 / a valid access token is required",
                headers={"WWW-Authenticate": "Bearer"},
            )

    guarded = [Depends(authorize)]

    def character_of(request: Request) -> str:
        cid = request.query_params.get("character") or observer.character_ids[0]
        if cid not in observer.character_ids:
            raise HTTPException(404, f"没有这个角色 / no character {cid!r} in this town")
        return cid

    def page_context(request: Request, snap: dict[str, Any]) -> dict[str, Any]:
        query = {k: v for k, v in request.query_params.items() if k in ("token", "character")}
        links = [
            (cid, name, "?" + urlencode({**query, "character": cid}))
            for cid, name in snap["characters"]
        ]
        box = chat.box() if chat is not None and snap["character_id"] == chat.character_id else None
        return {
            **snap,
            "query": query,
            "query_json": json.dumps(query, ensure_ascii=False),
            "character_links": links,
            "chat": box,
            "chat_json": json.dumps(box, ensure_ascii=False) if box else "",
        }

    @app.exception_handler(StoresDown)
    async def stores_down(request: Request, exc: StoresDown) -> Response:
        log.warning("observer: %s", exc)
        if request.url.path.startswith(("/api/", "/healthz")):
            return JSONResponse(
                {"ok": False, "error": str(exc)}, status_code=503, headers={"Retry-After": "5"}
            )
        html = _env.get_template("down.html.j2").render(message=str(exc))
        return HTMLResponse(html, status_code=503, headers={"Retry-After": "5"})

    @app.get("/", response_class=HTMLResponse, dependencies=guarded)
    async def page(request: Request) -> HTMLResponse:
        snap = await observer.snapshot(character_of(request))
        return HTMLResponse(_env.get_template("page.html.j2").render(page_context(request, snap)))

    @app.get("/panel", response_class=HTMLResponse, dependencies=guarded)
    async def panel(request: Request) -> HTMLResponse:
        snap = await observer.snapshot(character_of(request))
        return HTMLResponse(_env.get_template("panel.html.j2").render(page_context(request, snap)))

    @app.get("/api/state", dependencies=guarded)
    async def state(request: Request) -> Response:
        snap = await observer.snapshot(character_of(request))
        snap = {k: v for k, v in snap.items() if k not in ("map", "charts")}
        body = json.dumps(snap, ensure_ascii=False, default=_json_default)
        return Response(body, media_type="application/json")

    @app.get("/healthz", dependencies=guarded)
    async def healthz() -> dict[str, Any]:
        return {"ok": True, **(await observer.ping())}

    @app.get("/events", dependencies=guarded)
    async def events(request: Request) -> StreamingResponse:
        redis, stream = observer.redis, observer.keys.events
        last = request.headers.get("last-event-id") or request.query_params.get("since") or ""
        if not _STREAM_ID.match(last):
            try:
                newest = await redis.xrevrange(stream, count=1)
            except (RedisError, OSError) as exc:
                raise StoresDown(
                    f"Redis 暂时无法读取 / Redis is unavailable: {type(exc).__name__}"
                ) from exc
            last = (decoded(newest[0][0]) if newest else None) or "0-0"

        async def feed(last: str) -> AsyncIterator[str]:
            yield "retry: 3000\n: connected\n\n"
            app.state.event_streams += 1
            stopping = asyncio.ensure_future(app.state.stopping.wait())
            read: asyncio.Future[Any] | None = None
            try:
                while True:
                    read = asyncio.ensure_future(
                        redis.xread({stream: last}, block=SSE_BLOCK_MS, count=100)
                    )
                    await asyncio.wait({read, stopping}, return_when=asyncio.FIRST_COMPLETED)
                    if not read.done():  # the server is stopping: end the stream now
                        return
                    try:
                        got = read.result()
                    except (RedisError, OSError) as exc:
                        yield f"event: stores\ndata: {json.dumps({'ok': False, 'error': type(exc).__name__})}\n\n"
                        await asyncio.wait({stopping}, timeout=SSE_BLOCK_MS / 1000)
                        continue
                    if not got:
                        yield ": keep-alive\n\n"
                        continue
                    for entry_id, fields in got[0][1]:
                        last = entry_id
                        if (sent := _sse(entry_id, fields)) is not None:
                            yield sent
            finally:  # stopping, or the client went away (then we are cancelled)
                stopping.cancel()
                if read is not None and not read.done():
                    read.cancel()
                    # redis-py may swallow the cancellation and end the read with an error later
                    # (redis/redis-py#2028): take it, so asyncio does not log it as never retrieved
                    read.add_done_callback(lambda f: f.cancelled() or f.exception())

        return StreamingResponse(
            feed(last),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    if chat is not None:
        from yuiju.web.chat import add_chat_routes

        add_chat_routes(app, chat, guarded=guarded, stopping=app.state.stopping)
    return app


def _sse(entry_id: str, fields: dict[str, str]) -> str | None:
    """One stream entry (fields type, character_id, time, data JSON) as a server-sent event;
    None for an entry that does not fit its event's model (warned once, `parse_event`)."""
    event = parse_event(entry_id, fields)
    if event is None:
        return None
    payload = {
        "type": event.type,
        "character_id": event.character_id or "",
        "time": event.time.isoformat() if event.time else "",
        "data": event.data.dump(),
    }
    kind = re.sub(r"[^A-Za-z0-9_]", "_", event.type) or "message"
    body = json.dumps(payload, ensure_ascii=False, default=str)
    return f"id: {entry_id}\nevent: {kind}\ndata: {body}\n\n"


# -- serving it inside the daemon's event loop --------------------------------------------------


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        # The daemon owns SIGINT/SIGTERM (they stop the engine, which stops us).
        yield


class ObserverServer:
    """uvicorn serving the app as a task in the running loop: `start`, `url`, `stop`."""

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 8765) -> None:
        self.app = app
        self.host = host
        self.port = port
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    async def start(self) -> str:
        """Bind (an `OSError` names a port in use) and serve in the background; return the URL."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        sock.set_inheritable(True)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_config=None,
            access_log=False,
            lifespan="off",
            # uvicorn annotates an int but waits any number of seconds (asyncio.wait_for)
            timeout_graceful_shutdown=STOP_SECONDS / 2,  # type: ignore[arg-type]
            log_level="warning",
        )
        self._server = _Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="observer-web")
        # uvicorn offers no started event to wait on
        while not self._server.started and not self._task.done():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        if self._task.done():
            self._task.result()  # raise what stopped it
        return self.url

    def request_stop(self) -> None:
        """Begin stopping: end the event streams, close the port (`stop` waits for it)."""
        self.app.state.stopping.set()
        if self._server is not None:
            self._server.should_exit = True

    async def stop(self) -> None:
        """Stop serving within `STOP_SECONDS`: a request still waiting on a store is cancelled."""
        from yuiju.tasks import finish

        self.request_stop()
        await finish(self._task, grace=STOP_SECONDS / 2, what="the observer page")
