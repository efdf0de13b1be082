"""A public service for browsers: gRPC-Web and the Connect protocol over HTTP,
served by the service's host on a port of its own, next to its gRPC port.

The library is connect-python (`connectrpc`), the Connect project's own
Python implementation: one ASGI application speaks the Connect protocol,
gRPC-Web and gRPC; it writes each message of a server stream as it is
yielded (nothing waits for the end), carries error details (as
grpc-status-details-bin in gRPC-Web trailers, as `details` in Connect's JSON
error body), honours grpc-timeout and connect-timeout-ms, cancels a handler
whose client went away, works with google.protobuf messages through its
compat codecs, and is checked against the Connect conformance suite.
Not sonora (gRPC-Web only): its last release (0.2.3, 2023) requires
urllib3 < 2 (the stack installs 2.x), its context's abort() takes no
trailing metadata, so ErrorInfo and BadRequest details would never reach a
browser, an error before a stream's first message loses its trailers, and
its CORS echoes the Host header for any origin. Not a proxy (Envoy,
grpcwebproxy): none is installable from Debian, PyPI or npm here, and it
would be one more process for `agenthost up` to run.

One guard: connect-python has interceptors of its own, but every call must
pass the one grpc.aio interceptor (interceptors.py): the host's handlers
behind its own guard (guarded.py), called with WebContext, over
connect-python's RequestContext. An abort's status,
with the details in its grpc-status-details-bin, becomes a ConnectError,
which connect-python writes in the protocol the browser spoke. A request
whose bytes do not decode reaches the guard as the same Undecodable marker
as on the gRPC port, so it is refused after authentication there too.

Served by hypercorn (ASGI, in the service's own event loop, stopped by a
trigger rather than signal handlers of its own), behind starlette's
CORSMiddleware for the configured origins.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Mapping,
    Sequence,
)
from pathlib import Path
from typing import Any

import grpc
from connectrpc.code import Code
from connectrpc.codec import Codec
from connectrpc.compat import google_protobuf_binary_codec, google_protobuf_json_codec
from connectrpc.errors import ConnectError, ErrorDetail
from connectrpc.method import IdempotencyLevel, MethodInfo, StreamType
from connectrpc.request import RequestContext
from connectrpc.server import ConnectASGIApplication, Endpoint
from google.protobuf import descriptor_pool, message_factory
from google.rpc import status_pb2
from hypercorn.asyncio import serve
from hypercorn.config import Config as HypercornConfig
from protobuf.wkt import Any as WireAny
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from .config import LOOPBACK, TlsFiles
from .guarded import CallContext, Register, guarded_handlers
from .interceptors import ServiceInterceptor, Undecodable

log = logging.getLogger("agenthost.server")

# Request headers a browser client sends (connect-web, grpc-web), answered in
# a preflight; response headers its code may read.
ALLOWED_HEADERS = (
    "authorization",
    "content-type",
    "accept-encoding",
    "connect-protocol-version",
    "connect-timeout-ms",
    "connect-accept-encoding",
    "connect-content-encoding",
    "grpc-timeout",
    "grpc-accept-encoding",
    "grpc-encoding",
    "x-grpc-web",
    "x-user-agent",
)
EXPOSED_HEADERS = (
    "grpc-status",
    "grpc-message",
    "grpc-status-details-bin",
    "grpc-encoding",
    "grpc-accept-encoding",
    "connect-content-encoding",
    "connect-accept-encoding",
)
# How long a browser may reuse a preflight's answer (Chromium caps it at 2 h).
PREFLIGHT_MAX_AGE_S = 7200
MAX_MESSAGE_BYTES = 16 * 1024 * 1024

# What Endpoint.unary and .server_stream make (their classes are private).
ServedEndpoint = Any
RpcBehavior = Callable[..., Any]

# grpc's status codes by Connect's names (one spelling differs).
_CONNECT_CODES = {
    code: Code[code.name.replace("CANCELLED", "CANCELED")]
    for code in grpc.StatusCode
    if code != grpc.StatusCode.OK
}


# -- the servicer's handlers, guarded ----------------------------------------------------


class WebContext(CallContext):
    """A call that came over HTTP: metadata are the request's headers, the
    deadline is the request's timeout, and `error()` turns an abort's status
    into a ConnectError."""

    def __init__(self, request: RequestContext[Any, Any]) -> None:
        super().__init__()
        self._request = request

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return tuple(self._request.request_headers.allitems())

    def time_remaining(self) -> float | None:
        remaining_ms = self._request.timeout_ms
        return None if remaining_ms is None else max(remaining_ms / 1000, 0.0)

    def peer(self) -> str:
        return f"ipv4:{self._request.client_address}" if self._request.client_address else ""

    def error(self) -> ConnectError:
        """The status the call was aborted with, details included."""
        details: list[ErrorDetail] = []
        for key, value in self.trailing():
            if key == "grpc-status-details-bin" and isinstance(value, bytes):
                status = status_pb2.Status.FromString(value)
                details = [
                    ErrorDetail(WireAny(type_url=d.type_url, value=d.value)) for d in status.details
                ]
        code = self.code() or grpc.StatusCode.UNKNOWN
        return ConnectError(_CONNECT_CODES.get(code, Code.UNKNOWN), self.details(), details)


def _unary(behavior: RpcBehavior) -> Callable[[Any, RequestContext[Any, Any]], Awaitable[Any]]:
    async def call(request: Any, request_context: RequestContext[Any, Any]) -> Any:
        context = WebContext(request_context)
        try:
            return await behavior(request, context)
        except grpc.aio.AbortError:
            raise context.error() from None

    return call


def _server_stream(
    behavior: RpcBehavior,
) -> Callable[[Any, RequestContext[Any, Any]], AsyncIterator[Any]]:
    async def call(request: Any, request_context: RequestContext[Any, Any]) -> AsyncIterator[Any]:
        context = WebContext(request_context)
        try:
            async for reply in behavior(request, context):
                yield reply
        except grpc.aio.AbortError:
            raise context.error() from None

    return call


class _LenientCodec:
    """A codec whose undecodable requests reach the guard as Undecodable
    (refused after authentication, as on the gRPC port), not as an error
    raised before it."""

    def __init__(self, codec: Codec) -> None:
        self._codec = codec

    def name(self) -> str:
        return self._codec.name()

    def encode(self, message: Any) -> bytes:
        return self._codec.encode(message)

    def decode(self, data: bytes | bytearray, message_class: type[Any]) -> Any:
        try:
            return self._codec.decode(data, message_class)
        except Exception as error:  # any parse failure
            return Undecodable(error)


class _ServiceApp(ConnectASGIApplication[None]):
    """One service's methods at /<package.Service>/<Method>."""

    def __init__(self, service: str, endpoints: Mapping[str, ServedEndpoint]) -> None:
        self._path = f"/{service}"
        super().__init__(
            service=None,
            endpoints=lambda _: endpoints,
            read_max_bytes=MAX_MESSAGE_BYTES,
            codecs=[
                _LenientCodec(google_protobuf_binary_codec()),
                _LenientCodec(google_protobuf_json_codec()),
            ],
        )

    @property
    def path(self) -> str:
        return self._path


