"""A step's tool calls, as the agent runs them (a part of Agent, in a module
of its own): each call is parsed against the step's tools, judged by the
sandbox and approval policy, the session's grants and rules and the
capabilities (capability.py), asked about when it must be, run, and its
result recorded (spilled to a file when too big to show the model).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import PendingCall, Question, SessionState
from services.sessionlog.port import SessionLogPort

from . import approvals, gates, spill
from .capability import run_allowed
from .ids import new_id, with_ids
from .live import LiveFeed
from .models.base import ModelAdapter
from .neighbours import Neighbours
from .questions import ALLOWING, PLAN_REVIEW, AnswerWaits
from .tools import Call, ToolCatalog, ToolContext, ToolOutcome
from .view import ModelView

DENIED = "The user denied this call"


class ToolCalls:
    """Agent's tool calls; the attributes below are the agent's."""

    session_id: str
    cwd: Path
    cwd_text: str
    _state: SessionState
    _step_catalog: ToolCatalog
    _resumed: Question | None
    _answers: AnswerWaits
    _log: SessionLogPort
    _neighbours: Neighbours | None
    _live: LiveFeed
    _lease_token: int | None
    _model: ModelAdapter

    async def _view(self) -> ModelView:
        raise NotImplementedError

    async def _append(self, events: list[ev.Event]) -> None:
        raise NotImplementedError

    async def _catch_up(self) -> None:
        raise NotImplementedError

    async def _hidden(self) -> tuple[Path, ...]:
        raise NotImplementedError

    async def _run_calls(self, turn_id: str, step: int) -> bool:
        """Run the step's calls that have no result yet, then end the step;
        True when there were any (the model is owed another request). Calls
        of a tool that may run at once (subagents) run side by side, each
        recorded as it ends; the others one after another, in order."""
        calls = self._state.turn.calls
        for batch in self._batches(calls):
            await asyncio.gather(*(self._run_and_record(turn_id, call) for call in batch))
        end = ev.Event(id=new_id("step-end"), step_end=ev.StepEnd(turn_id=turn_id, step=step))
        await self._append([end])
        return bool(calls)

    async def _goes_on(self, turn_id: str, owes: bool) -> bool:
        """After a step (and before the first): whether the turn goes on. It
        does when the model is owed a request (its calls' results, a steered
        message) unless a part ends it, and when a part asks for one more
        (SessionPart.turn_goes_on)."""
        owed = owes or bool(self._state.turn.steered)
        parts = (await self._view()).parts.values()
        said = [await part.turn_goes_on(turn_id, owed) for part in parts]
        return False if False in said else owed or True in said

    def _batches(self, calls: tuple[PendingCall, ...]) -> list[list[PendingCall]]:
        """The calls in runs: consecutive calls of concurrent tools together."""
        batches: list[list[PendingCall]] = []
        for call in calls:
            tool = self._step_catalog.tool(call.name)
            together = tool is not None and tool.concurrent
            if together and batches and batches[-1][-1].name == call.name:
                batches[-1].append(call)
            else:
                batches.append([call])
        return batches

    async def _run_and_record(self, turn_id: str, call: PendingCall) -> None:
        outcome = await self._run_call(turn_id, call)
        await self._record_result(turn_id, call, outcome)

    async def _run_call(self, turn_id: str, call: PendingCall) -> ToolOutcome:
        parsed = self._step_catalog.parse(call.name, call.args_json)
        if isinstance(parsed, ToolOutcome):
            return parsed
        context = await self._context(turn_id, call.call_id)
        outcome = await self._decided(turn_id, call, parsed, context)
        events: list[ev.Event] = []
        for part in (await self._view()).parts.values():
            after = await part.after_tool(parsed, context, outcome)
            outcome, events = after.outcome, [*events, *after.events]
        return replace(outcome, events=(*outcome.events, *events))

    async def _decided(
        self, turn_id: str, call: PendingCall, parsed: Call, context: ToolContext
    ) -> ToolOutcome:
        """The call's outcome once it ran, or was refused or denied (a
        question may come first)."""
        question = next((q for q in self._state.questions.open if q.call_id == call.call_id), None)
        resumed = self._resumed
        if question is None and resumed is not None and resumed.call_id == call.call_id:
            question = resumed  # answered while the resumed step looked at its tools
        if question is None:
            first = await self._before_running(parsed, context)
            if isinstance(first, ToolOutcome):
                return first
            question = first
        answer = await self._answers.wait(question.question_id)
        return await self._after_answer(parsed, context, question, answer)

    async def _before_running(self, call: Call, context: ToolContext) -> ToolOutcome | Question:
        """The call's result, or the question recorded before it may run."""
        if call.tool.review is not None:
            review = await call.tool.review(context, call.args)
            if isinstance(review, ToolOutcome):
                return review
            asked = ev.QuestionAsked(
                presentation=ev.QUESTION_PRESENTATION_PLAN_REVIEW,
                title=review.title,
                body=review.body,
                approve_label=review.approve_label,
            )
            return await self._ask(context, asked)
        decision = approvals.decision(call, self._state)
        parts = (await self._view()).parts.values()
        verdicts = [v for part in parts if (v := await part.before_tool(call, context)) is not None]
        refusal = next((v for v in verdicts if v.refuse), None)
        if decision.gate is not gates.Gate.REFUSE and refusal is not None:
            return ToolOutcome(ok=False, error=f"Not run: {refusal.reason}")
        asks = any(v.ask for v in verdicts)
        if decision.gate is gates.Gate.ALLOW and asks:
            decision = gates.Decision(gates.Gate.ASK)
        elif decision.gate is gates.Gate.ASK and not asks and any(v.allow for v in verdicts):
            decision = gates.ALLOW  # a part allowed it, as a rule would: the sandbox still binds
        elif decision.gate is gates.Gate.ASK and await approvals.workspace_allows(
            call, self.session_id, self.cwd_text, self._log, self._neighbours
        ):
            decision = gates.ALLOW
        if decision.gate is gates.Gate.REFUSE:
            return ToolOutcome(ok=False, error=f"Not run: {decision.reason}.")
        if decision.gate is gates.Gate.ALLOW:
            return await self._run_tool(call, context)
        approval = await call.tool.approval_shown(context, call.args)
        return await self._ask(context, approvals.approval_question(approval))

    async def _ask(self, context: ToolContext, asked: ev.QuestionAsked) -> Question:
        asked.question_id = new_id("q")
        asked.turn_id, asked.call_id = context.turn_id, context.call_id
        self._answers.expect(asked.question_id)
        await self._append([ev.Event(id=new_id("asked"), question_asked=asked)])
        for part in (await self._view()).parts.values():
            await part.on_question(asked)
        return Question.from_event(asked)

    async def _after_answer(
        self, call: Call, context: ToolContext, question: Question, answer: ev.QuestionAnswer
    ) -> ToolOutcome:
        await self._catch_up()
        if question.presentation == PLAN_REVIEW and call.tool.reviewed is not None:
            return await call.tool.reviewed(context, call.args, answer)
        if answer.WhichOneof("kind") in ALLOWING:
            # The sandbox may have changed while the user thought about it.
            decision = approvals.decision(call, self._state)
            if decision.gate is gates.Gate.REFUSE:
                return ToolOutcome(ok=False, error=f"Not run: {decision.reason}.")
            context = await self._context(context.turn_id, context.call_id)
            return await self._run_tool(call, context)
        reason = answer.deny.strip() if answer.WhichOneof("kind") == "deny" else ""
        return ToolOutcome(ok=False, error=f"{DENIED}: {reason}" if reason else f"{DENIED}.")

    async def _run_tool(self, call: Call, context: ToolContext) -> ToolOutcome:
        """Run an allowed call, after what the capabilities record first."""
        first = [
            e
            for part in (await self._view()).parts.values()
            for e in await part.before_run(call, context)
        ]
        if first:
            await self._append(with_ids(first))
        return await run_allowed((await self._view()).parts.values(), call, context)

    async def _context(self, turn_id: str, call_id: str) -> ToolContext:
        def on_output(piece: str) -> None:
            self._live.output(self.session_id, turn_id, call_id, piece)

        settings = self._state.settings
        hidden = await self._hidden()
        return ToolContext(
            self.session_id,
            turn_id,
            call_id,
            self.cwd,
            settings.sandbox,
            on_output,
            self._lease_token,
            network=settings.network,
            hidden=hidden,
            parts=(await self._view()).parts,
            record=self._append,
        )

    async def _record_result(self, turn_id: str, call: PendingCall, outcome: ToolOutcome) -> None:
        # What the model sees of it (transcript.py): spilled whole to a file
        # it can page through when too big to show.
        shown = outcome.output if outcome.ok else outcome.error
        if spill.is_oversized(shown, spill.spill_limit(self._model.context_window)):
            await asyncio.to_thread(spill.write_spill, self.cwd, call.call_id, shown)
        result = ev.ToolResult(
            call_id=call.call_id,
            ok=outcome.ok,
            output=outcome.output[:1048576],
            error=outcome.error[:65536],
        )
        if outcome.display is not None:
            result.display.CopyFrom(outcome.display.to_pb())
        attachments = [
            ev.Event(
                id=new_id("attachment"),
                tool_attachment=ev.ToolAttachment(
                    call_id=call.call_id, mime_type=a.mime_type, data=a.data
                ),
            )
            for a in outcome.attachments
        ]
        recorded = [ev.Event(id=new_id("result"), tool_result=result), *attachments]
        await self._append([*recorded, *with_ids(outcome.events)])
        self._live.end_output(self.session_id, turn_id, call.call_id)
