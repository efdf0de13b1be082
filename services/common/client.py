"""Client-side helpers: channels, deadlines, and what a failed call to a peer
raises (its domain error, or PEER_UNAVAILABLE naming it: a service edge
never answers UNKNOWN for a peer that went away)."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, NoReturn, ParamSpec, TypeVar

import grpc

from .deadlines import downstream_timeout
from .errors import DomainError, PeerUnavailable
from .internal_auth import with_token
from .server import MAX_MESSAGE_BYTES
from .status import domain_error_from

P = ParamSpec("P")
T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0
# round_robin, not gRPC's default pick_first: where a peer's name resolves to
# every replica (a Kubernetes headless Service, Docker's DNS), calls spread
# over all of them instead of all going to the first address, and a replica
# that goes away leaves the others serving without a new resolution.
ROUND_ROBIN = json.dumps({"loadBalancingConfig": [{"round_robin": {}}]})
# How long a channel waits between attempts to reach a peer that is down: at
# most a second, not gRPC's default (up to 120 s, growing 1.6x from 1 s), so
# the calls waiting for a restarted peer go through within about a second of
# it serving again, however long it was away.
RECONNECT_BACKOFF_MS = (100, 1000)
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.service_config", ROUND_ROBIN),
    ("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS[0]),
    ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MS[1]),
    # Each channel keeps its own connections: gRPC otherwise shares them per
    # address across the process, so a channel opened to a service that just
    # started inherits the back-off another channel earned against whatever
    # listened on that address before (a reused port: refused at once).
    ("grpc.use_local_subchannel_pool", 1),
]


def open_channel(address: str, internal_token: str | None = None) -> grpc.aio.Channel:
    """A channel to a service; to an internal one, carrying the stack's token."""
    return with_token(grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS), internal_token)


def call_timeout(default: float | None = DEFAULT_TIMEOUT_S) -> float | None:
    """Our timeout, capped by the deadline of the call we are serving."""
    return downstream_timeout(default)


def peer_error(error: grpc.aio.AioRpcError, peer: str) -> DomainError | None:
    """What a failed call to `peer` means to this service: the domain error
    the peer raised, or PEER_UNAVAILABLE naming `peer` (it is down,
    restarting, or failed without a reason of ours). None for a missed
    deadline: the gRPC error stays, and the service edge answers it
    DEADLINE_EXCEEDED."""
    domain_error = domain_error_from(error)
    if domain_error is not None:
        return domain_error
    code: grpc.StatusCode = error.code()
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return None
    return PeerUnavailable(peer, code.name)


def _reraise(error: grpc.aio.AioRpcError, peer: str) -> NoReturn:
    typed = peer_error(error, peer)
    if typed is None:
        raise error
    raise typed from error


def raising_peer_errors(
    peer: str,
) -> Callable[[Callable[P, Awaitable[T]]], Callable[P, Coroutine[Any, Any, T]]]:
    """Decorate a port's calls to `peer` so they raise what `peer_error` says."""

    def decorate(call: Callable[P, Awaitable[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
        @functools.wraps(call)
        async def wrapped(*args: P.args, **kwargs: P.kwargs) -> T:
            try:
                return await call(*args, **kwargs)
            except grpc.aio.AioRpcError as error:
                _reraise(error, peer)

        return wrapped

    return decorate


async def peer_call(call: Awaitable[T], peer: str) -> T:
    """Await a gRPC call to `peer`, raising what `peer_error` says."""
    try:
        return await call
    except grpc.aio.AioRpcError as error:
        _reraise(error, peer)


async def peer_stream(stream: AsyncIterator[T], peer: str) -> AsyncIterator[T]:
    """A server stream from `peer`, raising what `peer_error` says."""
    try:
        async for item in stream:
            yield item
    except grpc.aio.AioRpcError as error:
        _reraise(error, peer)
