"""The one server interceptor every service installs.

It refuses calls until its host serves (UNAVAILABLE NOT_READY: a call that
arrives while storage is still opening must not reach a store that is not
open), validates each request against its protovalidate rules (INVALID_ARGUMENT
with google.rpc.BadRequest field violations), maps domain errors to status
codes with google.rpc.ErrorInfo reasons, records the caller's deadline for
downstream calls, and logs each call with the status code it ended with and
its duration.

A request whose bytes do not decode would otherwise fail inside grpc (UNKNOWN,
a traceback at error level per call, before authentication): the request
deserializer hands the guarded call a marker instead, which answers it
INVALID_ARGUMENT after authentication and logs one rate-limited warning.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc
from google.protobuf.message import Message

from .deadlines import set_deadline
from .errors import DomainError, NotReady, PeerUnavailable
from .logs import RepeatLimit
from .status import bad_request_status, clip, domain_error_status

log = logging.getLogger("agenthost.rpc")
# Refused bytes cost a caller nothing to send: one line per kind per window.
refused_log = logging.getLogger("agenthost.rpc.refused")
refused_lines = RepeatLimit()
refused_log.addFilter(refused_lines)

# Services we host but do not own (their messages carry no rules).
UNVALIDATED_PREFIXES = ("/grpc.health.", "/grpc.reflection.")

UnaryBehavior = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]
StreamBehavior = Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]
Deserializer = Callable[[bytes], Any]


class Undecodable:
    """What the request deserializer returns for bytes that do not decode."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = clip(str(error), 200)


def lenient(deserializer: Deserializer | None) -> Deserializer | None:
    """`deserializer`, answering an Undecodable instead of raising: grpc
    would fail the call itself, before any interceptor code runs."""
    if deserializer is None:
        return None
    strict = deserializer

    def deserialize(data: bytes) -> Any:
        try:
            return strict(data)
        except Exception as error:  # DecodeError, or any other parse failure
            return Undecodable(error)

    return deserialize


# Runs first in every call of a service that has one (e.g. the gateway's bearer
# tokens); raises a DomainError to refuse the call. It runs in the handler's own
# context, so context variables it sets are visible to the handler.
Authenticate = Callable[[grpc.aio.ServicerContext], None]
# Whether the host serves yet (its storage is open).
Ready = Callable[[], bool]


class InFlight:
    """The unary calls a service runs, so a graceful stop lets them finish
    before it stops the server: stopping cancels the calls still running and
    those gRPC received but had not handed over yet."""

    def __init__(self) -> None:
        self.count = 0
        # Calls begun so far, refused ones included: still moving while gRPC
        # hands over calls it had queued.
        self.begun = 0
        self._idle = asyncio.Event()
        self._idle.set()

    @asynccontextmanager
    async def call(self) -> AsyncIterator[None]:
        self.count += 1
        self.begun += 1
        self._idle.clear()
        try:
            yield
        finally:
            self.count -= 1
            if self.count == 0:
                self._idle.set()

    async def settle(self, within_s: float, quiet_s: float = 0.02, handover_s: float = 0.5) -> bool:
        """Wait until no call runs, then for gRPC to hand over the calls it
        had queued: a quiet spell of `quiet_s` with no new call. Clients that
        keep retrying never leave one, and their calls are refused at once,
        so the spell is waited for at most `handover_s`. False when
        `within_s` ran out with calls still running."""
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(within_s):
                await self._idle.wait()
                handed_over_by = loop.time() + handover_s
                while loop.time() < handed_over_by:
                    begun = self.begun
                    await asyncio.sleep(quiet_s)  # a quiet spell, not synchronisation
                    if self.begun == begun and self.count == 0:
                        break
                    await self._idle.wait()
                return True
        except TimeoutError:
            return False


class ServiceInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    def __init__(
        self,
        authenticate: Authenticate | None = None,
        ready: Ready | None = None,
        on_error: Callable[[DomainError], None] | None = None,
        service: str = "",
    ) -> None:
        self.authenticate = authenticate
        self.service = service
        self.ready = ready
        # Told of every domain error a call ends with (the host watches for
        # its storage failing).
        self.on_error = on_error
        self.unary_calls = InFlight()
        # Each method's guarded handler, made at its first call: grpc asks
        # for the handler on every call, and a method's never changes.
        self._guarded: dict[str, grpc.RpcMethodHandler] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method: str = details.method
        guarded = self._guarded.get(method)
        if guarded is None:
            guarded = self._guard(method, await continuation(details))
            if guarded is not None:
                self._guarded[method] = guarded
        return guarded

    def _guard(self, method: str, handler: grpc.RpcMethodHandler | None) -> grpc.RpcMethodHandler:
        if handler is None:
            return handler
        if method.startswith(UNVALIDATED_PREFIXES):
            # Health and reflection answer before SERVING and unauthenticated;
            # they only need bad bytes refused.
            return _checked(method, handler)
        deserializer = lenient(handler.request_deserializer)
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                _unary(method, handler.unary_unary, self),
                request_deserializer=deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                _server_stream(method, handler.unary_stream, self),
                request_deserializer=deserializer,
                response_serializer=handler.response_serializer,
            )
        return _checked(method, handler)  # no service of ours streams requests

    def failed(self, error: DomainError) -> None:
        if self.on_error is not None:
            self.on_error(error)

    def admit(self, context: grpc.aio.ServicerContext) -> None:
        """Refuse a call the host cannot serve yet, then authenticate it."""
        if self.ready is not None and not self.ready():
            raise NotReady(service=self.service)
        if self.authenticate is not None:
            self.authenticate(context)


RULES_MODULE = "services.common.validation"
_warming: list[threading.Thread] = []


def warm_request_rules() -> None:
    """Load the request rules in a thread of their own, once: a service
    calls this when it serves, so start-up does not wait for them, and the
    first request mostly finds them loaded (else its import waits for this
    one, as the import lock has it)."""
    if RULES_MODULE in sys.modules or _warming:
        return
    thread = threading.Thread(
        target=importlib.import_module, args=(RULES_MODULE,), name="rules", daemon=True
    )
    _warming.append(thread)
    thread.start()


def _invalid(request: object) -> grpc.Status | None:
    if not isinstance(request, Message):
        return None  # a raw-bytes method carries no rules
    # The rules (protovalidate and its runtime) load with the first request,
    # or as the stack's start warms them (warm_later), not before it serves.
    from .validation import violations_of

    violations = violations_of(request)
    if not violations:
        return None
    return bad_request_status(
        violations,
        f"invalid {request.DESCRIPTOR.name}: " + "; ".join(f"{f}: {d}" for f, d in violations),
    )


async def _refuse_undecodable(
    method: str, request: Undecodable, context: grpc.aio.ServicerContext
) -> None:
    """Answer INVALID_ARGUMENT (raises AbortError), logged as one warning
    without a traceback."""
    refused_log.warning(
        "undecodable request",
        extra={"method": method, "code": "INVALID_ARGUMENT", "error": request.error},
    )
    status = bad_request_status(
        [("", f"the request does not decode: {request.error}")],
        "invalid request: its bytes do not decode as the method's request message",
    )
    await context.abort(status.code, status.details, status.trailing_metadata)


def _log_call(method: str, started: float, code: str) -> None:
    log.info(
        "rpc",
        extra={
            "method": method,
            "code": code,
            "ms": round((time.monotonic() - started) * 1000, 2),
        },
    )


def _code_name(code: grpc.StatusCode | None) -> str:
    return code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"


