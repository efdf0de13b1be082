"""The grpc.aio server every service runs in.

Health starts NOT_SERVING, turns SERVING once the service's storage is open
(until then every other call is refused with UNAVAILABLE NOT_READY),
and goes back to NOT_SERVING as soon as SIGTERM arrives, so load balancers stop
sending before the grace period ends; SIGTERM during start-up (a gateway
waiting for its peers) stops it at once. Reflection lists every hosted service.

A public service may also be served to browsers, over gRPC-Web and the
Connect protocol, on a port of its own (web.py): the same servicers behind
the same interceptor, started and stopped with the gRPC server.

Ports are bound without SO_REUSEPORT: with it (gRPC's default on Linux) a
second stack started on the same ports shares them silently with the first.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from .config import ServiceConfig
from .errors import DomainError, StorageUnavailable
from .guarded import guarded_handlers
from .interceptors import Authenticate, ServiceInterceptor, warm_request_rules
from .internal_auth import require_token
from .local import LocalEndpoint, LocalEndpoints
from .reflection import enable_reflection
from .tasks import serve_until_signalled, spawn
from .topology import reachable_address

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from .web_port import WebPort

log = logging.getLogger("agenthost.server")
# Logged when a graceful stop's grace period ends with calls still running
# (the server's stop then cancels them).
GRACE_OVER = "grace period over with calls still running: they are cancelled"

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
# Pauses between storage probes while the storage is unavailable.
PROBE_FIRST_S, PROBE_MAX_S = 0.1, 2.0
SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.so_reuseport", 0),
]

Hook = Callable[[], Awaitable[None]]


class PortInUse(OSError):
    """Another process (another agenthost?) listens on the address."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.port = int(address.rsplit(":", 1)[1])
        super().__init__(errno.EADDRINUSE, f"port {self.port} is in use", address)


