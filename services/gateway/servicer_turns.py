"""The gateway's calls on a session's turns: prompts, cancel, commands,
answers, settings, models, paths, and plan mode; adapters over the
workflows, as the servicer is (servicer.py)."""

from __future__ import annotations

from typing import TypeAlias

import grpc
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.sessionlog.port import SessionLogPort

from .agent_loads import AgentLoads
from .plan_choices import PlanChoices
from .runtime_port import RuntimePort
from .scope import CallScope

Context: TypeAlias = grpc.aio.ServicerContext


class TurnCalls:
    """A part of GatewayServicer; the attributes are the servicer's."""

    scope: CallScope
    log: SessionLogPort
    runtime: RuntimePort
    agents: AgentLoads
    plans: PlanChoices

    async def Prompt(self, request: gw.PromptRequest, context: Context) -> gw.PromptResponse:
        async with self.scope.mutating(request.fence, request.session_id):
            session_id = request.session_id
            await self.agents.load(session_id)
            target = request.plan_target if request.HasField("plan_target") else None
            reply = await self.plans.with_target(
                session_id,
                target,
                lambda: self.runtime.prompt(
                    session_id, request.text, request.mode, request.resources, request.images
                ),
            )
            status = reply.status
            return gw.PromptResponse(mode=reply.mode, running=status.running, seq=status.last_seq)

    async def ReadImage(
        self, request: gw.ReadImageRequest, context: Context
    ) -> gw.ReadImageResponse:
        await self.scope.own(request.session_id)
        image = await self.log.read_image(request.session_id, request.digest)
        ref = ev.ImageRef(digest=image.digest, media_type=image.media_type, size=len(image.data))
        return gw.ReadImageResponse(image=ref, data=image.data)

    async def Cancel(self, request: gw.CancelRequest, context: Context) -> gw.CancelResponse:
        async with self.scope.mutating(request.fence, request.session_id):
            reply = await self.runtime.cancel(request.session_id)
            return gw.CancelResponse(cancelled=reply.cancelled, seq=reply.status.last_seq)

    async def ListCommands(
        self, request: gw.ListCommandsRequest, context: Context
    ) -> gw.ListCommandsResponse:
        await self.scope.own(request.session_id)
        commands = await self.runtime.list_commands(request.session_id)
        return gw.ListCommandsResponse(commands=commands)

    async def ExecuteCommand(
        self, request: gw.ExecuteCommandRequest, context: Context
    ) -> gw.ExecuteCommandResponse:
        async with self.scope.mutating(request.fence, request.session_id):
            await self.agents.load(request.session_id)
            args = request.args if request.HasField("args") else None
            reply = await self.runtime.execute_command(request.session_id, request.name, args)
            return gw.ExecuteCommandResponse(ok=reply.ok, message=reply.message, seq=reply.last_seq)

    async def AnswerQuestion(
        self, request: gw.AnswerQuestionRequest, context: Context
    ) -> gw.AnswerQuestionResponse:
        async with self.scope.mutating(request.fence, request.session_id):
            seq = await self.runtime.answer(request.session_id, request.question_id, request.answer)
            return gw.AnswerQuestionResponse(seq=seq)

    async def UpdateSessionSettings(
        self, request: gw.UpdateSessionSettingsRequest, context: Context
    ) -> gw.UpdateSessionSettingsResponse:
        async with self.scope.mutating(request.fence, request.session_id):
            update = rt.UpdateSettingsRequest(session_id=request.session_id)
            for name in ("sandbox", "approvals", "model", "network"):
                if request.HasField(name):
                    setattr(update, name, getattr(request, name))
            reply = await self.runtime.update_settings(update)
            return gw.UpdateSessionSettingsResponse(settings=reply.settings, seq=reply.seq)

    async def ListModels(
        self, request: gw.ListModelsRequest, context: Context
    ) -> gw.ListModelsResponse:
        await self.scope.own(request.session_id)
        return gw.ListModelsResponse(models=await self.runtime.list_models(request.session_id))

    async def ListPaths(
        self, request: gw.ListPathsRequest, context: Context
    ) -> gw.ListPathsResponse:
        """What `@` completes: the runtime lists the session's folder as its
        file tools see it (confined, hidden paths left out)."""
        await self.scope.own(request.session_id)
        reply = await self.runtime.list_paths(request.session_id, request.prefix, request.limit)
        return gw.ListPathsResponse(entries=reply.entries, truncated=reply.truncated)

    # -- plan mode ----------------------------------------------------------------------

    async def PlanMode(self, request: gw.PlanModeRequest, context: Context) -> gw.PlanModeResponse:
        """The `plan` projection value itself, so the two never disagree."""
        await self.scope.read(request)
        await self.scope.own(request.session_id)
        at_least = request.min_seq if request.HasField("min_seq") else -1
        state, seq = await self.plans.read(request.session_id, at_least)
        plan = gw.PlanModeValue() if state is None else gw.PlanModeValue(state=state.to_proto())
        return gw.PlanModeResponse(plan=plan, seq=seq)

    async def SetPlanMode(
        self, request: gw.SetPlanModeRequest, context: Context
    ) -> gw.SetPlanModeResponse:
        async with self.scope.mutating(request.fence, request.session_id):
            reply = await self.plans.choose(request.session_id, request.active)
            if reply is None:
                return gw.SetPlanModeResponse(plan=gw.PlanModeValue(), seq=-1)
            plan = gw.PlanModeValue(state=reply.state)
            return gw.SetPlanModeResponse(plan=plan, outcome=reply.outcome, seq=reply.as_of_seq)