async def service_apps(
    service_names: Sequence[str],
    register: Register,
    guard: ServiceInterceptor,
    only: Collection[str] | None = None,
) -> dict[str, ASGIApp]:
    """Each service's ASGI application, by its path prefix; every method
    (or those named in `only`) is the servicer's own handler behind `guard`."""
    handlers = await guarded_handlers(register, guard)
    apps: dict[str, ASGIApp] = {}
    for service_name in service_names:
        service = descriptor_pool.Default().FindServiceByName(service_name)
        endpoints: dict[str, ServedEndpoint] = {}
        for method in service.methods:
            if only is not None and method.name not in only:
                continue
            path = f"/{service.full_name}/{method.name}"
            guarded = handlers[path]
            info = MethodInfo(
                name=method.name,
                service_name=service.full_name,
                input=message_factory.GetMessageClass(method.input_type),
                output=message_factory.GetMessageClass(method.output_type),
                idempotency_level=IdempotencyLevel.UNKNOWN,
                stream_type=StreamType.SERVER_STREAM
                if method.server_streaming
                else StreamType.UNARY,
            )
            if method.client_streaming:
                raise ValueError(f"{path}: browsers cannot stream requests")
            endpoints[path] = (
                Endpoint.server_stream(info, _server_stream(guarded.unary_stream))
                if method.server_streaming
                else Endpoint.unary(info, _unary(guarded.unary_unary))
            )
        apps[f"/{service.full_name}/"] = _ServiceApp(service.full_name, endpoints)
    return apps


