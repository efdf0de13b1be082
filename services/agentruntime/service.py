"""The agent runtime as a ServiceHost definition."""

from __future__ import annotations

import os
from pathlib import Path

import grpc
from agenthost.runtime.v1 import runtime_pb2_grpc as pb_grpc

from services.common.server import ServiceDefinition
from services.sessionlog.port import SessionLogPort

from .confinement import hidden_from_env, make_non_dumpable
from .defaults import SessionDefaults
from .leases import DEFAULT_LEASE_S
from .mcp import McpServers
from .models.base import ModelAdapter
from .models.catalog import ModelCatalog
from .ports import PlanModePort, WorkspaceMembersPort
from .runtime import DEFAULT_IDLE_S, AgentRuntime
from .servicer import SERVICE_NAME, AgentRuntimeServicer


def agent_runtime_service(
    log: SessionLogPort,
    model: ModelAdapter | ModelCatalog,
    plan: PlanModePort | None,
    lease_s: float = DEFAULT_LEASE_S,
    data_dir: Path | None = None,
    workspaces: WorkspaceMembersPort | None = None,
    mcp: McpServers | None = None,
    idle_s: float = DEFAULT_IDLE_S,
) -> ServiceDefinition:
    """Running turns stop before shutdown without a record (their session
    leases are given up), and on start the turns a previous runtime left open
    are recovered from the log. Confined commands and stdio MCP servers (the
    agent passes its neighbours' hidden paths to them) never see `data_dir` nor
    the files the AGENTHOST_*_FILE settings name; `workspaces` says
    which sessions share workspace-scoped permission rules. Agents idle for
    `idle_s` are unloaded. New sessions get the defaults of the user's and
    the workspace's settings files and of AGENTHOST_DEFAULT_* (defaults.py)."""
    hidden = hidden_from_env(os.environ, data_dir)
    # Its commands must not read its environment (secrets) through /proc.
    make_non_dumpable()
    runtime = AgentRuntime(
        log,
        model,
        plan,
        lease_s=lease_s,
        hidden=hidden,
        workspaces=workspaces,
        mcp=mcp,
        idle_s=idle_s,
        data_dir=data_dir,
        defaults=SessionDefaults.from_env(os.environ),
    )
    servicer = AgentRuntimeServicer(runtime)

    def register(server: grpc.aio.Server) -> None:
        pb_grpc.add_AgentRuntimeServiceServicer_to_server(servicer, server)

    return ServiceDefinition(
        [SERVICE_NAME],
        register,
        open=runtime.start_recovery,
        close=runtime.models.aclose,
        before_stop=[runtime.close],
        listening=runtime.leases.serve_at,
    )
