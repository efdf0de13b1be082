"""The OpenAI-compatible adapter's time limits, and its settings from the environment.

Limits are small (tenths of a second); the fake provider pauses or stalls, and
each test waits on the adapter's result with a bound (support.TIMEOUT_S).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import pytest

from services.agentruntime.models.base import (
    Finish,
    ModelChunk,
    ModelRequest,
    StreamedAnswer,
    TextDelta,
    UserMessage,
)
from services.agentruntime.models.openai_compat import OpenAICompatAdapter, OpenAICompatConfig
from services.agentruntime.models.tests.conftest import MakeAdapter
from services.agentruntime.models.tests.fake_provider import (
    DONE,
    Comment,
    FakeProvider,
    Pause,
    ProviderReply,
    StreamItem,
    finish_chunk,
    keep_alive,
    text_chunk,
    tool_fragment,
)
from services.agentruntime.models.tests.support import (
    MODEL,
    collect,
    collect_timed,
    collect_until_error,
    wait,
)

LIMIT_S = 0.3
FIRST_BYTE_ERROR = (
    "the model sent nothing for 0.3 s after the request "
    "(first-byte limit, AGENTHOST_MODEL_FIRST_BYTE_TIMEOUT_S)"
)
IDLE_ERROR = "the model sent nothing for 0.3 s (idle limit, AGENTHOST_MODEL_IDLE_TIMEOUT_S)"


def request() -> ModelRequest:
    return ModelRequest(messages=[UserMessage("hi")])


def text_reply(*pieces: str) -> ProviderReply:
    return ProviderReply(
        stream=[*(text_chunk(piece) for piece in pieces), finish_chunk("stop"), DONE]
    )


def stalled(*before: StreamItem) -> ProviderReply:
    """Headers, then `before`, then keep-alive comments (no data) for longer than
    the tests wait, then nothing at all."""
    return ProviderReply(stream=[Comment(), *before, *keep_alive(6.0), asyncio.Event()])


def text_of(chunks: Sequence[ModelChunk]) -> str:
    folded = StreamedAnswer()
    for item in chunks:
        assert isinstance(item, TextDelta | Finish)
        folded.add(item)
    return folded.text


# --- first-byte limit ------------------------------------------------------


async def test_first_byte_limit_trips_on_headers_without_data_then_a_retry_succeeds(
    provider: FakeProvider, make_adapter: MakeAdapter
) -> None:
    provider.enqueue(stalled(), text_reply("back"))
    adapter = make_adapter(first_byte_timeout_s=LIMIT_S)

    chunks = await collect(adapter, request())

    # Keep-alive comments did not count as the first byte.
    assert text_of(chunks) == "back"
    assert len(provider.requests) == 2
    await wait(provider.disconnected)


async def test_first_byte_limit_error_names_the_limit_and_its_variable(
    provider: FakeProvider, make_adapter: MakeAdapter
) -> None:
    provider.enqueue(stalled(), stalled())
    adapter = make_adapter(first_byte_timeout_s=LIMIT_S, max_attempts=2)

    seen, error = await collect_until_error(adapter, request())

    assert seen == []
    assert error.message == FIRST_BYTE_ERROR
    assert (error.retryable, error.status) == (True, None)
    assert len(provider.requests) == 2


# --- idle limit ------------------------------------------------------------


async def test_idle_limit_after_yielded_chunks_is_final(
    provider: FakeProvider, make_adapter: MakeAdapter
) -> None:
    provider.enqueue(stalled(text_chunk("one"), text_chunk("two")), text_reply("again"))
    adapter = make_adapter(first_byte_timeout_s=LIMIT_S, idle_timeout_s=LIMIT_S)

    seen, error = await collect_until_error(adapter, request())

    assert seen == [TextDelta("one"), TextDelta("two")]
    assert error.message == IDLE_ERROR
    # Marked retryable, but the adapter does not retry after yielding.
    assert (error.retryable, error.status) == (True, None)
    assert len(provider.requests) == 1
    await wait(provider.disconnected)


async def test_idle_limit_before_anything_was_yielded_is_retried(
    provider: FakeProvider, make_adapter: MakeAdapter
) -> None:
    # Tool-call fragments are data, but nothing is yielded until the call is complete.
    provider.enqueue(
        stalled(tool_fragment(0, call_id="call_a", name="read_file")), text_reply("ok")
    )
    adapter = make_adapter(idle_timeout_s=LIMIT_S)

    assert text_of(await collect(adapter, request())) == "ok"
    assert len(provider.requests) == 2


async def test_slow_stream_never_silent_for_the_idle_limit_completes(
    provider: FakeProvider, make_adapter: MakeAdapter
) -> None:
    idle_s, gap_s, pieces = 0.5, 0.2, [str(n) for n in range(6)]
    stream: list[StreamItem] = []
    for piece in pieces:
        stream += [Pause(gap_s), text_chunk(piece)]
    provider.enqueue(ProviderReply(stream=[*stream, finish_chunk("stop"), DONE]))
    adapter = make_adapter(first_byte_timeout_s=idle_s, idle_timeout_s=idle_s)
    started = asyncio.get_running_loop().time()

    timed = await collect_timed(adapter, request())

    assert text_of([item for _, item in timed]) == "".join(pieces)
    # Longer than the idle limit in all (generous lower bound).
    assert timed[-1][0] - started >= 0.8 * gap_s * len(pieces) > idle_s
    assert len(provider.requests) == 1


# --- total limit -----------------------------------------------------------


async def test_total_limit_ends_a_stream_that_keeps_sending(
    provider: FakeProvider, make_adapter: MakeAdapter
) -> None:
    stream: list[StreamItem] = []
    for n in range(100):
        stream += [text_chunk(f"{n} "), Pause(0.05)]
    provider.enqueue(ProviderReply(stream=stream), text_reply("again"))
    adapter = make_adapter(idle_timeout_s=LIMIT_S, total_timeout_s=0.6)

    seen, error = await collect_until_error(adapter, request())

    assert seen and all(isinstance(item, TextDelta) for item in seen)
    assert error.message == (
        "the model request took longer than 0.6 s in all "
        "(total limit, AGENTHOST_MODEL_TOTAL_TIMEOUT_S)"
    )
    assert (error.retryable, error.status) == (False, None)
    assert len(provider.requests) == 1
    await wait(provider.disconnected)


async def test_total_limit_counts_retries_and_names_the_last_failure(
    provider: FakeProvider, make_adapter: MakeAdapter
) -> None:
    provider.enqueue(*(stalled() for _ in range(10)))
    adapter = make_adapter(first_byte_timeout_s=0.2, total_timeout_s=0.5, max_attempts=10)

    seen, error = await collect_until_error(adapter, request())

    assert seen == []
    assert error.message.startswith(
        "the model request took longer than 0.5 s in all "
        "(total limit, AGENTHOST_MODEL_TOTAL_TIMEOUT_S); last failure: "
        "the model sent nothing for 0.2 s after the request (first-byte limit"
    )
    assert error.retryable is False
    assert 2 <= len(provider.requests) < 10


async def test_total_limit_fails_at_once_when_the_backoff_would_outlast_it(
    provider: FakeProvider, make_adapter: MakeAdapter
) -> None:
    provider.enqueue(ProviderReply(status=503, error_message="overloaded"), text_reply("late"))
    # Sleeping the backoff would outlast collect's bound and fail the test.
    adapter = make_adapter(backoff_initial_s=30.0, backoff_max_s=30.0, total_timeout_s=20.0)

    _, error = await collect_until_error(adapter, request())

    assert error.message == (
        "the model request took longer than 20 s in all "
        "(total limit, AGENTHOST_MODEL_TOTAL_TIMEOUT_S); "
        "last failure: model server answered 503: overloaded"
    )
    assert error.retryable is False
    assert len(provider.requests) == 1


# --- connect limit ---------------------------------------------------------


@contextmanager
def full_accept_queue() -> Iterator[str]:
    """A base URL whose port never accepts: its listener's queue is full, so the
    kernel drops every further connection's SYN and connecting hangs."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    address = listener.getsockname()
    waiting: list[socket.socket] = []
    for _ in range(4):  # more than a backlog of 0 queues
        waiting.append(socket.socket())
        waiting[-1].setblocking(False)
        with suppress(BlockingIOError):
            waiting[-1].connect(address)
    try:
        yield f"http://127.0.0.1:{address[1]}/v1"
    finally:
        for held in [*waiting, listener]:
            held.close()


