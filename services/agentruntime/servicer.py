"""gRPC adapter of the agent runtime."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
from agenthost.runtime.v1 import runtime_pb2 as pb
from agenthost.runtime.v1 import runtime_pb2_grpc as pb_grpc

from agenthost_core.folds import APPROVAL_POLICIES, SANDBOXES, settings_event

from .agent import AgentStatus, PromptMode
from .capability import Resource
from .live import ANSWER, LiveDelta, TextDelta
from .models.catalog import ModelSpec
from .runtime import AgentRuntime

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["AgentRuntimeService"].full_name

_MODES = {
    pb.PROMPT_MODE_UNSPECIFIED: PromptMode.SEND,
    pb.PROMPT_MODE_SEND: PromptMode.SEND,
    pb.PROMPT_MODE_QUEUE: PromptMode.QUEUE,
    pb.PROMPT_MODE_STEER: PromptMode.STEER,
}
_MODE_VALUES = {mode: value for value, mode in _MODES.items() if value}
_TEXT_KINDS = {True: pb.TEXT_KIND_ANSWER, False: pb.TEXT_KIND_REASONING}


def status_pb(status: AgentStatus) -> pb.AgentStatus:
    return pb.AgentStatus(
        session_id=status.session_id,
        running=status.running,
        queued=status.queued,
        last_seq=status.last_seq,
    )


def model_pb(spec: ModelSpec, default: str) -> pb.ModelInfo:
    info = pb.ModelInfo(
        name=spec.name,
        provider=spec.provider.name,
        provider_model=spec.model_id,
        context_window=spec.context_window,
        max_output_tokens=spec.max_output_tokens,
        is_default=spec.name == default,
        images=spec.images,
    )
    if spec.prices is not None:
        info.prices.input, info.prices.output = spec.prices.input, spec.prices.output
        if spec.prices.cached_input is not None:
            info.prices.cached_input = spec.prices.cached_input
    return info


def live_pb(delta: LiveDelta) -> pb.WatchLiveResponse:
    if isinstance(delta, TextDelta):
        return pb.WatchLiveResponse(
            assistant=pb.AssistantDelta(
                session_id=delta.session_id,
                turn_id=delta.turn_id,
                step=delta.step,
                kind=_TEXT_KINDS[delta.kind == ANSWER],
                offset=delta.offset,
                text=delta.text,
            )
        )
    return pb.WatchLiveResponse(
        tool_output=pb.ToolOutputDelta(
            session_id=delta.session_id,
            turn_id=delta.turn_id,
            call_id=delta.call_id,
            offset=delta.offset,
            text=delta.text,
        )
    )


class AgentRuntimeServicer(pb_grpc.AgentRuntimeServiceServicer):
    def __init__(self, runtime: AgentRuntime) -> None:
        self.runtime = runtime

    async def ResumeAgent(
        self, request: pb.ResumeAgentRequest, context: grpc.aio.ServicerContext
    ) -> pb.ResumeAgentResponse:
        agent = await self.runtime.resume(request.session_id)
        return pb.ResumeAgentResponse(status=status_pb(agent.status()))

    async def Prompt(
        self, request: pb.PromptRequest, context: grpc.aio.ServicerContext
    ) -> pb.PromptResponse:
        resources = [
            Resource(r.uri, r.text if r.HasField("text") else None) for r in request.resources
        ]
        taken, status = await self.runtime.prompt(
            request.session_id,
            request.text,
            _MODES[request.mode],
            request.input_id,
            resources,
            request.images,
        )
        return pb.PromptResponse(mode=_MODE_VALUES[taken], status=status_pb(status))

    async def Cancel(
        self, request: pb.CancelRequest, context: grpc.aio.ServicerContext
    ) -> pb.CancelResponse:
        cancelled, status = await self.runtime.cancel(request.session_id)
        return pb.CancelResponse(cancelled=cancelled, status=status_pb(status))

    async def GetStatus(
        self, request: pb.GetStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetStatusResponse:
        return pb.GetStatusResponse(status=status_pb(await self.runtime.status(request.session_id)))

    async def WatchStatus(
        self, request: pb.WatchStatusRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WatchStatusResponse]:
        async for status in self.runtime.watch_status(request.session_id or None):
            yield pb.WatchStatusResponse(status=status_pb(status))

    async def ListCommands(
        self, request: pb.ListCommandsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListCommandsResponse:
        commands = await self.runtime.commands(request.session_id)
        return pb.ListCommandsResponse(
            commands=[
                pb.CommandInfo(name=c.name, description=c.description, usage=c.usage)
                for c in commands
            ]
        )

    async def ExecuteCommand(
        self, request: pb.ExecuteCommandRequest, context: grpc.aio.ServicerContext
    ) -> pb.ExecuteCommandResponse:
        result = await self.runtime.execute_command(
            request.session_id, request.name, request.args if request.HasField("args") else None
        )
        return pb.ExecuteCommandResponse(
            ok=result.ok, message=result.message, last_seq=result.last_seq
        )

    async def AnswerQuestion(
        self, request: pb.AnswerQuestionRequest, context: grpc.aio.ServicerContext
    ) -> pb.AnswerQuestionResponse:
        seq = await self.runtime.answer(request.session_id, request.question_id, request.answer)
        return pb.AnswerQuestionResponse(seq=seq)

    async def UpdateSettings(
        self, request: pb.UpdateSettingsRequest, context: grpc.aio.ServicerContext
    ) -> pb.UpdateSettingsResponse:
        sandbox = SANDBOXES[request.sandbox] if request.HasField("sandbox") else None
        approvals = APPROVAL_POLICIES[request.approvals] if request.HasField("approvals") else None
        model = request.model if request.HasField("model") else None
        network = request.network if request.HasField("network") else None
        settings, seq = await self.runtime.update_settings(
            request.session_id, sandbox, approvals, model, network=network
        )
        return pb.UpdateSettingsResponse(settings=settings_event(settings), seq=seq)

    async def ListModels(
        self, request: pb.ListModelsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListModelsResponse:
        specs = await self.runtime.list_models(request.session_id)
        default = self.runtime.models.default.name
        return pb.ListModelsResponse(models=[model_pb(spec, default) for spec in specs])

    async def StopProcesses(
        self, request: pb.StopProcessesRequest, context: grpc.aio.ServicerContext
    ) -> pb.StopProcessesResponse:
        stopped, last_seq = await self.runtime.stop_processes(request.session_id)
        return pb.StopProcessesResponse(stopped=stopped, last_seq=last_seq)

    async def WatchLive(
        self, request: pb.WatchLiveRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WatchLiveResponse]:
        async for delta in self.runtime.watch_live():
            yield live_pb(delta)

    async def ListPaths(
        self, request: pb.ListPathsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListPathsResponse:
        listing = await self.runtime.list_paths(request.session_id, request.prefix, request.limit)
        return pb.ListPathsResponse(
            entries=[pb.PathEntry(path=path, folder=folder) for path, folder in listing.paths],
            truncated=listing.truncated,
        )
