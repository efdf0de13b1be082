"""Bearer-token metadata on every call of a channel."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import grpc

Continuation = Callable[[grpc.aio.ClientCallDetails, Any], Any]


def _with_token(details: grpc.aio.ClientCallDetails, token: str) -> grpc.aio.ClientCallDetails:
    metadata = grpc.aio.Metadata(*(details.metadata or ()))
    metadata.add("authorization", f"Bearer {token}")
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
    )


class _UnaryUnary(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self, token: str) -> None:
        self.token = token

    async def intercept_unary_unary(
        self, continuation: Continuation, details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_with_token(details, self.token), request)


class _UnaryStream(grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    def __init__(self, token: str) -> None:
        self.token = token

    async def intercept_unary_stream(
        self, continuation: Continuation, details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_with_token(details, self.token), request)


def authorized_channel(
    address: str,
    token: str | None,
    interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
    options: Sequence[tuple[str, Any]] = (),
    tls_roots: bytes | None = None,
) -> grpc.aio.Channel:
    """A channel to the gateway that sends the token with every call; extra
    interceptors (tracing, latency injection in tests) run after the token's.
    With `tls_roots` (PEM certificates to trust) the channel uses TLS."""
    chain: list[grpc.aio.ClientInterceptor] = (
        [_UnaryUnary(token), _UnaryStream(token)] if token else []
    )
    chain.extend(interceptors)
    if tls_roots is not None:
        credentials = grpc.ssl_channel_credentials(root_certificates=tls_roots)
        return grpc.aio.secure_channel(
            address, credentials, options=list(options), interceptors=chain
        )
    return grpc.aio.insecure_channel(address, options=list(options), interceptors=chain)
