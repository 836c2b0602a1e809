"""Test doubles that ship next to the real model (pydantic-ai's `FunctionModel`)."""

from __future__ import annotations

import inspect
import json
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from yuiju.llm.model import ChatMessage, ChatResult, JsonSchema, ToolCall, ToolChatResult
from yuiju.llm.tokens import estimate_prompt_tokens, estimate_tokens

ChatFunc = Callable[[list[ChatMessage], JsonSchema | None], str | Awaitable[str]]
"""Plays the model: gets the messages and the requested schema, returns the answer text.
It may raise `LLMUnavailable` to simulate an outage. Through `complete_tools` it may also return a
`ToolCall`, a list of them, or a whole `ToolChatResult`."""


class FunctionChatModel:
    """A `ChatModel` whose answers come from a plain Python function (sync or async).

    >>> model = FunctionChatModel(lambda messages, schema: '{"action_id": "sleep"}')
    """

    def __init__(self, fn: ChatFunc, *, name: str = "function") -> None:
        self.fn = fn
        """The function that plays the model."""
        self.name = name
        """Identity for logs."""
        self.calls: list[list[ChatMessage]] = []
        """Every request's messages in order (copies), for assertions."""
        self.schemas: list[JsonSchema | None] = []
        """The `json_schema` of every request, parallel to `calls`."""
        self.tools: list[list[dict[str, Any]]] = []
        """The tools offered with every request, parallel to `calls` (empty for `complete`)."""
        self.max_tokens: list[int | None] = []
        """The ``max_tokens`` bound of every request, parallel to `calls`."""
        self.purposes: list[str | None] = []
        """The ``purpose`` of every request, parallel to `calls`."""

    def __repr__(self) -> str:
        return f"FunctionChatModel(name={self.name!r}, calls={len(self.calls)})"

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: JsonSchema | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        purpose: str | None = None,
    ) -> ChatResult:
        """Record the request and answer with `fn`; see `ChatModel.complete`."""
        sent = [dict(m) for m in messages]
        self._record(sent, json_schema, [], max_tokens, purpose)
        started = time.perf_counter()
        answer = self.fn([dict(m) for m in sent], json_schema)
        text = await answer if inspect.isawaitable(answer) else answer
        return ChatResult(
            text=text,
            model=self.name,
            prompt_tokens=estimate_prompt_tokens(sent),
            completion_tokens=estimate_tokens(text),
            latency_ms=(time.perf_counter() - started) * 1000,
            finish_reason="stop",
        )

    async def complete_tools(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] = (),
        temperature: float | None = None,
        max_tokens: int | None = None,
        purpose: str | None = None,
    ) -> ToolChatResult:
        """Record the request and answer with `fn` (text, `ToolCall`(s) or a `ToolChatResult`)."""
        sent = [dict(m) for m in messages]
        self._record(sent, None, [dict(t) for t in tools], max_tokens, purpose)
        started = time.perf_counter()
        answer: Any = self.fn([dict(m) for m in sent], None)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, ToolChatResult):
            return answer
        calls: tuple[ToolCall, ...] = ()
        text = ""
        if isinstance(answer, ToolCall):
            calls = (answer,)
        elif isinstance(answer, list | tuple):
            calls = tuple(answer)
        else:
            text = str(answer)
        return ToolChatResult(
            text=text,
            model=self.name,
            prompt_tokens=estimate_prompt_tokens(sent),
            completion_tokens=estimate_tokens(text),
            latency_ms=(time.perf_counter() - started) * 1000,
            finish_reason="tool_calls" if calls else "stop",
            tool_calls=calls,
        )

    def _record(
        self,
        sent: list[Any],
        schema: JsonSchema | None,
        tools: list[dict[str, Any]],
        max_tokens: int | None,
        purpose: str | None,
    ) -> None:
        self.calls.append(sent)
        self.schemas.append(schema)
        self.tools.append(tools)
        self.max_tokens.append(max_tokens)
        self.purposes.append(purpose)


# -- a model that follows the schema ------------------------------------------------------------

PHRASES = (
    "现在正好想这样做",
    "有点累了，先照顾一下自己",
    "天气不错，想出去走走",
    "想把今天过得充实一点",
    "肚子有点饿",
    "想换换心情",
    "先把该做的事做完",
)
"""What a schema-following fake writes into free-text fields (Chinese, like a real answer)."""


def follow_schema(schema: dict[str, Any], rng: random.Random, *, fill: float = 0.1) -> Any:
    """A random instance of ``schema`` (the JSON Schema subset providers and our prompts use).

    Understands ``$ref`` into ``$defs`` (with sibling keywords narrowing the target, as in JSON
    Schema 2019-09+), ``anyOf``/``oneOf``/``allOf``, ``const``, ``enum``, ``type`` (or a list of
    types), object ``properties``/``required``, array ``items``/``minItems``/``maxItems``/
    ``uniqueItems``, string ``minLength``/``maxLength`` and number bounds. Optional properties and
    nullable values are filled with probability ``fill``, as a model that leaves alone what it
    need not touch. A union picks a branch weighted by how many values its enums allow, so the
    choice among every offered value is uniform.

    Each value draws from its own generator, seeded from ``rng`` and its place in the document,
    so two schemas that say the same thing in different forms give the same answer.
    """
    return _Follower(schema, rng.getrandbits(64), fill).instance(schema, "$")


