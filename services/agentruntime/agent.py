"""One live agent: its turns, steps and tool calls, all recorded in the log.

What the agent knows of its session is the one fold of the log
(agenthost_core/folds.py) plus the conversation the model sees
(transcript.py): whether a turn is open, the tool calls of the open step that
wait for results, the inputs that wait to run, the open questions and what
"allow for this session" granted, the sandbox and approval settings. So a
restarted runtime picks up where the log stands: a turn that waits for a
question goes on once it is answered, any other turn left open is closed as
interrupted, and queued inputs still run.

A prompt is accepted once its user/message (or the input/queued it waits
as) is in the log; the turn then runs in the runtime's own task (spawn: no
deadline or account of the call that started it). Each step runs the
boundary hooks (plan mode) first, records the step's steered messages,
assembles the request from ordered prompt sections and the stable tool
catalog (with the MCP servers' tools as snapshotted at this boundary, and an
mcp/status event when their states changed: mcp/), records the request
header ("model-visible means logged"), streams the answer to clients as
ephemeral deltas, records it whole, and runs the tools it asked for under
the sandbox and approval policy.

Context: each model request's usage is recorded (model/usage). A request
the provider would likely count past the compaction threshold of the
model's window (request_size.py) is preceded by a compaction (compactor.py):
the model summarises the conversation and from then on sees the summary,
what the compaction kept of the running turn, and what follows. A request
predicted past the threshold even then is not sent: the turn ends with
ContextOverflow. A provider's "context length exceeded" refusal compacts
(trigger overflow) and tries the step once more.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace
from pathlib import Path

from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import (
    McpFold,
    Question,
    QueuedInput,
    SessionState,
    SettingsFold,
    fold,
    fold_mcp,
    mcp_status_event,
    settings_event,
    title_from_message,
)
from services.common.errors import FailedPrecondition, LeaseLost, WrongExpectedSeq
from services.common.tasks import spawn
from services.sessionlog.port import AppendResult, Direction, SessionLogPort

from . import approvals, spill
from .capability import Capability, Prompt, PromptMode, Resource, SessionPart, SessionScope
from .compaction import AUTO, MANUAL, OVERFLOW, CompactionPolicy, tokens_label
from .compactor import CompactionAsk, ContextOverflow, compact
from .ids import new_id, replace_id, with_ids
from .images import ImageLoader
from .live import ANSWER, REASONING, LiveFeed
from .mcp import McpServers
from .models.base import (
    ChatMessage,
    ModelAdapter,
    ModelError,
    ModelRequest,
    ReasoningDelta,
    StreamedAnswer,
    TextDelta,
    Usage,
)
from .models.catalog import ModelCatalog, price
from .neighbours import Neighbours
from .ports import PlanModePort
from .questions import (
    TOOL_APPROVAL,
    AnswerWaits,
    QuestionAnswered,
    QuestionNotFound,
    check_answer,
)
from .request_size import predicted_tokens
from .tool_calls import ToolCalls
from .tools import ToolCatalog
from .transcript import Transcript
from .view import ModelView, read_forward, read_view

log = logging.getLogger("agenthost.runtime")

# Attempts of one step's model request; a retry reuses the assembled request,
# so a plan choice made meanwhile waits for the next step's boundary.
STEP_ATTEMPTS = 2
# Appends retried after a WrongExpectedSeq (another writer got in between).
MAX_ATTEMPTS = 5
INTERRUPTED = "interrupted: the runtime stopped during this turn"


class AgentBusy(FailedPrecondition):
    REASON = "AGENT_BUSY"

    def __init__(self, session_id: str) -> None:
        super().__init__(
            self.REASON,
            f"session {session_id!r} is running a turn; queue or steer the input instead",
            session_id=session_id,
        )


@dataclass(frozen=True)
class CompactOutcome:
    ok: bool
    message: str


@dataclass(frozen=True)
class AgentStatus:
    session_id: str
    running: bool
    queued: int
    last_seq: int


class Agent(ToolCalls):
    def __init__(
        self,
        session_id: str,
        cwd: str,
        *,
        log: SessionLogPort,
        models: ModelCatalog,
        plan: PlanModePort | None,
        catalog: ToolCatalog,
        live: LiveFeed,
        base_sections: Sequence[ev.PromptSection],
        on_status: Callable[[AgentStatus], None],
        lease_token: int | None = None,
        on_lease_lost: Callable[[str, int], None] | None = None,
        compaction: CompactionPolicy | None = None,
        neighbours: Neighbours | None = None,
        mcp: McpServers | None = None,
        capabilities: Sequence[Capability] = (),
        config_dir: Path | None = None,
    ) -> None:
        self.session_id = session_id
        # The folder as the log records it (workspace rules name it so).
        self.cwd_text = cwd
        self.cwd = Path(cwd)
        self._log = log
        self._models = models
        # The session's model (its prices price model/usage) and its
        # adapter, chosen again at each step.
        self._spec = models.default
        self._model: ModelAdapter = models.adapter(self._spec)
        self._plan = plan
        self._catalog = catalog
        # The tools of the running step: the catalog and the MCP tools as
        # snapshotted at its boundary (servers changing meanwhile wait for
        # the next boundary).
        self._step_catalog = catalog
        self._mcp = mcp
        # The MCP servers' states as last recorded (mcp/status) in the log.
        self._mcp_seen = McpFold()
        # The question a resumed step's call waited for when it was loaded.
        self._resumed: Question | None = None
        self._live = live
        self._base_sections = list(base_sections)
        self._on_status = on_status
        self._state = SessionState()
        # The model's view of the conversation and the capabilities' parts
        # that follow it, built when a model request first needs it: a load
        # (resume, status) only needs the fold.
        self._view_read: ModelView | None = None
        # The bytes of the images its user messages reference.
        self._images = ImageLoader(log, session_id)
        self._capabilities = tuple(capabilities)
        self._scope = SessionScope(
            session_id,
            self.cwd,
            self._hidden,
            config_dir or Path.home(),
            self._find_back,
            lambda: self._state,
            self.record,
        )
        self._answers = AnswerWaits()
        # Serialises reading the log into the fold (several tasks catch up).
        self._reading = asyncio.Lock()
        # Serialises starting turns against accepting inputs.
        self._admitting = asyncio.Lock()
        self._runner: asyncio.Task[None] | None = None
        self._turn_task: asyncio.Task[None] | None = None
        # Set by close(): a stopping runtime records nothing about its turns.
        self._closing = False
        # Every append carries it: the log refuses it once another runtime
        # took the session over (LeaseLost), and then this agent stops.
        self._lease_token = lease_token
        self._on_lease_lost = on_lease_lost
        self._compaction = compaction or CompactionPolicy()
        # The answer streaming now: recorded as far as it got if cancelled.
        self._partial: StreamedAnswer | None = None
        # The provider's tokens per estimated token, from the last request it
        # counted (for a view with no counted request in it yet).
        self._ratio = 1.0
        self._neighbours = neighbours

    @property
    def state(self) -> SessionState:
        return self._state

    # -- loading -----------------------------------------------------------------------

    async def load(self) -> None:
        """Take the fold from the log's checkpointed state (not from seq 0),
        then pick up where a stopped runtime left the session."""
        async with self._reading:
            self._state = await self._log.load_state(self.session_id)
        await self._catch_up()
        self._choose_model()
        turn = self._state.turn
        if turn.open and self._waiting_question() is not None:
            self._start(turn.turn_id, resuming=True)
        elif turn.open:
            await self._end_turn(turn.turn_id, ev.TURN_END_REASON_INTERRUPTED, INTERRUPTED)
            await self._start_next()
        else:
            await self._start_next()

    def _choose_model(self) -> None:
        """Take the session's model as the folded state names it; called at
        a model-request boundary, so one step never mixes two models."""
        self._spec = self._models.resolve(self._state.settings.model)
        self._model = self._models.adapter(self._spec)

    def _waiting_question(self) -> Question | None:
        """The open question a pending call of the open step waits for."""
        pending = {call.call_id for call in self._state.turn.calls}
        # A subagent's question shown here is not this session's to wait for.
        waiting = (q for q in self._state.questions.open if not q.child_session_id)
        return next((q for q in waiting if q.call_id in pending), None)

    async def catch_up(self) -> None:
        """Fold what the log recorded since we last looked."""
        await self._catch_up()

    async def _catch_up(self) -> None:
        """Fold everything recorded since we last looked (our own events and
        those of plan mode and other writers, in log order)."""
        async with self._reading:
            async for event in self._events_after(self._state.last_seq):
                self._fold_in(event)

    def _fold_in(self, event: ev.Event) -> None:
        """One event of the log, next after those folded, into the state and
        the view."""
        self._state = fold(self._state, event)
        self._mcp_seen = fold_mcp(self._mcp_seen, event)
        if self._view_read is None:
            return
        if event.HasField("compaction") or event.HasField("rewind"):
            self._view_read = None  # a new view, read from the log when needed
        else:
            self._view_read.add(event)

    async def _fold_written(self, events: Sequence[ev.Event], written: AppendResult) -> None:
        """Fold what we just appended and anything recorded before it. When
        the log put our batch right after the last event we folded, nobody
        wrote in between and our own copy is what it stored (with its seqs;
        the time and position it stamped are the log's, which no fold of
        ours reads), so no read is needed; otherwise read the log."""
        async with self._reading:
            own = (
                not written.duplicate
                and len(written.seqs) == len(events)
                and written.seqs[:1] == [self._state.last_seq + 1]
                and all(event.id for event in events)
            )
            if own:
                for event, seq in zip(events, written.seqs, strict=True):
                    stored = ev.Event()
                    stored.CopyFrom(event)
                    stored.seq, stored.session_id = seq, self.session_id
                    self._fold_in(stored)
        if not own:
            await self._catch_up()

    async def _view(self) -> ModelView:
        """The view up to the folded state (its caller has caught up), read
        from the log the first time only (view.py)."""
        async with self._reading:
            if self._view_read is None:
                transcript = Transcript(spill.spill_limit(self._model.context_window))
                made = {cap.name: cap.session(self._scope) for cap in self._capabilities}
                parts = {name: part for name, part in made.items() if part is not None}
                view = ModelView(transcript, parts)
                self._view_read = await read_view(self._log, self.session_id, self._state, view)
            return self._view_read

    async def part(self, capability: str) -> SessionPart | None:
        """A capability's part of the session, as of its view now."""
        await self._catch_up()
        return (await self._view()).parts.get(capability)

    async def all_parts(self) -> list[SessionPart]:
        await self._catch_up()
        return await self._parts()

    async def _parts(self) -> list[SessionPart]:
        return list((await self._view()).parts.values())

    async def _messages(self) -> list[ChatMessage]:
        return await self._images.loaded((await self._view()).messages())

    async def _context_events(self) -> list[ev.Event]:
        """What the capabilities record for the model before its next request."""
        return [event for part in await self._parts() for event in await part.before_request()]

    async def _events_after(self, seq: int) -> AsyncIterator[ev.Event]:
        """Events after `seq` not folded yet."""
        async for event in read_forward(self._log, self.session_id, seq):
            if event.seq > self._state.last_seq:
                yield event

    # -- status --------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._runner is not None and not self._runner.done()

    def status(self) -> AgentStatus:
        queued = len(self._state.turn.queued)
        return AgentStatus(self.session_id, self.running, queued, self._state.last_seq)

    def _publish_status(self) -> None:
        self._on_status(self.status())

    # -- inputs --------------------------------------------------------------------------

    async def prompt(
        self,
        text: str,
        mode: PromptMode,
        input_id: str = "",
        resources: Sequence[Resource] = (),
        images: Sequence[ev.ImageInput] = (),
    ) -> PromptMode:
        """Take an input, once it is in the log; the mode it was taken in
        (SEND when idle). A retry with the same input id takes nothing twice.

        The admission runs to its end even when the caller goes away (its
        gateway died, its deadline passed): cut between the append and the
        start, it would leave a turn open in the log that nothing runs."""
        message = _user_message("", text).user_message
        taken = Prompt(text, message, resources=resources, images=list(images))
        admission = self._admit(taken, mode, input_id or new_id("input"))
        return await asyncio.shield(spawn(admission, name=f"prompt-{self.session_id}"))

    async def _admit(self, prompt: Prompt, mode: PromptMode, input_id: str) -> PromptMode:
        async with self._admitting:
            await self._catch_up()
            self._run_unrun_turn()
            if self._state.turn.open and mode is PromptMode.SEND:
                raise AgentBusy(self.session_id)
            message = await self._prepared(prompt)
            before = [replace_id(e, f"{input_id}-before-{n}") for n, e in enumerate(prompt.before)]
            if not self._state.turn.open:
                # Idle, or the last turn just ended: this input opens the next
                # one (a runner still finishing picks it up).
                if await self._open_turn(input_id, message, *before) and not self.running:
                    self._start(self._state.turn.turn_id, resuming=False)
                return PromptMode.SEND
            await self._append([*before, _queued(input_id, message, mode)])
        self._publish_status()
        return mode

    async def _prepared(self, prompt: Prompt) -> ev.UserMessage:
        """The user/message a prompt is recorded as, with what the
        capabilities attach to it (they may refuse it: a typed error)."""
        for part in await self._parts():
            await part.on_prompt(prompt)
        return prompt.message

    def _run_unrun_turn(self) -> None:
        """Start the open turn if nothing runs it: an admission whose append
        outcome was unknown to it (the log restarting past its deadline)
        may have opened it in the log without starting it."""
        turn = self._state.turn
        if turn.open and not self.running and not self._closing:
            log.warning("running a turn left unstarted", extra={"session_id": self.session_id})
            self._start(turn.turn_id, resuming=turn.step >= 0)

    async def _open_turn(self, input_id: str, message: ev.UserMessage, *before: ev.Event) -> bool:
        """Record turn/start and the user's message; whether that turn is open
        now. A duplicate answer is no reason to leave it unrun: the log gives
        it to a batch re-sent after a lost answer (its first send wrote it) as
        to a retried input; only the latter's turn may have run, and then it
        is closed."""
        await self._apply_pending_plan()
        turn = ev.Event(id=f"{input_id}-turn", turn_start=ev.TurnStart(turn_id=new_id("turn")))
        # The capabilities' context first, so the model reads the prompt after it.
        added = await self._context_events()
        context = [replace_id(e, f"{input_id}-context-{n}") for n, e in enumerate(added)]
        events = [turn, *context, *before, ev.Event(id=input_id, user_message=message)]
        if not self._state.title:
            # A session is named after its first message until someone renames it.
            title = ev.SessionTitle(title=title_from_message(message.text))
            events.append(ev.Event(id=f"{input_id}-title", session_title=title))
        await self._fold_written(events, await self._write(events))
        return self._state.turn.open

    async def _apply_pending_plan(self) -> None:
        """A plan switch chosen during the last turn that no boundary applied
        is applied before the next prompt is recorded, so its notice reaches
        the model before the prompt rather than after it."""
        if self._plan is not None and self._state.plan.pending is not None:
            await self._plan.boundary_sections(
                self.session_id, self._state.plan.active, self._lease_token
            )
            await self._catch_up()

    async def cancel(self) -> bool:
        """Stop the running turn (recorded as cancelled). Queued inputs stay."""
        turn = self._turn_task
        if turn is None or turn.done():
            return False
        turn.cancel()
        await asyncio.wait([turn])
        return True

    async def close(self) -> None:
        """Stop without recording anything: a turn left open is picked up by
        whichever runtime loads the session next."""
        self._closing = True
        for task in (self._turn_task, self._runner):
            if task is not None and not task.done():
                task.cancel()
                await asyncio.wait([task])

    # -- questions and settings ----------------------------------------------------------

    async def answer(self, question_id: str, answer: ev.QuestionAnswer) -> int:
        """Record the first answer of an open question; the seq it got."""
        for _ in range(MAX_ATTEMPTS):
            await self._catch_up()
            questions = self._state.questions
            question = questions.find(question_id)
            if question is None:
                if question_id in questions.answered:
                    raise QuestionAnswered(question_id)
                raise QuestionNotFound(question_id)
            check_answer(question, answer)
            answered = ev.Event(
                id=new_id("answer"),
                question_answered=ev.QuestionAnswered(question_id=question_id, answer=answer),
            )
            # An "always allow" answer and its rule are one append: the log
            # never shows one without the other.
            events = [answered, *approvals.rule_events(question, answer, self.cwd_text)]
            try:
                result = await self._write(events, expected_last_seq=self._state.last_seq)
            except WrongExpectedSeq:
                continue
            self._answers.resolve(question_id, answer)
            return result.last_seq
        raise FailedPrecondition("BUSY_LOG", f"session {self.session_id!r} changed too often")

    async def revoke_rule(self, rule_id: str) -> int | None:
        """Record that a rule of this session's log no longer applies; the
        seq it got (None: this log holds no such rule in force)."""
        await self._catch_up()
        if self._state.permissions.find(rule_id) is None:
            return None
        revoked = ev.PermissionRuleRevoked(rule_id=rule_id)
        await self._append([ev.Event(id=new_id("revoke"), permission_rule_revoked=revoked)])
        return self._state.last_seq

    async def update_settings(
        self,
        sandbox: str | None,
        approvals: str | None,
        *,
        model: str | None = None,
        network: bool | None = None,
    ) -> tuple[SettingsFold, int]:
        """Record new settings: the sandbox and approvals are effective for
        the next tool call, the model for the next model request. A model
        the catalog does not list is UnknownModel, and nothing is recorded."""
        if model:
            self._models.get(model)
        await self._catch_up()
        wanted = self._state.settings.changed(sandbox, approvals, model, network)
        if wanted is not None:
            await self.record_settings(wanted)
        return self._state.settings, self._state.last_seq

    async def record_settings(self, settings: SettingsFold) -> None:
        """Record `settings` as they are (a change, or the session's defaults)."""
        await self._append(
            [ev.Event(id=new_id("settings"), session_settings=settings_event(settings))]
        )

    # -- the run loop --------------------------------------------------------------------

    def _start(self, turn_id: str, *, resuming: bool) -> None:
        self._runner = spawn(self._run(turn_id, resuming), name=f"agent-{self.session_id}")
        self._publish_status()

    async def _start_next(self) -> None:
        """Run the oldest queued input, if any (after a turn, or on load)."""
        async with self._admitting:
            if not self.running and (turn_id := await self._next_turn()):
                self._start(turn_id, resuming=False)

    async def _following_turn(self, ended: str) -> str:
        """The turn to run after `ended`: one a prompt opened meanwhile, else
        the turn of the oldest waiting input ("" when there is none)."""
        if self._closing:
            return ""
        await self._catch_up()
        turn = self._state.turn
        if turn.open and turn.turn_id != ended:
            return turn.turn_id
        return "" if turn.open else await self._next_turn()

    async def _next_turn(self) -> str:
        """Open the turn of the oldest waiting input ("" when none waits); a
        steered input that came too late for the last step runs too."""
        await self._catch_up()
        waiting = self._state.turn.inputs
        if not waiting or self._closing:
            return ""
        await self._open_turn(waiting[0].input_id, await self._queued_message(waiting[0]))
        return self._state.turn.turn_id

    async def _queued_message(self, queued: QueuedInput) -> ev.UserMessage:
        """The user/message a queued input runs as: its text, or the message
        its input/queued holds (read back from the log's recent events)."""
        plain = _user_message(queued.input_id, queued.text).user_message
        if not queued.attached:
            return plain

        def its_own(event: ev.Event) -> bool:
            return event.HasField("input_queued") and event.input_queued.input_id == queued.input_id

        found = await self._find_back(its_own, lambda _: False)
        return found.input_queued.message if found is not None else plain

    async def _find_back(
        self, match: Callable[[ev.Event], bool], stop: Callable[[ev.Event], bool]
    ) -> ev.Event | None:
        """The latest event `match` takes, read back from the log's end, no
        further than the first one `stop` takes."""
        before = self._state.last_seq + 1
        while before > 0:
            read = await self._log.read(
                self.session_id, from_seq=before - 1, direction=Direction.BACKWARD, limit=256
            )
            for event in read.events:
                if match(event):
                    return event
                if stop(event):
                    return None
            if not read.events:
                return None
            before = read.events[-1].seq
        return None

    async def events(self, kinds: frozenset[str]) -> AsyncIterator[ev.Event]:
        """Every event of the whole log of those kinds, oldest first."""
        await self._catch_up()
        async for event in read_forward(self._log, self.session_id, -1, self._state.last_seq):
            if event.WhichOneof("body") in kinds:
                yield event

    async def _run(self, turn_id: str, resuming: bool) -> None:
        try:
            while turn_id:
                self._turn_task = spawn(self._turn(turn_id, resuming), name=f"turn-{turn_id}")
                await asyncio.wait([self._turn_task])
                resuming = False
                async with self._admitting:
                    turn_id = await self._following_turn(turn_id)
                    if not turn_id:
                        self._runner = None
        finally:
            self._turn_task = None
            # Report idle once this task is done, so `running` is already false.
            asyncio.get_running_loop().call_soon(self._publish_status)

    # -- the turn --------------------------------------------------------------------------

    async def _turn(self, turn_id: str, resuming: bool) -> None:
        try:
            step = self._state.turn.step if resuming else 0
            if resuming:
                await self._resume_step()
            owes = await self._run_calls(turn_id, step) if resuming else True
            if resuming:
                step += 1
            while await self._goes_on(turn_id, owes):
                owes = await self._step(turn_id, step)
                step += 1
            await self._end_turn(turn_id, ev.TURN_END_REASON_COMPLETED)
        except ModelError as error:
            log.warning(
                "model failed", extra={"session_id": self.session_id, "error": error.message}
            )
            await self._end_turn(turn_id, ev.TURN_END_REASON_ERROR, error.message)
        except asyncio.CancelledError:
            if self._closing:
                raise
            await self._end_turn(turn_id, ev.TURN_END_REASON_CANCELLED, partial=self._partial)
        except LeaseLost:
            # Deposed: the new owner ends this turn as interrupted.
            log.warning(
                "turn stopped: the session runs elsewhere now",
                extra={"session_id": self.session_id},
            )
        except Exception as error:
            log.exception("turn failed", extra={"session_id": self.session_id})
            await self._end_turn(turn_id, ev.TURN_END_REASON_ERROR, f"internal error: {error}")
        finally:
            self._live.end_turn(self.session_id, turn_id)

    async def _resume_step(self) -> None:
        """Before the resumed step's calls run: its tools (MCP servers' as
        they are now). The answer its question waits for is expected first,
        since it may come while the servers are looked at."""
        self._resumed = self._waiting_question()
        if self._resumed is not None:
            self._answers.expect(self._resumed.question_id)
        self._step_catalog, _ = await self._boundary_catalog()

    async def _end_turn(
        self,
        turn_id: str,
        reason: ev.TurnEndReason.ValueType,
        error: str = "",
        partial: StreamedAnswer | None = None,
    ) -> None:
        """Record the turn's end, after what a cancelled answer had streamed
        (the user saw it, so the model sees it next time, marked cancelled)."""
        events = []
        if partial is not None and (partial.text or partial.reasoning):
            message = ev.AssistantMessage(text=partial.text, reasoning=partial.reasoning)
            events.append(ev.Event(id=new_id("assistant"), assistant_message=message))
        if not self._closing:
            for part in await self._parts():
                events += await part.on_turn_end(turn_id, reason)
        end = ev.TurnEnd(turn_id=turn_id, reason=reason, error=error[:65536])
        events.append(ev.Event(id=new_id("end"), turn_end=end))
        self._partial = None
        await self._append(events)

    async def _step(self, turn_id: str, step: int) -> bool:
        """Run one step; True when its tool calls owe the model another request."""
        plan_sections = (
            await self._plan.boundary_sections(
                self.session_id, self._state.plan.active, self._lease_token
            )
            if self._plan
            else []
        )
        self._step_catalog, mcp_status = await self._boundary_catalog()
        await self._catch_up()
        # The session's model as of this boundary (a change made during the
        # last step applies from here, like a plan choice).
        self._choose_model()
        steered = [
            ev.Event(id=i.input_id, user_message=await self._queued_message(i))
            for i in self._state.turn.steered
        ]
        start = ev.Event(id=new_id("step"), step_start=ev.StepStart(turn_id=turn_id, step=step))
        await self._append([*mcp_status, start, *await self._context_events(), *steered])
        added = [s for part in await self._parts() for s in part.sections()]
        sections = sorted([*self._base_sections, *plan_sections, *added], key=lambda s: s.order)
        request = await self._request(sections)
        if self._compaction.due(await self._predicted(request), self._model.context_window):
            await self._compact(AUTO, turn_id=turn_id, step=step, sections=sections)
            request = await self._fitting(replace(request, messages=await self._messages()))
        header = ev.RequestHeader(
            sections=sections,
            tools=request.tools,
            model=self._model.model,
            turn_id=turn_id,
            step=step,
            estimated_tokens=request.estimated_tokens(),
        )
        await self._append([ev.Event(id=new_id("request"), request_header=header)])
        answer = await self._ask_fitting(request, turn_id, step)
        await self._record_answer(answer, turn_id, step)
        self._live.end_step(self.session_id, turn_id, step)
        return await self._run_calls(turn_id, step)

    async def next_request(self) -> ModelRequest:
        """The request a step would send now, with the base sections (no
        plan-mode boundary is run and nothing is recorded): what building a
        request costs, for the bench."""
        await self._catch_up()
        return await self._request(self._base_sections)

    async def _request(self, sections: Sequence[ev.PromptSection]) -> ModelRequest:
        return ModelRequest(
            messages=await self._messages(),
            sections=sections,
            tools=self._step_catalog.schemas(),
            model=self._model.model,
        )

    async def _ask_fitting(self, request: ModelRequest, turn_id: str, step: int) -> StreamedAnswer:
        """The step's answer; a refusal as too long compacts (trigger
        overflow) and asks once more, then ends the turn (ContextOverflow)."""
        try:
            return await self._ask_model(request, turn_id, step)
        except ModelError as error:
            if not error.context_overflow:
                raise
            log.warning("context overflow: compacting", extra={"session_id": self.session_id})
        await self._compact(OVERFLOW, turn_id=turn_id, step=step, sections=request.sections)
        request = await self._fitting(replace(request, messages=await self._messages()))
        try:
            return await self._ask_model(request, turn_id, step)
        except ModelError as error:
            if error.context_overflow:
                raise ContextOverflow(self._model.context_window, error.message) from error
            raise

    async def _predicted(self, request: ModelRequest) -> int:
        """The request's size as the provider will likely count it: its count
        of the view's last request and what was added since (request_size.py)."""
        counted = (await self._view()).transcript.counted
        if counted is not None:
            self._ratio = counted.ratio
        return predicted_tokens(request.estimated_tokens(), counted, self._ratio)

    async def _fitting(self, request: ModelRequest) -> ModelRequest:
        """`request` as compacted, unless even so it is predicted past the
        threshold: then it is not sent (a provider would refuse it, or
        leave the answer no room), and the turn ends with ContextOverflow."""
        predicted, window = await self._predicted(request), self._model.context_window
        if self._compaction.due(predicted, window):
            raise ContextOverflow(window, f"about {predicted} tokens after compacting")
        return request

    async def _boundary_catalog(self) -> tuple[ToolCatalog, list[ev.Event]]:
        """The step's tools with the MCP servers' as they are now, and the
        mcp/status event to record when their states changed."""
        offered = self._state.child.tools if self._state.child is not None else ()
        if self._mcp is None:
            return self._catalog.only(offered), []
        # Its stdio servers are confined like its commands (mcp/launch.py).
        snapshot = await self._mcp.snapshot(self.cwd, self._hidden)
        events = []
        if snapshot.servers != self._mcp_seen.servers:
            status = mcp_status_event(snapshot.servers)
            events.append(ev.Event(id=new_id("mcp"), mcp_status=status))
        return self._catalog.extended(snapshot.tools).only(offered), events

    async def _ask_model(self, request: ModelRequest, turn_id: str, step: int) -> StreamedAnswer:
        for attempt in range(1, STEP_ATTEMPTS + 1):
            answer = StreamedAnswer()
            self._partial = answer
            try:
                async with aclosing(self._model.stream(request)) as chunks:
                    async for chunk in chunks:
                        answer.add(chunk)
                        self._show(chunk, turn_id, step)
                return answer
            except ModelError as error:
                streamed = answer.text or answer.reasoning
                if not error.retryable or attempt == STEP_ATTEMPTS or streamed:
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

    def _show(self, chunk: object, turn_id: str, step: int) -> None:
        if isinstance(chunk, TextDelta) and chunk.text:
            self._live.text(self.session_id, turn_id, step, ANSWER, chunk.text)
        elif isinstance(chunk, ReasoningDelta) and chunk.text:
            self._live.text(self.session_id, turn_id, step, REASONING, chunk.text)

    async def _record_answer(self, answer: StreamedAnswer, turn_id: str, step: int) -> None:
        """The answer, then its usage, in one append (before its calls run)."""
        self._partial = None
        events: list[ev.Event] = []
        if answer.text or answer.reasoning:
            message = ev.AssistantMessage(text=answer.text, reasoning=answer.reasoning)
            events.append(ev.Event(id=new_id("assistant"), assistant_message=message))
        events += [
            ev.Event(
                id=new_id("call"),
                tool_call=ev.ToolCall(call_id=c.call_id, name=c.name, args_json=c.args_json),
            )
            for c in answer.tool_calls
        ]
        if answer.usage is not None:
            events.append(self._usage_event(answer.usage, turn_id, step))
        if events:
            await self._append(events)

    def _usage_event(self, usage: Usage, turn_id: str, step: int) -> ev.Event:
        """The request's usage as the provider reported it, under the models
        file's name for the model and priced at its prices."""
        configured = self._spec.name
        provider_id = usage.model or self._spec.model_id
        recorded = ev.ModelUsage(
            turn_id=turn_id,
            step=step,
            # The configured model, and the provider's id when it differs.
            model=configured if provider_id == configured else f"{configured} ({provider_id})",
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cached_prompt_tokens=usage.cached_prompt_tokens,
            estimated=usage.estimated,
            context_window=self._spec.context_window,
        )
        return ev.Event(id=new_id("usage"), model_usage=price(self._spec, recorded))

    # -- compaction -----------------------------------------------------------------------------

    async def compact(self, focus: str) -> CompactOutcome:
        """`/compact [focus]`: compact now, recorded between command/run and
        command/done. Only between turns: a running turn compacts itself
        at its boundaries when it needs to."""
        async with self._admitting:
            await self._catch_up()
            command_id = new_id("cmd")
            run = ev.CommandRun(command_id=command_id, name="compact")
            if focus:
                run.args = focus
            await self._append([ev.Event(id=command_id, command_run=run)])
            outcome = await self._compact_between_turns(focus)
            kind = ev.COMMAND_DONE_KIND_SUCCESS if outcome.ok else ev.COMMAND_DONE_KIND_ERROR
            done = ev.CommandDone(command_id=command_id, kind=kind, message=outcome.message)
            await self._append([ev.Event(id=f"{command_id}-done", command_done=done)])
            return outcome

    async def _compact_between_turns(self, focus: str) -> CompactOutcome:
        if self._state.turn.open:
            return CompactOutcome(False, "A turn is running: /compact once it has ended.")
        if not await self._messages():
            return CompactOutcome(False, "Nothing to compact yet.")
        try:
            done = await self._compact(MANUAL, focus=focus, sections=self._base_sections)
        except ModelError as error:
            return CompactOutcome(False, f"Could not compact: {error.message}")
        before, after = tokens_label(done.tokens_before), tokens_label(done.tokens_after)
        return CompactOutcome(True, f"Conversation compacted ({before} → {after} tokens).")

    async def _compact(
        self,
        trigger: str,
        *,
        turn_id: str = "",
        step: int = 0,
        focus: str = "",
        sections: Sequence[ev.PromptSection] = (),
    ) -> ev.Compaction:
        """Ask the model for a summary of the view so far and record it as a
        compaction covering everything up to the folded state."""
        for part in await self._parts():
            await part.before_compaction(trigger, focus)
        await self._catch_up()
        window = self._model.context_window
        view = await self._view()
        ask = CompactionAsk(
            trigger,
            self._model,
            view.transcript,
            sections,
            self._step_catalog.schemas(),
            # Taken before the view: an event folded meanwhile is then both
            # summarised and kept after the summary, never lost.
            up_to_seq=self._state.last_seq,
            limit_tokens=int(self._compaction.threshold * window),
            ratio=self._ratio,
            focus=focus,
            carried=[context for part in view.parts.values() for context in part.carried()],
        )
        done = await compact(ask)
        events = [ev.Event(id=new_id("compaction"), compaction=done.compaction)]
        if done.answer.usage is not None:
            events.insert(0, self._usage_event(done.answer.usage, turn_id, step))
        await self._append(events)
        log.info(
            "compacted the conversation",
            extra={"session_id": self.session_id, "trigger": trigger},
        )
        if done.results_dropped:
            raise ContextOverflow(window, "the latest tool results do not fit beside the summary")
        return done.compaction

    async def _hidden(self) -> tuple[Path, ...]:
        """What the session's commands must not see."""
        return await self._neighbours.hidden_from(self.cwd) if self._neighbours else ()

    async def _append(self, events: list[ev.Event]) -> None:
        await self._fold_written(events, await self._write(events))

    async def record(self, events: list[ev.Event]) -> int:
        """Append `events` under the agent's lease (a command's record); the
        seq of the last."""
        await self._append(with_ids(events))
        return self._state.last_seq

    async def _write(
        self, events: list[ev.Event], expected_last_seq: int | None = None
    ) -> AppendResult:
        """Every append of the agent, under its lease token. A refused token
        means another runtime owns the session now: nothing more is written
        from here (the turn stops where it is, see _turn)."""
        try:
            return await self._log.append(
                self.session_id, events, expected_last_seq, lease_token=self._lease_token
            )
        except LeaseLost:
            self._closing = True
            if self._on_lease_lost is not None and self._lease_token is not None:
                self._on_lease_lost(self.session_id, self._lease_token)
            raise


def _user_message(input_id: str, text: str) -> ev.Event:
    return ev.Event(
        id=input_id,
        user_message=ev.UserMessage(text=text, source=ev.MessageSource(kind=ev.SOURCE_KIND_USER)),
    )


def _queued(input_id: str, message: ev.UserMessage, mode: PromptMode) -> ev.Event:
    input_mode = ev.INPUT_MODE_STEER if mode is PromptMode.STEER else ev.INPUT_MODE_QUEUE
    queued = ev.InputQueued(input_id=input_id, text=message.text, mode=input_mode)
    if message != _user_message("", message.text).user_message:
        queued.message.CopyFrom(message)
    return ev.Event(id=f"{input_id}-queued", input_queued=queued)


__all__ = [
    "TOOL_APPROVAL",
    "Agent",
    "AgentBusy",
    "AgentStatus",
    "CompactOutcome",
    "ContextOverflow",
    "PromptMode",
]
