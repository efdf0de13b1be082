"""OpenAI-compatible streaming chat-completions adapter (DeepSeek API and peers).

POSTs `{base_url}/chat/completions` with `stream: true` (aiohttp) and reads the
server-sent events as they arrive (sse.py). Reasoning (`reasoning_content`, as DeepSeek's
`deepseek-reasoner` streams it before the answer) and text deltas are yielded as
they arrive; tool calls are assembled from their indexed fragments and yielded,
complete, at the end of the stream (`[DONE]`, or the stream closing after a
finish reason).

Time limits (config field, environment variable, default):

- `connect_timeout_s`, AGENTHOST_MODEL_CONNECT_TIMEOUT_S, 10: TCP/TLS connect.
- `first_byte_timeout_s`, AGENTHOST_MODEL_FIRST_BYTE_TIMEOUT_S, 120: from
  starting the request until its first SSE data event (keep-alive comments and
  events without data do not count).
- `idle_timeout_s`, AGENTHOST_MODEL_IDLE_TIMEOUT_S, 60: the longest wait for the
  next data event after the first.
- `total_timeout_s`, AGENTHOST_MODEL_TOTAL_TIMEOUT_S, 900: the whole `stream()`
  call, retries and backoff included.

They are asyncio timeouts around each wait; aiohttp only enforces the connect
limit. A limit that trips raises a `ModelError` naming it and its variable, e.g.
"the model sent nothing for 60 s (idle limit, AGENTHOST_MODEL_IDLE_TIMEOUT_S)".

Connection errors, the connect, first-byte and idle limits, 429 and 5xx are
retried (at most `max_attempts` tries, AGENTHOST_MODEL_MAX_ATTEMPTS) with bounded
exponential backoff, but only while nothing has been yielded yet: after that a
retry would repeat output the runtime already consumed, so the error is final
(still marked retryable). The total limit is final and not retryable; when it
leaves no time for a retry's backoff the call fails at once, naming the failure
it could not retry.

Usage: every request asks for it (`stream_options.include_usage`); the
trailing usage chunk becomes one `Usage` (prompt, completion and cached
prompt tokens, `prompt_tokens_details.cached_tokens` or DeepSeek's
`prompt_cache_hit_tokens`). A provider that sends none gets an estimate
from the request's and the answer's sizes (`estimate_tokens`: UTF-8 bytes
/ 4), marked estimated.

Context window: `context_window` (AGENTHOST_MODEL_CONTEXT_WINDOW, 128000
tokens) and `max_output_tokens` (AGENTHOST_MODEL_MAX_OUTPUT_TOKENS, 8192, at most a
quarter of the window).
A 400 (or 413) whose error says the request is longer than the model's
context (OpenAI's code `context_length_exceeded`, DeepSeek's "This model's
maximum context length is N tokens") is a ModelError with
`context_overflow` set, which the runtime answers by compacting.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import math
import os
from collections.abc import AsyncGenerator, Awaitable, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar
from urllib.parse import urlsplit

if TYPE_CHECKING:
    import aiohttp
    import yarl

from services.agentruntime.models.base import (
    FINISH_STOP,
    FINISH_TOOL_CALLS,
    AssistantMessage,
    ChatMessage,
    Finish,
    Image,
    ModelChunk,
    ModelError,
    ModelRequest,
    ReasoningDelta,
    StreamedAnswer,
    TextDelta,
    ToolCallRequest,
    ToolResultMessage,
    Usage,
    UserMessage,
    estimate_tokens,
)
from services.agentruntime.models.sse import EventDataDecoder

log = logging.getLogger(__name__)

OPENAI_COMPAT_NAME = "openai-compatible"
ENV_BASE_URL = "AGENTHOST_MODEL_BASE_URL"
ENV_API_KEY = "AGENTHOST_MODEL_API_KEY"
ENV_MODEL = "AGENTHOST_MODEL"
ENV_CONNECT_TIMEOUT = "AGENTHOST_MODEL_CONNECT_TIMEOUT_S"
ENV_FIRST_BYTE_TIMEOUT = "AGENTHOST_MODEL_FIRST_BYTE_TIMEOUT_S"
ENV_IDLE_TIMEOUT = "AGENTHOST_MODEL_IDLE_TIMEOUT_S"
ENV_TOTAL_TIMEOUT = "AGENTHOST_MODEL_TOTAL_TIMEOUT_S"
ENV_MAX_ATTEMPTS = "AGENTHOST_MODEL_MAX_ATTEMPTS"
ENV_CONTEXT_WINDOW = "AGENTHOST_MODEL_CONTEXT_WINDOW"
ENV_MAX_OUTPUT_TOKENS = "AGENTHOST_MODEL_MAX_OUTPUT_TOKENS"
DEFAULT_CONTEXT_WINDOW = 128_000
DEFAULT_MAX_OUTPUT_TOKENS = 8192
# What providers' "too long" refusals say (lower-cased), besides the code.
OVERFLOW_CODE = "context_length_exceeded"
OVERFLOW_PHRASES = (
    "maximum context length",
    "context length exceeded",
    "context_length_exceeded",
    "prompt is too long",
    "context window",
)
# "1": the model takes images (tools' images are sent as image_url parts).
ENV_IMAGES = "AGENTHOST_MODEL_IMAGES"
# Config field set by each timeout variable.
TIMEOUT_VARIABLES = {
    ENV_CONNECT_TIMEOUT: "connect_timeout_s",
    ENV_FIRST_BYTE_TIMEOUT: "first_byte_timeout_s",
    ENV_IDLE_TIMEOUT: "idle_timeout_s",
    ENV_TOTAL_TIMEOUT: "total_timeout_s",
}
DONE_SENTINEL = "[DONE]"
# Longest server error text carried into a ModelError.
MAX_ERROR_TEXT = 2000

_T = TypeVar("_T")


@dataclass(frozen=True, kw_only=True)
class OpenAICompatConfig:
    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    # Total tries of one request, the first included.
    max_attempts: int = 4
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 8.0
    # The time limits, in seconds (see the module docstring).
    connect_timeout_s: float = 10.0
    first_byte_timeout_s: float = 120.0
    idle_timeout_s: float = 60.0
    total_timeout_s: float = 900.0
    # The model's context window and the most one answer may take, in tokens.
    context_window: int = DEFAULT_CONTEXT_WINDOW
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    # Whether the model takes images (tool results' images are then sent).
    images: bool = False

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.context_window < 1 or self.max_output_tokens < 1:
            raise ValueError("context_window and max_output_tokens must be positive")
        for name in TIMEOUT_VARIABLES.values():
            value = getattr(self, name)
            if not _positive_seconds(value):
                raise ValueError(f"{name} must be a positive number of seconds, not {value!r}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> OpenAICompatConfig:
        """AGENTHOST_MODEL_BASE_URL and AGENTHOST_MODEL are required,
        AGENTHOST_MODEL_API_KEY is sent as a bearer token when set; the limits'
        variables override the defaults when set and not blank."""
        env = os.environ if env is None else env
        base_url, model = env.get(ENV_BASE_URL, ""), env.get(ENV_MODEL, "")
        if not base_url or not model:
            raise ValueError(f"{ENV_BASE_URL} and {ENV_MODEL} must both be set")
        return cls(
            base_url=base_url,
            model=model,
            api_key=env.get(ENV_API_KEY) or None,
            images=env.get(ENV_IMAGES, "").strip().lower() in ("1", "true", "yes"),
            **limits_from_env(env),
        )

    @property
    def completions_url(self) -> str:
        return f"{self.base_url.rstrip('/')}/chat/completions"

    def backoff_s(self, attempt: int, retry_after_s: float | None) -> float:
        """Delay before try `attempt + 1`; a server's Retry-After wins, within the cap."""
        delay = self.backoff_initial_s * 2.0 ** (attempt - 1)
        if retry_after_s is not None:
            delay = retry_after_s
        return min(delay, self.backoff_max_s)


