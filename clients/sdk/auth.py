"""Bearer-token metadata on every call of a channel."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

from agenthost_core.call_metadata import with_metadata


def authorized_channel(
    address: str,
    token: str | None,
    interceptors: Sequence[grpc.aio.ClientInterceptor] = (),
    options: Sequence[tuple[str, Any]] = (),
    tls_roots: bytes | None = None,
) -> grpc.aio.Channel:
    """A channel to the gateway that sends the token with every call; extra
    interceptors (tracing, latency injection in tests) see it among the
    call's metadata. With `tls_roots` (PEM certificates to trust) the
    channel uses TLS."""
    chain = list(interceptors)
    # Its own connections, not the process's shared ones: a channel to a
    # gateway that just started must not inherit another channel's back-off
    # against what listened on that address before.
    options = [*options, ("grpc.use_local_subchannel_pool", 1)]
    if tls_roots is not None:
        credentials = grpc.ssl_channel_credentials(root_certificates=tls_roots)
        channel = grpc.aio.secure_channel(address, credentials, options=options, interceptors=chain)
    else:
        channel = grpc.aio.insecure_channel(address, options=options, interceptors=chain)
    return with_metadata(channel, "authorization", f"Bearer {token}" if token else None)
