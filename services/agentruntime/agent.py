"""One live agent: its inputs, its turn loop and what it recorded.

A turn opens when input is claimed and closes when nothing is owed. Each step
runs the boundary hooks (plan mode) first, then records the step's user
messages, assembles the request from ordered prompt sections and the stable
tool catalog, records the request header ("model-visible means logged"),
streams the answer and runs the tools it asked for.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass

from agenthost.sessionlog.v1 import events_pb2 as ev

from services.common.errors import FailedPrecondition
from services.sessionlog.port import Direction, SessionLogPort

from .models.base import (
    ModelAdapter,
    ModelError,
    ModelRequest,
    StreamedAnswer,
)
from .ports import PlanModePort
from .questions import QuestionBroker
from .tools import ToolCatalog, ToolContext
from .transcript import Transcript

log = logging.getLogger("agenthost.runtime")

READ_BATCH = 1000
# Attempts of one step's model request; a retry reuses the assembled request,
# so a plan choice made meanwhile waits for the next step's boundary.
STEP_ATTEMPTS = 2
INTERRUPTED = "interrupted: the runtime stopped during this turn"


class AgentBusy(FailedPrecondition):
    REASON = "AGENT_BUSY"

    def __init__(self, session_id: str) -> None:
        super().__init__(
            self.REASON,
            f"session {session_id!r} is running a turn; queue or steer the input instead",
            session_id=session_id,
        )


class PromptMode(enum.Enum):
    SEND = "send"
    QUEUE = "queue"
    STEER = "steer"


@dataclass(frozen=True)
class AgentStatus:
    session_id: str
    running: bool
    queued: int
    last_seq: int


@dataclass(frozen=True)
class Input:
    text: str
    input_id: str


def _event_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


class Agent:
    def __init__(
        self,
        session_id: str,
        *,
        log: SessionLogPort,
        model: ModelAdapter,
        plan: PlanModePort | None,
        catalog: ToolCatalog,
        questions: QuestionBroker,
        base_sections: Sequence[ev.PromptSection],
        on_status: Callable[[AgentStatus], None],
    ) -> None:
        self.session_id = session_id
        self._log = log
        self._model = model
        self._plan = plan
        self._catalog = catalog
        self._questions = questions
        self._base_sections = list(base_sections)
        self._on_status = on_status
        self._transcript = Transcript()
        self._last_seq = -1
        self._last_appended_seq = -1
        self._queue: deque[Input] = deque()
        self._steered: list[Input] = []
        self._loop_task: asyncio.Task[None] | None = None
        self._turn_task: asyncio.Task[None] | None = None

    # -- loading ---------------------------------------------------------------

    async def load(self) -> None:
        """Rebuild the conversation from the log; close a turn a crash left open."""
        turn_open = False
        async for event in self._events_after(self._last_seq):
            kind = event.WhichOneof("body")
            if kind == "turn_start":
                turn_open = True
            elif kind == "turn_end":
                turn_open = False
        if turn_open:
            await self._append(
                [
                    ev.Event(
                        id=_event_id("interrupted"),
                        turn_end=ev.TurnEnd(reason=ev.TURN_END_REASON_ERROR, error=INTERRUPTED),
                    )
                ]
            )
            await self._catch_up()

    async def _events_after(self, seq: int) -> AsyncIterator[ev.Event]:
        while True:
            batch = (
                await self._log.read(
                    self.session_id, from_seq=seq + 1, direction=Direction.FORWARD, limit=READ_BATCH
                )
            ).events
            for event in batch:
                self._transcript.add(event)
                self._last_seq = event.seq
                yield event
            if len(batch) < READ_BATCH:
                return
            seq = batch[-1].seq

    async def _catch_up(self) -> None:
        """Take in everything recorded since we last looked (our own events
        and those plan mode appended, such as notices)."""
        async for _ in self._events_after(self._last_seq):
            pass

    # -- status ------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._loop_task is not None and not self._loop_task.done()

    def status(self) -> AgentStatus:
        last_seq = max(self._last_seq, self._last_appended_seq)
        return AgentStatus(self.session_id, self.running, len(self._queue), last_seq)

    def _publish_status(self) -> None:
        self._on_status(self.status())

    # -- inputs --------------------------------------------------------------------

    def prompt(self, text: str, mode: PromptMode, input_id: str = "") -> PromptMode:
        """Take an input; returns the mode it was taken in (SEND when idle)."""
        item = Input(text, input_id or _event_id("input"))
        if not self.running:
            self._start_loop(item)
            return PromptMode.SEND
        if mode is PromptMode.SEND:
            raise AgentBusy(self.session_id)
        if mode is PromptMode.STEER:
            self._steered.append(item)
        else:
            self._queue.append(item)
            self._publish_status()
        return mode

    async def cancel(self) -> bool:
        """Stop the running turn (recorded as cancelled). Queued inputs stay."""
        turn = self._turn_task
        if turn is None or turn.done():
            return False
        turn.cancel()
        await asyncio.wait([turn])
        return True

    async def close(self) -> None:
        await self.cancel()
        self._queue.clear()
        if self._loop_task is not None:
            await asyncio.wait([self._loop_task])

    def _start_loop(self, first: Input) -> None:
        self._loop_task = asyncio.create_task(
            self._run_inputs(first), name=f"agent-{self.session_id}"
        )
        self._publish_status()

    async def _run_inputs(self, first: Input) -> None:
        try:
            item: Input | None = first
            while item is not None:
                self._turn_task = asyncio.create_task(self._turn(item))
                await asyncio.wait([self._turn_task])
                self._steered.clear()
                item = self._queue.popleft() if self._queue else None
        finally:
            self._turn_task = None
            # Report idle once this task is done, so `running` is already false.
            asyncio.get_running_loop().call_soon(self._publish_status)

    # -- the turn ----------------------------------------------------------------

    async def _turn(self, first: Input) -> None:
        turn_id = _event_id("turn")
        incoming = [first]
        try:
            await self._append(
                [ev.Event(id=f"{first.input_id}-turn", turn_start=ev.TurnStart(turn_id=turn_id))]
            )
            step = 0
            while True:
                owes_request = await self._step(turn_id, step, incoming)
                incoming = []
                if not owes_request and not self._steered:
                    break
                step += 1
            await self._end_turn(turn_id, ev.TURN_END_REASON_COMPLETED)
        except ModelError as error:
            log.warning(
                "model failed", extra={"session_id": self.session_id, "error": error.message}
            )
            await self._end_turn(turn_id, ev.TURN_END_REASON_ERROR, error.message)
        except asyncio.CancelledError:
            await self._end_turn(turn_id, ev.TURN_END_REASON_CANCELLED)
        except Exception as error:
            log.exception("turn failed", extra={"session_id": self.session_id})
            await self._end_turn(turn_id, ev.TURN_END_REASON_ERROR, f"internal error: {error}")

    async def _end_turn(
        self, turn_id: str, reason: ev.TurnEndReason.ValueType, error: str = ""
    ) -> None:
        await self._append(
            [
                ev.Event(
                    id=_event_id("end"),
                    turn_end=ev.TurnEnd(turn_id=turn_id, reason=reason, error=error),
                )
            ]
        )

    async def _step(self, turn_id: str, step: int, incoming: list[Input]) -> bool:
        """Run one step; True when its tool calls owe the model another request."""
        plan_sections = await self._plan.boundary_sections(self.session_id) if self._plan else []
        incoming = incoming + self._steered
        self._steered = []
        await self._append(
            [
                ev.Event(id=_event_id("step"), step_start=ev.StepStart(turn_id=turn_id, step=step)),
                *(_user_message(item) for item in incoming),
            ]
        )
        await self._catch_up()
        sections = sorted([*self._base_sections, *plan_sections], key=lambda s: s.order)
        request = ModelRequest(
            messages=self._transcript.messages(),
            sections=sections,
            tools=self._catalog.schemas(),
            model=self._model.model,
        )
        await self._append(
            [
                ev.Event(
                    id=_event_id("request"),
                    request_header=ev.RequestHeader(
                        sections=sections,
                        tools=request.tools,
                        model=self._model.model,
                        turn_id=turn_id,
                        step=step,
                    ),
                )
            ]
        )
        answer = await self._ask_model(request)
        owes_request = await self._record_answer(answer)
        await self._append(
            [ev.Event(id=_event_id("step-end"), step_end=ev.StepEnd(turn_id=turn_id, step=step))]
        )
        return owes_request

    async def _ask_model(self, request: ModelRequest) -> StreamedAnswer:
        for attempt in range(1, STEP_ATTEMPTS + 1):
            answer = StreamedAnswer()
            try:
                async with aclosing(self._model.stream(request)) as chunks:
                    async for chunk in chunks:
                        answer.add(chunk)
                return answer
            except ModelError as error:
                if not error.retryable or attempt == STEP_ATTEMPTS or answer.text:
                    raise
                log.warning(
                    "retrying the step's request",
                    extra={
                        "session_id": self.session_id,
                        "attempt": attempt,
                        "error": error.message,
                    },
                )
        raise AssertionError("unreachable")

    async def _record_answer(self, answer: StreamedAnswer) -> bool:
        events: list[ev.Event] = []
        if answer.text:
            events.append(
                ev.Event(
                    id=_event_id("assistant"),
                    assistant_message=ev.AssistantMessage(text=answer.text),
                )
            )
        events += [
            ev.Event(
                id=_event_id("call"),
                tool_call=ev.ToolCall(
                    call_id=call.call_id, name=call.name, args_json=call.args_json
                ),
            )
            for call in answer.tool_calls
        ]
        if events:
            await self._append(events)
        context = ToolContext(self.session_id, self._questions)
        for call in answer.tool_calls:
            outcome = await self._catalog.run(context, call.name, call.args_json)
            await self._append(
                [
                    ev.Event(
                        id=_event_id("result"),
                        tool_result=ev.ToolResult(
                            call_id=call.call_id,
                            ok=outcome.ok,
                            output=outcome.output,
                            error=outcome.error,
                        ),
                    )
                ]
            )
        return bool(answer.tool_calls)

    async def _append(self, events: list[ev.Event]) -> None:
        # Our own events reach the transcript through _catch_up, with plan
        # mode's in between, so the model sees them in log order.
        result = await self._log.append(self.session_id, events)
        self._last_appended_seq = max(self._last_appended_seq, result.last_seq)


def _user_message(item: Input) -> ev.Event:
    return ev.Event(
        id=item.input_id,
        user_message=ev.UserMessage(
            text=item.text, source=ev.MessageSource(kind=ev.SOURCE_KIND_USER)
        ),
    )