def limits_from_env(env: Mapping[str, str]) -> dict[str, Any]:
    """Config fields from the timeout and attempt variables that are set; a bad
    value is a ValueError naming the variable and the value."""
    fields: dict[str, Any] = {}
    for variable, name in TIMEOUT_VARIABLES.items():
        raw = env.get(variable, "").strip()
        if raw:
            fields[name] = _env_seconds(variable, raw)
    raw = env.get(ENV_MAX_ATTEMPTS, "").strip()
    if raw:
        fields["max_attempts"] = _env_count(ENV_MAX_ATTEMPTS, raw)
    for variable, name in (
        (ENV_CONTEXT_WINDOW, "context_window"),
        (ENV_MAX_OUTPUT_TOKENS, "max_output_tokens"),
    ):
        raw = env.get(variable, "").strip()
        if raw:
            fields[name] = _env_count(variable, raw)
    return fields


def context_window_from_env(env: Mapping[str, str], default: int) -> int:
    """AGENTHOST_MODEL_CONTEXT_WINDOW when set (a bad value is a ValueError
    naming it), else `default`."""
    raw = env.get(ENV_CONTEXT_WINDOW, "").strip()
    return _env_count(ENV_CONTEXT_WINDOW, raw) if raw else default


def _env_seconds(variable: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not _positive_seconds(value):
        raise ValueError(f"{variable}={raw!r}: expected a positive number of seconds")
    return value


def _env_count(variable: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{variable}={raw!r}: expected a whole number, at least 1")
    return value


def _positive_seconds(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


# --- time limits -----------------------------------------------------------


@dataclass(frozen=True)
class TimeLimit:
    """One configured limit; `message` is the text of the error when it trips."""

    name: str
    variable: str
    seconds: float
    # What happened, with "{s}" for the seconds.
    what: str

    @property
    def message(self) -> str:
        happened = self.what.format(s=f"{self.seconds:g}")
        return f"{happened} ({self.name} limit, {self.variable})"


class TimeLimits(NamedTuple):
    connect: TimeLimit
    first_byte: TimeLimit
    idle: TimeLimit
    total: TimeLimit

    @classmethod
    def of(cls, config: OpenAICompatConfig) -> TimeLimits:
        return cls(
            TimeLimit(
                "connect",
                ENV_CONNECT_TIMEOUT,
                config.connect_timeout_s,
                "could not connect to the model within {s} s",
            ),
            TimeLimit(
                "first-byte",
                ENV_FIRST_BYTE_TIMEOUT,
                config.first_byte_timeout_s,
                "the model sent nothing for {s} s after the request",
            ),
            TimeLimit(
                "idle", ENV_IDLE_TIMEOUT, config.idle_timeout_s, "the model sent nothing for {s} s"
            ),
            TimeLimit(
                "total",
                ENV_TOTAL_TIMEOUT,
                config.total_timeout_s,
                "the model request took longer than {s} s in all",
            ),
        )


class _Clock:
    """The deadlines of one `stream()` call: each wait is bounded by its own
    limit and by what is left of the total."""

    def __init__(self, total: TimeLimit) -> None:
        self._loop = asyncio.get_running_loop()
        self._total = total
        self._total_at = self._loop.time() + total.seconds
        # The last failure retried, named when the total limit ends the call.
        self.last_failure = ""

    def now(self) -> float:
        return self._loop.time()

    def remaining(self) -> float:
        return self._total_at - self.now()

    async def within(
        self, limit: TimeLimit, awaitable: Awaitable[_T], *, since: float | None = None
    ) -> _T:
        """Await under `limit` counted from `since` (default now) and the total:
        `_RetryableFailure` when `limit` trips, the total's ModelError when it does."""
        since = self.now() if since is None else since
        try:
            async with asyncio.timeout_at(self.deadline(limit, since)) as scope:
                return await awaitable
        except TimeoutError:
            if not scope.expired():
                raise
            raise self.expired(limit, since) from None

    def deadline(self, limit: TimeLimit, since: float) -> float:
        return min(since + limit.seconds, self._total_at)

    def expired(self, limit: TimeLimit, since: float) -> ModelError:
        """The error of a wait under `limit` from `since` that its deadline ended."""
        if since + limit.seconds < self._total_at:
            return _RetryableFailure(limit.message, status=None, retry_after_s=None)
        return self.total_error()

    def total_error(self) -> ModelError:
        last = f"; last failure: {self.last_failure}" if self.last_failure else ""
        return ModelError(self._total.message + last, retryable=False)


class _Silence:
    """How long a stream may stay silent: until its next data event comes
    within `limit` of `since`, and within the total. One timer a stream, not
    one a read: a data event moves `since` (and the timer only when that
    brings the deadline nearer), and the timer, when it fires before the
    deadline, waits for it. When the deadline passes, the body's pending
    read fails with the limit's error."""

    # A timer that fires this close to the deadline counts as at it.
    SLACK_S = 1e-3

    def __init__(
        self, clock: _Clock, body: aiohttp.StreamReader, limit: TimeLimit, since: float
    ) -> None:
        self._clock, self._body = clock, body
        self._limit, self._since = limit, since
        self._timer = asyncio.get_running_loop().call_at(self._deadline(), self._check)

    def data(self, limit: TimeLimit) -> None:
        """A data event arrived: the next must come within `limit` of now."""
        self._limit, self._since = limit, self._clock.now()
        if self._deadline() < self._timer.when():  # the first: idle may be shorter
            self._timer.cancel()
            self._timer = asyncio.get_running_loop().call_at(self._deadline(), self._check)

    def cancel(self) -> None:
        self._timer.cancel()

    def _deadline(self) -> float:
        return self._clock.deadline(self._limit, self._since)

    def _check(self) -> None:
        deadline = self._deadline()
        if deadline - self._clock.now() > self.SLACK_S:
            self._timer = asyncio.get_running_loop().call_at(deadline, self._check)
        else:
            self._body.set_exception(self._clock.expired(self._limit, self._since))


class _RetryableFailure(ModelError):
    """A retryable failure with the server's Retry-After hint, if any."""

    def __init__(self, message: str, *, status: int | None, retry_after_s: float | None) -> None:
        super().__init__(message, retryable=True, status=status)
        self.retry_after_s = retry_after_s


class OpenAICompatAdapter:
    name = OPENAI_COMPAT_NAME

    def __init__(self, config: OpenAICompatConfig) -> None:
        self.config = config
        self.model = config.model
        self.context_window = config.context_window
        # A small window keeps most of itself for the conversation.
        self.max_output_tokens = min(config.max_output_tokens, config.context_window // 4)
        self.limits = TimeLimits.of(config)
        self._http: aiohttp.ClientSession | None = None
        self._http_loop: asyncio.AbstractEventLoop | None = None
        self._proxy: yarl.URL | None = None

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelChunk, None]:
        body = request_body(request, request.model or self.model, images=self.config.images)
        clock = _Clock(self.limits.total)
        for attempt in range(1, self.config.max_attempts + 1):
            yielded = False
            answer = StreamedAnswer()
            try:
                async with aclosing(self._attempt(body, clock)) as chunks:
                    async for chunk in chunks:
                        yielded = True
                        answer.add(chunk)
                        if isinstance(chunk, Finish) and answer.usage is None:
                            yield estimated_usage(request, answer, str(body["model"]))
                        yield chunk
                return
            except _RetryableFailure as failure:
                if yielded or attempt == self.config.max_attempts:
                    raise ModelError(
                        failure.message, retryable=True, status=failure.status
                    ) from failure
                await self._back_off(clock, attempt, failure)

    async def _back_off(self, clock: _Clock, attempt: int, failure: _RetryableFailure) -> None:
        clock.last_failure = failure.message
        delay = self.config.backoff_s(attempt, failure.retry_after_s)
        if delay >= clock.remaining():
            raise clock.total_error() from failure
        log.warning("model request failed (%s), retry %d in %.2fs", failure.message, attempt, delay)
        await asyncio.sleep(delay)

    async def _attempt(
        self, body: dict[str, Any], clock: _Clock
    ) -> AsyncGenerator[ModelChunk, None]:
        """One HTTP exchange; transport failures become `_RetryableFailure`."""
        import aiohttp  # loaded already by _client

        started = clock.now()
        try:
            response = await clock.within(self.limits.first_byte, self._send(body), since=started)
            try:
                if response.status != 200:
                    raise await clock.within(
                        self.limits.first_byte, _refusal(response), since=started
                    )
                _require_event_stream(response)
                async with aclosing(self._events(response.content, clock, started)) as chunks:
                    async for chunk in chunks:
                        yield chunk
            except BaseException:
                response.close()  # not back to the pool: the server may be mid-stream
                raise
            response.release()
        except aiohttp.ConnectionTimeoutError as error:
            raise _RetryableFailure(
                self.limits.connect.message, status=None, retry_after_s=None
            ) from error
        except aiohttp.InvalidURL as error:
            raise ModelError(
                f"the model's address is not a URL: {error}", retryable=False
            ) from error
        except aiohttp.ClientError as error:
            raise _RetryableFailure(
                f"connection to the model failed: {error!r}", status=None, retry_after_s=None
            ) from error

    async def _events(
        self, body: aiohttp.StreamReader, clock: _Clock, started: float
    ) -> AsyncGenerator[ModelChunk, None]:
        """The chunks of a 200 stream: the first data event within the first-byte
        limit of `started`, each later one within the idle limit of the one before
        (comments and empty events, such as keep-alives, do not count)."""
        assembler = _StreamAssembler()
        events = EventDataDecoder()
        silence = _Silence(clock, body, self.limits.first_byte, started)
        try:
            while block := await body.readany():
                for data in events.feed(block):
                    if not data.strip():
                        continue
                    silence.data(self.limits.idle)
                    for chunk in assembler.feed(data):
                        yield chunk
                    if assembler.done:
                        return
        finally:
            silence.cancel()
        for chunk in assembler.close():
            yield chunk

    async def _send(self, body: dict[str, Any]) -> aiohttp.ClientResponse:
        import aiohttp  # loaded already by _client

        client = self._client()
        proxy = self._proxy
        return await client.post(
            self.config.completions_url,
            json=body,
            headers=self._headers(),
            proxy=proxy,
            proxy_auth=aiohttp.BasicAuth.from_url(proxy) if proxy is not None else None,
        )

    def _client(self) -> aiohttp.ClientSession:
        """The HTTP client, made on first use in the running loop: the import
        waits too, so a stack whose model is never asked carries none of it."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._http.closed or self._http_loop is not loop:
            import aiohttp

            self._http = aiohttp.ClientSession(
                # Only the connect limit: reads are bounded by the limits above.
                timeout=aiohttp.ClientTimeout(total=None, connect=self.config.connect_timeout_s),
                # One stream per session that asks: no pool to wait for.
                connector=aiohttp.TCPConnector(limit=0),
            )
            self._http_loop = loop
            self._proxy = environment_proxy(self.config.completions_url)
        return self._http

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-store"}
        if self.config.api_key is not None:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        return headers


def environment_proxy(url: str) -> yarl.URL | None:
    """The proxy the environment names for `url` (HTTP_PROXY, HTTPS_PROXY,
    NO_PROXY, as curl and httpx read them), with its credentials if it has
    any. Not aiohttp's trust_env: it would also take ~/.netrc's login for the
    model's host, which aiohttp refuses beside our bearer token."""
    import urllib.request

    import yarl

    parts = urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxy = urllib.request.getproxies().get(parts.scheme)
    return yarl.URL(proxy) if proxy else None


# --- request mapping -------------------------------------------------------


def request_body(request: ModelRequest, model: str, *, images: bool = False) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    system = request.system_prompt()
    if system:
        messages.append({"role": "system", "content": system})
    mapped = [_with_user_images(m, chat_message(m), images) for m in request.messages]
    if images:
        mapped = _with_tool_images(request.messages, mapped)
    messages.extend(_joined_user_turns(mapped))
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        # Some providers reject an empty tools array, so it is only sent when needed.
        body["tools"] = [
            function_tool(tool.name, tool.description, tool.parameters_json)
            for tool in request.tools
        ]
    return body


def _joined_user_turns(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Adjacent user messages (a notice, a summary, then the prompt) as one:
    some providers (DeepSeek's reasoner) refuse two user turns in a row."""
    joined: list[dict[str, Any]] = []
    for message in messages:
        last = joined[-1] if joined else None
        if last is not None and last["role"] == message["role"] == "user":
            joined[-1] = {"role": "user", "content": _joined(last["content"], message["content"])}
        else:
            joined.append(message)
    return joined


def _joined(first: str | list[dict[str, Any]], second: str | list[dict[str, Any]]) -> Any:
    """Two user contents as one: text joined by a blank line, or parts in
    order when either has parts (a tool's images)."""
    if isinstance(first, str) and isinstance(second, str):
        return f"{first}\n\n{second}"
    return [*_parts(first), *_parts(second)]


def _parts(content: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def estimated_usage(request: ModelRequest, answer: StreamedAnswer, model: str) -> Usage:
    """The usage of a request whose provider reported none."""
    calls = [part for c in answer.tool_calls for part in (c.name, c.args_json)]
    completion = estimate_tokens(answer.text, answer.reasoning, *calls)
    return Usage(request.estimated_tokens(), completion, model=model, estimated=True)


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


IMAGES_NOT_SENT = "[The user sent {count} image(s) here, which this model cannot see.]"


def _with_user_images(message: ChatMessage, mapped: dict[str, Any], images: bool) -> dict[str, Any]:
    """A user message's images after its text as image_url parts (the one
    way images are sent, a tool's too); a model that takes none is told
    that there were some instead. An image whose bytes were not loaded is
    left out."""
    if not isinstance(message, UserMessage) or not message.images:
        return mapped
    if not images:
        note = IMAGES_NOT_SENT.format(count=len(message.images))
        return {**mapped, "content": f"{message.text}\n\n{note}"}
    parts = [_image_part(image) for image in message.images if image.data]
    return {**mapped, "content": [{"type": "text", "text": message.text}, *parts]}


def _with_tool_images(
    conversation: Sequence[ChatMessage], mapped: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Tool messages carry text only: the images of a step's tool results
    follow its run of tool messages as one user message of image_url parts."""
    images = {
        m.call_id: m.images for m in conversation if isinstance(m, ToolResultMessage) and m.images
    }
    if not images:
        return mapped
    out: list[dict[str, Any]] = []
    waiting: list[dict[str, Any]] = []
    for index, entry in enumerate(mapped):
        out.append(entry)
        if entry.get("role") == "tool":
            waiting += [_image_part(i) for i in images.get(entry.get("tool_call_id", ""), ())]
        following = mapped[index + 1] if index + 1 < len(mapped) else None
        if waiting and (following is None or following.get("role") != "tool"):
            text = {"type": "text", "text": "Images the tool calls above returned:"}
            out.append({"role": "user", "content": [text, *waiting]})
            waiting = []
    return out


def _image_part(image: Image) -> dict[str, Any]:
    data = base64.b64encode(image.data).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{image.mime_type};base64,{data}"}}


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


async def _refusal(response: aiohttp.ClientResponse) -> ModelError:
    body = (await response.read()).decode("utf-8", errors="replace")
    return refusal_error(
        response.status, response.reason or "", body, response.headers.get("retry-after")
    )


def refusal_error(status: int, reason: str, body: str, retry_after: str | None) -> ModelError:
    """What a status other than 200 means: 429 and 5xx are retried (after the
    server's Retry-After, when it gives seconds), a "too long" 400 or 413 is a
    context overflow, anything else is final."""
    message = f"model server answered {status}: {_server_message(body, reason)}"
    if status == 429 or status >= 500:
        return _RetryableFailure(message, status=status, retry_after_s=_retry_after_s(retry_after))
    overflow = status in (400, 413) and _says_too_long(body, reason)
    return ModelError(message, retryable=False, status=status, context_overflow=overflow)


def _require_event_stream(response: aiohttp.ClientResponse) -> None:
    """A 200 that is not an event stream (a wrong base URL that serves a page)
    is final: asking again gets the same."""
    if response.content_type != "text/event-stream":
        raise ModelError(
            "not an event stream: the model server answered with "
            f"{response.content_type!r} (is the base URL an OpenAI-compatible API?)",
            retryable=False,
        )


def _error_object(body: str) -> dict[str, Any] | None:
    """The OpenAI-style `error` object of a refusal's body, if it has one."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return None
    return error if isinstance(error, dict) else None


def _says_too_long(body: str, reason: str) -> bool:
    """Whether a refusal says the request exceeds the model's context window."""
    error = _error_object(body)
    if error is not None and error.get("code") == OVERFLOW_CODE:
        return True
    return _names_overflow(_server_message(body, reason))


def _names_overflow(message: str) -> bool:
    text = message.lower()
    return any(phrase in text for phrase in OVERFLOW_PHRASES)


def _server_message(body: str, reason: str) -> str:
    """The OpenAI-style `error.message`, else the raw body (shortened)."""
    error = _error_object(body)
    if error is not None and isinstance(error.get("message"), str):
        return str(error["message"])
    return body[:MAX_ERROR_TEXT] or reason


def _retry_after_s(retry_after: str | None) -> float | None:
    try:
        return max(0.0, float(retry_after or ""))
    except ValueError:
        return None  # absent, or an HTTP date: use our own backoff


@dataclass
class _PartialCall:
    call_id: str = ""
    name: str = ""
    arguments: str = ""


class _StreamAssembler:
    """Turns `data:` payloads into chunks: reasoning and text deltas at once; tool calls (from
    indexed fragments) and Finish at the end, since trailing chunks (usage) may
    follow the finish reason."""

    def __init__(self) -> None:
        self.done = False
        self._calls: dict[int, _PartialCall] = {}
        self._finish_reason: str | None = None
        self._usage: Usage | None = None

    def feed(self, data: str) -> list[ModelChunk]:
        if data.strip() == DONE_SENTINEL:
            return self._finish()
        if not data.strip():
            return []
        payload = _parse_payload(data)
        if isinstance(payload.get("usage"), dict):
            self._usage = _usage(payload["usage"], str(payload.get("model") or ""))
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
        # DeepSeek sends the other field as null while one of them streams.
        if reasoning := _text(delta, "reasoning_content"):
            chunks.append(ReasoningDelta(reasoning))
        if text := _text(delta, "content"):
            chunks.append(TextDelta(text))
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
        if self._usage is not None:
            chunks.append(self._usage)
        chunks.append(Finish(self._finish_reason or default))
        return chunks


def _usage(usage: dict[str, Any], model: str) -> Usage:
    """OpenAI's usage object (`prompt_tokens_details.cached_tokens`), or
    DeepSeek's (`prompt_cache_hit_tokens`)."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if cached is None:
        cached = usage.get("prompt_cache_hit_tokens")
    return Usage(
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        cached_prompt_tokens=_count(cached),
        model=model,
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _text(delta: dict[str, Any], key: str) -> str:
    value = delta.get(key)
    return value if isinstance(value, str) else ""


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
        code = failure.get("code") if isinstance(failure, dict) else None
        overflow = code == OVERFLOW_CODE or _names_overflow(str(message))
        raise ModelError(
            f"model stream failed: {message}", retryable=False, context_overflow=overflow
        )
    return payload
