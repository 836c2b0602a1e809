"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests (no network beyond loopback).

Use it as a context manager::

    with OpenAIStub() as stub:
        stub.reply('{"action_id": "sleep"}', StubError(500), StubDelay(1.0, "late"))
        model = OpenAIChatModel(base_url=stub.base_url, api_key=None, model="stub")
        ...
        assert stub.requests[0]["messages"][-1]["content"] == "..."

or as a pytest plugin: `pytest_plugins = ["tests.openai_stub"]` in tests/conftest.py provides the
`openai_stub` fixture (a running stub, stopped after the test).

A model that uses a tool is scripted with `StubToolCall` (a list of them: several calls in one
answer), answered as OpenAI's ``tool_calls``; the next request carries the tool's result::

    stub.reply(StubToolCall("propose_plan", {"kind": "invite", "when": "明天下午", ...}), "好呀")

`schema_following(seed)` is a handler that plays a model which follows the requested JSON schema
(from ``response_format``, or from the prompt in ``json_object`` mode), deterministic for the seed
and the request: ``OpenAIStub(handler=schema_following(7))``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import random
import re
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

from yuiju.llm.openai_model import JSON_OBJECT_INSTRUCTION
from yuiju.llm.testing import PHRASES, follow_schema


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


@dataclass(frozen=True)
class StubToolCall:
    """Answer with a call of one tool (``finish_reason: "tool_calls"``), as a model that decided
    to use it: ``stub.reply(StubToolCall("propose_plan", {"kind": "invite", ...}), "好呀")``. A list
    of them is one answer calling several."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    """The call's arguments: a dict (sent as JSON) or the raw JSON text."""
    text: str = ""
    """Content next to the call (a model's thinking aloud); usually empty."""


StubAnswer = str | StubError | StubDelay | StubCut | StubToolCall | list[StubToolCall]
"""Assistant content, an HTTP error, a delayed answer, a cut-off answer, or tool calls."""


