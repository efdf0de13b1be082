"""The deterministic built-in model: the embedded default for demos and tests.

Without a script it answers "Echo: <last user message>" and never calls tools.
Scripted replies are consumed in order, one per request; once the queue is empty
it echoes again. Each `ScriptedReply` is also the test's handle on that reply:

    reply = adapter.enqueue(ScriptedReply(text="Planning…", hold=True))
    async with asyncio.timeout(5):                    # the model is "generating"
        await reply.started.wait()
    ...                                               # act mid-request
    reply.release()                                   # let it finish

A reply can also stream reasoning before its text, cut its deltas into `parts`
pieces spaced `delta_s` seconds apart, and wait `hold_s` seconds after its text
before finishing, so a person sees a long streamed answer, a plan review or
tool approvals without an API key. All waiting is cancellable: a cancelled
stream ends at once with outcome "cancelled".

Every answer reports its usage, estimated from the request's and the
answer's sizes (`estimate_tokens`); the model's context window is
`context_window` (32000 tokens unless given; a script file may set it).

A separately started runtime is scripted with a JSON file (see `load_script`),
named by AGENTHOST_BUILTIN_SCRIPT, e.g.

    {"context_window": 32000, "replies": [
      {"reasoning": "The user wants a plan.", "text": "Here is my plan.",
       "parts": 20, "delta_s": 0.1, "hold_s": 2,
       "tool_calls": [{"name": "exit_plan_mode", "args": {"plan": "# Plan"}}]},
      {"tool_calls": [{"name": "write_file", "args": {"path": "a.txt", "content": "hi"}}]},
      {"text": "Done."}
    ]}
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from services.agentruntime.models.base import (
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    Finish,
    ModelChunk,
    ModelError,
    ModelRequest,
    ReasoningDelta,
    StreamedAnswer,
    TextDelta,
    ToolCallRequest,
    Usage,
    UserMessage,
    estimate_tokens,
)

BUILTIN_NAME = "builtin"
BUILTIN_MODEL = "builtin-echo"
BUILTIN_CONTEXT_WINDOW = 32_000
BUILTIN_MAX_OUTPUT_TOKENS = 4096
# Replies are cut into this many deltas so consumers see a real stream.
DELTA_PARTS = 3

Outcome = Literal["completed", "error", "cancelled", "closed"]
_V = TypeVar("_V")


@dataclass
class ScriptedToolCall:
    name: str
    args: dict[str, Any] = field(default_factory=dict)
    # Generated ("builtin-call-<n>") when not given.
    call_id: str | None = None


@dataclass(eq=False)
class ScriptedReply:
    """One scripted answer: reasoning deltas, text deltas, then (after `hold_s`
    and, when `hold`, the gate) either the scripted error or the tool calls and
    Finish."""

    text: str = ""
    tool_calls: list[ScriptedToolCall] = field(default_factory=list)
    error: ModelError | None = None
    # When true the reply waits for `release()` after its text, before finishing.
    hold: bool = False
    # Streamed as ReasoningDelta pieces before the text.
    reasoning: str = ""
    # Seconds to wait after the text, before finishing (and before the gate).
    hold_s: float = 0
    # Seconds between two deltas.
    delta_s: float = 0
    # How many deltas the text and the reasoning are each cut into (at most).
    parts: int = DELTA_PARTS
    # Set when a request starts consuming this reply; `request` is that request.
    started: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    # Set when the reply stops streaming for any reason; `outcome` says which.
    ended: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    request: ModelRequest | None = field(default=None, init=False)
    outcome: Outcome | None = field(default=None, init=False)
    _gate: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("hold_s", "delta_s"):
            if not _seconds(getattr(self, name)):
                raise ValueError(f"{name} is a non-negative number of seconds")
        if not _count(self.parts):
            raise ValueError("parts is a whole number, at least 1")

    def deltas(self) -> list[ModelChunk]:
        """The reasoning's deltas, then the text's."""
        reasoning = [ReasoningDelta(piece) for piece in split_deltas(self.reasoning, self.parts)]
        return [*reasoning, *(TextDelta(piece) for piece in split_deltas(self.text, self.parts))]

    def release(self) -> None:
        """Let a held reply finish (harmless when not held or already released)."""
        self._gate.set()

    async def wait_released(self) -> None:
        if self.hold:
            await self._gate.wait()


# Requests the built-in model keeps (the latest): what a test looks at, and
# a bound for a demo stack that runs for days.
RECORDED_REQUESTS = 100


class BuiltinAdapter:
    """Deterministic scripted model; records the latest requests it receives."""

    name = BUILTIN_NAME

    def __init__(
        self,
        replies: Iterable[ScriptedReply] = (),
        *,
        model: str = BUILTIN_MODEL,
        context_window: int = BUILTIN_CONTEXT_WINDOW,
        max_output_tokens: int = BUILTIN_MAX_OUTPUT_TOKENS,
    ) -> None:
        self.model = model
        self.context_window = context_window
        self.max_output_tokens = min(max_output_tokens, context_window // 2)
        self.requests: deque[ModelRequest] = deque(maxlen=RECORDED_REQUESTS)
        self._replies: deque[ScriptedReply] = deque(replies)
        self._call_ids = itertools.count(1)

    @classmethod
    def from_script_file(
        cls,
        path: str | Path,
        *,
        model: str = BUILTIN_MODEL,
        context_window: int = BUILTIN_CONTEXT_WINDOW,
    ) -> BuiltinAdapter:
        """The script's replies; its `context_window` wins over the one given."""
        window = script_context_window(path, context_window)
        return cls(load_script(path), model=model, context_window=window)

    def enqueue(self, reply: ScriptedReply) -> ScriptedReply:
        self._replies.append(reply)
        return reply

    @property
    def pending(self) -> int:
        """Scripted replies not consumed yet."""
        return len(self._replies)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        self.requests.append(request)
        reply = self._replies.popleft() if self._replies else self._echo(request)
        reply.request = request
        reply.started.set()
        outcome: Outcome = "closed"
        try:
            answer = StreamedAnswer()
            async with aclosing(self._play(reply)) as chunks:
                async for chunk in chunks:
                    answer.add(chunk)
                    if isinstance(chunk, Finish):
                        yield self._usage(request, answer)
                    yield chunk
            outcome = "completed"
        except ModelError:
            outcome = "error"
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            reply.outcome = outcome
            reply.ended.set()

    async def aclose(self) -> None:
        """Nothing to release."""

    async def _play(self, reply: ScriptedReply) -> AsyncGenerator[ModelChunk, None]:
        deltas = reply.deltas()
        for number, delta in enumerate(deltas, 1):
            yield delta
            # Other tasks get a turn between deltas at least, as with a network stream.
            await asyncio.sleep(reply.delta_s if number < len(deltas) else 0)
        await asyncio.sleep(reply.hold_s)
        await reply.wait_released()
        if reply.error is not None:
            raise reply.error
        for call in reply.tool_calls:
            yield self._tool_call(call)
        yield Finish(FINISH_TOOL_CALLS if reply.tool_calls else FINISH_STOP)

    def _usage(self, request: ModelRequest, answer: StreamedAnswer) -> Usage:
        calls = [part for c in answer.tool_calls for part in (c.name, c.args_json)]
        completion = estimate_tokens(answer.text, answer.reasoning, *calls)
        return Usage(request.estimated_tokens(), completion, model=self.model, estimated=True)

    def _tool_call(self, call: ScriptedToolCall) -> ToolCallRequest:
        call_id = call.call_id or f"builtin-call-{next(self._call_ids)}"
        return ToolCallRequest(call_id, call.name, json.dumps(call.args, ensure_ascii=False))

    @staticmethod
    def _echo(request: ModelRequest) -> ScriptedReply:
        last_user = next(
            (
                message.text
                for message in reversed(request.messages)
                if isinstance(message, UserMessage)
            ),
            "",
        )
        return ScriptedReply(text=f"Echo: {last_user}")


