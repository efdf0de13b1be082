"""The agent runtime as the gateway calls it: one method per call, each
routed to the session's owner by RuntimeReplicas (runtimes.py). Every write
reports the log seq it reached to `on_written`, so the gateway's kept plan
states know of it (read-your-writes) without each caller saying so."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev

from .runtimes import RuntimeReplicas

Written = Callable[[str, int], None]


class RuntimePort:
    def __init__(self, replicas: RuntimeReplicas, on_written: Written) -> None:
        self.replicas = replicas
        self._on_written = on_written

    def _wrote(self, session_id: str, seq: int) -> None:
        self._on_written(session_id, seq)

    async def resume(self, session_id: str) -> rt.AgentStatus:
        """Load the session's agent (a turn a stopped runtime left open ends)."""
        reply: rt.ResumeAgentResponse = await self.replicas.call(
            "ResumeAgent", rt.ResumeAgentRequest(session_id=session_id)
        )
        return reply.status

    async def prompt(
        self,
        session_id: str,
        text: str,
        mode: rt.PromptMode.ValueType,
        resources: Sequence[rt.PromptResource] = (),
        images: Sequence[ev.ImageInput] = (),
    ) -> rt.PromptResponse:
        request = rt.PromptRequest(
            session_id=session_id, text=text, mode=mode, resources=resources, images=images
        )
        reply: rt.PromptResponse = await self.replicas.call("Prompt", request)
        self._wrote(session_id, reply.status.last_seq)
        return reply

    async def cancel(self, session_id: str) -> rt.CancelResponse:
        reply: rt.CancelResponse = await self.replicas.call(
            "Cancel", rt.CancelRequest(session_id=session_id)
        )
        self._wrote(session_id, reply.status.last_seq)
        return reply

    async def list_commands(self, session_id: str) -> Sequence[rt.CommandInfo]:
        reply: rt.ListCommandsResponse = await self.replicas.call(
            "ListCommands", rt.ListCommandsRequest(session_id=session_id)
        )
        return reply.commands

    async def execute_command(
        self, session_id: str, name: str, args: str | None
    ) -> rt.ExecuteCommandResponse:
        request = rt.ExecuteCommandRequest(session_id=session_id, name=name)
        if args is not None:
            request.args = args
        reply: rt.ExecuteCommandResponse = await self.replicas.call("ExecuteCommand", request)
        self._wrote(session_id, reply.last_seq)
        return reply

    async def answer(self, session_id: str, question_id: str, answer: ev.QuestionAnswer) -> int:
        """The answer's seq."""
        reply: rt.AnswerQuestionResponse = await self.replicas.call(
            "AnswerQuestion",
            rt.AnswerQuestionRequest(session_id=session_id, question_id=question_id, answer=answer),
        )
        self._wrote(session_id, reply.seq)
        return reply.seq

    async def update_settings(self, update: rt.UpdateSettingsRequest) -> rt.UpdateSettingsResponse:
        reply: rt.UpdateSettingsResponse = await self.replicas.call("UpdateSettings", update)
        self._wrote(update.session_id, reply.seq)
        return reply

    async def list_models(self, session_id: str) -> Sequence[rt.ModelInfo]:
        reply: rt.ListModelsResponse = await self.replicas.call(
            "ListModels", rt.ListModelsRequest(session_id=session_id)
        )
        return reply.models

    async def list_paths(self, session_id: str, prefix: str, limit: int) -> rt.ListPathsResponse:
        request = rt.ListPathsRequest(session_id=session_id, prefix=prefix, limit=limit)
        reply: rt.ListPathsResponse = await self.replicas.call("ListPaths", request)
        return reply

    async def stop_processes(self, session_id: str) -> int:
        """Stop the session's jobs and terminals; how many."""
        reply: rt.StopProcessesResponse = await self.replicas.call(
            "StopProcesses", rt.StopProcessesRequest(session_id=session_id)
        )
        self._wrote(session_id, reply.last_seq)
        return reply.stopped
