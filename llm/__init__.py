"""The LLM seam: a `ChatModel` protocol, the OpenAI-compatible implementation, a function-backed
fake for tests, and `ask_structured`, which validates JSON answers and retries with feedback.

Around the real model, in this order from the outside in: `MeteredModel` (a ``max_tokens`` bound
per purpose, every call counted), `CircuitBreaker` (stop asking during an outage), and
optionally `RecordingChatModel` (a cassette that `ReplayChatModel` replays with no network).
"""

from yuiju.llm.breaker import CircuitBreaker
from yuiju.llm.cassette import CassetteError, CassetteMismatch, RecordingChatModel, ReplayChatModel
from yuiju.llm.errors import LLMError, LLMUnavailable, ModelRequestsBlocked, StructuredOutputFailed
from yuiju.llm.model import (
    ChatMessage,
    ChatModel,
    ChatResult,
    JsonSchema,
    ToolCall,
    ToolChatModel,
    ToolChatResult,
    check_allow_model_requests,
)
from yuiju.llm.openai_model import OpenAIChatModel
from yuiju.llm.structured import (
    Attempt,
    RetryWithFeedback,
    StructuredOutcome,
    ask_structured,
    extract_json_text,
)
from yuiju.llm.testing import FunctionChatModel
from yuiju.llm.tokens import estimate_prompt_tokens, estimate_tokens
from yuiju.llm.usage import PURPOSES, CallRecord, MeteredModel, Usage, UsageSink, UsageTotals

__all__ = [
    "PURPOSES",
    "Attempt",
    "CallRecord",
    "CassetteError",
    "CassetteMismatch",
    "ChatMessage",
    "ChatModel",
    "ChatResult",
    "CircuitBreaker",
    "FunctionChatModel",
    "JsonSchema",
    "LLMError",
    "LLMUnavailable",
    "MeteredModel",
    "ModelRequestsBlocked",
    "OpenAIChatModel",
    "RecordingChatModel",
    "ReplayChatModel",
    "RetryWithFeedback",
    "StructuredOutcome",
    "StructuredOutputFailed",
    "ToolCall",
    "ToolChatModel",
    "ToolChatResult",
    "Usage",
    "UsageSink",
    "UsageTotals",
    "ask_structured",
    "check_allow_model_requests",
    "estimate_prompt_tokens",
    "estimate_tokens",
    "extract_json_text",
]