def split_deltas(text: str, parts: int = DELTA_PARTS) -> list[str]:
    """Cut text into at most `parts` non-empty pieces that join back to it."""
    if not text:
        return []
    size = math.ceil(len(text) / parts)
    return [text[start : start + size] for start in range(0, len(text), size)]


# --- JSON script files -----------------------------------------------------

_REPLY_KEYS = {"text", "reasoning", "tool_calls", "error", "hold_s", "delta_s", "parts"}
_CALL_KEYS = {"name", "args", "call_id"}
_ERROR_KEYS = {"message", "retryable", "status"}


def script_context_window(path: str | Path, default: int = BUILTIN_CONTEXT_WINDOW) -> int:
    """The script's `context_window` (`default` when it sets none)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        return default
    window = data.get("context_window", default)
    if not isinstance(window, int) or not _count(window):
        raise ValueError(f"{path}: context_window is a whole number, at least 1")
    return window


def load_script(path: str | Path) -> list[ScriptedReply]:
    """Read scripted replies from JSON: `{"replies": [...]}` or a bare list, each
    `{"text"?, "reasoning"?, "tool_calls"?: [{"name", "args"?, "call_id"?}],
    "error"?: {"message", "retryable"?, "status"?}, "hold_s"?, "delta_s"?,
    "parts"?}`. Unknown keys and wrong types are errors naming the file and the
    reply's index."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, dict):
        _check_keys(data, {"replies", "context_window"}, "script")
        data = data.get("replies", [])
    if not isinstance(data, list):
        raise ValueError(f"{path}: a script is a list of replies")
    return [parse_reply(item, f"{path}: reply {index}") for index, item in enumerate(data)]


