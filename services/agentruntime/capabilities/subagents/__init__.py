"""Subagents: a `task` call runs a child session, as Claude Code's Task tool
and opencode's task tool do.

The child is a real session whose log starts with a subagent/header naming
its parent and the call that started it, with its own context window and
transcript, the parent's folder, sandbox, approvals and network (never
wider: an `explore` agent, and any child of a parent in plan mode, is
read-only), its agent's instructions as a system section and its tools
as the agent file lists them. Its final answer is the call's result; calls
of `task` in one step run at once; a call naming an earlier child sends it
a follow-up. Cancelling the parent's turn cancels the children's; their
usage is added to the parent's (a model/usage naming the child). A question
a child asks (an approval) is shown in the parent's log, where the parent's
clients answer it (the runtime passes the answer on). Depth is limited.

The model is told which agents there are (context/added, kept through
compactions); `/agents` lists this session's children and any agent file
that cannot be used.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import (
    Question,
    QuestionsFold,
    SessionState,
    SettingsFold,
    fold_questions,
    one_line,
    question_event,
    settings_event,
)
from services.sessionlog.usage import UsageFold, fold_usage

from ...capability import (
    AgentHandle,
    Capability,
    Command,
    CommandResult,
    SessionPart,
    SessionScope,
)
from ...gates import Effect
from ...tools import Args, Tool, ToolContext, ToolDisplay, ToolOutcome
from .agent_types import BUILT_IN, AgentType, Found, discover

NAME = "subagents"
TOOL = "task"
MAX_DEPTH = 2
SECTION_ID = "agenthost:subagent"
# What of a child's answer its parent is given at most.
ANSWER_BYTES = 64 * 1024

TASK_DESCRIPTION = """\
Start a subagent: another agent that works on a task in its own context and \
answers with a report, which is this call's result. Use it for searches \
through much code, or for independent pieces of work, so your own context \
holds only their answers. Several task calls in one step run at the same \
time. Subagent types: `general` (research, edits, commands) and `explore` \
(read-only: finds and reads code), and any the project defines (listed in \
your context when there are). Give `child` (a subagent id an earlier task \
call returned) to send that subagent a follow-up instead."""

TASK_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "description": {"type": "string", "description": "A short (3-5 words) title."},
        "prompt": {"type": "string", "description": "The task, with all it needs to know."},
        "subagent_type": {
            "type": "string",
            "description": "Which agent: general, explore, or one the project defines.",
        },
        "child": {
            "type": "string",
            "description": "An earlier subagent's id, to send it this prompt as a follow-up.",
        },
    },
    "required": ["description", "prompt"],
    "additionalProperties": False,
}


class Children(Protocol):
    """What the `task` tool needs of the runtime."""

    async def start_child(
        self, parent_id: str, header: ev.SubagentHeader, settings: ev.SessionSettings
    ) -> str:
        """A new child session with its header and settings recorded; its id."""
        ...

    async def prompt_child(self, child_id: str, text: str) -> tuple[str, int]:
        """Send the child a prompt (queued while it runs); its input id and
        the child's last seq before it."""
        ...

    async def cancel_child(self, child_id: str) -> None: ...

    def follow(self, child_id: str, after_seq: int) -> AsyncIterator[ev.Event]:
        """The child's events after `after_seq`, as they are recorded."""
        ...


@dataclass
class Run:
    """What the parent learns of one child turn while following it."""

    text: str = ""
    reason: ev.TurnEndReason.ValueType = ev.TURN_END_REASON_UNSPECIFIED
    error: str = ""
    usage: UsageFold = field(default_factory=UsageFold)
    # The child's question id -> the parent's copy of it.
    mirrored: dict[str, str] = field(default_factory=dict)


