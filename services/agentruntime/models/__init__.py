"""Model adapters for the agent runtime's turn loop (see base.py for the contract)."""

from services.agentruntime.models.base import (
    AssistantMessage,
    ChatMessage,
    Finish,
    ModelAdapter,
    ModelChunk,
    ModelError,
    ModelRequest,
    ReasoningDelta,
    StreamedAnswer,
    TextDelta,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from services.agentruntime.models.builtin import BuiltinAdapter, ScriptedReply, ScriptedToolCall
from services.agentruntime.models.factory import adapter_from_env
from services.agentruntime.models.openai_compat import OpenAICompatAdapter, OpenAICompatConfig

__all__ = [
    "AssistantMessage",
    "BuiltinAdapter",
    "ChatMessage",
    "Finish",
    "ModelAdapter",
    "ModelChunk",
    "ModelError",
    "ModelRequest",
    "OpenAICompatAdapter",
    "OpenAICompatConfig",
    "ReasoningDelta",
    "ScriptedReply",
    "ScriptedToolCall",
    "StreamedAnswer",
    "TextDelta",
    "ToolCallRequest",
    "ToolResultMessage",
    "UserMessage",
    "adapter_from_env",
]
