"""OpenAI-compatible streaming chat-completions adapter (DeepSeek API and peers).

POSTs `{base_url}/chat/completions` with `stream: true` and reads the
server-sent events with httpx-sse. Text deltas are yielded as they arrive; tool
calls are assembled from their indexed fragments and yielded, complete, at the
end of the stream (`[DONE]`, or the stream closing after a finish reason).
Connection errors, 429 and 5xx are retried with bounded exponential backoff, but
only while nothing has been yielded yet: after that a retry would repeat output
the runtime already consumed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import SSEError, aconnect_sse

from services.agentruntime.models.base import (
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    AssistantMessage,
    ChatMessage,
    Finish,
    ModelChunk,
    ModelError,
    ModelRequest,
    TextDelta,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)

log = logging.getLogger(__name__)

OPENAI_COMPAT_NAME = "openai-compatible"
ENV_BASE_URL = "AGENTHOST_MODEL_BASE_URL"
ENV_API_KEY = "AGENTHOST_MODEL_API_KEY"
ENV_MODEL = "AGENTHOST_MODEL"
DONE_SENTINEL = "[DONE]"
# Longest server error text carried into a ModelError.
MAX_ERROR_TEXT = 2000


@dataclass(frozen=True, kw_only=True)
class OpenAICompatConfig:
    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    # Total tries of one request, the first included.
    max_attempts: int = 4
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 8.0
    connect_timeout_s: float = 10.0
    # Longest silence between two stream chunks.
    read_timeout_s: float = 120.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> OpenAICompatConfig:
        """AGENTHOST_MODEL_BASE_URL and AGENTHOST_MODEL are required,
        AGENTHOST_MODEL_API_KEY is sent as a bearer token when set."""
        env = os.environ if env is None else env
        base_url, model = env.get(ENV_BASE_URL, ""), env.get(ENV_MODEL, "")
        if not base_url or not model:
            raise ValueError(f"{ENV_BASE_URL} and {ENV_MODEL} must both be set")
        return cls(base_url=base_url, model=model, api_key=env.get(ENV_API_KEY) or None)

    @property
    def completions_url(self) -> str:
        return f"{self.base_url.rstrip('/')}/chat/completions"

    def backoff_s(self, attempt: int, retry_after_s: float | None) -> float:
        """Delay before try `attempt + 1`; a server's Retry-After wins, within the cap."""
        delay = self.backoff_initial_s * 2.0 ** (attempt - 1)
        if retry_after_s is not None:
            delay = retry_after_s
        return min(delay, self.backoff_max_s)


class _RetryableFailure(ModelError):
    """A retryable failure with the server's Retry-After hint, if any."""

    def __init__(self, message: str, *, status: int | None, retry_after_s: float | None) -> None:
        super().__init__(message, retryable=True, status=status)
        self.retry_after_s = retry_after_s


class OpenAICompatAdapter:
    name = OPENAI_COMPAT_NAME

    def __init__(
        self, config: OpenAICompatConfig, *, client: httpx.AsyncClient | None = None
    ) -> None:
        self.config = config
        self.model = config.model
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(config.read_timeout_s, connect=config.connect_timeout_s)
        )

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        body = request_body(request, request.model or self.model)
        for attempt in range(1, self.config.max_attempts + 1):
            yielded = False
            try:
                async with aclosing(self._attempt(body)) as chunks:
                    async for chunk in chunks:
                        yielded = True
                        yield chunk
                return
            except _RetryableFailure as failure:
                if yielded or attempt == self.config.max_attempts:
                    raise ModelError(
                        failure.message, retryable=True, status=failure.status
                    ) from failure
                delay = self.config.backoff_s(attempt, failure.retry_after_s)
                log.warning(
                    "model request failed (%s), retry %d in %.2fs", failure.message, attempt, delay
                )
                await asyncio.sleep(delay)

    async def _attempt(self, body: dict[str, Any]) -> AsyncGenerator[ModelChunk, None]:
        """One HTTP exchange; transport failures become `_RetryableFailure`."""
        try:
            async with aconnect_sse(
                self._client,
                "POST",
                self.config.completions_url,
                json=body,
                headers=self._headers(),
            ) as source:
                await _raise_for_status(source.response)
                assembler = _StreamAssembler()
                async for event in source.aiter_sse():
                    for chunk in assembler.feed(event.data):
                        yield chunk
                    if assembler.done:
                        return
                for chunk in assembler.close():
                    yield chunk
        except SSEError as error:
            raise ModelError(
                f"not an event stream: {error}", retryable=False, status=None
            ) from error
        except httpx.TransportError as error:
            raise _RetryableFailure(
                f"connection to the model failed: {error!r}", status=None, retry_after_s=None
            ) from error

    def _headers(self) -> dict[str, str]:
        if self.config.api_key is None:
            return {}
        return {"Authorization": f"Bearer {self.config.api_key}"}


# --- request mapping -------------------------------------------------------


