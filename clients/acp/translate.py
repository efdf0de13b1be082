"""What agenthost's log and questions look like in the Agent Client Protocol:
pure functions from SDK values to the protocol's schema models (no I/O)."""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from acp import schema as acp
from acp.helpers import (
    plan_entry,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_available_commands,
    update_current_mode,
    update_plan,
    update_user_message_text,
)
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2

from clients.sdk import Image, ModelInfo, Question, Resource, Todo, Usage

DEFAULT_MODE = "default"
PLAN_MODE = "plan"
MODE_CONFIG_ID = "mode"
MODEL_CONFIG_ID = "model"
# Tool output shown while a command runs: its tail, so an editor is not fed
# megabytes on every delta.
OUTPUT_SHOWN_CHARS = 16_384

TOOL_KINDS: dict[str, acp.ToolKind] = {
    "read_file": "read",
    "list_dir": "read",
    "glob": "search",
    "grep": "search",
    "write_file": "edit",
    "edit_file": "edit",
    "shell": "execute",
    "exit_plan_mode": "switch_mode",
    # A subagent thinks the task through in its own context.
    "task": "think",
}
# The last steps of a subagent its task call's progress shows.
SUBAGENT_LINES_SHOWN = 20
# Tools an editor is not shown as calls: todo_write's list is a plan update.
UNSHOWN_TOOLS = frozenset({"todo_write"})
TURN_END_STOP_REASONS: dict[int, acp.StopReason] = {
    events_pb2.TURN_END_REASON_COMPLETED: "end_turn",
    events_pb2.TURN_END_REASON_CANCELLED: "cancelled",
}

# -- modes ------------------------------------------------------------------------------


def mode_id(plan_active: bool) -> str:
    return PLAN_MODE if plan_active else DEFAULT_MODE


def modes(plan_active: bool, plan_available: bool) -> acp.SessionModeState:
    """The session's modes: `plan` only where the deployment has plan mode."""
    available = [
        acp.SessionMode(id=DEFAULT_MODE, name="Default", description="Work on the task."),
    ]
    if plan_available:
        available.append(
            acp.SessionMode(
                id=PLAN_MODE,
                name="Plan",
                description="Read and plan only; the plan is reviewed before any change.",
            )
        )
    return acp.SessionModeState(current_mode_id=mode_id(plan_active), available_modes=available)


ConfigOption = acp.SessionConfigOptionSelect | acp.SessionConfigOptionBoolean


def config_options(
    state: acp.SessionModeState, models: Sequence[ModelInfo], model: str
) -> list[ConfigOption]:
    """The session's choices as config options (the form newer clients use):
    its modes, then its model when the deployment lists models."""
    options: list[ConfigOption] = [
        acp.SessionConfigOptionSelect(
            id=MODE_CONFIG_ID,
            name="Mode",
            category="mode",
            type="select",
            current_value=state.current_mode_id,
            options=[
                acp.SessionConfigSelectOption(value=m.id, name=m.name, description=m.description)
                for m in state.available_modes
            ],
        )
    ]
    if models:
        options.append(model_option(models, model))
    return options


def model_id(models: Sequence[ModelInfo], model: str) -> str:
    """The model a session's settings name ("": the deployment's default)."""
    if model:
        return model
    return next((m.name for m in models if m.is_default), models[0].name if models else "")


def model_option(models: Sequence[ModelInfo], model: str) -> acp.SessionConfigOptionSelect:
    """The configured models (ListModels), the session's selected. One the
    session names that the models file no longer lists is shown as such."""
    current = model_id(models, model)
    choices = [
        acp.SessionConfigSelectOption(value=m.name, name=m.name, description=model_description(m))
        for m in models
    ]
    if current not in {m.name for m in models}:
        choices.append(
            acp.SessionConfigSelectOption(
                value=current, name=current, description="Not in the models file any more."
            )
        )
    return acp.SessionConfigOptionSelect(
        id=MODEL_CONFIG_ID,
        name="Model",
        description="The model of the session's next model request.",
        category="model",
        type="select",
        current_value=current,
        options=choices,
    )


def model_description(model: ModelInfo) -> str:
    """One line: the provider's model, its window and its prices."""
    parts = [f"{model.provider_model} ({model.provider})"]
    if model.context_window:
        parts.append(f"{model.context_window // 1000}k context")
    if model.prices is not None:
        parts.append(f"${model.prices.input:g}/${model.prices.output:g} per M tokens")
    if model.is_default:
        parts.append("the default")
    return ", ".join(parts)


