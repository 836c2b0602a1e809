"""The LLM seam: a `ChatModel` protocol, the OpenAI-compatible implementation, a function-backed
fake for tests, and `ask_structured`, which validates JSON answers and retries with feedback.

Around the real model, in this order from the outside in: `MeteredModel` (a ``max_tokens`` bound
per purpose, every call counted), `CircuitBreaker` (stop asking during an outage), and
optionally `RecordingChatModel` (a cassette that `ReplayChatModel` replays with no network).
"""

from llm.breaker import CircuitBreaker
from llm.cassette import CassetteError, CassetteMismatch, RecordingChatModel, ReplayChatModel
from llm.errors import LLMError, LLMUnavailable, ModelRequestsBlocked, StructuredOutputFailed
from llm.model import (
    ChatMessage,
    ChatModel,
    ChatResult,
    JsonSchema,
    ToolCall,
    ToolChatModel,
    ToolChatResult,
    check_allow_model_requests,
)
from llm.openai_model import OpenAIChatModel
from llm.structured import (
    Attempt,
    RetryWithFeedback,
    StructuredOutcome,
    ask_structured,
    extract_json_text,
)
from llm.testing import FunctionChatModel
from llm.tokens import estimate_prompt_tokens, estimate_tokens
from llm.usage import PURPOSES, CallRecord, MeteredModel, Usage, UsageSink, UsageTotals

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