def request_body(request: ModelRequest, model: str) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    system = request.system_prompt()
    if system:
        messages.append({"role": "system", "content": system})
    messages.extend(chat_message(message) for message in request.messages)
    body: dict[str, Any] = {"model": model, "messages": messages, "stream": True}
    if request.tools:
        # Some providers reject an empty tools array, so it is only sent when needed.
        body["tools"] = [
            function_tool(tool.name, tool.description, tool.parameters_json)
            for tool in request.tools
        ]
    return body


def chat_message(message: ChatMessage) -> dict[str, Any]:
    match message:
        case UserMessage(text=text):
            return {"role": "user", "content": text}
        case ToolResultMessage(call_id=call_id, content=content):
            return {"role": "tool", "tool_call_id": call_id, "content": content}
        case AssistantMessage(text=text, tool_calls=calls):
            if not calls:
                return {"role": "assistant", "content": text}
            return {
                "role": "assistant",
                "content": text or None,
                "tool_calls": [
                    {
                        "id": call.call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.args_json},
                    }
                    for call in calls
                ],
            }


def function_tool(name: str, description: str, parameters_json: str) -> dict[str, Any]:
    try:
        parameters = json.loads(parameters_json) if parameters_json else {}
    except json.JSONDecodeError as error:
        raise ModelError(
            f"tool {name!r} has an invalid parameters schema: {error}", retryable=False
        ) from error
    if not parameters:
        parameters = {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


# --- response handling -----------------------------------------------------


async def _raise_for_status(response: httpx.Response) -> None:
    if response.status_code == 200:
        return
    await response.aread()
    status = response.status_code
    message = f"model server answered {status}: {_server_message(response)}"
    if status == 429 or status >= 500:
        raise _RetryableFailure(message, status=status, retry_after_s=_retry_after_s(response))
    raise ModelError(message, retryable=False, status=status)


def _server_message(response: httpx.Response) -> str:
    """The OpenAI-style `error.message`, else the raw body (shortened)."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return response.text[:MAX_ERROR_TEXT] or response.reason_phrase


def _retry_after_s(response: httpx.Response) -> float | None:
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None  # absent, or an HTTP date: use our own backoff


@dataclass
class _PartialCall:
    call_id: str = ""
    name: str = ""
    arguments: str = ""


class _StreamAssembler:
    """Turns `data:` payloads into chunks: text deltas at once; tool calls (from
    indexed fragments) and Finish at the end, since trailing chunks (usage) may
    follow the finish reason."""

    def __init__(self) -> None:
        self.done = False
        self._calls: dict[int, _PartialCall] = {}
        self._finish_reason: str | None = None

    def feed(self, data: str) -> list[ModelChunk]:
        if data.strip() == DONE_SENTINEL:
            return self._finish()
        if not data.strip():
            return []
        payload = _parse_payload(data)
        chunks: list[ModelChunk] = []
        for choice in payload.get("choices") or []:
            chunks.extend(self._choice(choice))
        return chunks

    def close(self) -> list[ModelChunk]:
        """The stream closed without [DONE]: complete only if a choice finished."""
        if self._finish_reason is None:
            raise _RetryableFailure(
                "model stream ended before it finished", status=None, retry_after_s=None
            )
        return self._finish()

    def _choice(self, choice: dict[str, Any]) -> list[ModelChunk]:
        delta = choice.get("delta") or {}
        chunks: list[ModelChunk] = []
        if delta.get("content"):
            chunks.append(TextDelta(delta["content"]))
        for fragment in delta.get("tool_calls") or []:
            self._add_fragment(fragment)
        if choice.get("finish_reason"):
            self._finish_reason = str(choice["finish_reason"])
        return chunks

    def _add_fragment(self, fragment: dict[str, Any]) -> None:
        call = self._calls.setdefault(int(fragment.get("index", 0)), _PartialCall())
        call.call_id = fragment.get("id") or call.call_id
        function = fragment.get("function") or {}
        call.name = function.get("name") or call.name
        call.arguments += function.get("arguments") or ""

    def _finish(self) -> list[ModelChunk]:
        self.done = True
        chunks: list[ModelChunk] = [
            ToolCallRequest(call.call_id or f"call_{index}", call.name, call.arguments or "{}")
            for index, call in sorted(self._calls.items())
        ]
        default = FINISH_TOOL_CALLS if chunks else FINISH_STOP
        chunks.append(Finish(self._finish_reason or default))
        return chunks


def _parse_payload(data: str) -> dict[str, Any]:
    try:
        payload = json.loads(data)
    except json.JSONDecodeError as error:
        raise ModelError(f"malformed stream chunk: {data[:200]!r}", retryable=False) from error
    if not isinstance(payload, dict):
        raise ModelError(f"malformed stream chunk: {data[:200]!r}", retryable=False)
    failure = payload.get("error")
    if failure is not None:
        # Some providers report failures in-band, after the 200 status.
        message = failure.get("message") if isinstance(failure, dict) else str(failure)
        raise ModelError(f"model stream failed: {message}", retryable=False)
    return payload