def config_update(options: Sequence[ConfigOption]) -> acp.ConfigOptionUpdate:
    """Every config option with its value: what tells an editor one changed."""
    return acp.ConfigOptionUpdate(
        session_update="config_option_update", config_options=list(options)
    )


def mode_updates(state: acp.SessionModeState, options: Sequence[ConfigOption]) -> list[Any]:
    """What tells an editor the committed mode changed: both forms."""
    return [update_current_mode(state.current_mode_id), config_update(options)]


# -- commands and usage ---------------------------------------------------------------------


def commands_update(commands: Iterable[rt.CommandInfo]) -> acp.AvailableCommandsUpdate:
    return update_available_commands(
        acp.AvailableCommand(
            name=c.name, description=c.description or c.name, input=_command_input(c)
        )
        for c in commands
    )


def _command_input(command: rt.CommandInfo) -> acp.AvailableCommandInput | None:
    """The hint an editor shows while a command's input is empty: what its
    usage has after the name (`/review FILE CONCERN`: `FILE CONCERN`)."""
    hint = command.usage.strip().removeprefix(f"/{command.name}").strip()
    return acp.AvailableCommandInput(root=acp.UnstructuredCommandInput(hint=hint)) if hint else None


def usage_update(usage: Usage | None) -> acp.UsageUpdate | None:
    """The session's usage (the SDK's reading of the `usage` projection) as a
    usage update: the last request's context against its model's window and
    the cost so far. None before the first request or while the window is
    unknown (an update needs its size)."""
    if usage is None or not usage.context_window:
        return None
    return acp.UsageUpdate(
        session_update="usage_update",
        used=usage.context_tokens,
        size=usage.context_window,
        cost=None if usage.cost is None else acp.Cost(amount=usage.cost, currency="USD"),
    )


PLAN_STATUSES: dict[str, acp.PlanEntryStatus] = {
    "pending": "pending",
    "in_progress": "in_progress",
    "completed": "completed",
}


def plan_update(todos: Iterable[Todo]) -> acp.AgentPlanUpdate:
    """The agent's task list (a todos/updated event) as ACP's plan: the whole
    list, each entry of medium priority (the agent gives none)."""
    return update_plan(
        plan_entry(todo.content, status=PLAN_STATUSES.get(todo.status, "pending")) for todo in todos
    )


# -- prompts ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PromptParts:
    """A prompt's text, the files it sends (attached to its message as an
    `@path` of the text is), and its images."""

    text: str
    resources: list[Resource]
    images: list[Image] = field(default_factory=list)


def prompt_parts(blocks: Iterable[Any]) -> PromptParts:
    """What a prompt's content blocks carry: their text, where a resource
    (a link to a file, or a file's text the editor embedded) is named as a
    markdown link and an image as "[image: name]", the resources, sent to
    be attached, and the images (their base64 data decoded; the gateway
    checks their bytes)."""
    parts: list[str] = []
    resources: list[Resource] = []
    images: list[Image] = []
    for block in blocks:
        if isinstance(block, acp.TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, acp.ImageContentBlock):
            name = _name(block.uri) if block.uri else f"image {len(images) + 1}"
            data = base64.b64decode(block.data, validate=False)
            images.append(Image(data, name=name, media_type=block.mime_type))
            parts.append(f"[image: {name}]")
        elif isinstance(block, acp.EmbeddedResourceContentBlock):
            resource = block.resource
            if isinstance(resource, acp.TextResourceContents):
                parts.append(f"[{_name(resource.uri)}]({resource.uri})")
                resources.append(Resource(resource.uri, resource.text))
        elif isinstance(block, acp.ResourceContentBlock):
            parts.append(f"[{block.name}]({block.uri})")
            resources.append(Resource(block.uri))
    return PromptParts("".join(parts).strip(), resources, images)


def _name(uri: str) -> str:
    return uri.rstrip("/").rpartition("/")[2] or uri


@dataclass(frozen=True)
class SlashCommand:
    name: str
    args: str | None


def slash_command(text: str, known: Iterable[str]) -> SlashCommand | None:
    """`/name args` when `name` is one of the session's commands."""
    match = re.fullmatch(r"/(\S+)(?:\s+(.*))?", text, re.DOTALL)
    if match is None or match.group(1) not in set(known):
        return None
    return SlashCommand(match.group(1), (match.group(2) or "").strip() or None)


# -- the log as updates ---------------------------------------------------------------------


def user_message(text: str) -> acp.UserMessageChunk:
    return update_user_message_text(text)


def agent_text(text: str, kind: str) -> acp.AgentMessageChunk | acp.AgentThoughtChunk:
    """A chunk of a step's answer, or of its reasoning."""
    if kind == "reasoning":
        return update_agent_thought_text(text)
    return update_agent_message_text(text)