def parse_reply(data: object, where: str) -> ScriptedReply:
    reply = _object(data, _REPLY_KEYS, where)
    calls = reply.get("tool_calls", [])
    if not isinstance(calls, list):
        raise ValueError(f"{where}: tool_calls is a list")
    error = reply.get("error")
    return ScriptedReply(
        text=_field(reply, "text", "", where),
        reasoning=_field(reply, "reasoning", "", where),
        tool_calls=[_parse_call(call, f"{where}: tool call {n}") for n, call in enumerate(calls)],
        error=None if error is None else _parse_error(error, f"{where}: error"),
        hold_s=_field(reply, "hold_s", 0, where),
        delta_s=_field(reply, "delta_s", 0, where),
        parts=_field(reply, "parts", DELTA_PARTS, where),
    )


def _parse_call(data: object, where: str) -> ScriptedToolCall:
    call = _object(data, _CALL_KEYS, where)
    name, args, call_id = call.get("name"), call.get("args", {}), call.get("call_id")
    if not isinstance(name, str) or not name or not isinstance(args, dict):
        raise ValueError(f"{where}: needs a non-empty name and an args object")
    if call_id is not None and not isinstance(call_id, str):
        raise ValueError(f"{where}: call_id is a string")
    return ScriptedToolCall(name=name, args=args, call_id=call_id)


def _parse_error(data: object, where: str) -> ModelError:
    error = _object(data, _ERROR_KEYS, where)
    message, retryable, status = (
        error.get("message"),
        error.get("retryable", False),
        error.get("status"),
    )
    if not isinstance(message, str) or not isinstance(retryable, bool):
        raise ValueError(f"{where}: needs a message string and a boolean retryable")
    if status is not None and not isinstance(status, int):
        raise ValueError(f"{where}: status is an integer")
    return ModelError(message, retryable=retryable, status=status)


def _field(reply: dict[str, Any], key: str, default: _V, where: str) -> _V:
    """`reply[key]` (or `default`), checked by the key's rule in `_FIELD_RULES`."""
    if key not in reply:
        return default
    valid, kind = _FIELD_RULES[key]
    if not valid(reply[key]):
        raise ValueError(f"{where}: {key} is {kind}, not {reply[key]!r}")
    value: _V = reply[key]
    return value


def _seconds(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


_FIELD_RULES: dict[str, tuple[Callable[[object], bool], str]] = {
    "text": (lambda value: isinstance(value, str), "a string"),
    "reasoning": (lambda value: isinstance(value, str), "a string"),
    "hold_s": (_seconds, "a non-negative number of seconds"),
    "delta_s": (_seconds, "a non-negative number of seconds"),
    "parts": (_count, "a whole number, at least 1"),
}


def _object(data: object, allowed: set[str], where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a JSON object")
    _check_keys(data, allowed, where)
    return data


def _check_keys(data: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}")
