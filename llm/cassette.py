"""Record every exchange with the model, and replay it with no network.

A cassette is a JSON-lines file: a header line (``{"cassette": "yuiju-llm", "version": 1,
"meta": {...}}``, the caller's run parameters), then one line per request with the request as the
caller made it (messages, schema, tools, temperature, max_tokens, purpose) and what came back:
the answer, or the error (a timeout, an HTTP 500), so that an outage replays as one.

`RecordingChatModel` wraps the real model; `ReplayChatModel` answers from a cassette. Requests
are matched by content (the same request asked twice gets its answers in recorded order), so a
run that asks the same things in the same order reproduces exactly; the first request that is
not in the cassette raises `CassetteMismatch`, naming it and where it differs from the request
recorded at that position.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from yuiju.llm.errors import LLMError, LLMUnavailable
from yuiju.llm.model import ChatModel, ChatResult, JsonSchema, ToolCall, ToolChatResult
from yuiju.llm.wrapper import ChatModelWrapper, RoutedChatModel

FORMAT = "yuiju-llm"
VERSION = 1


class CassetteError(LLMError):
    """A cassette file that cannot be read; the message names the file, the line and the fix."""


class CassetteMismatch(LLMError):
    """A replayed run asked something the recorded run did not: it diverged here."""

    def __init__(self, message: str, *, index: int) -> None:
        super().__init__(message)
        self.index = index
        """Position of the first request not found (0-based)."""


def request_of(
    kind: str,
    messages: Sequence[Any],
    *,
    json_schema: JsonSchema | None = None,
    tools: Sequence[dict[str, Any]] = (),
    temperature: float | None = None,
    max_tokens: int | None = None,
    purpose: str | None = None,
) -> dict[str, Any]:
    """A request as stored: plain JSON, everything that can change the answer."""
    return {
        "kind": kind,
        "purpose": purpose,
        "max_tokens": max_tokens,
        "temperature": temperature,
        "messages": [dict(m) for m in messages],
        "json_schema": asdict(json_schema) if json_schema is not None else None,
        "tools": [dict(t) for t in tools],
    }


def request_key(request: dict[str, Any]) -> str:
    return hashlib.sha256(
        json.dumps(request, ensure_ascii=False, sort_keys=True).encode()
    ).hexdigest()


def _result_doc(result: ChatResult) -> dict[str, Any]:
    doc = asdict(result)
    doc["tool_calls"] = [asdict(c) for c in getattr(result, "tool_calls", ())]
    return doc


def _result_of(doc: dict[str, Any], kind: str) -> ChatResult:
    fields = {k: v for k, v in doc.items() if k != "tool_calls"}
    if kind == "complete_tools":
        calls = tuple(ToolCall(**c) for c in doc.get("tool_calls", ()))
        return ToolChatResult(**fields, tool_calls=calls)
    return ChatResult(**fields)


class RecordingChatModel(ChatModelWrapper):
    """Passes every call to ``inner`` and appends the exchange to the cassette at ``path``
    (a new file; the header carries ``meta``)."""

    def __init__(
        self, inner: ChatModel, path: str | Path, *, meta: dict[str, Any] | None = None
    ) -> None:
        super().__init__(inner)
        self.path = Path(path)
        self.recorded = 0
        self._file: IO[str] = self.path.open("w", encoding="utf-8")
        self._write({"cassette": FORMAT, "version": VERSION, "meta": meta or {}})

    def __repr__(self) -> str:
        return f"RecordingChatModel({self.inner!r}, {str(self.path)!r})"

    def _write(self, doc: dict[str, Any]) -> None:
        # Line by line and flushed: a crash still leaves every exchange so far (a bug report).
        self._file.write(json.dumps(doc, ensure_ascii=False) + "\n")
        self._file.flush()

    async def around(self, kind: str, messages: Sequence[Any], options: dict[str, Any]) -> Any:
        entry: dict[str, Any] = {
            "n": self.recorded,
            "request": request_of(kind, messages, **options),
        }
        try:
            result = await self.call(kind, messages, options)
        except LLMUnavailable as exc:
            entry["error"] = {
                "message": str(exc),
                "retryable": exc.retryable,
                "sent": exc.sent,
                "reached": exc.reached,
                "prompt_tokens": exc.prompt_tokens,
                "result": _result_doc(exc.result) if exc.result else None,
            }
            self._write(entry)
            self.recorded += 1
            raise
        entry["response"] = _result_doc(result)
        self._write(entry)
        self.recorded += 1
        return result

    async def aclose(self) -> None:
        """Close the cassette and the inner model."""
        self._file.close()
        await super().aclose()


class ReplayChatModel(RoutedChatModel):
    """Answers from the cassette at ``path``; never touches the network."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.meta, self.entries = read_cassette(self.path)
        """The header's meta (the recorded run's parameters) and every exchange in order."""
        self.name = f"replay of {self.path.name}"
        self._by_key: dict[str, deque[dict[str, Any]]] = {}
        for entry in self.entries:
            self._by_key.setdefault(request_key(entry["request"]), deque()).append(entry)
        self.replayed = 0
        self.diverged: CassetteMismatch | None = None
        """The first divergence, kept so a caller that swallows exceptions can still stop."""

    def __repr__(self) -> str:
        return f"ReplayChatModel({str(self.path)!r}, {self.replayed}/{len(self.entries)} replayed)"

    @property
    def unused(self) -> int:
        """Recorded exchanges not asked for (yet)."""
        return sum(len(q) for q in self._by_key.values())

    async def around(self, kind: str, messages: Sequence[Any], options: dict[str, Any]) -> Any:
        return self._answer(request_of(kind, messages, **options))

    def _answer(self, request: dict[str, Any]) -> ChatResult:
        index = self.replayed
        queue = self._by_key.get(request_key(request))
        if not queue:
            self.diverged = CassetteMismatch(self._describe_miss(index, request), index=index)
            raise self.diverged
        entry = queue.popleft()
        self.replayed += 1
        if "error" in entry:
            error = entry["error"]
            result = _result_of(error["result"], request["kind"]) if error.get("result") else None
            raise LLMUnavailable(
                error["message"],
                retryable=error["retryable"],
                result=result,
                prompt_tokens=error.get("prompt_tokens", 0),
                sent=error.get("sent", True),
                reached=error.get("reached", True),
            )
        return _result_of(entry["response"], request["kind"])

    def _describe_miss(self, index: int, request: dict[str, Any]) -> str:
        head = (
            f"{self.path}: request #{index + 1} ({request['kind']}, purpose {request['purpose']!r}) is not "
            "in the cassette, so this run diverged from the recorded one here"
        )
        if index >= len(self.entries):
            return f"{head}: the recording has only {len(self.entries)} request(s). Record the run again."
        recorded = self.entries[index]["request"]
        where, was, now = first_difference(recorded, request)
        return (
            f"{head}. Request #{index + 1} of the recording differs at {where}:\n"
            f"  recorded: {was}\n  now:      {now}\n"
            "Same seed, days, start and config as the recording? A changed prompt, action or "
            "character card changes the requests too: then record the run again."
        )


