"""Client-side helpers: channels, deadlines and domain errors from statuses."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

import grpc

from .deadlines import downstream_timeout
from .internal_auth import token_interceptors
from .server import MAX_MESSAGE_BYTES
from .status import domain_error_from

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_permit_without_calls", 1),
]


def open_channel(address: str, internal_token: str | None = None) -> grpc.aio.Channel:
    """A channel to a service; to an internal one, carrying the stack's token."""
    return grpc.aio.insecure_channel(
        address, options=CHANNEL_OPTIONS, interceptors=token_interceptors(internal_token)
    )


def call_timeout(default: float | None = DEFAULT_TIMEOUT_S) -> float | None:
    """Our timeout, capped by the deadline of the call we are serving."""
    return downstream_timeout(default)


def raising_domain_errors(
    call: Callable[P, Awaitable[T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Turn a status that carries our ErrorInfo back into the domain error."""

    async def wrapped(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await call(*args, **kwargs)
        except grpc.aio.AioRpcError as error:
            domain_error = domain_error_from(error)
            if domain_error is None:
                raise
            raise domain_error from error

    return wrapped


async def domain_errors(call: Awaitable[T]) -> T:
    """Await a gRPC call, raising the domain error its status carries."""
    try:
        return await call
    except grpc.aio.AioRpcError as error:
        domain_error = domain_error_from(error)
        if domain_error is None:
            raise
        raise domain_error from error


async def stream_raising_domain_errors(stream: AsyncIterator[T]) -> AsyncIterator[T]:
    try:
        async for item in stream:
            yield item
    except grpc.aio.AioRpcError as error:
        domain_error = domain_error_from(error)
        if domain_error is None:
            raise
        raise domain_error from error
