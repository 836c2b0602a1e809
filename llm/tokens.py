"""Token estimates for text the provider never counted (failed calls, budgets, context sizes)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any


def estimate_tokens(text: str) -> int:
    """A CJK-aware estimate: 0.6 token per CJK character, 0.3 per other character, rounded up.

    DeepSeek's documented rule of thumb (api-docs.deepseek.com, "Token & Token Usage"); other
    tokenizers differ by a few tens of percent, which is fine for budgets and failed calls.
    """
    cjk = sum(
        1
        for c in text
        if "\u3000" <= c <= "\u9fff" or "\uf900" <= c <= "\ufaff" or "\uff00" <= c <= "\uffef"
    )
    return math.ceil(cjk * 0.6 + (len(text) - cjk) * 0.3)


def estimate_prompt_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """Estimated input tokens of chat messages (their text content and any tool calls)."""
    total = 0
    for message in messages:
        total += estimate_tokens(str(message.get("content") or ""))
        for call in message.get("tool_calls") or ():
            function = call.get("function", {}) if isinstance(call, Mapping) else {}
            total += estimate_tokens(
                str(function.get("name", "")) + str(function.get("arguments", ""))
            )
    return total