def first_difference(recorded: Any, now: Any, where: str = "request") -> tuple[str, str, str]:
    """Where two requests first differ, with a short excerpt of both values there."""
    if isinstance(recorded, dict) and isinstance(now, dict):
        for key in [*recorded, *(k for k in now if k not in recorded)]:
            if recorded.get(key) != now.get(key):
                return first_difference(recorded.get(key), now.get(key), f"{where}.{key}")
    elif isinstance(recorded, list) and isinstance(now, list):
        for n, (a, b) in enumerate(zip(recorded, now, strict=False)):
            if a != b:
                return first_difference(a, b, f"{where}[{n}]")
        return f"{where} (length {len(recorded)} recorded, {len(now)} now)", "", ""
    elif isinstance(recorded, str) and isinstance(now, str):
        at = next(
            (n for n, (a, b) in enumerate(zip(recorded, now, strict=False)) if a != b),
            min(len(recorded), len(now)),
        )
        start = max(0, at - 30)
        return (
            f"{where}, character {at}",
            repr(recorded[start : at + 50]),
            repr(now[start : at + 50]),
        )
    return where, repr(recorded)[:120], repr(now)[:120]


def read_cassette(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header's meta and the exchanges of the cassette at ``path``."""
    if not path.exists():
        raise CassetteError(
            f"cassette {str(path)!r} does not exist; record one with "
            "`yuiju simulate --policy llm --record PATH`"
        )
    lines = path.read_text(encoding="utf-8").splitlines()
    try:
        header = json.loads(lines[0]) if lines else {}
    except json.JSONDecodeError as exc:
        raise CassetteError(f"{path}:1: not JSON ({exc}); is this a cassette?") from exc
    if header.get("cassette") != FORMAT or header.get("version") != VERSION:
        raise CassetteError(
            f"{path}:1: not a {FORMAT} cassette of version {VERSION} (header {lines[0][:80]!r})"
        )
    entries = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            entry = json.loads(line)
            if "request" not in entry or ("response" not in entry and "error" not in entry):
                raise ValueError("needs 'request' and 'response' or 'error'")
        except (json.JSONDecodeError, ValueError) as exc:
            raise CassetteError(
                f"{path}:{number}: not an exchange ({exc}); a cassette cut short by a "
                "crash can be replayed after deleting its last line"
            ) from exc
        entries.append(entry)
    return header.get("meta", {}), entries
