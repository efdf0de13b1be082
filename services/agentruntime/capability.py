"""The seam the runtime's capabilities plug into (DESIGN.md, "Capabilities").

A capability is a module of capabilities/ (instructions, skills, the task
list, ...). It may give the runtime tools and slash commands, and, for each
session, a part that follows the model's view of the session and is asked
at fixed points of its turns:

  - before each model request (and again right after a compaction): the
    context to record for the model (context/added events, say a
    repository's AGENTS.md);
  - when a prompt is taken: what to attach to its user/message, or why to
    refuse it (a typed error: nothing is recorded);
  - before a tool call runs: whether it may (a refusal, a question, or
    none where the policy would ask);
  - right before it runs (allowed, and answered if it asked): what to
    record first (a snapshot of the folder, say);
  - instead of its tool: a part may run an allowed call itself (a shell
    command started in the background, say);
  - after it ran: what to change in its result and to record with it;
  - when a question was asked: nothing to decide (someone may be told);
  - when a step ended, and when the turn would end: whether it goes on;
  - before a compaction: nothing to decide (its run may be recorded);
  - when a turn ends: what to record.

And a capability is told when a session's agent is unloaded (unused for a
while, or the runtime stops): what it keeps for the session may go.

A part may also offer the session's own slash commands (its workspace's
prompt files, say) and name folders outside the session's folder that the
file tools may read (`readable`: a skill's folder in the user's config
folder); a capability's tool finds its session's part in
ToolContext.parts.
A capability that keeps something running for a session between turns (a
background job, a terminal) records its own events through the session's
scope (`record`), and is asked by the runtime: whether it holds a session
(a held session stays loaded here), to release a session's processes (the
session archived or deleted, the runtime stopping, the session gone to
another runtime), to settle what a session's log shows running when a
runtime loads it (`loaded`: a job of a runtime that died is lost), and at a
runtime's start which sessions a stopped runtime left running (`recover`).

A part's state is folded from the events of the model's view (`observe`:
the view's events in log order, from the latest compaction on), and what
the model must keep through a compaction it gives as context that the
compaction records (`carried`), so restart, resume, fork and compaction
need nothing special from it. agent.py asks these points and knows no
capability; the projections clients see are folded from the whole log by
the capability's projection units (capabilities/__init__.py).
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import SessionState

from .tools import Call, Tool, ToolContext, ToolOutcome


class PromptMode(enum.Enum):
    SEND = "send"
    QUEUE = "queue"
    STEER = "steer"


@dataclass(frozen=True)
class SessionScope:
    """What a capability knows of the session it serves."""

    session_id: str
    # The session's folder (canonical, as its log records it).
    cwd: Path
    # What its commands must not see (the stack's data and secrets, the
    # other sessions' folders): never read for the model either.
    hidden: Callable[[], Awaitable[tuple[Path, ...]]]
    # The user's agenthost config folder (global instructions, skills, ...).
    config_dir: Path
    # The latest event of the log `match` takes, looking back from its end
    # no further than the first event `stop` takes (None: not found).
    find_back: Callable[
        [Callable[[ev.Event], bool], Callable[[ev.Event], bool]], Awaitable[ev.Event | None]
    ]
    # The session's fold as of now (settings, plan mode, a subagent's header).
    state: Callable[[], SessionState]
    # Append events to the session's log under its agent's lease, at any
    # time (a job that ended between turns, a hook's run, a refused prompt's
    # included): the seq of the last.
    record: Callable[[list[ev.Event]], Awaitable[int]]


@dataclass(frozen=True)
class Resource:
    """What an editor sent with a prompt (ACP): a link to a file (`text`
    None), or the text of one (an embedded resource)."""

    uri: str
    text: str | None = None


@dataclass
class Prompt:
    """A prompt being taken, before its user/message is recorded: a part may
    attach files to it (UserMessage.files) or add context before it."""

    text: str
    message: ev.UserMessage
    # Events recorded right before the user/message (context for it); for a
    # prompt that waits for a running turn, right before its input/queued
    # (a context/added there reaches the model after the results of the
    # running step's calls: transcript.py).
    before: list[ev.Event] = field(default_factory=list)
    # What an editor sent with it.
    resources: Sequence[Resource] = ()
    # Images sent with it, not yet stored (a part may add one: an `@path`
    # naming an image file); the images capability stores them and
    # references them from `message`.
    images: list[ev.ImageInput] = field(default_factory=list)


@dataclass(frozen=True)
class ToolVerdict:
    """What a part decides before a call runs: refuse it (the model is told
    `reason`), ask the user first although the policy would not, or run it
    without the question the policy would ask (`allow`: as a permission
    rule does, it never runs what the sandbox refuses). A refusal wins over
    a question, a question over an allowance."""

    refuse: bool = False
    ask: bool = False
    allow: bool = False
    reason: str = ""


@dataclass(frozen=True)
class AfterTool:
    """A call's result as a part leaves it, and events to record after it."""

    outcome: ToolOutcome
    events: tuple[ev.Event, ...] = ()


@dataclass(frozen=True)
class CommandResult:
    ok: bool
    message: str
    last_seq: int