def port_in_use(address: str) -> bool:
    """Whether something listens on host:port already (port 0 never is).

    Asked before gRPC binds, whose failure says only "Failed to bind" and
    writes a line of its own to stderr."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return False
    try:
        resolved = socket.getaddrinfo(
            host.strip("[]") or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror:
        return False  # gRPC reports it
    for family, kind, proto, _, sockaddr in resolved:
        with socket.socket(family, kind, proto) as probe:
            # As gRPC binds: a port with connections in TIME_WAIT is free.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(sockaddr)
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    return True
    return False


@dataclass
class ServiceDefinition:
    """What a service contributes to its host.

    `register` adds the servicers to the server; `open` opens storage (health
    stays NOT_SERVING until it returns); `close` releases it after shutdown.
    """

    service_names: Sequence[str]
    register: Callable[[grpc.aio.Server], None]
    open: Hook | None = None
    close: Hook | None = None
    before_stop: Sequence[Hook] = field(default_factory=list)
    # Refuses unauthenticated calls before validation (see interceptors.py).
    # A service with its own authentication is public (the gateway); the
    # others are internal and, with an internal token configured, answer only
    # calls that carry it (internal_auth.py).
    authenticate: Authenticate | None = None
    # A write to the service's storage that raises while it is unavailable:
    # after a call failed with STORAGE_UNAVAILABLE, health is NOT_SERVING
    # until a probe succeeds.
    probe: Hook | None = None
    # Counters of the work the service did (e.g. the session log's LogStats),
    # for tests and benchmarks that measure work rather than time.
    stats: object | None = None
    # Public: also served to browsers where the config names a web address.
    web: bool = False
    # Told, once the port is bound and before `open`, the address peers reach
    # this replica at (how an agent runtime names itself as a lease owner).
    listening: Callable[[str], None] | None = None


class ServiceHost:
    def __init__(
        self,
        config: ServiceConfig,
        definition: ServiceDefinition,
        local: LocalEndpoints | None = None,
    ) -> None:
        self.config = config
        self.definition = definition
        # Where the other services of this process reach it without the
        # loopback hop (local.py), while its server runs.
        self.local = local
        self._endpoint: LocalEndpoint | None = None
        # Made in start(): grpc.aio binds them to the running event loop.
        self.health: health.aio.HealthServicer | None = None
        self.server: grpc.aio.Server | None = None
        self.port = 0
        self._stopped = asyncio.Event()
        self._stopping = False
        self._serving = False
        self._started = False  # the server runs (and `open` may have begun)
        self._interceptor: ServiceInterceptor | None = None
        self._recovery: asyncio.Task[None] | None = None
        self.web: WebPort | None = None

    @property
    def address(self) -> str:
        host = self.config.listen.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    @property
    def web_listen(self) -> str | None:
        """Where browsers are served, if they are (config.web_listen with
        its port once bound): keeps the port on a restart."""
        if not self.definition.web or self.config.web_listen is None:
            return None
        if self.web is None:
            return self.config.web_listen
        return f"{self.config.web_listen.rsplit(':', 1)[0]}:{self.web.port}"

    @property
    def web_url(self) -> str | None:
        """The browsers' base URL (http://host:port), once serving them."""
        return self.web.url if self.web is not None else None

    async def start(self) -> None:
        """Bind, serve health, open storage, then report SERVING. Raises
        PortInUse, before binding anything, when the port is taken."""
        for listen in (self.config.listen, self.web_listen):
            if listen is not None and port_in_use(listen):
                raise PortInUse(listen)
        self.health = health.aio.HealthServicer()
        self._interceptor = ServiceInterceptor(
            self._admission(),
            ready=lambda: self._serving,
            on_error=self._on_error,
            service=self.config.name,
        )
        self.server = server = grpc.aio.server(
            interceptors=[self._interceptor],
            options=SERVER_OPTIONS,
        )
        self.definition.register(server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        enable_reflection([*self.definition.service_names, health.SERVICE_NAME], server)
        await self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        try:
            tls = self.config.tls
            self.port = (
                server.add_secure_port(self.config.listen, tls.credentials())
                if tls is not None
                else server.add_insecure_port(self.config.listen)
            )
        except RuntimeError as error:
            if port_in_use(self.config.listen):  # taken since we asked
                raise PortInUse(self.config.listen) from error
            raise
        await server.start()
        self._started = True
        await self._serve_locally()
        log.info("listening", extra={"address": self.address})
        if self.definition.listening is not None:
            host = self.config.listen.rsplit(":", 1)[0]
            self.definition.listening(
                reachable_address(host, self.port, self.config.advertise_host)
            )
        await self._serve_browsers()
        if self.definition.open is not None:
            await self.definition.open()
        self._serving = True
        await self._set_health(health_pb2.HealthCheckResponse.SERVING)
        log.info("serving", extra={"address": self.address})
        warm_request_rules()

    async def _serve_browsers(self) -> None:
        """Serve the definition to browsers at web_listen, if it is public
        and one is configured: its servicers behind this host's interceptor.
        The port is bound now; the web stack loads with its first
        connection (web_port.py)."""
        listen = self.web_listen
        if listen is None:
            return
        from .web_port import PortTaken, WebPort, bind

        try:
            sock = bind(listen)
        except PortTaken as error:  # taken since we asked
            raise PortInUse(listen) from error
        self.web = WebPort(sock, self.config.tls, self.config.grace_s, self._web_app)
        self.web.open()
        log.info("web listening", extra={"address": self.web.url})

    async def _web_app(self) -> ASGIApp:
        from .web import expand_origins, service_apps, web_app

        assert self._interceptor is not None and self.health is not None and self.web is not None
        apps = await service_apps(
            self.definition.service_names, self.definition.register, self._interceptor
        )
        # Health's Check over HTTP too (Connect: a JSON POST), so a load
        # balancer that cannot speak gRPC (haproxy) still asks the service
        # whether it serves, and sees a draining one say NOT_SERVING.
        servicer = self.health
        apps |= await service_apps(
            [health.SERVICE_NAME],
            lambda server: health_pb2_grpc.add_HealthServicer_to_server(servicer, server),
            self._interceptor,
            only=("Check",),
        )
        origins = expand_origins(self.config.web_origins, self.web.port, self.web.scheme)
        log.info("web serving", extra={"address": self.web.url, "origins": origins})
        return web_app(apps, origins, self.config.web_files)

    async def _serve_locally(self) -> None:
        if self.local is None:
            return
        assert self._interceptor is not None
        self._endpoint = LocalEndpoint(
            await guarded_handlers(self.definition.register, self._interceptor)
        )
        self.local.add(self.config.name, self._endpoint)

    async def _stop_serving_locally(self) -> None:
        """Where the server stops: local streams end as its streams do."""
        if self.local is not None and self._endpoint is not None:
            self.local.remove(self.config.name, self._endpoint)
            await self._endpoint.stop()

    def _admission(self) -> Authenticate | None:
        if self.definition.authenticate is not None:
            return self.definition.authenticate
        token = self.config.internal_token
        return require_token(token) if token is not None else None

    async def stop(self) -> None:
        """Shut down gracefully; also part-way through start() (cancel that
        first): a service that never served skips the drain."""
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        try:
            await self._shut_down()
        finally:
            self._stopped.set()

    async def _shut_down(self) -> None:
        if self.health is None or self.server is None or not self._started:
            return
        await self.health.enter_graceful_shutdown()
        if self._serving and self.config.drain_s > 0:
            await asyncio.sleep(self.config.drain_s)  # balancers see NOT_SERVING first
        # New calls are refused (UNAVAILABLE, retry) rather than cut off by the
        # server's stop; those already received finish, then the streams end.
        self._serving = False
        if self._recovery is not None:
            self._recovery.cancel()
        started = time.monotonic()
        calls = self._interceptor.unary_calls if self._interceptor is not None else None
        if calls is not None and not await calls.settle(self.config.grace_s):
            log.warning(GRACE_OVER)
        for hook in self.definition.before_stop:
            await hook()
        if self.web is not None:
            await self.web.stop()
        await self._stop_serving_locally()
        await self.server.stop(max(self.config.grace_s - (time.monotonic() - started), 0))
        if self.definition.close is not None:
            await self.definition.close()
        log.info("stopped")

    async def run_until_signalled(self) -> None:
        """Serve until SIGTERM or SIGINT, then shut down gracefully. A signal
        during start-up cuts it short; a failed start-up is raised, after
        releasing what it had started."""
        await serve_until_signalled(self.start, self.stop)

    # -- storage failures --------------------------------------------------------

    def _on_error(self, error: DomainError) -> None:
        if (
            isinstance(error, StorageUnavailable)
            and self.definition.probe is not None
            and self._recovery is None
            and self._serving
        ):
            self._recovery = spawn(self._recover_storage(), name=f"{self.config.name}-storage")

    async def _recover_storage(self) -> None:
        """NOT_SERVING (balancers and orchestrators look elsewhere; calls are
        still answered, reads may work) until a probe write succeeds."""
        assert self.definition.probe is not None
        log.warning("storage unavailable: NOT_SERVING until it can be written again")
        await self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        delay = PROBE_FIRST_S
        while True:
            await asyncio.sleep(delay)  # a pause between probes, not synchronisation
            try:
                await self.definition.probe()
            except Exception as error:
                log.debug("storage probe failed: %s", error)
                delay = min(delay * 2, PROBE_MAX_S)
                continue
            break
        self._recovery = None
        if self._serving:
            await self._set_health(health_pb2.HealthCheckResponse.SERVING)
            log.warning("storage writable again: SERVING")

    async def _set_health(self, status: health_pb2.HealthCheckResponse.ServingStatus) -> None:
        assert self.health is not None
        for name in ("", *self.definition.service_names):
            await self.health.set(name, status)
