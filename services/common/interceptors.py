"""The one server interceptor every service installs.

It refuses calls until its host serves (UNAVAILABLE NOT_READY: a call that
arrives while storage is still opening must not reach a store that is not
open), validates each request against its protovalidate rules (INVALID_ARGUMENT
with google.rpc.BadRequest field violations), maps domain errors to status
codes with google.rpc.ErrorInfo reasons, records the caller's deadline for
downstream calls, and logs each call with its outcome and duration.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc
import protovalidate
from buf.validate import validate_pb2
from google.protobuf.message import Message

from .deadlines import set_deadline
from .errors import DomainError, NotReady
from .status import bad_request_status, domain_error_status

log = logging.getLogger("agenthost.rpc")

# Services we host but do not own (their messages carry no rules).
UNVALIDATED_PREFIXES = ("/grpc.health.", "/grpc.reflection.")

_validator = protovalidate.Validator()

UnaryBehavior = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]
StreamBehavior = Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]


def field_path(violation: validate_pb2.Violation) -> str:
    """`a.b[2].c` from a violation's field path (empty for message-level rules)."""
    parts: list[str] = []
    for element in violation.field.elements:
        part = element.field_name
        if element.HasField("index"):
            part += f"[{element.index}]"
        elif element.HasField("string_key"):
            part += f"[{element.string_key!r}]"
        parts.append(part)
    return ".".join(parts)


def violations_of(request: Message) -> list[tuple[str, str]]:
    # Re-read each violation as our generated buf.validate type.
    found = [
        validate_pb2.Violation.FromString(v.proto.to_binary())
        for v in _validator.collect_violations(request)
    ]
    return [(field_path(v), f"{v.rule_id}: {v.message}") for v in found]


# Runs first in every call of a service that has one (e.g. the gateway's bearer
# tokens); raises a DomainError to refuse the call. It runs in the handler's own
# context, so context variables it sets are visible to the handler.
Authenticate = Callable[[grpc.aio.ServicerContext], None]
# Whether the host serves yet (its storage is open).
Ready = Callable[[], bool]


class ServiceInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    def __init__(
        self, authenticate: Authenticate | None = None, ready: Ready | None = None
    ) -> None:
        self.authenticate = authenticate
        self.ready = ready

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        method: str = details.method
        if handler is None or method.startswith(UNVALIDATED_PREFIXES):
            return handler
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                _unary(method, handler.unary_unary, self._admit),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                _server_stream(method, handler.unary_stream, self._admit),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    def _admit(self, context: grpc.aio.ServicerContext) -> None:
        """Refuse a call the host cannot serve yet, then authenticate it."""
        if self.ready is not None and not self.ready():
            raise NotReady()
        if self.authenticate is not None:
            self.authenticate(context)


async def _reject_invalid(request: Message, context: grpc.aio.ServicerContext) -> None:
    if not isinstance(request, Message):
        return  # a raw-bytes method carries no rules
    violations = violations_of(request)
    if violations:
        status = bad_request_status(
            violations,
            f"invalid {request.DESCRIPTOR.name}: " + "; ".join(f"{f}: {d}" for f, d in violations),
        )
        await context.abort(status.code, status.details, status.trailing_metadata)


async def _abort_domain(error: DomainError, context: grpc.aio.ServicerContext) -> None:
    status = domain_error_status(error)
    await context.abort(status.code, status.details, status.trailing_metadata)


def _log_call(method: str, started: float, outcome: str) -> None:
    log.info(
        "rpc",
        extra={
            "method": method,
            "code": outcome,
            "ms": round((time.monotonic() - started) * 1000, 2),
        },
    )


@asynccontextmanager
async def _guarded_call(
    method: str,
    request: Message,
    context: grpc.aio.ServicerContext,
    admit: Authenticate,
) -> AsyncIterator[None]:
    """Around every call: admit (ready, authenticated), validate, carry the deadline, turn a
    domain error into its status, and log the outcome."""
    started, outcome = time.monotonic(), "OK"
    try:
        admit(context)
        await _reject_invalid(request, context)
        # Each call runs in its own task: set, never reset (a cancelled
        # stream is closed from another context, where a reset would fail).
        set_deadline(context.time_remaining())
        yield
    except DomainError as error:
        outcome = error.status
        await _abort_domain(error, context)
    except grpc.aio.AbortError:
        outcome = "ABORTED_BY_HANDLER" if outcome == "OK" else outcome
        raise
    except BaseException as error:
        outcome = type(error).__name__
        raise
    finally:
        _log_call(method, started, outcome)


def _unary(method: str, behavior: UnaryBehavior, admit: Authenticate) -> UnaryBehavior:
    async def wrapped(request: Message, context: grpc.aio.ServicerContext) -> Any:
        async with _guarded_call(method, request, context, admit):
            return await behavior(request, context)

    return wrapped


def _server_stream(method: str, behavior: StreamBehavior, admit: Authenticate) -> StreamBehavior:
    async def wrapped(request: Message, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async with _guarded_call(method, request, context, admit):
            async for response in behavior(request, context):
                yield response

    return wrapped
