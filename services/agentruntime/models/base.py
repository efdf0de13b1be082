"""The model adapter interface used by the agent runtime's turn loop.

A `ModelAdapter` turns one `ModelRequest` (prompt sections, tool schemas and the
conversation) into a stream of `ModelChunk`s: reasoning deltas (a reasoning model's
thinking, e.g. DeepSeek's `reasoning_content`) and text deltas as they arrive,
complete tool calls, what the request used (`Usage`: the provider's token
counts, or an estimate from the request's size, see `estimate_tokens`), and
one final `Finish`. `StreamedAnswer` folds them into one
answer. Reasoning is shown to people but never sent back to the model: the
`ChatMessage` types do not carry it. Failures are `ModelError`s.

Cancellation: the runtime cancels the task consuming `stream()`. Consumers should
iterate under `contextlib.aclosing(adapter.stream(request))` so an adapter also
releases its resources when iteration stops between chunks.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agenthost.sessionlog.v1 import events_pb2

# Finish reasons the runtime can rely on; providers may report others verbatim.
FINISH_STOP = "stop"
FINISH_TOOL_CALLS = "tool_calls"
FINISH_LENGTH = "length"


# The estimator of a text's tokens when a provider reports none: UTF-8 bytes
# divided by this (about right for English and code with BPE tokenizers; it
# overestimates CJK text less than characters would underestimate it).
BYTES_PER_TOKEN = 4


class ModelError(Exception):
    """A failed model request. `retryable` says whether trying again may help;
    `context_overflow` that the provider refused the request as longer than
    the model's context window (the runtime compacts and tries once more)."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        status: int | None = None,
        context_overflow: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.status = status
        self.context_overflow = context_overflow

    def __repr__(self) -> str:
        return (
            f"ModelError({self.message!r}, retryable={self.retryable}, status={self.status}, "
            f"context_overflow={self.context_overflow})"
        )


# --- conversation messages -------------------------------------------------


@dataclass(frozen=True)
class Image:
    mime_type: str
    data: bytes
    # "sha256:<hex>" of a prompt's image, whose bytes the log keeps apart:
    # `data` is empty until the request is sent (images.py loads it).
    digest: str = ""


@dataclass(frozen=True)
class UserMessage:
    text: str
    # Images the user sent with it (sent by adapters that take images).
    images: tuple[Image, ...] = ()


@dataclass(frozen=True)
class ToolCallRequest:
    """A complete tool call asked for by the model (also a stream chunk)."""

    call_id: str
    name: str
    # JSON object of the arguments, as the model wrote it.
    args_json: str


@dataclass(frozen=True)
class AssistantMessage:
    text: str = ""
    tool_calls: tuple[ToolCallRequest, ...] = ()


@dataclass(frozen=True)
class ToolResultMessage:
    """What a tool call returned; `content` is the output, or the error when not ok."""

    call_id: str
    content: str
    ok: bool = True
    # Images the tool returned (sent by adapters that take images).
    images: tuple[Image, ...] = ()


ChatMessage = UserMessage | AssistantMessage | ToolResultMessage


# --- request and stream chunks ---------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """One model request. Sequences are stored as tuples so a recorded request
    keeps the shape it was sent with."""

    messages: Sequence[ChatMessage]
    sections: Sequence[events_pb2.PromptSection] = ()
    tools: Sequence[events_pb2.ToolSchema] = ()
    # Empty means "the adapter's configured model".
    model: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "sections", tuple(self.sections))
        object.__setattr__(self, "tools", tuple(self.tools))

    def system_prompt(self) -> str:
        return join_sections(self.sections)

    def estimated_tokens(self) -> int:
        """The request's size in tokens by `estimate_tokens`: the system
        prompt, the messages and the tool schemas, as a provider counts them."""
        parts: list[str] = [self.system_prompt()]
        for message in self.messages:
            parts += message_texts(message)
        for tool in self.tools:
            parts += [tool.name, tool.description, tool.parameters_json]
        return estimate_tokens(*parts)


def estimate_tokens(*texts: str) -> int:
    """Tokens of `texts` estimated as UTF-8 bytes / BYTES_PER_TOKEN (rounded
    up), plus a few per text for the framing a chat format adds."""
    total = sum(len(text.encode()) for text in texts)
    return -(-total // BYTES_PER_TOKEN) + 4 * len(texts)


# What an image counts for in an estimate of a request's size: about the
# tokens a provider counts for a screenshot (some 1,600), as text.
IMAGE_TOKENS_TEXT = "x" * (1600 * BYTES_PER_TOKEN)


def message_texts(message: ChatMessage) -> list[str]:
    match message:
        case UserMessage(text=text, images=images):
            return [text, *(IMAGE_TOKENS_TEXT for _ in images)]
        case ToolResultMessage(call_id=call_id, content=content):
            return [call_id, content]
        case AssistantMessage(text=text, tool_calls=calls):
            return [text, *(part for c in calls for part in (c.call_id, c.name, c.args_json))]


def join_sections(sections: Iterable[events_pb2.PromptSection]) -> str:
    """Sections in ascending `order` (stable for equal orders), blank ones dropped."""
    ordered = sorted(sections, key=lambda section: section.order)
    return "\n\n".join(section.text for section in ordered if section.text.strip())


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of the model's reasoning, streamed before (or between) its text."""

    text: str


@dataclass(frozen=True)
class Finish:
    reason: str = FINISH_STOP


@dataclass(frozen=True)
class Usage:
    """What one request used: the provider's figures, or (`estimated`) the
    adapter's estimate from the request's and the answer's sizes."""

    prompt_tokens: int
    completion_tokens: int
    # The part of prompt_tokens the provider served from its prompt cache.
    cached_prompt_tokens: int = 0
    # The provider's model id, as it answered (may differ from the one asked).
    model: str = ""
    estimated: bool = False


ModelChunk = TextDelta | ReasoningDelta | ToolCallRequest | Usage | Finish


@dataclass
class StreamedAnswer:
    """A whole answer folded from chunks (convenient for callers and tests)."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    finish: Finish | None = None
    usage: Usage | None = None

    def add(self, chunk: ModelChunk) -> None:
        match chunk:
            case TextDelta(text=text):
                self.text += text
            case ReasoningDelta(text=text):
                self.reasoning += text
            case ToolCallRequest():
                self.tool_calls.append(chunk)
            case Usage():
                self.usage = chunk
            case Finish():
                self.finish = chunk


class ModelAdapter(Protocol):
    @property
    def name(self) -> str:
        """The adapter kind, e.g. "builtin" or "openai-compatible"."""
        ...

    @property
    def model(self) -> str:
        """The model used when a request names none (logged in request/header)."""
        ...

    @property
    def context_window(self) -> int:
        """The model's context window in tokens: the runtime compacts the
        conversation before a request would fill too much of it."""
        ...

    @property
    def max_output_tokens(self) -> int:
        """The most tokens one answer may take (room kept free in the window)."""
        ...

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        """Reasoning and text deltas and complete tool calls in order, one
        Usage (before Finish), then one Finish."""
        ...

    async def aclose(self) -> None:
        """Release shared resources (HTTP connections); the adapter is unusable after."""
        ...
