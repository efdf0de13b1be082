"""Service-to-service authentication: a shared internal token.

The gateway is the one public entry point; the other services trust their
callers (an account is a field of their requests), so they must answer only
the stack's own services. Each call between services carries the stack's
internal token in the `x-agenthost-internal-token` metadata; an internal
service with a token configured refuses any call without it (UNAUTHENTICATED),
health and reflection excepted (probes and grpcurl need no secret).

Why a shared token rather than mutual TLS: it works unchanged on loopback
(the embedded default, plaintext), in compose (a file secret) and in
Kubernetes (a Secret, plus a NetworkPolicy that lets only the gateway reach
the internal services), with nothing to issue or rotate per service. TLS in
front of the gateway is a separate, configured concern.

The token comes from AGENTHOST_INTERNAL_TOKEN, or the file named by
AGENTHOST_INTERNAL_TOKEN_FILE; the embedded default makes a fresh one each
start. No token configured means no check (a service under test alone).
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path

import grpc

from agenthost_core.call_metadata import with_metadata

from .errors import Unauthenticated

METADATA_KEY = "x-agenthost-internal-token"
TOKEN_ENV = "AGENTHOST_INTERNAL_TOKEN"
TOKEN_FILE_ENV = "AGENTHOST_INTERNAL_TOKEN_FILE"


def new_token() -> str:
    return secrets.token_urlsafe(32)


def token_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """The configured internal token (None: none configured)."""
    env = os.environ if env is None else env
    if env.get(TOKEN_ENV):
        return env[TOKEN_ENV]
    path = env.get(TOKEN_FILE_ENV)
    if path:
        token = Path(path).read_text().strip()
        if not token:
            raise SystemExit(f"{TOKEN_FILE_ENV}: {path} is empty")
        return token
    return None


def require_token(token: str) -> Callable[[grpc.aio.ServicerContext], None]:
    """The admission check of an internal service (runs before validation)."""
    expected = token.encode()

    def check(context: grpc.aio.ServicerContext) -> None:
        for key, value in context.invocation_metadata() or ():
            if key == METADATA_KEY:
                given = value.encode() if isinstance(value, str) else value
                if hmac.compare_digest(given, expected):
                    return
        raise Unauthenticated(
            "UNAUTHENTICATED", "this service answers only the agenthost stack's own services"
        )

    return check


def with_token(channel: grpc.aio.Channel, token: str | None) -> grpc.aio.Channel:
    """`channel`, presenting the stack's token (if any) with every call."""
    return with_metadata(channel, METADATA_KEY, token)