# -- the HTTP application ----------------------------------------------------------------


class _Routes:
    """Each service's calls to its application; anything else to the web
    client's files, when there are any."""

    def __init__(self, services: Mapping[str, ASGIApp], files: ASGIApp | None) -> None:
        self._services = dict(services)
        self._files = files

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        path: str = scope.get("path", "")
        for prefix, app in self._services.items():
            if path.startswith(prefix):
                await app(scope, receive, send)
                return
        if self._files is not None and scope["type"] == "http":
            await self._files(scope, receive, send)
            return
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})


async def _lifespan(receive: Receive, send: Send) -> None:
    """Nothing to set up: the host starts and stops the services."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def expand_origins(origins: Iterable[str], port: int, scheme: str) -> list[str]:
    """The allowed origins, LOOPBACK replaced by the web port's own."""
    found: list[str] = []
    for origin in origins:
        if origin == LOOPBACK:
            found += [f"{scheme}://{h}:{port}" for h in ("127.0.0.1", "localhost", "[::1]")]
        elif origin:
            found.append(origin.rstrip("/"))
    return list(dict.fromkeys(found))


def web_app(
    services: Mapping[str, ASGIApp], origins: Sequence[str], files_dir: Path | None = None
) -> ASGIApp:
    """The services (and the web client's files in `files_dir`, the hook
    for clients/web) behind CORS for `origins`."""
    # A same-origin page (the web client served from files_dir) needs no
    # CORS; `origins` are the others allowed to call.
    # StaticFiles raises HTTPException for a missing file (a 404 is an
    # answer, not a server error): ExceptionMiddleware writes it as one.
    files = (
        ExceptionMiddleware(StaticFiles(directory=files_dir, html=True))
        if files_dir is not None
        else None
    )
    return CORSMiddleware(
        _Routes(services, files),
        allow_origins=list(origins),
        allow_methods=["GET", "POST"],
        allow_headers=list(ALLOWED_HEADERS),
        expose_headers=list(EXPOSED_HEADERS),
        max_age=PREFLIGHT_MAX_AGE_S,
    )


# -- the HTTP server ---------------------------------------------------------------------


class WebServer:
    """Serves an ASGI application on a listening socket (whose descriptor it
    takes over) until stopped."""

    def __init__(self, fd: int, tls: TlsFiles | None, grace_s: float) -> None:
        self.fd = fd
        self.tls = tls
        self.grace_s = grace_s
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self, app: ASGIApp) -> None:
        config = HypercornConfig()
        config.bind = [f"fd://{self.fd}"]  # hypercorn closes it when it stops
        config.graceful_timeout = self.grace_s
        config.errorlog = logging.getLogger("agenthost.web")  # JSON lines, as every log
        config.accesslog = None
        if self.tls is not None:
            config.certfile, config.keyfile = str(self.tls.cert), str(self.tls.key)
        # starlette's and hypercorn's typings of ASGI differ; the protocol is one.
        served: Any = app
        self._task = asyncio.create_task(
            serve(served, config, shutdown_trigger=self._stop.wait, mode="asgi"), name="web"
        )
        self._task.add_done_callback(_report)

    async def stop(self) -> None:
        """Stop accepting, let the requests under way finish within the
        grace period, then close."""
        self._stop.set()
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=self.grace_s + 1)


def _report(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the web server failed", exc_info=task.exception())
