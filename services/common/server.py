"""The grpc.aio server every service runs in.

Health starts NOT_SERVING, turns SERVING once the service's storage is open
(until then every other call is refused with UNAVAILABLE NOT_READY),
and goes back to NOT_SERVING as soon as SIGTERM arrives, so load balancers stop
sending before the grace period ends. Reflection lists every hosted service.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from .config import ServiceConfig
from .interceptors import Authenticate, ServiceInterceptor
from .internal_auth import require_token
from .tasks import spawn

log = logging.getLogger("agenthost.server")

MAX_MESSAGE_BYTES = 16 * 1024 * 1024
SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
]

Hook = Callable[[], Awaitable[None]]


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


class ServiceHost:
    def __init__(self, config: ServiceConfig, definition: ServiceDefinition) -> None:
        self.config = config
        self.definition = definition
        # Made in start(): grpc.aio binds them to the running event loop.
        self.health: health.aio.HealthServicer | None = None
        self.server: grpc.aio.Server | None = None
        self.port = 0
        self._stopped = asyncio.Event()
        self._stopping = False
        self._serving = False

    @property
    def address(self) -> str:
        host = self.config.listen.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    async def start(self) -> None:
        self.health = health.aio.HealthServicer()
        self.server = server = grpc.aio.server(
            interceptors=[ServiceInterceptor(self._admission(), ready=lambda: self._serving)],
            options=SERVER_OPTIONS,
        )
        self.definition.register(server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        names = [*self.definition.service_names, health.SERVICE_NAME, reflection.SERVICE_NAME]
        reflection.enable_server_reflection(names, server)
        await self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        self.port = server.add_insecure_port(self.config.listen)
        await server.start()
        log.info("listening", extra={"address": self.address})
        if self.definition.open is not None:
            await self.definition.open()
        self._serving = True
        await self._set_health(health_pb2.HealthCheckResponse.SERVING)
        log.info("serving", extra={"address": self.address})

    def _admission(self) -> Authenticate | None:
        if self.definition.authenticate is not None:
            return self.definition.authenticate
        token = self.config.internal_token
        return require_token(token) if token is not None else None

    async def stop(self) -> None:
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        if self.health is None or self.server is None:
            self._stopped.set()
            return
        await self.health.enter_graceful_shutdown()
        if self.config.drain_s > 0:
            await asyncio.sleep(self.config.drain_s)
        for hook in self.definition.before_stop:
            await hook()
        await self.server.stop(self.config.grace_s)
        if self.definition.close is not None:
            await self.definition.close()
        log.info("stopped")
        self._stopped.set()

    async def run_until_signalled(self) -> None:
        """Serve until SIGTERM or SIGINT, then shut down gracefully."""
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, lambda: spawn(self.stop(), name="stop"))
        await self.start()
        await self._stopped.wait()

    async def _set_health(self, status: health_pb2.HealthCheckResponse.ServingStatus) -> None:
        assert self.health is not None
        for name in ("", *self.definition.service_names):
            await self.health.set(name, status)
