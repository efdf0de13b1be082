"""Questions an agent asks its user: the plan review and tool approvals.

A question is a log value (question/asked, question/answered, folded by
agenthost_core/folds.py), so it survives a runtime restart and reaches
every client, including one that was away when it was asked. The first
answer wins (appended with the expected seq); a second one is refused with
QUESTION_ANSWERED. Here live only the runtime's waits for answers.
"""

from __future__ import annotations

import asyncio

from agenthost.sessionlog.v1 import events_pb2

from agenthost_core.folds import Question
from services.common.errors import FailedPrecondition, InvalidArgument, NotFound

PLAN_REVIEW = "plan-review"
TOOL_APPROVAL = "tool-approval"
GENERIC = "generic"
# Tool-approval answers that run the call.
ALLOWING = frozenset(
    {"allow_once", "allow_for_session", "always_allow_session", "always_allow_workspace"}
)

# The answers each presentation understands.
ANSWER_KINDS = {
    PLAN_REVIEW: frozenset({"approve", "feedback", "dismiss"}),
    TOOL_APPROVAL: ALLOWING | {"deny"},
    GENERIC: frozenset({"approve", "feedback", "dismiss"}),
}


class QuestionNotFound(NotFound):
    REASON = "QUESTION_NOT_FOUND"

    def __init__(self, question_id: str) -> None:
        super().__init__(self.REASON, f"no open question {question_id!r}", question_id=question_id)


class QuestionAnswered(FailedPrecondition):
    REASON = "QUESTION_ANSWERED"

    def __init__(self, question_id: str) -> None:
        super().__init__(
            self.REASON, f"question {question_id!r} was already answered", question_id=question_id
        )


class AnswerMismatch(InvalidArgument):
    REASON = "ANSWER_MISMATCH"

    def __init__(self, question: Question, kind: str) -> None:
        allowed = ", ".join(sorted(ANSWER_KINDS[question.presentation]))
        super().__init__(
            self.REASON,
            f"a {question.presentation} question is answered with one of {allowed}, not {kind}",
            question_id=question.question_id,
        )


def check_answer(question: Question, answer: events_pb2.QuestionAnswer) -> None:
    kind = answer.WhichOneof("kind") or ""
    if kind not in ANSWER_KINDS.get(question.presentation, ANSWER_KINDS[GENERIC]):
        raise AnswerMismatch(question, kind)


class AnswerWaits:
    """The answers turns wait for, by question id. A turn expects the answer
    before it records its question, so an answer can never come unheard."""

    def __init__(self) -> None:
        self._futures: dict[str, asyncio.Future[events_pb2.QuestionAnswer]] = {}

    def expect(self, question_id: str) -> None:
        if question_id not in self._futures:
            self._futures[question_id] = asyncio.get_running_loop().create_future()

    async def wait(self, question_id: str) -> events_pb2.QuestionAnswer:
        self.expect(question_id)
        future = self._futures[question_id]
        try:
            return await asyncio.shield(future)
        finally:
            self._futures.pop(question_id, None)

    def resolve(self, question_id: str, answer: events_pb2.QuestionAnswer) -> None:
        future = self._futures.get(question_id)
        if future is not None and not future.done():
            future.set_result(answer)