def _args(args_json: str) -> dict[str, Any]:
    try:
        args = json.loads(args_json or "{}")
    except ValueError:
        return {}
    return args if isinstance(args, dict) else {}


def _absolute(cwd: str, path: str) -> str:
    return os.path.normpath(os.path.join(cwd, path))


def tool_title(name: str, args: Mapping[str, Any]) -> str:
    """One line, as a person would say it."""
    path = args.get("path")
    if name == "shell" and isinstance(args.get("command"), str):
        return f"$ {args['command']}"
    if name in ("grep", "glob") and isinstance(args.get("pattern"), str):
        return f"{name} {args['pattern']}"
    if name == "exit_plan_mode":
        return "Ready to code? (plan review)"
    if name == "task":
        kind = args.get("subagent_type") or "general"
        return f"Subagent {kind}: {args.get('description', '')}".strip()
    if isinstance(path, str):
        return f"{name} {path}"
    return name


def tool_call(call: events_pb2.ToolCall, cwd: str) -> acp.ToolCallStart:
    args = _args(call.args_json)
    path = args.get("path")
    return acp.ToolCallStart(
        session_update="tool_call",
        tool_call_id=call.call_id,
        title=tool_title(call.name, args),
        kind=TOOL_KINDS.get(call.name, "other"),
        status="pending",
        raw_input=args,
        locations=[acp.ToolCallLocation(path=_absolute(cwd, path))]
        if isinstance(path, str)
        else None,
    )


def tool_output(call_id: str, text: str) -> acp.ToolCallProgress:
    """A running command's output so far (its tail)."""
    shown = text[-OUTPUT_SHOWN_CHARS:]
    return acp.ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=call_id,
        status="in_progress",
        content=[tool_content(text_block(f"```\n{shown}\n```"))],
    )


def tool_result(result: events_pb2.ToolResult, cwd: str) -> acp.ToolCallProgress:
    """The end of a call: the diffs of what it changed, else its output."""
    display = result.display
    content: list[Any] = [
        tool_diff_content(path, new, old) for path, old, new in diff_hunks(display.diff, cwd)
    ]
    if not content:
        shown = result.output if result.ok else (result.error or result.output)
        if display.summary:
            shown = f"{display.summary}\n{shown}" if shown else display.summary
        if shown:
            content.append(tool_content(text_block(f"```\n{shown[-OUTPUT_SHOWN_CHARS:]}\n```")))
    raw: dict[str, Any] = {"ok": result.ok, "output": result.output[-OUTPUT_SHOWN_CHARS:]}
    if result.error:
        raw["error"] = result.error
    if display.HasField("exit_code"):
        raw["exit_code"] = display.exit_code
    return acp.ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=result.call_id,
        status="completed" if result.ok else "failed",
        content=content,
        raw_output=raw,
    )


def diff_hunks(diff: str, cwd: str) -> list[tuple[str, str | None, str]]:
    """A unified diff as (absolute path, old text, new text) per hunk; old
    text None for a new file."""
    hunks: list[tuple[str, str | None, str]] = []
    path: str | None = None
    created = False
    old: list[str] | None = None
    new: list[str] = []

    def close() -> None:
        if path is not None and old is not None:
            hunks.append((path, None if created else "".join(old), "".join(new)))

    for line in diff.splitlines(keepends=True):
        if line.startswith("--- "):
            close()
            old, path = None, None
            created = line[4:].strip() == "/dev/null"
        elif line.startswith("+++ ") and old is None:
            name = line[4:].strip().split("\t")[0]
            name = name[2:] if name.startswith(("a/", "b/")) else name
            path = _absolute(cwd, name)
        elif line.startswith("@@"):
            close()
            old, new = [], []
        elif old is not None and line[:1] in (" ", "-", "+"):
            body = line[1:]
            if line[0] != "+":
                old.append(body)
            if line[0] != "-":
                new.append(body)
    close()
    return hunks


def is_notice(message: events_pb2.UserMessage) -> bool:
    """A message a plugin recorded for the model (e.g. that the mode changed),
    not the person's."""
    return message.source.kind == events_pb2.SOURCE_KIND_PLUGIN


def starts_turn(event: events_pb2.Event) -> bool:
    """A turn opened, or the person's message that opens one was taken."""
    kind = event.WhichOneof("body")
    if kind == "user_message":
        return not is_notice(event.user_message)
    return kind in ("turn_start", "input_queued")


def stop_reason(end: events_pb2.TurnEnd) -> acp.StopReason | None:
    """How a turn ended, as a stop reason; None for a failed turn."""
    return TURN_END_STOP_REASONS.get(end.reason)


