"""A channel that adds one metadata pair to every call: the bearer token a
client presents to the gateway, and the internal token services present to
each other, are both this."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

Continuation = Callable[[grpc.aio.ClientCallDetails, Any], Any]


def _with(details: grpc.aio.ClientCallDetails, pair: tuple[str, str]) -> grpc.aio.ClientCallDetails:
    metadata = grpc.aio.Metadata(*(details.metadata or ()))
    metadata.add(*pair)
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
    )


# Two classes: grpc.aio files an interceptor under its first matching kind only.
class _Unary(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self, pair: tuple[str, str]) -> None:
        self._pair = pair

    async def intercept_unary_unary(
        self, continuation: Continuation, details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_with(details, self._pair), request)


class _Stream(grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    def __init__(self, pair: tuple[str, str]) -> None:
        self._pair = pair

    async def intercept_unary_stream(
        self, continuation: Continuation, details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_with(details, self._pair), request)


def metadata_interceptors(key: str, value: str) -> list[grpc.aio.ClientInterceptor]:
    """The interceptors that send `key: value` with every unary and streaming call."""
    return [_Unary((key, value)), _Stream((key, value))]
