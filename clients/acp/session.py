"""One agenthost session as an ACP session: follows the SDK session's updates
and sends them to the editor as `session/update` notifications; asks the
editor's permission for the session's questions; tells a prompt when its
turn has ended."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from acp import schema as acp
from acp.interfaces import Client
from agenthost.sessionlog.v1 import events_pb2

from clients.sdk import (
    AgentHostClient,
    AgentHostError,
    CommandsChanged,
    EventAppended,
    HistoryLoaded,
    ModelInfo,
    OutputStreamed,
    PlanChanged,
    Question,
    QuestionAnsweredError,
    QuestionAsked,
    QuestionClosed,
    Session,
    SettingsChanged,
    TextStreamed,
    Update,
    UsageChanged,
    last_title,
    todos_written,
    turn_calls,
)

from . import translate

log = logging.getLogger("agenthost.acp")


@dataclass(frozen=True)
class TurnEnded:
    seq: int
    end: events_pb2.TurnEnd


@dataclass
class Streamed:
    """How much of the running step's text the editor already has."""

    step: tuple[str, int] | None = None
    sent: dict[str, int] = field(default_factory=dict)


class AcpSession:
    """Created by the agent on session/new or session/load; `start()` begins
    sending live updates (after the history, when replayed)."""

    def __init__(
        self, client: Client, session: Session, cwd: str, gateway: AgentHostClient | None = None
    ) -> None:
        self.client = client
        # Opens the subagents' sessions, to show what each running one does.
        self.gateway = gateway
        # The running subagents followed: child session id -> its task call's
        # id, and the steps shown under each task call.
        self._children: dict[str, asyncio.Task[None]] = {}
        self._child_steps: dict[str, list[str]] = {}
        self.session = session
        self.id = session.id
        self.cwd = cwd
        # Texts this editor prompted: their user/message is not echoed back.
        self.own_prompts: list[str] = []
        self.command_names: list[str] = []
        # The configured models (ListModels; none: no model choice offered).
        self.models: list[ModelInfo] = []
        self._updates = session.updates()
        self._streamed = Streamed()
        self._mode_sent: str | None = None
        self._model_sent: str | None = None
        self._turn_ends: list[TurnEnded] = []
        self._turn_waiters: list[tuple[int, asyncio.Future[TurnEnded]]] = []
        self._asking: dict[str, asyncio.Task[None]] = {}
        # Calls the editor is not shown (translate.UNSHOWN_TOOLS).
        self._unshown: set[str] = set()
        self._pump: asyncio.Task[None] | None = None
        # The seq of the last event sent (replayed, or live); what the history
        # held when the subscription began is no news.
        self._upto = session.last_seq

    # -- modes ---------------------------------------------------------------------------

    @property
    def plan_active(self) -> bool:
        state = self.session.plan.state
        return state is not None and state.active

    def modes(self) -> acp.SessionModeState:
        available = self.session.plan.state is not None
        return translate.modes(self.plan_active, available)

    # -- the model ---------------------------------------------------------------------

    @property
    def model(self) -> str:
        """The session's model (its `settings`; the default when it names none)."""
        settings = self.session.settings
        return translate.model_id(self.models, settings.model if settings is not None else "")

    async def load_models(self) -> None:
        """The models the session can switch to; none when the gateway cannot
        list them (the editor is then offered no model choice)."""
        try:
            self.models = await self.session.list_models()
        except AgentHostError as error:
            log.info("session %s: listing the models failed (%s)", self.id, error)

    async def choose_model(self, name: str) -> None:
        """The editor's choice, recorded in the session's settings. The reply
        to it tells the editor (no config_option_update for it, even when the
        change reaches the SDK first); a newer change from elsewhere does."""
        told, self._model_sent = self._model_sent, name
        try:
            await self.session.set_model(name)
        except AgentHostError:
            self._model_sent = told
            raise
        self._model_sent = self.model

    def config_options(self) -> list[translate.ConfigOption]:
        return translate.config_options(self.modes(), self.models, self.model)

    # -- replay and live -----------------------------------------------------------------

    async def replay(self) -> None:
        """The whole history as updates (session/load), before the response."""
        while self.session.history.has_more:
            await self.session.load_older()
        events = list(self.session.events)
        for event in events:
            await self._on_event(event, replay=True)
        self._upto = events[-1].seq if events else -1

    def start(self) -> None:
        """Begin the live updates (commands, usage, mode, open questions first).
        Called from a request's handler: the task runs once the handler's
        response is queued, so these follow the response. Once only (a
        session/new that reuses a session this editor has open)."""
        if self._pump is not None:
            return
        self._mode_sent = translate.mode_id(self.plan_active)
        self._model_sent = self.model
        self._pump = asyncio.create_task(self._run(), name=f"acp-{self.id}")

    async def _run(self) -> None:
        try:
            await self._send_commands()
            usage = translate.usage_update(self.session.usage)
            if usage is not None:
                await self._send(usage)
            for question in list(self.session.questions.values()):
                self._ask(question)
            async for update in self._updates:
                await self._on_update(update)
        except ConnectionError:
            return  # the editor went away
        except Exception:
            log.exception("session %s: following the session failed", self.id)

    async def close(self) -> None:
        self._updates.close()
        tasks = [
            t
            for t in (self._pump, *self._asking.values(), *self._children.values())
            if t is not None
        ]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for _, waiter in self._turn_waiters:
            if not waiter.done():
                waiter.cancel()

    async def say(self, text: str) -> None:
        """A line from agenthost itself (a command's message)."""
        await self._send(translate.agent_text(text, "answer"))

    async def _send(self, update: Any) -> None:
        await self.client.session_update(session_id=self.id, update=update)

    async def _on_update(self, update: Update) -> None:
        if isinstance(update, EventAppended):
            await self._on_live_event(update.event)
        elif isinstance(update, HistoryLoaded):
            # After a resync the window is replaced without EventAppended:
            # what it holds beyond the last event sent is new.
            for event in list(self.session.events):
                await self._on_live_event(event)
        elif isinstance(update, TextStreamed):
            await self._on_text(update)
        elif isinstance(update, OutputStreamed):
            await self._send(translate.tool_output(update.call_id, update.text))
        elif isinstance(update, PlanChanged):
            await self._send_mode()
        elif isinstance(update, QuestionAsked):
            self._ask(update.question)
        elif isinstance(update, QuestionClosed):
            asking = self._asking.pop(update.question_id, None)
            if asking is not None:
                asking.cancel()
        elif isinstance(update, SettingsChanged):
            await self._send_model()
        elif isinstance(update, CommandsChanged):
            await self._send_commands()
        elif isinstance(update, UsageChanged):
            usage = translate.usage_update(update.usage)
            if usage is not None:
                await self._send(usage)

    async def _on_live_event(self, event: events_pb2.Event) -> None:
        """Each event once, in log order."""
        if event.seq > self._upto:
            self._upto = event.seq
            await self._on_event(event, replay=False)

    async def _on_text(self, update: TextStreamed) -> None:
        streamed = self._streamed
        step = (update.turn_id, update.step)
        if streamed.step != step:
            streamed.step, streamed.sent = step, {}
        sent = streamed.sent.get(update.kind, 0)
        if len(update.text) > sent:
            streamed.sent[update.kind] = len(update.text)
            await self._send(translate.agent_text(update.text[sent:], update.kind))

    async def _on_event(self, event: events_pb2.Event, *, replay: bool) -> None:
        kind = event.WhichOneof("body")
        if kind == "step_start":
            step = (event.step_start.turn_id, event.step_start.step)
            if self._streamed.step != step:
                self._streamed = Streamed(step)
        elif kind == "user_message":
            text = event.user_message.text
            if translate.is_notice(event.user_message):
                return
            if not replay and text in self.own_prompts:
                self.own_prompts.remove(text)
            elif text:
                await self._send(translate.user_message(text))
        elif kind == "assistant_message":
            await self._on_answer(event.assistant_message, replay)
        elif kind == "tool_call" and event.tool_call.name in translate.UNSHOWN_TOOLS:
            self._unshown.add(event.tool_call.call_id)
        elif kind == "tool_call":
            await self._send(translate.tool_call(event.tool_call, self.cwd))
        elif kind == "tool_result" and event.tool_result.call_id not in self._unshown:
            await self._send(translate.tool_result(event.tool_result, self.cwd))
        elif kind == "todos_updated":
            await self._send(translate.plan_update(todos_written(event.todos_updated)))
        elif kind == "subagent_started":
            await self._child_started(event.subagent_started, replay)
        elif (title := last_title((event,))) is not None:
            info = acp.SessionInfoUpdate(session_update="session_info_update", title=title)
            await self._send(info)
        elif kind == "turn_end" and not replay:
            self._turn_ended(TurnEnded(event.seq, event.turn_end))

    async def _on_answer(self, message: events_pb2.AssistantMessage, replay: bool) -> None:
        """The logged answer: what streaming did not already show."""
        sent = {} if replay else self._streamed.sent
        for kind, text in (("reasoning", message.reasoning), ("answer", message.text)):
            rest = text[sent.get(kind, 0) :]
            if rest:
                await self._send(translate.agent_text(rest, kind))
        if not replay:
            self._streamed = Streamed()

    async def _send_mode(self) -> None:
        """current_mode_update when the committed mode changed, whoever
        changed it (a pending choice is no change yet)."""
        state = self.session.plan.state
        if state is None or translate.mode_id(state.active) == self._mode_sent:
            return
        self._mode_sent = translate.mode_id(state.active)
        for update in translate.mode_updates(self.modes(), self.config_options()):
            await self._send(update)

    async def _send_model(self) -> None:
        """config_option_update when the session's model changed from what the
        editor was told, whoever changed it (the CLI, the web, the SDK)."""
        if not self.models or self.model == self._model_sent:
            return
        self._model_sent = self.model
        await self._send(translate.config_update(self.config_options()))

    async def refresh_commands(self) -> None:
        """List the session's commands again and tell the editor (a prompt
        file may have been added since: the gateway says nothing of files)."""
        await self._send_commands()

    async def _send_commands(self) -> None:
        try:
            commands = await self.session.list_commands()
        except AgentHostError as error:
            log.info("session %s: listing commands failed (%s)", self.id, error)
            return
        self.command_names = [c.name for c in commands]
        await self._send(translate.commands_update(commands))

    # -- turns -----------------------------------------------------------------------------

    def _turn_ended(self, ended: TurnEnded) -> None:
        self._turn_ends.append(ended)
        for after, waiter in list(self._turn_waiters):
            if ended.seq > after and not waiter.done():
                waiter.set_result(ended)
                self._turn_waiters.remove((after, waiter))

    def turn_end_after(self, seq: int) -> asyncio.Future[TurnEnded]:
        """Resolved by the first turn end after `seq` the editor was sent (so a
        prompt's response follows its turn's updates)."""
        waiter: asyncio.Future[TurnEnded] = asyncio.get_running_loop().create_future()
        for ended in self._turn_ends:
            if ended.seq > seq:
                waiter.set_result(ended)
                return waiter
        self._turn_waiters.append((seq, waiter))
        return waiter

    # -- subagents ---------------------------------------------------------------------------

    async def _child_started(self, started: events_pb2.SubagentStarted, replay: bool) -> None:
        """A task call's subagent: its start as the call's progress, then
        (live) each of its steps as they come."""
        steps = self._child_steps.setdefault(started.call_id, [])
        steps.append(f"subagent {started.agent_type} started ({started.child_session_id})")
        await self._send(translate.subagent_progress(started.call_id, steps))
        child = started.child_session_id
        if not replay and self.gateway is not None and child not in self._children:
            self._children[child] = asyncio.create_task(
                self._follow_child(child, started.call_id), name=f"child-{child}"
            )

    async def _follow_child(self, child_id: str, call_id: str) -> None:
        assert self.gateway is not None
        # Closed at the end only when opened here (the editor may hold it too).
        shared = child_id in self.gateway.sessions
        try:
            opened = await self.gateway.open_session(child_id)
        except AgentHostError as error:
            log.info("subagent %s: not followed (%s)", child_id, error)
            self._children.pop(child_id, None)
            return

        def expected() -> bool:
            return any(c.session_id == child_id and c.running for c in self.session.subagents)

        try:
            async for call in turn_calls(opened, expected):
                steps = self._child_steps.setdefault(call_id, [])
                steps.append(translate.child_step(call))
                await self._send(translate.subagent_progress(call_id, steps))
        except ConnectionError:
            return  # the editor went away
        finally:
            self._children.pop(child_id, None)
            if not shared:
                with contextlib.suppress(AgentHostError):
                    await opened.close()

    def asker(self, question: Question) -> str:
        """Which subagent asks a question raised inside it ("" for this session's own)."""
        if not question.child_session_id:
            return ""
        child = next(
            (c for c in self.session.subagents if c.session_id == question.child_session_id), None
        )
        return f"Subagent {child.agent_type} · {child.description}" if child else "A subagent"

    # -- questions -------------------------------------------------------------------------

    def _ask(self, question: Question) -> None:
        if question.question_id in self._asking:
            return
        self._asking[question.question_id] = asyncio.create_task(
            self._ask_editor(question), name=f"ask-{question.question_id}"
        )

    async def _ask_editor(self, question: Question) -> None:
        """A question as session/request_permission; the choice as its answer."""
        try:
            reply = await self.client.request_permission(
                session_id=self.id,
                tool_call=translate.permission_tool_call(question, self.asker(question)),
                options=translate.permission_options(question),
            )
        except (ConnectionError, asyncio.CancelledError):
            return
        except Exception as error:
            log.info("question %s: the editor did not answer (%s)", question.question_id, error)
            return
        finally:
            self._asking.pop(question.question_id, None)
        outcome = reply.outcome
        if not isinstance(outcome, acp.AllowedOutcome):
            return  # cancelled: the prompt was cancelled, the turn ends without an answer
        feedback = (outcome.field_meta or {}).get("feedback")
        answer = translate.answer_for_option(
            outcome.option_id, feedback if isinstance(feedback, str) and feedback else None
        )
        if answer is None:
            log.info("question %s: unknown option %r", question.question_id, outcome.option_id)
            return
        try:
            await self.session.answer_question(question.question_id, **answer)
        except QuestionAnsweredError:
            pass  # answered elsewhere first
        except AgentHostError as error:
            log.warning("question %s: the answer failed (%s)", question.question_id, error)
