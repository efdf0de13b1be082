"""Hooks: commands a project or a user configured to run at the session's
points, as Claude Code runs them, so hooks people already wrote work
unchanged (settings.py: where they are read, the format; running.py: how
one runs and what its answer means).

Each event fires at its point with Claude Code's input on stdin
(session_id, cwd, hook_event_name, permission_mode, and the event's own):

  - PreToolUse (tool_name by Claude Code's names, tool_input with its
    argument names, tool_use_id): before a call's approval; a hook may
    deny it (its reason is the call's result the model reads), ask the
    user although the policy would not, or allow it without the question
    the policy would ask, never what the sandbox refuses;
  - PostToolUse (and tool_response): after a call that ran and succeeded;
    a block's reason and additionalContext follow the result the model reads;
  - UserPromptSubmit (prompt): before a prompt is taken; a block refuses
    it (PROMPT_BLOCKED, with the reason; nothing but the run is recorded),
    its context is recorded right before the prompt;
  - Stop, or SubagentStop in a subagent's session (stop_hook_active,
    last_assistant_message): when a turn would end; a block has the model
    go on, told the reason. stop_hook_active says the turn already went
    on for a Stop hook, and after MAX_GO_ONS the turn ends whatever they say;
  - PreCompact (trigger manual or auto, custom_instructions): before a
    compaction; SessionStart (source startup, resume or compact): before
    the first model request of the session in this runtime, or the first
    after a compaction, its context recorded for the model; SessionEnd
    (reason other): when the runtime unloads the session; Notification
    (message, notification_type): when a question waits for the user.

`continue: false` ends the turn (after the step under way; a prompt is
refused), with its stopReason shown to the user. Every run is recorded as
hook/run (event, command, exit code, decision, reason, note, duration,
bounded output), which clients show as a line; a hook that fails, hangs or
cannot be confined costs only its own run, with a note. The hooks of a
session are read once, when the runtime first runs it: a hook a file gains
later runs from the session's next load (as Claude Code, which reads them
at start, so a change made meanwhile is no surprise).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agenthost.sessionlog.v1 import events_pb2 as ev

from services.common.errors import FailedPrecondition
from services.common.status import clip
from services.common.tasks import spawn

from ...capability import (
    AfterTool,
    AgentHandle,
    Capability,
    Command,
    CommandResult,
    Prompt,
    Release,
    SessionPart,
    SessionScope,
    ToolVerdict,
)
from ...claude_names import claude_input, claude_name, claude_names
from ...framing import element
from ...tools import Call, ToolContext, ToolOutcome
from .running import Answer, Where, reasons, run_hook, strongest
from .settings import HookSettings, described, load_hooks

log = logging.getLogger("agenthost.runtime.hooks")
NAME = "hooks"
# Times one turn goes on for Stop hooks before it ends whatever they say.
MAX_GO_ONS = 5
PERMISSION_MODES = {
    "ask": "default",
    "ask-for-commands": "acceptEdits",
    "never": "bypassPermissions",
}
CONTEXT_HEADING = "Context a {event} hook of this project added:"
GO_ON_HEADING = "A {event} hook did not let you stop yet. Its reason, to act on:"
FEEDBACK_HEADING = "{event} hook feedback:"
STOPPED = "a {event} hook stopped the turn"


class PromptBlocked(FailedPrecondition):
    """A UserPromptSubmit hook refused the prompt: only its run is recorded."""

    REASON = "PROMPT_BLOCKED"

    def __init__(self, reason: str) -> None:
        super().__init__(self.REASON, f"A UserPromptSubmit hook blocked the prompt: {reason}")


@dataclass
class Running:
    """What the capability keeps of a session the runtime runs, beyond
    any one view of it (a compaction starts a new one mid-turn): its hooks
    as first read, whether it has started here, what its turns owe to
    hooks, its notifications' tasks."""

    scope: SessionScope
    settings: HookSettings
    started: bool = False
    # The turns a hook stopped (continue: false): they end after the step.
    stopping: dict[str, str] = field(default_factory=dict)
    # How often each turn went on for Stop hooks.
    went_on: dict[str, int] = field(default_factory=dict)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


