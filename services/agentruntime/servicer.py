"""gRPC adapter of the agent runtime."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
from agenthost.runtime.v1 import runtime_pb2 as pb
from agenthost.runtime.v1 import runtime_pb2_grpc as pb_grpc

from .agent import AgentStatus, PromptMode
from .questions import GENERIC, PLAN_REVIEW, Answer, Asked, Question
from .runtime import AgentRuntime

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["AgentRuntimeService"].full_name

_MODES = {
    pb.PROMPT_MODE_UNSPECIFIED: PromptMode.SEND,
    pb.PROMPT_MODE_SEND: PromptMode.SEND,
    pb.PROMPT_MODE_QUEUE: PromptMode.QUEUE,
    pb.PROMPT_MODE_STEER: PromptMode.STEER,
}
_MODE_VALUES = {mode: value for value, mode in _MODES.items() if value}
_PRESENTATIONS = {
    GENERIC: pb.QUESTION_PRESENTATION_GENERIC,
    PLAN_REVIEW: pb.QUESTION_PRESENTATION_PLAN_REVIEW,
}


def status_pb(status: AgentStatus) -> pb.AgentStatus:
    return pb.AgentStatus(
        session_id=status.session_id,
        running=status.running,
        queued=status.queued,
        last_seq=status.last_seq,
    )


def question_pb(question: Question) -> pb.Question:
    return pb.Question(
        question_id=question.question_id,
        session_id=question.session_id,
        title=question.title,
        body=question.body,
        presentation=_PRESENTATIONS[question.presentation],
        approve_label=question.approve_label,
    )


def answer_from_pb(answer: pb.Answer) -> Answer:
    kind = answer.WhichOneof("kind")
    return Answer(
        approve=kind == "approve" and answer.approve,
        feedback=answer.feedback if kind == "feedback" else "",
        dismiss=kind == "dismiss" and answer.dismiss,
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
        taken, status = await self.runtime.prompt(
            request.session_id, request.text, _MODES[request.mode], request.input_id
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

    async def ListQuestions(
        self, request: pb.ListQuestionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListQuestionsResponse:
        return pb.ListQuestionsResponse(
            questions=[question_pb(q) for q in self.runtime.questions.pending(request.session_id)]
        )

    async def WatchQuestions(
        self, request: pb.WatchQuestionsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WatchQuestionsResponse]:
        async for event in self.runtime.questions.watch(request.session_id or None):
            if isinstance(event, Asked):
                yield pb.WatchQuestionsResponse(asked=question_pb(event.question))
            else:
                yield pb.WatchQuestionsResponse(
                    answered=pb.QuestionAnswered(
                        question_id=event.question_id, session_id=event.session_id
                    )
                )

    async def AnswerQuestion(
        self, request: pb.AnswerQuestionRequest, context: grpc.aio.ServicerContext
    ) -> pb.AnswerQuestionResponse:
        self.runtime.questions.answer(
            request.session_id, request.question_id, answer_from_pb(request.answer)
        )
        return pb.AnswerQuestionResponse()