# -- questions ---------------------------------------------------------------------------------

ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE, REJECT_ALWAYS = (
    "allow-once",
    "allow-always",
    "reject-once",
    "reject-always",
)
APPROVE, KEEP_PLANNING = "approve", "keep-planning"
KEEP_PLANNING_FEEDBACK = "Keep planning: the plan is not approved yet."


def permission_options(question: Question) -> list[acp.PermissionOption]:
    if question.presentation == "plan-review":
        return [
            acp.PermissionOption(
                option_id=APPROVE, name=question.approve_label or "Approve", kind="allow_once"
            ),
            acp.PermissionOption(option_id=KEEP_PLANNING, name="Keep planning", kind="reject_once"),
        ]
    grant = question.approval.grant if question.approval is not None else ""
    return [
        acp.PermissionOption(option_id=ALLOW_ONCE, name="Allow once", kind="allow_once"),
        acp.PermissionOption(
            option_id=ALLOW_ALWAYS,
            name=f"Always allow {grant} in this folder" if grant else "Always allow in this folder",
            kind="allow_always",
        ),
        acp.PermissionOption(option_id=REJECT_ONCE, name="Reject", kind="reject_once"),
        acp.PermissionOption(option_id=REJECT_ALWAYS, name="Reject always", kind="reject_always"),
    ]


def answer_for_option(option_id: str, feedback: str | None = None) -> dict[str, Any] | None:
    """The question answer (SDK `answer_question` keywords) an editor's choice
    means; None for an option never offered. "Allow always" records a
    workspace permission rule: the editor's folder is the workspace, and an
    editor's "always" outlives the thread, so the project's other sessions
    (new threads, the CLI in that folder) skip the question too; /permissions
    lists and revokes it. Rules only allow, so "reject always" denies once."""
    answers: dict[str, dict[str, Any]] = {
        ALLOW_ONCE: {"allow_once": True},
        ALLOW_ALWAYS: {"always_allow_workspace": True},
        REJECT_ONCE: {"deny": ""},
        REJECT_ALWAYS: {"deny": ""},
        APPROVE: {"approve": True},
        KEEP_PLANNING: {"feedback": feedback or KEEP_PLANNING_FEEDBACK},
    }
    return answers.get(option_id)


def subagent_progress(call_id: str, lines: Sequence[str]) -> acp.ToolCallProgress:
    """A task call's subagent at work: what it did so far, a line a step."""
    shown = "\n".join(lines[-SUBAGENT_LINES_SHOWN:])
    return acp.ToolCallProgress(
        session_update="tool_call_update",
        tool_call_id=call_id,
        status="in_progress",
        content=[tool_content(text_block(shown))],
    )


def child_step(call: events_pb2.ToolCall) -> str:
    """One step of a subagent, as its task call's progress shows it."""
    return tool_title(call.name, _args(call.args_json))


OVERWRITE, LEAVE = "overwrite", "leave"
OVERWRITE_OPTIONS = [
    acp.PermissionOption(option_id=OVERWRITE, name="Overwrite them", kind="allow_once"),
    acp.PermissionOption(option_id=LEAVE, name="Leave them as they are", kind="reject_once"),
]


def overwrite_tool_call(command: str, skipped: Sequence[str]) -> acp.ToolCallUpdate:
    """What /undo, /redo or /rewind asks before it overwrites files someone
    changed since the turn."""
    listed = "\n".join(f"- {path}" for path in skipped)
    return acp.ToolCallUpdate(
        tool_call_id=f"{command}-overwrite",
        title=f"/{command}: overwrite {len(skipped)} file(s) changed since the turn?",
        kind="edit",
        status="pending",
        content=[
            tool_content(text_block(f"Changed since by someone other than the agent:\n{listed}"))
        ],
    )


def permission_tool_call(question: Question, asker: str = "") -> acp.ToolCallUpdate:
    """The tool call a question is about, with what the person must judge:
    the plan under review, the command, the diff of an edit. A question a
    subagent asks says which subagent (`asker`) asks."""
    detail = question.body
    kind: acp.ToolKind = "switch_mode" if question.presentation == "plan-review" else "other"
    title = question.title
    if question.approval is not None:
        detail = question.approval.detail or question.body
        kind = TOOL_KINDS.get(question.approval.tool, "other")
        title = question.approval.summary or title
    if asker:
        title = f"{asker} asks: {title}"
    return acp.ToolCallUpdate(
        tool_call_id=question.call_id or question.question_id,
        title=title or None,
        kind=kind,
        status="pending",
        content=[tool_content(text_block(detail))] if detail else None,
    )