class Hooks(Capability):
    name = NAME

    def __init__(self) -> None:
        self._running: dict[str, Running] = {}

    def session(self, scope: SessionScope) -> SessionPart:
        running = self._running.get(scope.session_id)
        if running is None or running.scope is not scope:
            # A session loaded afresh (after a restart, or a lease taken
            # back) starts again, with its hooks read again.
            settings = load_hooks(scope.cwd, scope.config_dir)
            for problem in settings.problems:
                log.warning("hooks: %s", problem, extra={"session_id": scope.session_id})
            running = self._running[scope.session_id] = Running(scope, settings)
        return HooksPart(running)

    async def release(self, session_id: str, why: Release) -> int:
        """SessionEnd, while the session's lease is still held: unloaded for
        being idle, the runtime stopping, the session archived or deleted
        (not when another runtime took it over: nothing could be recorded)."""
        running = self._running.pop(session_id, None)
        if running is None or not running.started or why is Release.DROPPED:
            return 0
        part = HooksPart(running)
        await part.fire("SessionEnd", {"reason": "other"}, ["other"])
        return 0

    def commands(self) -> Sequence[Command]:
        return (
            Command(
                "hooks",
                "List the hooks this session runs (from its settings files), and any that "
                "cannot be used.",
                "/hooks",
                self._list,
            ),
        )

    async def _list(self, agent: AgentHandle, args: str | None) -> CommandResult:
        part = await agent.part(NAME)
        settings = part.settings if isinstance(part, HooksPart) else HookSettings()
        lines = list(described(settings)) or ["No hooks are configured for this session."]
        return CommandResult(True, "\n".join(lines), agent.state.last_seq)


