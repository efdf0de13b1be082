"""A fake OpenAI-compatible model provider: a real aiohttp server on 127.0.0.1.

Each request takes the next scripted `ProviderReply`: an error status with an
OpenAI-style error body, a dropped connection, or a 200 event stream. A stream's
items are sent in order: a dict is one `data:` chunk, a string is sent raw as
`data:` (e.g. "[DONE]"), a `Comment` is an SSE comment line (what providers send
to keep a connection alive), a `Pause` makes the server wait that long, and an
`asyncio.Event` makes it wait until the event is set (an event nobody sets
stalls the stream for good), so a test controls exactly what the client has seen
and when. The response headers go out before the first item. The server records
every request and notices when a client goes away mid-stream.

Instead of a queue, a `responder` may answer each request from its body (a
model that behaves: see `WindowedModel` in tests/support/windowed_model.py).
`ProviderReply.error_code` and `error_param` fill the OpenAI error body's
`code` and `param`, as in a real "context length exceeded" refusal
(`context_overflow_reply`).
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

DONE = "[DONE]"


@dataclass(frozen=True)
class Pause:
    """Wait this long before sending the next item."""

    seconds: float


@dataclass(frozen=True)
class Comment:
    """An SSE comment (`: text`), e.g. a keep-alive; carries no data."""

    text: str = "keep-alive"


StreamItem = dict[str, Any] | str | Comment | Pause | asyncio.Event


def keep_alive(seconds: float, every_s: float = 0.05) -> list[StreamItem]:
    """Keep-alive comments every `every_s` for about `seconds`, without data."""
    return [item for _ in range(round(seconds / every_s)) for item in (Comment(), Pause(every_s))]


@dataclass
class ProviderReply:
    status: int = 200
    stream: list[StreamItem] = field(default_factory=list)
    error_message: str = ""
    # Close the connection: before answering, or after the stream items when 200.
    drop: bool = False
    error_code: str | None = None
    error_param: str | None = None
    # A 200's content type (a server that is not an OpenAI-compatible API
    # answers with another).
    content_type: str = "text/event-stream; charset=utf-8"


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeProvider:
    def __init__(self) -> None:
        self.replies: deque[ProviderReply] = deque()
        self.requests: list[RecordedRequest] = []
        # Set when a client disconnects while its stream is being served.
        self.disconnected = asyncio.Event()
        self.url = ""
        # Answers every request from its body when set (the queue is unused).
        self.responder: Callable[[dict[str, Any]], ProviderReply] | None = None
        self._runner: web.AppRunner | None = None

    def enqueue(self, *replies: ProviderReply) -> None:
        self.replies.extend(replies)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        # handler_cancellation: a client disconnect cancels the handler, which is
        # how the server observes it.
        self._runner = web.AppRunner(app, handler_cancellation=True)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}/v1"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(
            RecordedRequest(
                request.path,
                {key.lower(): value for key, value in request.headers.items()},
                await request.json(),
            )
        )
        if self.responder is not None:
            reply = self.responder(self.requests[-1].body)
        elif not self.replies:
            return _error_response(500, "the test scripted no reply")
        else:
            reply = self.replies.popleft()
        if reply.drop and reply.status == 200 and not reply.stream:
            return _drop(request)
        if reply.status != 200:
            return _error_response(
                reply.status, reply.error_message, reply.error_code, reply.error_param
            )
        return await self._serve_stream(request, reply)

    async def _serve_stream(self, request: web.Request, reply: ProviderReply) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": reply.content_type})
        await response.prepare(request)
        try:
            for item in reply.stream:
                await _send_item(response, item)
        except (asyncio.CancelledError, ConnectionError):
            self.disconnected.set()
            raise
        if reply.drop:
            return _drop(request)
        await response.write_eof()
        return response


async def _send_item(response: web.StreamResponse, item: StreamItem) -> None:
    match item:
        case asyncio.Event():
            await item.wait()
        case Pause(seconds=seconds):
            await asyncio.sleep(seconds)
        case Comment(text=text):
            await response.write(f": {text}\n\n".encode())
        case str() | dict():
            payload = item if isinstance(item, str) else json.dumps(item)
            await response.write(f"data: {payload}\n\n".encode())


def _error_response(
    status: int, message: str, code: str | None = None, param: str | None = None
) -> web.Response:
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return web.json_response({"error": error}, status=status)


def context_overflow_reply(limit: int, requested: int, *, shape: str = "openai") -> ProviderReply:
    """A provider refusing a request longer than its window, as OpenAI
    (code `context_length_exceeded`) or DeepSeek (a generic code, the limit
    in the message) answer it."""
    if shape == "deepseek":
        message = (
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{requested} tokens ({requested} in the messages, 0 in the completion). Please "
            "reduce the length of the messages or completion."
        )
        return ProviderReply(status=400, error_message=message, error_code="invalid_request_error")
    message = (
        f"This model's maximum context length is {limit} tokens. However, your messages "
        f"resulted in {requested} tokens. Please reduce the length of the messages."
    )
    return ProviderReply(
        status=400,
        error_message=message,
        error_code="context_length_exceeded",
        error_param="messages",
    )


def _drop(request: web.Request) -> web.Response:
    assert request.transport is not None
    request.transport.close()
    return web.Response()


@asynccontextmanager
async def serving() -> AsyncIterator[FakeProvider]:
    """A fake provider listening for as long as the block runs."""
    server = FakeProvider()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


# --- chat.completion.chunk builders ----------------------------------------


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "deepseek-chat",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def text_chunk(text: str) -> dict[str, Any]:
    return chunk({"content": text})


def tool_fragment(
    index: int, *, call_id: str | None = None, name: str | None = None, arguments: str = ""
) -> dict[str, Any]:
    fragment: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        fragment |= {"id": call_id, "type": "function"}
        fragment["function"]["name"] = name
    return chunk({"tool_calls": [fragment]})


def finish_chunk(reason: str) -> dict[str, Any]:
    return chunk({}, finish_reason=reason)


def usage_chunk(
    prompt: int = 10, completion: int = 5, cached: int | None = None, model: str = "deepseek-chat"
) -> dict[str, Any]:
    """The trailing chunk `stream_options.include_usage` asks for (OpenAI's
    shape: `prompt_tokens_details.cached_tokens`)."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [],
        "usage": usage,
    }