class AgentHandle(Protocol):
    """What a command sees of the session's live agent."""

    session_id: str
    cwd: Path

    @property
    def state(self) -> SessionState: ...

    async def catch_up(self) -> None: ...

    async def record(self, events: list[ev.Event]) -> int:
        """Append `events` under the agent's lease; the seq of the last."""
        ...

    async def part(self, capability: str) -> SessionPart | None:
        """The session's part of a capability, as of its view now."""
        ...

    async def prompt(
        self,
        text: str,
        mode: PromptMode,
        input_id: str = "",
        resources: Sequence[Resource] = (),
        images: Sequence[ev.ImageInput] = (),
    ) -> PromptMode:
        """Take `text` as the user's input (a command that sends a prompt)."""
        ...

    def events(self, kinds: frozenset[str]) -> AsyncIterator[ev.Event]:
        """Every event of the whole log of those kinds, oldest first."""
        ...


CommandRun = Callable[[AgentHandle, str | None], Awaitable[CommandResult]]


@dataclass(frozen=True)
class Command:
    name: str
    description: str
    usage: str
    run: CommandRun


class SessionPart:
    """One capability's part in one session; every point is optional.

    A part follows one view: the session's parts are made afresh each time
    its view is read from the log (the agent's first model request, after a
    compaction), so their state is the fold of that view's events. What
    must outlive a view (a running job, say) belongs to the capability."""

    def observe(self, event: ev.Event) -> None:
        """One more event of the model's view, in log order (a compaction
        starts the view again: its `context` is what stays of it)."""

    def carried(self) -> list[ev.ContextAdded]:
        """What of this part's context a compaction must keep in the view."""
        return []

    async def before_request(self) -> list[ev.Event]:
        """Events to record before the next model request (context for it)."""
        return []

    def sections(self) -> list[ev.PromptSection]:
        """System-prompt sections of the next model request (logged with it)."""
        return []

    async def on_prompt(self, prompt: Prompt) -> None:
        """Attach to a prompt being taken, or raise a typed error to refuse it."""

    async def before_tool(self, call: Call, context: ToolContext) -> ToolVerdict | None:
        return None

    async def before_run(self, call: Call, context: ToolContext) -> list[ev.Event]:
        """Events to record right before an allowed call runs."""
        return []

    async def run(self, call: Call, context: ToolContext) -> ToolOutcome | None:
        """Run an allowed call in place of its tool (None: the tool runs
        it), say a shell command started in the background."""
        return None

    async def after_tool(self, call: Call, context: ToolContext, outcome: ToolOutcome) -> AfterTool:
        return AfterTool(outcome)

    async def on_question(self, asked: ev.QuestionAsked) -> None:
        """A question of the turn was recorded and waits for its answer (a
        part may tell someone; it must not hold the turn up)."""

    async def turn_goes_on(self, turn_id: str, owed: bool) -> bool | None:
        """When a step ended (and before the first): whether the turn goes
        on. `owed`: the model is owed another request (its calls' results,
        a steered message); None leaves it so. False ends the turn although
        it is owed; True, when it is not, asks the model once more (what it
        is told then is context `before_request` gives). Any False wins."""
        return None

    async def before_compaction(self, trigger: str, focus: str) -> None:
        """A compaction (`trigger` auto, manual or overflow; `focus` what
        /compact was given) is about to summarise the view."""

    async def on_turn_end(self, turn_id: str, reason: ev.TurnEndReason.ValueType) -> list[ev.Event]:
        return []

    async def commands(self, taken: frozenset[str]) -> Sequence[Command]:
        """Commands of this session only (say, a workspace's prompt files).
        `taken`: the names the runtime's and the capabilities' commands hold
        already, which win a clash (the part may tell its user so)."""
        return ()

    def readable(self) -> Sequence[Path]:
        """Folders outside the session's folder the file tools may read
        (never write) for the model, as the view stands: say, the folder of
        a skill it was offered. What is hidden stays hidden in them."""
        return ()


async def run_allowed(
    parts: Iterable[SessionPart], call: Call, context: ToolContext
) -> ToolOutcome:
    """An allowed call's outcome: run by the first part that runs it, else
    by its tool."""
    for part in parts:
        outcome = await part.run(call, context)
        if outcome is not None:
            return outcome
    return await call.tool.run(context, call.args)


class Release(enum.Enum):
    """Why the runtime asks a capability to release a session."""

    # Archived or being deleted: stop what runs, and record it.
    CLOSED = "closed"
    # The runtime is shutting down: stop what runs, and record it.
    STOPPED = "stopped"
    # Another runtime owns the session now: stop what runs, record nothing
    # (the log refuses this runtime's appends; the new owner's load settles it).
    DROPPED = "dropped"
    # Unloaded for being idle (nothing runs: it was not held): forget it.
    UNLOADED = "unloaded"


# Loads a session's agent (the runtime's resume): a SessionNotFound, or a
# SessionOwnedElsewhere when another runtime runs it, is raised as is.
LoadSession = Callable[[str], Awaitable[object]]


class Capability:
    """A family of behaviour the runtime offers every session."""

    name = ""

    def tools(self) -> Sequence[Tool]:
        return ()

    def commands(self) -> Sequence[Command]:
        return ()

    def session(self, scope: SessionScope) -> SessionPart | None:
        return None

    async def loaded(self, agent: AgentHandle) -> None:
        """A runtime loaded the session's agent: settle what its log shows
        running that runs nowhere now (recorded through `agent`)."""

    def holds(self, session_id: str) -> bool:
        """Whether something of the session runs here (a background job): the
        runtime keeps it loaded, and its lease, meanwhile."""
        return False

    async def release(self, session_id: str, why: Release) -> int:
        """Stop what runs here for the session (see Release); how many."""
        return 0

    async def recover(self, load: LoadSession) -> None:
        """At a runtime's start: load the sessions a runtime that stopped
        without releasing them left something running in, so `loaded`
        settles them."""