async def test_connect_limit_is_retried_then_names_itself(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with full_accept_queue() as base_url:
        config = OpenAICompatConfig(
            base_url=base_url,
            model=MODEL,
            max_attempts=2,
            backoff_initial_s=0.0,
            connect_timeout_s=LIMIT_S,
        )
        adapter = OpenAICompatAdapter(config)
        with caplog.at_level(logging.WARNING):
            _, error = await collect_until_error(adapter, request())
        await adapter.aclose()

    assert error.message == (
        "could not connect to the model within 0.3 s "
        "(connect limit, AGENTHOST_MODEL_CONNECT_TIMEOUT_S)"
    )
    assert (error.retryable, error.status) == (True, None)
    assert [r.getMessage() for r in caplog.records if "retry" in r.getMessage()] == [
        "model request failed (could not connect to the model within 0.3 s "
        "(connect limit, AGENTHOST_MODEL_CONNECT_TIMEOUT_S)), retry 1 in 0.00s"
    ]


# --- configuration ---------------------------------------------------------

BASE_ENV = {"AGENTHOST_MODEL_BASE_URL": "http://127.0.0.1:9/v1", "AGENTHOST_MODEL": "m"}


def test_limits_have_defaults() -> None:
    config = OpenAICompatConfig.from_env(BASE_ENV)
    assert (
        config.connect_timeout_s,
        config.first_byte_timeout_s,
        config.idle_timeout_s,
        config.total_timeout_s,
        config.max_attempts,
    ) == (10.0, 120.0, 60.0, 900.0, 4)


def test_every_limit_variable_is_read() -> None:
    config = OpenAICompatConfig.from_env(
        BASE_ENV
        | {
            "AGENTHOST_MODEL_CONNECT_TIMEOUT_S": "2.5",
            "AGENTHOST_MODEL_FIRST_BYTE_TIMEOUT_S": "300",
            "AGENTHOST_MODEL_IDLE_TIMEOUT_S": " 45 ",
            "AGENTHOST_MODEL_TOTAL_TIMEOUT_S": "1800",
            "AGENTHOST_MODEL_MAX_ATTEMPTS": "6",
        }
    )
    assert (
        config.connect_timeout_s,
        config.first_byte_timeout_s,
        config.idle_timeout_s,
        config.total_timeout_s,
        config.max_attempts,
    ) == (2.5, 300.0, 45.0, 1800.0, 6)


def test_blank_variables_keep_the_defaults() -> None:
    variables = [
        "AGENTHOST_MODEL_CONNECT_TIMEOUT_S",
        "AGENTHOST_MODEL_FIRST_BYTE_TIMEOUT_S",
        "AGENTHOST_MODEL_IDLE_TIMEOUT_S",
        "AGENTHOST_MODEL_TOTAL_TIMEOUT_S",
        "AGENTHOST_MODEL_MAX_ATTEMPTS",
    ]
    config = OpenAICompatConfig.from_env(BASE_ENV | dict.fromkeys(variables, " "))
    assert config == OpenAICompatConfig.from_env(BASE_ENV)


@pytest.mark.parametrize(
    "variable",
    [
        "AGENTHOST_MODEL_CONNECT_TIMEOUT_S",
        "AGENTHOST_MODEL_FIRST_BYTE_TIMEOUT_S",
        "AGENTHOST_MODEL_IDLE_TIMEOUT_S",
        "AGENTHOST_MODEL_TOTAL_TIMEOUT_S",
    ],
)
@pytest.mark.parametrize("value", ["0", "-5", "soon", "10s", "nan", "inf"])
def test_bad_timeout_variables_are_refused(variable: str, value: str) -> None:
    with pytest.raises(ValueError) as raised:
        OpenAICompatConfig.from_env(BASE_ENV | {variable: value})
    assert str(raised.value) == f"{variable}={value!r}: expected a positive number of seconds"


@pytest.mark.parametrize("value", ["0", "-1", "2.5", "many"])
def test_bad_max_attempts_is_refused(value: str) -> None:
    with pytest.raises(ValueError) as raised:
        OpenAICompatConfig.from_env(BASE_ENV | {"AGENTHOST_MODEL_MAX_ATTEMPTS": value})
    assert str(raised.value) == (
        f"AGENTHOST_MODEL_MAX_ATTEMPTS={value!r}: expected a whole number, at least 1"
    )


@pytest.mark.parametrize(
    "field", ["connect_timeout_s", "first_byte_timeout_s", "idle_timeout_s", "total_timeout_s"]
)
@pytest.mark.parametrize("value", [0.0, -1.0])
def test_config_refuses_non_positive_limits(field: str, value: float) -> None:
    limit: dict[str, Any] = {field: value}
    with pytest.raises(ValueError, match=f"{field} must be a positive number of seconds"):
        OpenAICompatConfig(base_url="http://127.0.0.1:9", model=MODEL, **limit)
