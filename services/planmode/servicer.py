"""gRPC adapter of plan mode."""

from __future__ import annotations

import grpc
from agenthost.planmode.v1 import plan_mode_pb2 as pb
from agenthost.planmode.v1 import plan_mode_pb2_grpc as pb_grpc

from .controller import PlanModeController, SetOutcome

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["PlanModeService"].full_name

OUTCOMES = {
    SetOutcome.COMMITTED: pb.SET_OUTCOME_COMMITTED,
    SetOutcome.QUEUED: pb.SET_OUTCOME_QUEUED,
    SetOutcome.CANCELLED: pb.SET_OUTCOME_CANCELLED,
    SetOutcome.NOOP: pb.SET_OUTCOME_NOOP,
}


class PlanModeServicer(pb_grpc.PlanModeServiceServicer):
    def __init__(self, controller: PlanModeController) -> None:
        self.controller = controller

    async def GetPlanMode(
        self, request: pb.GetPlanModeRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetPlanModeResponse:
        snapshot = await self.controller.get(request.session_id)
        return pb.GetPlanModeResponse(state=snapshot.state.to_proto(), as_of_seq=snapshot.as_of_seq)

    async def SetPlanMode(
        self, request: pb.SetPlanModeRequest, context: grpc.aio.ServicerContext
    ) -> pb.SetPlanModeResponse:
        choose = self.controller.set_when_idle if request.when_idle else self.controller.set
        result = await choose(request.session_id, request.active)
        if result is None:
            return pb.SetPlanModeResponse(deferred=True)
        return pb.SetPlanModeResponse(
            outcome=OUTCOMES[result.outcome],
            state=result.state.to_proto(),
            as_of_seq=result.as_of_seq,
        )

    async def ApplyAtBoundary(
        self, request: pb.ApplyAtBoundaryRequest, context: grpc.aio.ServicerContext
    ) -> pb.ApplyAtBoundaryResponse:
        result = await self.controller.apply_at_boundary(
            request.session_id, request.lease_token if request.HasField("lease_token") else None
        )
        return pb.ApplyAtBoundaryResponse(
            state=result.state.to_proto(),
            sections=result.sections,
            applied=result.applied,
            as_of_seq=result.as_of_seq,
        )

    async def ExitPlanMode(
        self, request: pb.ExitPlanModeRequest, context: grpc.aio.ServicerContext
    ) -> pb.ExitPlanModeResponse:
        snapshot = await self.controller.exit_plan_mode(
            request.session_id, request.lease_token if request.HasField("lease_token") else None
        )
        return pb.ExitPlanModeResponse(
            state=snapshot.state.to_proto(), as_of_seq=snapshot.as_of_seq
        )

    async def RunPlanCommand(
        self, request: pb.RunPlanCommandRequest, context: grpc.aio.ServicerContext
    ) -> pb.RunPlanCommandResponse:
        result = await self.controller.run_plan_command(
            request.session_id,
            request.args if request.HasField("args") else None,
            request.command_id,
        )
        reply = pb.RunPlanCommandResponse(
            ok=result.ok,
            message=result.message,
            state=result.state.to_proto(),
            as_of_seq=result.as_of_seq,
        )
        if result.steer_text is not None:
            reply.steer_text = result.steer_text
        return reply
