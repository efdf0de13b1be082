"""Tools the model can call. The catalog is fixed when the runtime starts, so
the tool schemas a model sees never change with modes (stable KV cache): plan
mode steers the model, the sandbox and the approval policy (gates.py) decide
whether a call runs. MCP servers' tools (mcp/) join it per step, as
snapshotted at the step's boundary (`extended`).

A tool declares its effect (read, write, command), how an approval question
describes a call and what "allow for this session" grants, and how it runs.
A tool that asks its own question before it finishes (exit_plan_mode's plan
review) declares `review` and `reviewed`; the runtime records the question
and its answer in the log, so the wait survives a restart.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agenthost.sessionlog.v1 import events_pb2

from agenthost_core.folds import Approval

from .gates import Effect

Args = dict[str, Any]


@dataclass(frozen=True)
class ToolDisplay:
    """What a client shows of a call (the model never sees it)."""

    summary: str = ""
    diff: str = ""
    lines_added: int = 0
    lines_removed: int = 0
    exit_code: int | None = None

    def to_pb(self) -> events_pb2.ToolDisplay:
        shown = events_pb2.ToolDisplay(
            summary=self.summary[:1024],
            diff=self.diff[:262144],
            lines_added=self.lines_added,
            lines_removed=self.lines_removed,
        )
        if self.exit_code is not None:
            shown.exit_code = self.exit_code
        return shown


@dataclass(frozen=True)
class Attachment:
    """An image a tool returned (recorded as tool/attachment)."""

    mime_type: str
    data: bytes


@dataclass(frozen=True)
class ToolOutcome:
    ok: bool
    output: str = ""
    error: str = ""
    display: ToolDisplay | None = None
    attachments: tuple[Attachment, ...] = ()
    # Events recorded right after the call's result (a task list it wrote).
    events: tuple[events_pb2.Event, ...] = ()


class PartOfSession(Protocol):
    """What a tool's context sees of a capability's part of its session
    (capability.SessionPart, which knows the tools, not the other way)."""

    def readable(self) -> Sequence[Path]: ...


@dataclass(frozen=True)
class ToolContext:
    session_id: str
    turn_id: str
    call_id: str
    # The session's folder: relative paths start here.
    cwd: Path
    sandbox: str
    # Streams a running command's output to clients (ephemeral).
    on_output: Callable[[str], None]
    # The runtime's session lease token, for a tool that has another
    # service write to the log on the session's behalf (exit_plan_mode).
    lease_token: int | None = None
    # Whether the session lets commands reach the network (/network on).
    network: bool = False
    # What commands must not see (confinement.Jail.hidden): the stack's
    # data, its secrets' files, the other sessions' folders.
    hidden: tuple[Path, ...] = ()
    # The session's capability parts (capability.SessionPart), by
    # capability: a capability's tool finds its own here and checks its type.
    parts: Mapping[str, PartOfSession] = field(default_factory=dict)
    # Records events in the session's log while the call runs (a subagent's
    # question, shown to the parent's clients).
    record: Callable[[list[events_pb2.Event]], Awaitable[None]] | None = None

    @property
    def readable(self) -> tuple[Path, ...]:
        """Folders outside `cwd` the file tools may read, never write (the
        parts' SessionPart.readable: a skill's folder, say)."""
        return tuple(folder for part in self.parts.values() for folder in part.readable())


@dataclass(frozen=True)
class Review:
    """A question a tool asks its user before it finishes."""

    title: str
    body: str
    approve_label: str


ToolRun = Callable[[ToolContext, Args], Awaitable[ToolOutcome]]
ToolReview = Callable[[ToolContext, Args], Awaitable[Review | ToolOutcome]]
ToolReviewed = Callable[[ToolContext, Args, events_pb2.QuestionAnswer], Awaitable[ToolOutcome]]


def plain_approval(name: str, args: Args) -> Approval:
    shown = json.dumps(args, ensure_ascii=False, sort_keys=True)
    return Approval(name, f"{name} {shown}"[:200], shown, name)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: ToolRun
    effect: Effect = Effect.NONE
    # What an approval question shows of a call, and what it grants.
    describe: Callable[[Args], Approval] | None = None
    review: ToolReview | None = None
    reviewed: ToolReviewed | None = None
    # What the question shows when it needs the workspace (a file change's
    # diff against the file as it is now); `describe` otherwise.
    preview: Callable[[ToolContext, Args], Awaitable[Approval]] | None = None
    # Calls of it in one step may run at once (subagents).
    concurrent: bool = False
    # Its calls run other agents in the session's folder (subagents): they
    # may change files though the call itself does not.
    delegates: bool = False

    def approval(self, args: Args) -> Approval:
        return self.describe(args) if self.describe else plain_approval(self.name, args)

    async def approval_shown(self, context: ToolContext, args: Args) -> Approval:
        return await self.preview(context, args) if self.preview else self.approval(args)

    def schema(self) -> events_pb2.ToolSchema:
        return events_pb2.ToolSchema(
            name=self.name,
            description=self.description,
            parameters_json=json.dumps(self.parameters, sort_keys=True),
        )


@dataclass(frozen=True)
class Call:
    """A tool call the catalog understood."""

    tool: Tool
    args: Args


class ToolCatalog:
    def __init__(self, tools: Sequence[Tool]) -> None:
        self._tools = {tool.name: tool for tool in tools}
        self._schemas = [tool.schema() for tool in tools]

    def extended(self, tools: Sequence[Tool]) -> ToolCatalog:
        """This catalog and `tools` (e.g. an MCP snapshot's), for one step."""
        return ToolCatalog([*self._tools.values(), *tools]) if tools else self

    def only(self, names: Sequence[str]) -> ToolCatalog:
        """The tools named (a subagent offered some only); all when none."""
        if not names:
            return self
        return ToolCatalog([tool for name, tool in self._tools.items() if name in names])

    def schemas(self) -> list[events_pb2.ToolSchema]:
        return list(self._schemas)

    def tool(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def parse(self, name: str, args_json: str) -> Call | ToolOutcome:
        """The tool and its arguments, or the failure the model is told."""
        tool = self._tools.get(name)
        if tool is None:
            return ToolOutcome(ok=False, error=f"unknown tool {name!r}")
        try:
            args = json.loads(args_json or "{}")
        except json.JSONDecodeError as error:
            return ToolOutcome(ok=False, error=f"arguments are not JSON: {error}")
        if not isinstance(args, dict):
            return ToolOutcome(ok=False, error="arguments must be a JSON object")
        return Call(tool, args)