class HooksPart(SessionPart):
    def __init__(self, running: Running) -> None:
        self._running = running
        self._scope = running.scope
        self.settings = running.settings
        # Context for the model's next request (SessionStart's, a Stop
        # hook's reason): recorded by before_request.
        self._for_model: list[ev.ContextAdded] = []
        # The view started at a compaction no SessionStart has run after.
        self._compacted = False
        self._last_answer = ""

    @property
    def _child(self) -> bool:
        return self._scope.state().child is not None

    def observe(self, event: ev.Event) -> None:
        kind = event.WhichOneof("body")
        if kind == "compaction":
            self._compacted = True
        elif kind == "hook_run" and event.hook_run.event == "SessionStart":
            self._compacted = False
        elif kind == "assistant_message" and event.assistant_message.text:
            self._last_answer = event.assistant_message.text

    # -- running -------------------------------------------------------------------------

    def _payload(self, event: str, given: dict[str, Any]) -> dict[str, Any]:
        """Claude Code's input for `event`: the fields every event has, then its own."""
        state = self._scope.state()
        mode = "plan" if state.plan.active else PERMISSION_MODES.get(state.settings.approvals, "")
        return {
            "session_id": self._scope.session_id,
            "cwd": str(self._scope.cwd),
            "hook_event_name": event,
            "permission_mode": mode,
            **given,
        }

    async def _where(self) -> Where:
        settings = self._scope.state().settings
        hidden = await self._scope.hidden()
        return Where(self._scope.cwd, settings.sandbox, settings.network, hidden)

    async def _run(
        self, event: str, given: dict[str, Any], names: Sequence[str] = ()
    ) -> list[Answer]:
        """Every hook of `event` for `names`, at once; nothing to run: []."""
        hooks = self.settings.of(event, names)
        if not hooks:
            return []
        payload, where = self._payload(event, given), await self._where()
        return list(await asyncio.gather(*(run_hook(hook, payload, where) for hook in hooks)))

    async def fire(
        self, event: str, given: dict[str, Any], names: Sequence[str] = (), call_id: str = ""
    ) -> list[Answer]:
        """Run `event`'s hooks and record their runs."""
        answers = await self._run(event, given, names)
        if answers:
            await self._scope.record([a.event(call_id) for a in answers])
        return answers

    def _context(self, event: str, heading: str, answers: Sequence[Answer]) -> ev.ContextAdded:
        framed = [
            element("hook", {"event": event, "command": a.hook.command}, a.context)
            for a in answers
            if a.context
        ]
        text = "\n".join([heading.format(event=event), *framed])
        return ev.ContextAdded(capability=NAME, text=clip(text, 262144))

    # -- the session's points ------------------------------------------------------------

    async def before_request(self) -> list[ev.Event]:
        if not self._child:
            await self._session_start()
        given, self._for_model = self._for_model, []
        return [ev.Event(context_added=context) for context in given]

    async def _session_start(self) -> None:
        if not self._running.started:
            self._running.started = True
            source = "startup" if self._scope.state().blank else "resume"
        elif self._compacted:
            source = "compact"
        else:
            return
        self._compacted = False
        answers = await self.fire("SessionStart", {"source": source}, [source])
        if any(a.context for a in answers):
            self._for_model.append(self._context("SessionStart", CONTEXT_HEADING, answers))

    async def on_prompt(self, prompt: Prompt) -> None:
        if self._child:
            return  # a subagent's prompt is its parent's task, not the user's
        await self._session_start()  # the session starts before its first prompt is taken
        answers = await self.fire("UserPromptSubmit", {"prompt": prompt.text})
        if strongest(answers) in ("stop", "block"):
            raise PromptBlocked(reasons(answers, "stop", "block") or "no reason given")
        if any(a.context for a in answers):
            context = self._context("UserPromptSubmit", CONTEXT_HEADING, answers)
            prompt.before.append(ev.Event(context_added=context))

    async def before_tool(self, call: Call, context: ToolContext) -> ToolVerdict | None:
        tool = call.tool.name
        given = {
            "tool_name": claude_name(tool),
            "tool_input": claude_input(tool, call.args, self._scope.cwd),
            "tool_use_id": context.call_id,
        }
        answers = await self.fire("PreToolUse", given, claude_names(tool), context.call_id)
        decision = strongest(answers)
        if decision == "stop":
            self._running.stopping[context.turn_id] = reasons(answers, "stop")
            why = STOPPED.format(event="PreToolUse")
            return ToolVerdict(refuse=True, reason=f"{why}: {reasons(answers, 'stop')}")
        if decision == "deny":
            return ToolVerdict(refuse=True, reason=f"PreToolUse hook: {reasons(answers, 'deny')}")
        if decision in ("ask", "allow"):
            return ToolVerdict(ask=decision == "ask", allow=decision == "allow")
        return None

    async def after_tool(self, call: Call, context: ToolContext, outcome: ToolOutcome) -> AfterTool:
        if not outcome.ok:
            return AfterTool(outcome)  # refused, denied or failed: it did not run through
        tool = call.tool.name
        given = {
            "tool_name": claude_name(tool),
            "tool_input": claude_input(tool, call.args, self._scope.cwd),
            "tool_response": _response(tool, call, outcome, self._scope),
            "tool_use_id": context.call_id,
        }
        answers = await self._run("PostToolUse", given, claude_names(tool))
        if strongest(answers) == "stop":
            self._running.stopping[context.turn_id] = reasons(answers, "stop")
        feedback = [
            element("hook", {"event": "PostToolUse", "command": a.hook.command}, text)
            for a in answers
            for text in (a.reason if a.decision == "block" else "", a.context)
            if text
        ]
        if feedback:
            said = "\n".join([FEEDBACK_HEADING.format(event="PostToolUse"), *feedback])
            outcome = replace(outcome, output=f"{outcome.output}\n\n{said}")
        return AfterTool(outcome, tuple(a.event(context.call_id) for a in answers))

    async def on_question(self, asked: ev.QuestionAsked) -> None:
        if not self.settings.of("Notification"):
            return
        kind = "permission_prompt" if asked.HasField("approval") else "elicitation_dialog"
        given = {
            "message": f"agenthost needs your answer: {asked.title}",
            "notification_type": kind,
        }
        work = self.fire("Notification", given, [kind], asked.call_id)
        task = spawn(_quietly(work), name=f"hooks-notification-{self._scope.session_id}")
        self._running.tasks.add(task)
        task.add_done_callback(self._running.tasks.discard)

    async def turn_goes_on(self, turn_id: str, owed: bool) -> bool | None:
        if turn_id in self._running.stopping:
            return False
        if owed:
            return None
        event = "SubagentStop" if self._child else "Stop"
        went = self._running.went_on.get(turn_id, 0)
        given = {"stop_hook_active": went > 0, "last_assistant_message": self._last_answer}
        answers = await self._run(event, given)
        decision = strongest(answers)
        capped = decision == "block" and went >= MAX_GO_ONS
        note = f"not heeded: the turn went on {went} times for Stop hooks already" if capped else ""
        if answers:
            runs = [a.event(note=note if a.decision == "block" else "") for a in answers]
            await self._scope.record(runs)
        if decision != "block" or capped:
            return False if decision == "stop" else None
        self._running.went_on[turn_id] = went + 1
        blocking = [replace(a, context=a.reason) for a in answers if a.decision == "block"]
        self._for_model.append(self._context(event, GO_ON_HEADING, blocking))
        return True

    async def before_compaction(self, trigger: str, focus: str) -> None:
        shown = "manual" if trigger == "manual" else "auto"
        await self.fire("PreCompact", {"trigger": shown, "custom_instructions": focus}, [shown])

    async def on_turn_end(self, turn_id: str, reason: ev.TurnEndReason.ValueType) -> list[ev.Event]:
        self._running.stopping.pop(turn_id, None)
        self._running.went_on.pop(turn_id, None)
        return []


def _response(tool: str, call: Call, outcome: ToolOutcome, scope: SessionScope) -> dict[str, Any]:
    """What a tool returned, named as Claude Code's tool_response names it."""
    response: dict[str, Any] = {"success": outcome.ok, "output": outcome.output}
    path = claude_input(tool, call.args, scope.cwd).get("file_path")
    if path is not None:
        response["filePath"] = path
    if tool == "shell":
        response |= {"stdout": outcome.output, "stderr": "", "interrupted": False}
    return response


async def _quietly(work: Awaitable[object]) -> None:
    """A notification's hooks, whose failure (the session unloaded
    meanwhile, say) is only logged."""
    try:
        await work
    except Exception as error:
        log.warning("a Notification hook's run could not be recorded: %s", error)
