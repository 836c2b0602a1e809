"""Every call bounded and counted: a per-purpose model wrapper and the usage it reports.

`MeteredModel` sits in front of the real model. It gives each call the ``max_tokens`` bound of
its purpose (decide, chat, summary, diary, distill, proactive, converse) unless the caller set one, and
reports every request that left this process as a `CallRecord`, including failed ones: when the
provider did not count the prompt (a timeout, an HTTP error) its tokens are estimated from the
text and marked so, because a budget that cannot see failed calls cannot stop them. A request that
never reached the provider (a refused connection) is reported apart, as no call and no tokens.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from yuiju.llm.errors import LLMUnavailable
from yuiju.llm.model import ChatModel, ChatResult
from yuiju.llm.tokens import estimate_prompt_tokens, estimate_tokens
from yuiju.llm.wrapper import ChatModelWrapper

PURPOSES = ("decide", "chat", "summary", "diary", "distill", "proactive", "converse")
"""What calls are for; each has its own ``max_tokens`` bound (``[llm].max_tokens_<purpose>``)."""

DEFAULT_MAX_TOKENS = 600
"""The bound of a call whose purpose has none configured."""


@dataclass(frozen=True, kw_only=True)
class CallRecord:
    """One request that left this process, successful or not."""

    purpose: str
    model: str
    ok: bool
    """The provider answered (whether or not the answer was then accepted)."""
    error: str | None
    prompt_tokens: int
    completion_tokens: int
    estimated: bool
    """The token counts are estimates from the text: the provider did not report usage."""
    latency_ms: float
    max_tokens: int | None
    truncated: bool = False
    """The answer was cut at ``max_tokens``."""
    reached: bool = True
    """False: the request never reached the provider (connection refused, a connect timeout).
    Then it is no call and spent no tokens; it is kept apart (`Usage.unreached`)."""


UsageSink = Callable[[CallRecord], Awaitable[None]]
"""Receives every `CallRecord` (the ledger, the daily usage counters, a report)."""


@dataclass
class Usage:
    """Totals of some calls."""

    calls: int = 0
    failed: int = 0
    """Calls the provider did not answer (timeouts, HTTP errors, empty answers)."""
    prompt_tokens: int = 0
    """Input tokens, estimated ones included."""
    completion_tokens: int = 0
    estimated_prompt_tokens: int = 0
    """The part of ``prompt_tokens`` estimated from the text (failed calls)."""
    truncated: int = 0
    """Answers cut at their ``max_tokens`` bound."""
    unreached: int = 0
    """Requests that never reached the provider (not calls: no tokens, not in ``calls``)."""

    def add(self, call: CallRecord) -> None:
        if not call.reached:
            self.unreached += 1
            return
        self.calls += 1
        self.failed += not call.ok
        self.prompt_tokens += call.prompt_tokens
        self.completion_tokens += call.completion_tokens
        self.estimated_prompt_tokens += call.prompt_tokens if call.estimated else 0
        self.truncated += call.truncated


@dataclass
class UsageTotals:
    """A `UsageSink` that keeps totals by purpose in memory (``simulate``'s report), passing
    every record on to ``then`` (e.g. the persistent ledger)."""

    then: UsageSink | None = None
    by_purpose: dict[str, Usage] = field(default_factory=dict)

    async def __call__(self, call: CallRecord) -> None:
        self.by_purpose.setdefault(call.purpose, Usage()).add(call)
        if self.then is not None:
            await self.then(call)


class MeteredModel(ChatModelWrapper):
    """A `ToolChatModel` that bounds and counts every call of ``inner``.

    One instance per process wraps the shared model; `for_purpose` gives the same model with
    another default purpose (the bot's is "chat": its agent loop passes none).
    """

    def __init__(
        self,
        inner: ChatModel,
        *,
        max_tokens: Mapping[str, int] | None = None,
        purpose: str = "chat",
        sink: UsageSink | None = None,
    ) -> None:
        super().__init__(inner)
        self.bounds = dict(max_tokens or {})
        """``max_tokens`` by purpose; a purpose not listed gets `DEFAULT_MAX_TOKENS`."""
        self.purpose = purpose
        """The purpose of calls that name none."""
        self.sink = sink

    def __repr__(self) -> str:
        return f"MeteredModel({self.inner!r}, purpose={self.purpose!r})"

    def for_purpose(self, purpose: str) -> MeteredModel:
        """The same model, bounds and sink, with ``purpose`` as the default."""
        return MeteredModel(self.inner, max_tokens=self.bounds, purpose=purpose, sink=self.sink)

    def bound(self, purpose: str) -> int:
        return self.bounds.get(purpose, DEFAULT_MAX_TOKENS)

    async def around(self, kind: str, messages: Sequence[Any], options: dict[str, Any]) -> Any:
        purpose = options["purpose"] = options["purpose"] or self.purpose
        bound = options["max_tokens"] = options["max_tokens"] or self.bound(purpose)
        started = time.perf_counter()
        try:
            result = await self.call(kind, messages, options)
        except LLMUnavailable as exc:
            if exc.sent:
                await self._record(purpose, bound, messages, exc.result, exc, started)
            raise
        await self._record(purpose, bound, messages, result, None, started)
        return result

    async def _record(
        self,
        purpose: str,
        bound: int,
        messages: Sequence[Any],
        result: ChatResult | None,
        error: LLMUnavailable | None,
        started: float,
    ) -> None:
        if self.sink is None:
            return
        reached = error is None or error.reached
        counted = result is not None and result.prompt_tokens > 0
        if counted:
            assert result is not None
            prompt, completion = result.prompt_tokens, result.completion_tokens
        elif not reached:  # nothing reached the provider: nothing was spent
            prompt = completion = 0
        else:  # the provider did not count: estimate what was sent (and any text that came back)
            prompt = (error.prompt_tokens if error is not None else 0) or estimate_prompt_tokens(
                messages
            )
            completion = estimate_tokens(result.text) if result is not None else 0
        await self.sink(
            CallRecord(
                purpose=purpose,
                model=result.model if result else self.name,
                ok=error is None,
                error=str(error) if error is not None else None,
                prompt_tokens=prompt,
                completion_tokens=completion,
                estimated=not counted,
                latency_ms=result.latency_ms if result else (time.perf_counter() - started) * 1000,
                max_tokens=bound,
                truncated=bool(result and result.truncated),
                reached=reached,
            )
        )
