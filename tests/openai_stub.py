"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests (no network beyond loopback).

Use it as a context manager::

    with OpenAIStub() as stub:
        stub.reply('{"action_id": "sleep"}', StubError(500), StubDelay(1.0, "late"))
        model = OpenAIChatModel(base_url=stub.base_url, api_key=None, model="stub")
        ...
        assert stub.requests[0]["messages"][-1]["content"] == "..."

or as a pytest plugin: `pytest_plugins = ["tests.openai_stub"]` in tests/conftest.py provides the
`openai_stub` fixture (a running stub, stopped after the test).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


@dataclass(frozen=True)
class StubError:
    """Answer with an HTTP error."""

    status: int
    """HTTP status code, e.g. 500 or 429."""
    body: Any = None
    """JSON body; None gives an OpenAI-style {"error": {...}} body."""


@dataclass(frozen=True)
class StubDelay:
    """Wait, then answer (to provoke client timeouts)."""

    seconds: float
    """How long to wait before answering."""
    answer: StubAnswer = "{}"
    """What to answer afterwards."""


@dataclass(frozen=True)
class StubCut:
    """Answer with text the provider cut off at the token limit (``finish_reason: "length"``)."""

    text: str


StubAnswer = str | StubError | StubDelay | StubCut
"""Assistant content, an HTTP error, a delayed answer, or a cut-off answer."""


@dataclass
class OpenAIStub:
    """Starlette app served by uvicorn on 127.0.0.1:<free port> in a background thread.

    Implements POST /v1/chat/completions; every other path is 404.
    """

    handler: Callable[[dict[str, Any]], StubAnswer] | None = None
    """Answers a request body when the `reply` queue is empty."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    """Every /chat/completions JSON body received, in order."""
    base_url: str = ""
    """'http://127.0.0.1:PORT/v1', set by `start`."""
    _queue: deque[StubAnswer] = field(default_factory=deque)
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None
    _stopping: asyncio.Event | None = None
    """Set on stop() so delayed answers end early; created in the server's event loop."""
    _loop: asyncio.AbstractEventLoop | None = None
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    def reply(self, *answers: StubAnswer) -> None:
        """Queue answers, consumed one per request in order."""
        self._queue.extend(answers)

    def start(self) -> None:
        """Serve on a free loopback port; returns once the server accepts connections."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        app = Starlette(routes=[Route("/v1/chat/completions", self._chat, methods=["POST"])])
        config = uvicorn.Config(
            app,
            # Loopback only; no logging config (uvicorn's default would reconfigure logging
            # for the whole test process), no lifespan or websocket machinery to import.
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            ws="none",
            http="h11",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._stopping = self._loop = None
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="openai-stub", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 5
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("OpenAIStub: uvicorn did not start within 5 s")
            time.sleep(0.005)
        self.base_url = f"http://127.0.0.1:{port}/v1"

    def stop(self) -> None:
        """Shut the server down and wait for its thread."""
        if self._server is None or self._thread is None:
            return
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._server.should_exit = True
        self._thread.join(timeout=5)
        if self._thread.is_alive():
            raise RuntimeError("OpenAIStub: server thread did not stop within 5 s")
        self._server = self._thread = None

    def __enter__(self) -> OpenAIStub:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def _chat(self, request: Request) -> Response:
        body: dict[str, Any] = await request.json()
        self.requests.append(body)
        if self._queue:
            answer = self._queue.popleft()
        elif self.handler is not None:
            answer = self.handler(body)
        else:
            answer = StubError(
                500, _error_body("OpenAIStub has no answer: call stub.reply(...) or set .handler")
            )
        while isinstance(answer, StubDelay):
            await self._delay(answer.seconds)
            answer = answer.answer
        if isinstance(answer, StubError):
            body_out = answer.body if answer.body is not None else _error_body("stub error")
            return JSONResponse(body_out, status_code=answer.status)
        if isinstance(answer, StubCut):
            return JSONResponse(self._completion(body, answer.text, finish_reason="length"))
        return JSONResponse(self._completion(body, answer))

    async def _delay(self, seconds: float) -> None:
        """Sleep, but end early on stop() so that shutdown never waits for a long delay."""
        if self._stopping is None:
            self._loop, self._stopping = asyncio.get_running_loop(), asyncio.Event()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    def _completion(self, body: dict[str, Any], content: str, finish_reason: str = "stop") -> dict[str, Any]:
        prompt = "".join(str(m.get("content", "")) for m in body.get("messages", []))
        prompt_tokens, completion_tokens = len(prompt) // 2, len(content) // 2
        return {
            "id": f"chatcmpl-stub-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "stub"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def _error_body(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "server_error", "param": None, "code": None}}


@pytest.fixture
def openai_stub() -> Iterator[OpenAIStub]:
    """A running `OpenAIStub`, stopped after the test."""
    with OpenAIStub() as stub:
        yield stub
