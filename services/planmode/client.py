"""Plan mode over gRPC, for the runtime and the gateway."""

from __future__ import annotations

import grpc
from agenthost.planmode.v1 import plan_mode_pb2 as pb
from agenthost.planmode.v1 import plan_mode_pb2_grpc as pb_grpc

from services.common.client import call_timeout, raising_peer_errors

BOUNDARY_TIMEOUT_S = 1.0


PEER = "planmode"
calls_peer = raising_peer_errors(PEER)


class PlanModeClient:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.stub = pb_grpc.PlanModeServiceStub(channel)

    @calls_peer
    async def get(self, session_id: str) -> pb.GetPlanModeResponse:
        reply: pb.GetPlanModeResponse = await self.stub.GetPlanMode(
            pb.GetPlanModeRequest(session_id=session_id),
            timeout=call_timeout(),
            wait_for_ready=True,
        )
        return reply

    @calls_peer
    async def set(
        self, session_id: str, active: bool, *, when_idle: bool = False
    ) -> pb.SetPlanModeResponse:
        reply: pb.SetPlanModeResponse = await self.stub.SetPlanMode(
            pb.SetPlanModeRequest(session_id=session_id, active=active, when_idle=when_idle),
            timeout=call_timeout(),
            wait_for_ready=True,
        )
        return reply

    @calls_peer
    async def apply_at_boundary(
        self, session_id: str, lease_token: int | None = None
    ) -> pb.ApplyAtBoundaryResponse:
        reply: pb.ApplyAtBoundaryResponse = await self.stub.ApplyAtBoundary(
            pb.ApplyAtBoundaryRequest(session_id=session_id, lease_token=lease_token),
            # A step waits this long at most for plan mode (through a restart,
            # say), then runs with the plan mode committed in the log
            # (plan_port.RemotePlanMode).
            timeout=call_timeout(BOUNDARY_TIMEOUT_S),
            wait_for_ready=True,
        )
        return reply

    @calls_peer
    async def exit_plan_mode(
        self, session_id: str, lease_token: int | None = None
    ) -> pb.ExitPlanModeResponse:
        reply: pb.ExitPlanModeResponse = await self.stub.ExitPlanMode(
            pb.ExitPlanModeRequest(session_id=session_id, lease_token=lease_token),
            timeout=call_timeout(),
            wait_for_ready=True,
        )
        return reply

    @calls_peer
    async def run_plan_command(
        self, session_id: str, args: str | None
    ) -> pb.RunPlanCommandResponse:
        request = pb.RunPlanCommandRequest(session_id=session_id)
        if args is not None:
            request.args = args
        reply: pb.RunPlanCommandResponse = await self.stub.RunPlanCommand(
            request, timeout=call_timeout(), wait_for_ready=True
        )
        return reply
