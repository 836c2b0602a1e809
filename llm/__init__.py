"""The LLM seam: a `ChatModel` protocol, the OpenAI-compatible implementation, a function-backed
fake for tests, and `ask_structured`, which validates JSON answers and retries with feedback."""

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

__all__ = [
    "Attempt",
    "ChatMessage",
    "ChatModel",
    "ChatResult",
    "FunctionChatModel",
    "JsonSchema",
    "LLMError",
    "LLMUnavailable",
    "ModelRequestsBlocked",
    "OpenAIChatModel",
    "RetryWithFeedback",
    "StructuredOutcome",
    "StructuredOutputFailed",
    "ToolCall",
    "ToolChatModel",
    "ToolChatResult",
    "ask_structured",
    "check_allow_model_requests",
    "extract_json_text",
]
