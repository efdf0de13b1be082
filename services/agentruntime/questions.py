"""Questions an agent asks its user, held until answered.

A tool awaits `ask`; clients list, watch and answer. Answers are one of
approve / feedback / dismiss; answering an unknown or already answered
question is a typed error, and the first answer wins.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass

from services.common.errors import FailedPrecondition, NotFound


class QuestionNotFound(NotFound):
    REASON = "QUESTION_NOT_FOUND"

    def __init__(self, question_id: str) -> None:
        super().__init__(self.REASON, f"no question {question_id!r}", question_id=question_id)


class QuestionAnswered(FailedPrecondition):
    REASON = "QUESTION_ANSWERED"

    def __init__(self, question_id: str) -> None:
        super().__init__(
            self.REASON, f"question {question_id!r} was already answered", question_id=question_id
        )


PLAN_REVIEW = "plan-review"
GENERIC = "generic"


@dataclass(frozen=True)
class Question:
    question_id: str
    session_id: str
    title: str
    body: str
    presentation: str = GENERIC
    approve_label: str = ""


@dataclass(frozen=True)
class Answer:
    """Exactly one of: approve, feedback (non-empty), dismiss."""

    approve: bool = False
    feedback: str = ""
    dismiss: bool = False

    def is_well_formed(self) -> bool:
        return (self.approve, bool(self.feedback), self.dismiss).count(True) == 1


@dataclass(frozen=True)
class Asked:
    question: Question


@dataclass(frozen=True)
class Closed:
    session_id: str
    question_id: str


QuestionEvent = Asked | Closed


class QuestionBroker:
    def __init__(self) -> None:
        self._pending: dict[str, tuple[Question, asyncio.Future[Answer]]] = {}
        self._closed: set[str] = set()
        self._watchers: set[asyncio.Queue[QuestionEvent]] = set()
        self._ids = itertools.count(1)

    async def ask(
        self,
        session_id: str,
        title: str,
        body: str,
        *,
        presentation: str = GENERIC,
        approve_label: str = "",
    ) -> Answer:
        """Wait for the user's answer; cancelling the wait withdraws the question."""
        question = Question(
            f"q-{next(self._ids)}-{session_id}"[:128],
            session_id,
            title,
            body,
            presentation,
            approve_label,
        )
        answer: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._pending[question.question_id] = (question, answer)
        self._publish(Asked(question))
        try:
            return await answer
        finally:
            self._pending.pop(question.question_id, None)
            self._closed.add(question.question_id)
            self._publish(Closed(session_id, question.question_id))

    def answer(self, session_id: str, question_id: str, answer: Answer) -> None:
        entry = self._pending.get(question_id)
        if entry is None or entry[0].session_id != session_id:
            if question_id in self._closed and entry is None:
                raise QuestionAnswered(question_id)
            raise QuestionNotFound(question_id)
        future = entry[1]
        if future.done():
            raise QuestionAnswered(question_id)
        future.set_result(answer)

    def pending(self, session_id: str | None = None) -> list[Question]:
        return [
            q for q, _ in self._pending.values() if session_id is None or q.session_id == session_id
        ]

    async def watch(self, session_id: str | None = None) -> AsyncIterator[QuestionEvent]:
        """Pending questions now, then questions as they are asked and closed."""
        queue: asyncio.Queue[QuestionEvent] = asyncio.Queue()
        self._watchers.add(queue)
        try:
            for question in self.pending(session_id):
                yield Asked(question)
            while True:
                event = await queue.get()
                event_session = (
                    event.question.session_id if isinstance(event, Asked) else event.session_id
                )
                if session_id is None or event_session == session_id:
                    yield event
        finally:
            self._watchers.discard(queue)

    def _publish(self, event: QuestionEvent) -> None:
        for queue in self._watchers:
            queue.put_nowait(event)
