"""The embedded default: every service in one process, each on its own
loopback port, with SQLite under one data folder (or in the database
AGENTHOST_DATABASE_URL names, PostgreSQL included). `agenthost up` (and so
`make run`) starts this; the integration suites start it too. The gateway
also serves browsers (gRPC-Web and Connect) on a port of its own, allowing
its own loopback origins and any others given.

The services reach each other in-process (services/common/local.py): the
same stubs, clients, guard and errors as over gRPC, without the loopback
hop, which cost each call between them about one bare gRPC call of CPU on
the one event loop they share. Their ports still serve everyone else (the
CLI, browsers, tests, another process). The gateway reaches runtimes by
address, as it reaches the replicas of a deployment: this stack's own
runtime in-process, any other over gRPC."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from agenthost.projection.v1 import projection_pb2_grpc

from agenthost_core.locations import TOKEN_FILE
from services.agentruntime.confinement import describe as describe_confinement
from services.agentruntime.leases import lease_s_from_env
from services.agentruntime.mcp import McpServers
from services.agentruntime.mcp.config import deployment_path
from services.agentruntime.models.base import ModelAdapter
from services.agentruntime.models.catalog import ModelCatalog, catalog_from_env
from services.agentruntime.plan_port import RemotePlanMode
from services.agentruntime.runtime import idle_s_from_env
from services.agentruntime.service import agent_runtime_service
from services.common.client import open_channel
from services.common.config import LOOPBACK, ServiceConfig, TlsFiles, web_client_files
from services.common.database import Database, database_from_env
from services.common.internal_auth import METADATA_KEY, new_token
from services.common.local import LocalChannel, LocalEndpoints
from services.common.server import PortInUse, ServiceDefinition, ServiceHost, port_in_use
from services.common.tasks import serve_until_signalled
from services.common.topology import DEFAULT_PORTS, DEFAULT_WEB_PORT, SERVICES
from services.gateway.accounts import LOCAL_ACCOUNT, TokenStore, ensure_local_token
from services.gateway.runtimes import RuntimeReplicas
from services.gateway.service import gateway_service
from services.planmode.client import PlanModeClient
from services.planmode.config import PlanModeConfig, config_from_env
from services.planmode.service import plan_mode_service
from services.projection.service import projection_service
from services.sessionlog.client import SessionLogClient
from services.sessionlog.port import SessionLogPort
from services.sessionlog.service import session_log_service, session_store
from services.workspace.client import WorkspaceClient
from services.workspace.service import workspace_service

DEFAULT_HOST = "127.0.0.1"


@dataclass
class EmbeddedStack:
    data_dir: Path
    host: str = DEFAULT_HOST
    # 0 picks a free port for every service (tests); None uses the defaults.
    port_override: int | None = None
    # Where every service keeps its data; None: AGENTHOST_DATABASE_URL, else
    # SQLite in data_dir. (Not the session log's own AGENTHOST_SESSIONLOG_DSN:
    # a shell set up for one deployed service must not rewire `agenthost up`.)
    database: Database | None = None
    with_plan_mode: bool = True
    # None: the models file or the environment's model (models/catalog.py).
    model: ModelAdapter | ModelCatalog | None = None
    tokens: TokenStore | None = None
    gateway_heartbeat_s: float = 15.0
    # How long a stopping service says NOT_SERVING before refusing calls.
    drain_s: float = 0.0
    # Plan mode's policy text; None: AGENTHOST_PLANMODE_CONFIG or the default.
    plan_config: PlanModeConfig | None = None
    # Lets a test put failure injection between plan mode and the log.
    wrap_plan_log: Callable[[SessionLogPort], SessionLogPort] | None = None
    # The gateway's certificate and key: clients then reach it over TLS.
    gateway_tls: TlsFiles | None = None
    # Browsers: whether the gateway serves them, where (None: the default
    # port, or a free one with port_override 0), the origins allowed to call
    # it, and the web client's files it serves (by default the built
    # clients/web, so `make run` serves the page).
    web: bool = True
    web_listen: str | None = None
    web_origins: tuple[str, ...] = (LOOPBACK,)
    web_files: Path | None = field(default_factory=lambda: web_client_files(os.environ))
    # What the services present to each other (fresh each start of the stack).
    internal_token: str = field(default_factory=new_token)
    hosts: dict[str, ServiceHost] = field(default_factory=dict)
    addresses: dict[str, str] = field(default_factory=dict)
    definitions: dict[str, ServiceDefinition] = field(default_factory=dict)
    _channels: dict[str, list[grpc.aio.Channel]] = field(default_factory=dict)
    # Where the services reach each other in-process.
    peers: LocalEndpoints = field(default_factory=LocalEndpoints)

    @property
    def names(self) -> list[str]:
        # SERVICES is in start order: each service only needs those before it.
        return [n for n in SERVICES if self.with_plan_mode or n != "planmode"]

    @property
    def confinement(self) -> str:
        """Whether the agent's commands can be confined here (probed once)."""
        return describe_confinement()

    @property
    def web_url(self) -> str | None:
        """Where browsers reach the gateway (http://host:port), once it serves."""
        gateway = self.hosts.get("gateway")
        return gateway.web_url if gateway is not None else None

    def token(self) -> str:
        """The embedded default's bearer token (account "local")."""
        return ensure_local_token(self.data_dir / TOKEN_FILE)

    async def start(self) -> None:
        """Start every service; raises PortInUse, having started none, when
        a port is taken (the gateway's, the one people know, asked first).
        A failed or cancelled start stops what it had started."""
        listens = [self._listen(n) for n in sorted(self.names, key=lambda n: n != "gateway")]
        for listen in [*listens, self._web_listen()]:
            if listen is not None and port_in_use(listen):
                raise PortInUse(listen)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.tokens is None:
            self.tokens = TokenStore({self.token(): LOCAL_ACCOUNT})
        try:
            for name in self.names:
                await self.start_service(name)
        except BaseException:
            await self.stop()
            raise

    def _listen(self, name: str) -> str:
        port = DEFAULT_PORTS[name] if self.port_override is None else self.port_override
        return self.addresses.get(name, f"{self.host}:{port}")

    def _web_listen(self) -> str | None:
        if not self.web:
            return None
        port = DEFAULT_WEB_PORT if self.port_override is None else self.port_override
        return self.web_listen or f"{self.host}:{port}"

    async def start_service(self, name: str) -> None:
        config = ServiceConfig(
            name=name,
            listen=self._listen(name),
            data_dir=self.data_dir,
            grace_s=2.0,
            drain_s=self.drain_s,
            internal_token=self.internal_token,
            tls=self.gateway_tls if name == "gateway" else None,
            web_listen=self._web_listen() if name == "gateway" else None,
            web_origins=self.web_origins,
            web_files=self.web_files,
        )
        definition = self._definition(name)
        service_host = ServiceHost(config, definition, local=self.peers)
        # Known before it starts, so stop() also ends a start cut short.
        self.hosts[name], self.definitions[name] = service_host, definition
        await service_host.start()
        self.addresses[name] = service_host.address
        if service_host.web_listen is not None:
            self.web_listen = service_host.web_listen  # kept on a restart

    async def stop_service(self, name: str) -> None:
        await self.hosts.pop(name).stop()
        for channel in self._channels.pop(name, []):
            await channel.close()

    async def restart(self, name: str) -> None:
        """Stop and start one service on the same address and data."""
        await self.stop_service(name)
        await self.start_service(name)

    async def stop(self) -> None:
        for name in reversed(list(self.hosts)):
            await self.stop_service(name)

    async def run_until_signalled(self, on_up: Callable[[], None] | None = None) -> None:
        """Start, call `on_up`, serve until SIGTERM or SIGINT, then stop; a
        signal during start-up cuts it short (a failed start is raised)."""
        await serve_until_signalled(self.start, self.stop, on_up=on_up)

    # -- wiring ----------------------------------------------------------------

    def channel(self, target: str) -> grpc.aio.Channel:
        """A channel to one of the stack's services, as its peers call it
        (with the internal token); the caller closes it."""
        return self.dial(self.addresses[target])

    def dial(self, address: str) -> grpc.aio.Channel:
        """A channel to one replica's address, as peers call it."""
        return open_channel(address, self.internal_token)

    def _dial_runtime(self, address: str) -> grpc.aio.Channel:
        """How the gateway reaches a runtime replica: this stack's own
        in-process (its live text then crosses no socket), any other by its
        address."""
        if address == self.addresses.get("agentruntime"):
            return self._channel("gateway", "agentruntime")
        return self.dial(address)

    def _channel(self, owner: str, target: str) -> grpc.aio.Channel:
        """How `owner` calls `target`: in-process, with the internal token."""
        channel = LocalChannel(self.peers, target, ((METADATA_KEY, self.internal_token),))
        self._channels.setdefault(owner, []).append(channel)
        return channel

    def _log(self, owner: str) -> SessionLogClient:
        return SessionLogClient(self._channel(owner, "sessionlog"))

    def _plan_client(self, owner: str) -> PlanModeClient | None:
        return PlanModeClient(self._channel(owner, "planmode")) if self.with_plan_mode else None

    def _plan_config(self) -> PlanModeConfig:
        return self.plan_config or config_from_env(os.environ)

    def stores(self) -> Database:
        """Where the services keep their data: the database given, else the
        stack's setting (SQLite in the data folder by default)."""
        return self.database or database_from_env(os.environ, self.data_dir)

    def _definition(self, name: str) -> ServiceDefinition:
        data = self.data_dir
        database = self.stores()
        if name == "sessionlog":
            return session_log_service(data / "sessionlog.db", session_store(database))
        if name == "planmode":
            log: SessionLogPort = self._log(name)
            return plan_mode_service(
                self.wrap_plan_log(log) if self.wrap_plan_log else log, self._plan_config()
            )
        if name == "projection":
            return projection_service(
                data, self._log(name), with_plan_mode=self.with_plan_mode, database=database
            )
        if name == "workspace":
            return workspace_service(data, self._log(name), database=database)
        if name == "agentruntime":
            plan = self._plan_client(name)
            model = self.model if self.model is not None else catalog_from_env(None, data)
            return agent_runtime_service(
                self._log(name),
                model,
                RemotePlanMode(plan, self._plan_config()) if plan else None,
                lease_s_from_env(os.environ),
                data,
                WorkspaceClient(self._channel(name, "workspace")),
                mcp=McpServers(deployment_path(os.environ, data)),
                idle_s=idle_s_from_env(os.environ),
            )
        assert self.tokens is not None
        return gateway_service(
            self.tokens,
            self._log(name),
            WorkspaceClient(self._channel(name, "workspace")),
            RuntimeReplicas(self.addresses["agentruntime"], self._dial_runtime),
            projection_pb2_grpc.ProjectionServiceStub(self._channel(name, "projection")),
            self._plan_client(name),
            heartbeat_s=self.gateway_heartbeat_s,
            database=database,
        )