class Subagents(Capability):
    name = NAME

    def __init__(self, children: Children, config_dir: Path) -> None:
        self._children = children
        self._config_dir = config_dir
        self._task = Tool(
            TOOL,
            TASK_DESCRIPTION,
            TASK_PARAMETERS,
            self._run,
            Effect.NONE,
            concurrent=True,
            delegates=True,
        )

    def tools(self) -> Sequence[Tool]:
        return (self._task,)

    def session(self, scope: SessionScope) -> SessionPart:
        return SubagentsPart(scope)

    def commands(self) -> Sequence[Command]:
        return (
            Command(
                "agents",
                "List this session's subagents, and agent files that cannot be used.",
                "/agents",
                self._agents,
            ),
        )

    # -- /agents -----------------------------------------------------------------------------

    async def _agents(self, agent: AgentHandle, args: str | None) -> CommandResult:
        children: dict[str, str] = {}
        running: set[str] = set()
        async for event in agent.events(frozenset({"subagent_started", "subagent_ended"})):
            if event.HasField("subagent_started"):
                started = event.subagent_started
                children.setdefault(started.child_session_id, started.description)
                running.add(started.child_session_id)
            else:
                running.discard(event.subagent_ended.child_session_id)
        lines = [
            f"{child}  {what}{'  (running)' if child in running else ''}"
            for child, what in children.items()
        ] or ["No subagents in this session yet."]
        found = discover(agent.cwd, self._config_dir)
        lines.append("agent types: " + ", ".join(t.name for t in found.types))
        lines += [f"cannot use {path}: {problem}" for path, problem in found.problems]
        return CommandResult(True, "\n".join(lines), agent.state.last_seq)

    # -- task ----------------------------------------------------------------------------------

    async def _run(self, context: ToolContext, args: Args) -> ToolOutcome:
        part = context.parts.get(NAME)
        if not isinstance(part, SubagentsPart):
            return ToolOutcome(ok=False, error="subagents are not available here")
        task = _task_args(args)
        if isinstance(task, ToolOutcome):
            return task
        state = part.scope.state()
        depth = (state.child.depth if state.child is not None else 0) + 1
        if depth > MAX_DEPTH:
            return ToolOutcome(
                ok=False,
                error=f"Subagents may not start subagents deeper than {MAX_DEPTH} levels: "
                "do this task yourself.",
            )
        if task.child:
            child_id = task.child
            if not await part.started(child_id):
                return ToolOutcome(ok=False, error=f"{child_id!r} is not a subagent of yours.")
            kind = "follow-up"
        else:
            found = discover(part.scope.cwd, part.scope.config_dir)
            chosen = found.get(task.subagent_type)
            if chosen is None:
                names = ", ".join(t.name for t in found.types)
                return ToolOutcome(
                    ok=False, error=f"No subagent type {task.subagent_type!r}; there are: {names}."
                )
            header = ev.SubagentHeader(
                parent_session_id=part.scope.session_id,
                parent_call_id=context.call_id,
                agent_type=chosen.name,
                description=task.description[:512],
                depth=depth,
                tools=chosen.tools,
                prompt=chosen.prompt[:65536],
            )
            child_id = await self._children.start_child(
                part.scope.session_id, header, _child_settings(state, chosen)
            )
            kind = chosen.name
        started = ev.SubagentStarted(
            child_session_id=child_id,
            call_id=context.call_id,
            agent_type=kind,
            description=task.description[:512],
        )
        await _record(context, [ev.Event(subagent_started=started)])
        run = await self._follow(context, child_id, task)
        return _outcome(child_id, task, kind, run)

    async def _follow(self, context: ToolContext, child_id: str, task: Task) -> Run:
        """Prompt the child and follow its turn to its end; cancelled, the
        child's turn is cancelled too."""
        input_id, after = await self._children.prompt_child(child_id, task.prompt)
        run = Run()
        try:
            await self._through_turn(context, child_id, input_id, after, run)
        except asyncio.CancelledError:
            await asyncio.shield(self._children.cancel_child(child_id))
            raise
        # Questions it left open no longer wait (its turn ended).
        await _withdraw(context, list(run.mirrored.values()))
        return run

    async def _through_turn(
        self, context: ToolContext, child_id: str, input_id: str, after: int, run: Run
    ) -> None:
        ours = False  # whether the turn our prompt opened has begun
        questions = QuestionsFold()
        async for event in self._children.follow(child_id, after):
            kind = event.WhichOneof("body")
            if kind == "user_message" and event.id == input_id:
                ours = True
            if not ours:
                continue
            if kind == "assistant_message" and event.assistant_message.text:
                run.text = event.assistant_message.text
            elif kind == "model_usage":
                run.usage = fold_usage(run.usage, event)
            elif kind == "tool_result":
                shown = event.tool_result.display.summary or event.tool_result.call_id
                context.on_output(f"· {shown}\n")
            questions = await _questions(context, child_id, questions, event, run)
            if kind == "turn_end":
                run.reason, run.error = event.turn_end.reason, event.turn_end.error
                return


@dataclass(frozen=True)
class Task:
    description: str
    prompt: str
    subagent_type: str
    child: str


def _task_args(args: Args) -> Task | ToolOutcome:
    description, prompt = args.get("description"), args.get("prompt")
    kind, child = args.get("subagent_type") or "general", args.get("child") or ""
    if not isinstance(description, str) or not description.strip():
        return ToolOutcome(ok=False, error="description must be a short non-empty text")
    if not isinstance(prompt, str) or not prompt.strip():
        return ToolOutcome(ok=False, error="prompt must be the task, as text")
    if not isinstance(kind, str) or not isinstance(child, str):
        return ToolOutcome(ok=False, error="subagent_type and child must be text")
    return Task(description.strip(), prompt, kind.strip(), child.strip())


def _child_settings(state: SessionState, chosen: AgentType) -> ev.SessionSettings:
    """The parent's settings, never wider: read-only for a read-only agent
    and for any child of a parent in plan mode."""
    parent = state.settings
    read_only = chosen.read_only or state.plan.active
    sandbox = "read-only" if read_only else parent.sandbox
    model = chosen.model or parent.model
    return settings_event(SettingsFold(sandbox, parent.approvals, model, parent.network))


async def _record(context: ToolContext, events: list[ev.Event]) -> None:
    if context.record is not None:
        await context.record([_identified(e) for e in events])


