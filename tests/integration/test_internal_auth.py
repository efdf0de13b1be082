"""Internal services answer only the stack's own services: a caller that
reaches their port without the stack's internal token is refused, while
health and reflection stay open to probes, and the stack works end to end."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from agenthost.planmode.v1 import plan_mode_pb2 as pm
from agenthost.planmode.v1 import plan_mode_pb2_grpc
from agenthost.projection.v1 import projection_pb2 as pj
from agenthost.projection.v1 import projection_pb2_grpc
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.runtime.v1 import runtime_pb2_grpc
from agenthost.sessionlog.v1 import session_log_pb2 as sl
from agenthost.sessionlog.v1 import session_log_pb2_grpc
from agenthost.workspace.v1 import workspace_pb2 as ws
from agenthost.workspace.v1 import workspace_pb2_grpc
from grpc_health.v1 import health_pb2

from services.common.client import open_channel
from services.common.internal_auth import token_from_env
from services.embedded import EmbeddedStack
from tests.support.hosts import health_status
from tests.support.rpc import expect_rpc_error, reason_of

WAIT_S = 10.0


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[EmbeddedStack]:
    embedded = EmbeddedStack(tmp_path / "data", port_override=0)
    await embedded.start()
    try:
        yield embedded
    finally:
        await embedded.stop()


def probes(channel: grpc.aio.Channel) -> dict[str, object]:
    """One read of each internal service, as an outsider would try it."""
    return {
        "sessionlog": session_log_pb2_grpc.SessionLogServiceStub(channel).ReadEvents(
            sl.ReadEventsRequest(session_id="s-someone"), timeout=WAIT_S
        ),
        "planmode": plan_mode_pb2_grpc.PlanModeServiceStub(channel).GetPlanMode(
            pm.GetPlanModeRequest(session_id="s-someone"), timeout=WAIT_S
        ),
        "projection": projection_pb2_grpc.ProjectionServiceStub(channel).GetProjection(
            pj.GetProjectionRequest(session_id="s-someone"), timeout=WAIT_S
        ),
        "workspace": workspace_pb2_grpc.WorkspaceServiceStub(channel).ListWorkspaces(
            ws.ListWorkspacesRequest(account_id="local"), timeout=WAIT_S
        ),
        "agentruntime": runtime_pb2_grpc.AgentRuntimeServiceStub(channel).ResumeAgent(
            rt.ResumeAgentRequest(session_id="s-someone"), timeout=WAIT_S
        ),
    }


@pytest.mark.parametrize(
    "service", ["sessionlog", "planmode", "projection", "workspace", "agentruntime"]
)
async def test_an_internal_service_refuses_a_caller_without_the_stacks_token(
    stack: EmbeddedStack, service: str
) -> None:
    for token in (None, "a-guess"):
        async with open_channel(stack.addresses[service], token) as outsider:
            call = probes(outsider)[service]
            error = await expect_rpc_error(call, grpc.StatusCode.UNAUTHENTICATED)  # type: ignore[arg-type]
            assert reason_of(error) == "UNAUTHENTICATED"
            # Probes need no secret.
            assert await health_status(outsider) == health_pb2.HealthCheckResponse.SERVING
    # The stack's own token passes (the answer is the service's own).
    async with stack.channel(service) as insider:
        try:
            await probes(insider)[service]  # type: ignore[misc]
        except grpc.aio.AioRpcError as error:
            assert error.code() != grpc.StatusCode.UNAUTHENTICATED, error


def test_the_token_comes_from_the_environment_or_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "internal-token"
    secret.write_text("from-a-file\n")
    assert token_from_env({}) is None
    assert token_from_env({"AGENTHOST_INTERNAL_TOKEN": "inline"}) == "inline"
    assert token_from_env({"AGENTHOST_INTERNAL_TOKEN_FILE": str(secret)}) == "from-a-file"
