"""The shape every model around a model shares (bounds and usage, the circuit breaker, the
cassette recorder and player): both calls of the seam funnel into one `around` to override."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, overload

from yuiju.llm.model import ChatMessage, ChatModel, ChatResult, JsonSchema, ToolChatResult


class RoutedChatModel:
    """A `ToolChatModel` whose two calls funnel into `around` (for models that are not HTTP
    clients: wrappers, the cassette player)."""

    name: str

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        json_schema: JsonSchema | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        purpose: str | None = None,
    ) -> ChatResult:
        return await self.around(
            "complete",
            messages,
            {
                "json_schema": json_schema,
                "temperature": temperature,
                "max_tokens": max_tokens,
                "purpose": purpose,
            },
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
        return await self.around(
            "complete_tools",
            messages,
            {
                "tools": tools,
                "temperature": temperature,
                "max_tokens": max_tokens,
                "purpose": purpose,
            },
        )

    @overload
    async def around(
        self, kind: Literal["complete"], messages: Sequence[Any], options: dict[str, Any]
    ) -> ChatResult: ...
    @overload
    async def around(
        self, kind: Literal["complete_tools"], messages: Sequence[Any], options: dict[str, Any]
    ) -> ToolChatResult: ...
    async def around(self, kind: str, messages: Sequence[Any], options: dict[str, Any]) -> Any:
        """Answer the call ``kind`` ('complete' or 'complete_tools') with its keyword ``options``."""
        raise NotImplementedError


class ChatModelWrapper(RoutedChatModel):
    """A `RoutedChatModel` around ``inner``: by default every call goes straight to it."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.name = inner.name

    async def around(self, kind: str, messages: Sequence[Any], options: dict[str, Any]) -> Any:
        return await self.call(kind, messages, options)

    async def call(self, kind: str, messages: Sequence[Any], options: dict[str, Any]) -> Any:
        """The call on ``inner``."""
        method = getattr(self.inner, kind, None)
        if method is None:
            raise TypeError(f"{self.inner!r} does not offer {kind}")
        return await method(messages, **options)

    async def aclose(self) -> None:
        """Close the inner model's connections."""
        if hasattr(self.inner, "aclose"):
            await self.inner.aclose()