class _Follower:
    def __init__(self, root: dict[str, Any], seed: int, fill: float) -> None:
        self.defs = {**root.get("definitions", {}), **root.get("$defs", {})}
        self.seed = seed
        self.fill = fill

    def rng(self, path: str) -> random.Random:
        return random.Random(f"{self.seed}|{path}")

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        """``schema`` with ``$ref`` and ``allOf`` merged in (the referring keys narrow the target)."""
        if "$ref" in schema:
            target = self.resolve(self.defs[schema["$ref"].rsplit("/", 1)[-1]])
            schema = _merge(target, {k: v for k, v in schema.items() if k != "$ref"})
        for part in schema.get("allOf", ()):
            schema = _merge({k: v for k, v in schema.items() if k != "allOf"}, self.resolve(part))
        return schema

    def weight(self, schema: dict[str, Any]) -> int:
        schema = self.resolve(schema)
        for prop in schema.get("properties", {}).values():
            prop = self.resolve(prop)
            if "enum" in prop:
                return max(1, len(prop["enum"]))
            if "const" in prop:
                return 1
        return 1

    def instance(self, schema: dict[str, Any], path: str) -> Any:
        schema = self.resolve(schema)
        branches = schema.get("anyOf") or schema.get("oneOf")
        if branches:
            rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
            nullable = [b for b in branches if self.resolve(b).get("type") == "null"]
            if (
                nullable
                and len(nullable) < len(branches)
                and self.rng(f"{path}#null").random() >= self.fill
            ):
                return None
            options = [b for b in branches if b not in nullable] or branches
            chosen = self.rng(f"{path}#anyOf").choices(
                options, weights=[self.weight(b) for b in options]
            )[0]
            return self.instance(_merge(rest, self.resolve(chosen)), path)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return self.rng(path).choice(schema["enum"])
        kind = schema.get("type")
        if isinstance(kind, list):
            concrete = [k for k in kind if k != "null"]
            if "null" in kind and (not concrete or self.rng(f"{path}#null").random() >= self.fill):
                return None
            kind = self.rng(f"{path}#type").choice(concrete)
        if kind is None:
            kind = "object" if "properties" in schema else "string"
        return getattr(self, f"_{kind}")(schema, path)

    def _object(self, schema: dict[str, Any], path: str) -> dict[str, Any]:
        required = set(schema.get("required", ()))
        out = {}
        for name, prop in schema.get("properties", {}).items():
            if name in required or self.rng(f"{path}/{name}#fill").random() < self.fill:
                out[name] = self.instance(prop, f"{path}/{name}")
        return out

    def _array(self, schema: dict[str, Any], path: str) -> list[Any]:
        items = self.resolve(schema.get("items", {}))
        low = schema.get("minItems", 0)
        high = schema.get("maxItems", low + 2)
        if schema.get("uniqueItems") and "enum" in items:
            high = min(high, len(items["enum"]))
            rng = self.rng(path)
            return rng.sample(items["enum"], rng.randint(min(low, high), high))
        count = self.rng(f"{path}#len").randint(low, max(low, high))
        return [self.instance(items, f"{path}/{n}") for n in range(count)]

    def _string(self, schema: dict[str, Any], path: str) -> str:
        text = self.rng(path).choice(PHRASES)
        text = text[: schema.get("maxLength", len(text))]
        return text.ljust(schema.get("minLength", 0), "。")

    def _integer(self, schema: dict[str, Any], path: str) -> int:
        low = schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1)
        high = schema.get("maximum", schema.get("exclusiveMaximum", low + 101) - 1)
        return self.rng(path).randint(low, max(low, high))

    def _number(self, schema: dict[str, Any], path: str) -> float:
        return float(self._integer(schema, path))

    def _boolean(self, _schema: dict[str, Any], path: str) -> bool:
        return self.rng(path).random() < 0.5

    def _null(self, _schema: dict[str, Any], _path: str) -> None:
        return None


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``base`` narrowed by ``over``: properties merged by name, required lists united."""
    merged = {**base, **over}
    if "properties" in base and "properties" in over:
        merged["properties"] = {**base["properties"], **over["properties"]}
    if "required" in base and "required" in over:
        merged["required"] = list(dict.fromkeys([*base["required"], *over["required"]]))
    return merged


def schema_following(
    seed: int = 0,
    *,
    fill: float = 0.1,
    read: Callable[[dict[str, Any], str], dict[str, Any]] | None = None,
) -> ChatFunc:
    """For `FunctionChatModel`: answer every structured request with a random instance of its
    schema (deterministic for the seed and the request), anything else with a short line.
    ``read(schema, prompt)`` narrows the schema by what the prompt says, as a model reading it
    would (e.g. the options a decision prompt lists)."""

    def answer(messages: list[ChatMessage], schema: JsonSchema | None) -> str:
        rng = random.Random(f"{seed}|{json.dumps(messages, ensure_ascii=False, sort_keys=True)}")
        if schema is None:
            return rng.choice(PHRASES)
        followed = schema.schema
        if read is not None:
            followed = read(followed, "\n".join(m["content"] for m in messages))
        return json.dumps(follow_schema(followed, rng, fill=fill), ensure_ascii=False)

    return answer