@dataclass
class OpenAIStub:
    """Starlette app served by uvicorn on 127.0.0.1:<free port> in a background thread.

    Implements POST /v1/chat/completions; every other path is 404.
    """

    handler: Callable[[dict[str, Any]], StubAnswer] | None = None
    """Answers a request body when the `reply` queue is empty."""
    count_tokens: Callable[[str], int] = field(default=lambda text: len(text) // 2)
    """The usage the stub reports for a text (prompt: every message's content joined)."""
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

    def answer_by_line(self, answers: dict[str, str], otherwise: str = "嗯。") -> None:
        """Answer each request by the line said to her in it (its last user message): a daemon
        also asks the model on its own (a diary, a week's summary: which, depends on the day and
        hour a test runs at), so a queue of answers in order would hand her lines to those.
        They get ``otherwise``."""

        def by_line(body: dict[str, Any]) -> StubAnswer:
            said = next(
                (m["content"] for m in reversed(body["messages"]) if m["role"] == "user"), ""
            )
            return next((a for line, a in answers.items() if line in str(said)), otherwise)

        self.handler = by_line

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
        if isinstance(answer, StubToolCall | list):
            calls = [answer] if isinstance(answer, StubToolCall) else answer
            return JSONResponse(self._completion(body, calls[0].text if calls else "", calls=calls))
        return JSONResponse(self._completion(body, answer))

    async def _delay(self, seconds: float) -> None:
        """Sleep, but end early on stop() so that shutdown never waits for a long delay."""
        if self._stopping is None:
            self._loop, self._stopping = asyncio.get_running_loop(), asyncio.Event()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    def _completion(
        self,
        body: dict[str, Any],
        content: str,
        finish_reason: str = "stop",
        calls: list[StubToolCall] | None = None,
    ) -> dict[str, Any]:
        prompt = "".join(str(m.get("content", "")) for m in body.get("messages", []))
        prompt_tokens, completion_tokens = self.count_tokens(prompt), self.count_tokens(content)
        message: dict[str, Any] = {"role": "assistant", "content": content or None}
        if calls:
            finish_reason = "tool_calls"
            message["tool_calls"] = [
                {
                    "id": f"call_{next(self._ids)}",
                    "type": "function",
                    "function": {
                        "name": c.name,
                        "arguments": c.arguments
                        if isinstance(c.arguments, str)
                        else json.dumps(c.arguments, ensure_ascii=False),
                    },
                }
                for c in calls
            ]
        else:
            message["content"] = content
        return {
            "id": f"chatcmpl-stub-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "stub"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
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


OPTIONS_LINE = re.compile(r"^可选行为：(.+)$", re.MULTILINE)
PARAMS_LINE = re.compile(r"^(.+?)的 params：(\{.*\})$", re.MULTILINE)


def read_the_moment(schema: dict[str, Any], prompt: str) -> dict[str, Any]:
    """A decision schema as a model that reads the prompt follows it: only the actions the
    moment lists as options (``可选行为：``), and their params as the moment states them
    (``X的 params：{...}``). With the moment's own schema this changes nothing; with the stable
    one (a decision's shape only) it is what a capable model does with the prompt. Any other
    schema is returned as it is."""
    listed = OPTIONS_LINE.findall(prompt)
    branches_of = schema.get("anyOf", [])
    is_decision = "action" in schema.get("properties", {}) or any(
        "action" in b.get("properties", {}) for b in branches_of
    )
    if not listed or not is_decision:
        return schema
    options = listed[-1].split("、")
    stated = {name: json.loads(params) for name, params in PARAMS_LINE.findall(prompt)}
    if "anyOf" not in schema:  # a decision's shape only (a stable schema): the moment says it all
        branches = [
            {
                "properties": {
                    "action": {"const": name},
                    **({"params": stated[name]} if name in stated else {}),
                },
                "required": ["params"] if name in stated else [],
            }
            for name in options
        ]
        return {**schema, "anyOf": branches}
    branches = []
    for branch in schema["anyOf"]:
        props = branch.get("properties", {})
        action = props.get("action", {})
        names = action.get("enum") or ([action["const"]] if "const" in action else [])
        keep = [n for n in names if n in options]
        if not keep:
            continue
        props = {**props, "action": {"enum": keep} if "enum" in action else action}
        if "const" in action and action["const"] in stated:
            props["params"] = stated[action["const"]]
        branches.append({**branch, "properties": props})
    return {**schema, "anyOf": branches} if branches else schema


def schema_following(seed: int = 0, *, fill: float = 0.1) -> Callable[[dict[str, Any]], StubAnswer]:
    """A handler that answers like a model following the requested schema: the ``json_schema`` in
    ``response_format``, or in ``json_object`` mode the schema shown in the prompt (as
    `llm.openai_model` shows it). Plain requests get a short line.

    The n-th request draws from ``Random(f"{seed}|{n}")``: the same seed gives the same answers,
    and both output modes, whose schemas say the same in two forms, live the same life (the
    answers differ only in plan changes, which the json_object form leaves to the prompt's rules),
    so their prompts can be compared side by side. A decision schema is followed as the prompt
    narrows it (`read_the_moment`): the options it lists, the params it states."""
    order = itertools.count()

    def answer(body: dict[str, Any]) -> StubAnswer:
        rng = random.Random(f"{seed}|{next(order)}")
        schema = requested_schema(body)
        if schema is None:
            return rng.choice(PHRASES)
        prompt = "\n".join(str(m.get("content") or "") for m in body.get("messages", []))
        schema = read_the_moment(schema, prompt)
        return json.dumps(follow_schema(schema, rng, fill=fill), ensure_ascii=False)

    return answer


def requested_schema(body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a chat-completions request asks its answer to follow, if any."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return fmt["json_schema"]["schema"]
    if fmt.get("type") != "json_object":
        return None
    text = "\n".join(str(m.get("content") or "") for m in body.get("messages", []))
    shown = _json_after(text, JSON_OBJECT_INSTRUCTION.split("（")[0])
    if shown is None:
        raise ValueError("json_object request without a schema in its prompt")
    return shown


def _json_after(text: str, marker: str) -> Any:
    at = text.find(marker)
    if at < 0:
        return None
    start = text.index("{", text.index("\n", at))
    return json.JSONDecoder().raw_decode(text, start)[0]


def flat_prompt(body: dict[str, Any]) -> str:
    """A request's messages as a provider's prompt cache sees them: in order, role and content."""
    return "".join(f"<{m['role']}>{m.get('content') or ''}" for m in body["messages"])


def prefix_share(previous: str, current: str) -> float:
    """How much of ``current`` a cache holding ``previous`` can reuse: their longest common
    prefix over the length of ``current``."""
    n = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        n += 1
    return n / len(current) if current else 1.0


def _error_body(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "server_error", "param": None, "code": None}}


@pytest.fixture
def openai_stub() -> Iterator[OpenAIStub]:
    """A running `OpenAIStub`, stopped after the test."""
    with OpenAIStub() as stub:
        yield stub