def _identified(event: ev.Event) -> ev.Event:
    if not event.id:
        event.id = f"subagent-{uuid.uuid4().hex}"
    return event


async def _questions(
    context: ToolContext, child_id: str, before: QuestionsFold, event: ev.Event, run: Run
) -> QuestionsFold:
    """The child's open questions after `event`: one it asked is shown in
    the parent's log; one that closed there no longer waits here."""
    after = fold_questions(before, event)
    if after is before:
        return after
    for question in after.open:
        if question not in before.open:
            await _mirror(context, child_id, question, run)
    closed = [run.mirrored.pop(q.question_id, "") for q in before.open if q not in after.open]
    await _withdraw(context, [mirror for mirror in closed if mirror])
    return after


async def _mirror(context: ToolContext, child_id: str, asked: Question, run: Run) -> None:
    """The child's question, asked again in the parent's log: the parent's
    clients see it (saying which child asks) and answer it there."""
    copied = question_event(asked)
    copied.question_id = f"q-{uuid.uuid4().hex}"
    copied.turn_id, copied.call_id = context.turn_id, context.call_id
    copied.child_session_id, copied.child_question_id = child_id, asked.question_id
    copied.title = f"[subagent {child_id}] {asked.title}"[:512]
    run.mirrored[asked.question_id] = copied.question_id
    await _record(context, [ev.Event(question_asked=copied)])


async def _withdraw(context: ToolContext, question_ids: list[str]) -> None:
    """The parent's copies of questions that no longer wait (a copy the
    parent's clients answered is closed already: withdrawing it is a no-op)."""
    withdrawn = [
        ev.Event(question_withdrawn=ev.QuestionWithdrawn(question_id=q)) for q in question_ids
    ]
    if withdrawn:
        await _record(context, withdrawn)


def _outcome(child_id: str, task: Task, kind: str, run: Run) -> ToolOutcome:
    usage = run.usage
    rolled = ev.ModelUsage(
        child_session_id=child_id,
        requests=usage.requests,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cached_prompt_tokens=usage.cached_prompt_tokens,
        model=usage.model[:256],
    )
    if usage.cost is not None:
        rolled.cost = usage.cost
    ended = ev.SubagentEnded(child_session_id=child_id, reason=run.reason)
    events = (ev.Event(subagent_ended=ended), ev.Event(model_usage=rolled))
    display = ToolDisplay(summary=f"task {one_line(task.description, 80)} ({kind})")
    if run.reason != ev.TURN_END_REASON_COMPLETED:
        why = run.error or ev.TurnEndReason.Name(run.reason).removeprefix("TURN_END_REASON_")
        error = f"The subagent {child_id} did not finish: {why.lower()}"
        return ToolOutcome(ok=False, error=error[:65536], display=display, events=events)
    answer = run.text.encode()[:ANSWER_BYTES].decode(errors="ignore") or "(no answer)"
    output = f"{answer}\n\n[subagent {child_id}: give child={json.dumps(child_id)} to follow up]"
    return ToolOutcome(ok=True, output=output, display=display, events=events)


class SubagentsPart(SessionPart):
    def __init__(self, scope: SessionScope) -> None:
        self.scope = scope
        # The agent types the view last showed the model.
        self._told = ""

    def observe(self, event: ev.Event) -> None:
        if event.HasField("context_added") and event.context_added.capability == NAME:
            self._told = event.context_added.text
        elif event.HasField("compaction"):
            told = [c.text for c in event.compaction.context if c.capability == NAME]
            self._told = told[-1] if told else ""

    def carried(self) -> list[ev.ContextAdded]:
        return [ev.ContextAdded(capability=NAME, text=self._told)] if self._told else []

    async def before_request(self) -> list[ev.Event]:
        state = self.scope.state()
        if state.child is not None and state.child.depth >= MAX_DEPTH:
            return []
        found = await asyncio.to_thread(discover, self.scope.cwd, self.scope.config_dir)
        # The built-in types are in the tool's description; others are told.
        text = catalog_text(found) if len(found.types) > len(BUILT_IN) else ""
        if text == self._told:
            return []
        return [ev.Event(context_added=ev.ContextAdded(capability=NAME, text=text))]

    def sections(self) -> list[ev.PromptSection]:
        child = self.scope.state().child
        if child is None:
            return []
        text = child.prompt or "You are a subagent: answer with a concise report."
        return [ev.PromptSection(id=SECTION_ID, order=5, text=text)]

    async def started(self, child_id: str) -> bool:
        """Whether this session started the subagent `child_id`."""

        def its_start(event: ev.Event) -> bool:
            return (
                event.HasField("subagent_started")
                and event.subagent_started.child_session_id == child_id
            )

        return await self.scope.find_back(its_start, lambda _: False) is not None


def catalog_text(found: Found) -> str:
    lines = [f"- {t.name}: {one_line(t.description, 300)}" for t in found.types]
    return "Subagent types for the task tool (subagent_type):\n" + "\n".join(lines)