@asynccontextmanager
async def _guarded_call(
    method: str,
    request: Message | Undecodable,
    context: grpc.aio.ServicerContext,
    guard: ServiceInterceptor,
) -> AsyncIterator[None]:
    """Around every call: admit (ready, authenticated), refuse bad bytes and
    invalid requests, carry the deadline, turn a domain error into its status,
    and log the status code the call ended with."""
    started, code = time.monotonic(), "OK"
    try:
        guard.admit(context)
        if isinstance(request, Undecodable):
            code = "INVALID_ARGUMENT"
            await _refuse_undecodable(method, request, context)
        refusal = _invalid(request)
        if refusal is not None:
            code = _code_name(refusal.code)
            await context.abort(refusal.code, refusal.details, refusal.trailing_metadata)
        # Each call runs in its own task: set, never reset (a cancelled
        # stream is closed from another context, where a reset would fail).
        set_deadline(context.time_remaining())
        yield
    except DomainError as error:
        guard.failed(error)
        status = domain_error_status(error)
        code = _code_name(status.code)
        await context.abort(status.code, status.details, status.trailing_metadata)
    except grpc.aio.AioRpcError as error:
        # A call to a peer failed without a domain error of ours: typed here,
        # at the edge, never UNKNOWN.
        if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            code = "DEADLINE_EXCEEDED"
            await context.abort(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                "a service behind this one did not answer in time",
            )
        status = domain_error_status(
            PeerUnavailable(PeerUnavailable.UNNAMED, _code_name(error.code()))
        )
        code = _code_name(status.code)
        await context.abort(status.code, status.details, status.trailing_metadata)
    except grpc.aio.AbortError:
        if code == "OK":  # aborted by the behavior itself
            code = _code_name(context.code())
        raise
    except (asyncio.CancelledError, GeneratorExit):
        remaining = context.time_remaining()
        code = "DEADLINE_EXCEEDED" if remaining is not None and remaining <= 0 else "CANCELLED"
        raise
    except BaseException:
        code = "UNKNOWN"  # what grpc answers for an exception it did not expect
        raise
    finally:
        if not isinstance(request, Undecodable) or code != "INVALID_ARGUMENT":
            _log_call(method, started, code)


def _unary(method: str, behavior: UnaryBehavior, guard: ServiceInterceptor) -> UnaryBehavior:
    async def wrapped(request: Message, context: grpc.aio.ServicerContext) -> Any:
        async with guard.unary_calls.call(), _guarded_call(method, request, context, guard):
            return await behavior(request, context)

    return wrapped


def _server_stream(
    method: str, behavior: StreamBehavior, guard: ServiceInterceptor
) -> StreamBehavior:
    async def wrapped(request: Message, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async with _guarded_call(method, request, context, guard):
            async for response in behavior(request, context):
                yield response

    return wrapped


def _checked(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """`handler` with its bad bytes refused (no admission, no validation)."""

    async def one(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if isinstance(request, Undecodable):
            await _refuse_undecodable(method, request, context)
        return request

    async def each(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        async for request in requests:
            yield await one(request, context)

    async def streamed(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        return each(requests, context)

    kinds = (
        (handler.unary_unary, one, grpc.unary_unary_rpc_method_handler),
        (handler.unary_stream, one, grpc.unary_stream_rpc_method_handler),
        (handler.stream_unary, streamed, grpc.stream_unary_rpc_method_handler),
        (handler.stream_stream, streamed, grpc.stream_stream_rpc_method_handler),
    )
    behavior, prepare, make = next(kind for kind in kinds if kind[0] is not None)
    return make(
        _prepared(behavior, prepare),
        request_deserializer=lenient(handler.request_deserializer),
        response_serializer=handler.response_serializer,
    )


Prepare = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]


def _prepared(behavior: Callable[..., Any], prepare: Prepare) -> Callable[..., Any]:
    """`behavior` called with `prepare`d requests, in its own style: an async
    generator, or a coroutine (that may answer by context.write, as health's
    Watch does)."""
    if inspect.isasyncgenfunction(behavior):

        async def generating(request: Any, context: grpc.aio.ServicerContext) -> Any:
            async for response in behavior(await prepare(request, context), context):
                yield response

        return generating

    async def returning(request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await behavior(await prepare(request, context), context)

    return returning
