"""How the chat shows a session's work, as plain functions of its events:
one compact line per tool call (`read x.py:1-80`, `edit x.py (+3 -1)`,
`$ pytest -q (exit 1)`), diffs, a command's output folded to its first
lines, questions and turn endings."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agenthost.sessionlog.v1 import events_pb2 as ev
from rich.text import Text

from agenthost_core.folds import CallAnswers, Question
from clients.sdk import ModelInfo, Usage

APPROVAL_CHOICES = (
    "[y] yes, once",
    "[a] yes, for this session",
    "[s] always, in this session (a rule /permissions lists)",
    "[w] always, in every session of this folder",
    "[n] no",
)
REVIEW_CHOICES = ("Approve the plan?", "[a] approve", "[k] keep planning", "[d] dismiss")
DIFF_LINES_SHOWN = 40
# A command's output shows its first lines, as the web client's tool rows do.
OUTPUT_LINES_SHOWN = 8
ANSWER_LINES = {
    "deny": "denied",
    "feedback": "kept planning",
    "dismiss": "review dismissed",
}


def call_args(call: ev.ToolCall) -> dict[str, Any]:
    try:
        args = json.loads(call.args_json or "{}")
    except json.JSONDecodeError:
        return {}
    return args if isinstance(args, dict) else {}


def call_line(call: ev.ToolCall) -> str:
    """What a tool call does, before it runs (a command shows at once)."""
    args = call_args(call)
    if call.name == "shell":
        return f"$ {args.get('command', '')}"
    if call.name == "read_file":
        offset, limit = args.get("offset"), args.get("limit")
        where = ""
        if isinstance(offset, int) or isinstance(limit, int):
            first = offset if isinstance(offset, int) else 1
            last = f"{first + limit - 1}" if isinstance(limit, int) else ""
            where = f":{first}-{last}"
        return f"read {args.get('path', '')}{where}"
    if call.name in ("write_file", "edit_file"):
        return f"{call.name.removesuffix('_file')} {args.get('path', '')}"
    if call.name == "exit_plan_mode":
        return "present the plan"
    if call.name == "task":
        kind = args.get("subagent_type") or "general"
        return f"task {kind}: {args.get('description', '')}"
    shown = " ".join(f"{k}={v!r}" for k, v in args.items())
    return f"{call.name} {shown}".strip()


def result_line(
    result: ev.ToolResult, call: ev.ToolCall | None = None, answer: ev.QuestionAnswer | None = None
) -> str:
    """The one line a finished call leaves: its display summary (a command's
    says how it ended: `$ make (exit 2)`), what went wrong for a failed
    call of another tool, or the answer that refused it (`$ rm -r x:
    denied (not now)`)."""
    summary = result.display.summary if result.HasField("display") else ""
    refused = answer.WhichOneof("kind") if answer is not None else None
    if not result.ok and refused in ANSWER_LINES:
        what = summary or (call_line(call) if call is not None else "the call")
        reason = (answer.deny or answer.feedback).strip() if answer is not None else ""
        return f"{what}: {ANSWER_LINES[refused]}" + (f" ({_one_line(reason)})" if reason else "")
    # A command's summary says how it ended (its error starts with the same).
    command = result.display.HasField("exit_code") or (call is not None and call.name == "shell")
    if result.ok or (summary and command):
        return summary or "done"
    error = (result.error or "failed").strip().splitlines()
    first = error[0] if error else "failed"
    return f"{summary}: {first}" if summary else first


def command_ending(result: ev.ToolResult) -> str:
    """How a command ended, without the command (`exit 1`, `timed out`), for
    the line under its own output."""
    summary = result.display.summary if result.HasField("display") else ""
    if summary.endswith(")") and " (" in summary:
        return summary[summary.rindex(" (") + 2 : -1]
    return result_line(result)


def command_output(result: ev.ToolResult) -> str:
    """A command's whole output, without the status line the model reads
    first (`exit code 1`: its ending line says it)."""
    text = result.output if result.ok else result.error
    _, _, output = text.partition("\n")
    return output.rstrip("\n") or "(no output)"


def last_command(events: list[ev.Event]) -> tuple[ev.ToolCall, ev.ToolResult] | None:
    """The last command of `events` that finished, with its result."""
    calls = {e.tool_call.call_id: e.tool_call for e in events if e.HasField("tool_call")}
    for event in reversed(events):
        call = calls.get(event.tool_result.call_id) if event.HasField("tool_result") else None
        if call is not None and call.name == "shell":
            return call, event.tool_result
    return None


def call_answers(events: list[ev.Event]) -> dict[str, ev.QuestionAnswer]:
    """The answer given to each call's question (call_id -> answer), from the log."""
    return CallAnswers.of(events).answers


@dataclass
class FoldedOutput:
    """A command's output as it streams: its first OUTPUT_LINES_SHOWN lines
    are shown, the rest counted."""

    shown_lines: int = 0
    hidden_lines: int = 0
    # The last hidden piece did not end its line (it counts as one more).
    _open_hidden: bool = field(default=False, repr=False)

    def take(self, delta: str) -> str:
        """The part of `delta` to show."""
        shown = []
        for piece in delta.splitlines(keepends=True):
            ends = piece.endswith("\n")
            if self.shown_lines < OUTPUT_LINES_SHOWN:
                shown.append(piece)
                self.shown_lines += ends
            elif ends:
                self.hidden_lines += 1
                self._open_hidden = False
            else:
                self._open_hidden = True
        return "".join(shown)

    @property
    def hidden(self) -> int:
        return self.hidden_lines + self._open_hidden


def diff_text(diff: str, shown: int = DIFF_LINES_SHOWN) -> Text:
    """A unified diff, coloured, cut to `shown` lines."""
    lines = diff.splitlines()
    text = Text()
    for line in lines[:shown]:
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
        if line.startswith(("+++", "---", "@@")):
            style = "dim"
        text.append(line + "\n", style=style)
    if len(lines) > shown:
        text.append(f"… {len(lines) - shown} more lines\n", style="dim")
    return text


def choice_lines(choices: tuple[str, ...], width: int) -> list[str]:
    """The choices two spaces apart, as many a line as fit in `width`: a
    line breaks between two choices, never inside one."""
    lines = [""]
    for choice in choices:
        joined = f"{lines[-1]}  {choice}" if lines[-1] else choice
        if len(joined) <= width or not lines[-1]:
            lines[-1] = joined
        else:
            lines.append(choice)
    return lines


def turn_end_line(end: ev.TurnEnd) -> tuple[str, str] | None:
    """The line and style a turn's end leaves (None when it just completed)."""
    if end.reason == ev.TURN_END_REASON_CANCELLED:
        return "turn cancelled", "yellow"
    if end.reason == ev.TURN_END_REASON_ERROR:
        return f"turn failed: {_one_line(end.error)}", "red"
    if end.reason == ev.TURN_END_REASON_INTERRUPTED:
        return "turn interrupted (the runtime stopped)", "yellow"
    return None


# What a hook's decision did, as the line says it (hook/run's `decision`).
HOOK_DECISIONS = {
    "allow": "allowed the call",
    "deny": "blocked the call",
    "ask": "asked the user",
    "stop": "stopped the turn",
    "context": "added context",
}
# What a block did, by event.
HOOK_BLOCKS = {
    "UserPromptSubmit": "blocked the prompt",
    "PostToolUse": "sent feedback",
    "Stop": "kept the turn going",
    "SubagentStop": "kept the subagent going",
}


def hook_line(run: ev.HookRun) -> str:
    """The one line a hook's run leaves: `· hook PreToolUse: blocked the
    call (exit 2): <its reason>`, `· hook PostToolUse: ok`, or what went
    wrong with it (`· hook Stop: timed out after 60 s and was stopped`)."""
    if run.decision == "block":
        what = HOOK_BLOCKS.get(run.event, "blocked")
    else:
        what = HOOK_DECISIONS.get(run.decision, "")
    if not what:
        what = run.note or "ok"
    elif run.note:
        what = f"{what} ({run.note})"
    if run.HasField("exit_code") and run.exit_code != 0 and what != run.note:
        what = f"{what} (exit {run.exit_code})"
    reason = f": {_one_line(run.reason)[:200]}" if run.reason and run.decision else ""
    return f"· hook {run.event}: {what}{reason}"


def compaction_line(compaction: ev.Compaction) -> str:
    """The marker where the model's view of the conversation was compacted."""
    before, after = _tokens(compaction.tokens_before), _tokens(compaction.tokens_after)
    return f"── conversation compacted ({before} → {after} tokens) ──"


def _tokens(count: int) -> str:
    return f"{round(count / 1000)}k" if count >= 1000 else str(count)


def question_title(question: Question) -> str:
    if question.presentation == "tool-approval":
        summary = question.approval.summary if question.approval else question.title
        return f"Allow {summary}?"
    return question.title or ("Plan review" if question.presentation == "plan-review" else "?")


def _one_line(text: str) -> str:
    return " ".join(text.split())[:500]


def usage_line(usage: Usage) -> str:
    """The context in use and what the session cost: `ctx 41% · 52k/128k · $0.08`
    (`~` marks an estimate; no cost without prices, no share without a window)."""
    mark = "~" if usage.estimated else ""
    if usage.context_window:
        shown = f"ctx {mark}{usage.context_share:.0%} · {tokens(usage.context_tokens)}/"
        shown += tokens(usage.context_window)
    else:
        shown = f"ctx {mark}{tokens(usage.context_tokens)}"
    if usage.cost is not None:
        shown += f" · {dollars(usage.cost)}"
    return shown


def tokens(count: int) -> str:
    """A token count as people read it: 950, 52k, 1.2M."""
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count // 1000}k"
    return f"{count / 1_000_000:.1f}M"


def dollars(amount: float) -> str:
    return f"${amount:.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.4f}"


def models_table(models: list[ModelInfo], current: str) -> Text:
    """`/model`: the configured models, the session's own marked `*`."""
    chosen = current or next((m.name for m in models if m.is_default), "")
    width = max((len(m.name) for m in models), default=0)
    text = Text()
    for model in models:
        mine = model.name == chosen
        line = f"{'*' if mine else ' '} {model.name:<{width}}  {model.provider}/"
        line += f"{model.provider_model}  {tokens(model.context_window)} context"
        if model.prices is not None:
            line += f"  {dollars(model.prices.input)}/{dollars(model.prices.output)} per M in/out"
        if model.is_default:
            line += "  (default)"
        text.append(line + "\n", style="bold" if mine else "")
    text.rstrip()
    return text


def mcp_lines(view: Any) -> list[Text]:
    """The `mcp` projection: one line per configured MCP server, as the
    session's last model request saw it."""
    servers = view.get("servers") if isinstance(view, dict) else None
    if not isinstance(servers, list) or not servers:
        return [Text("no MCP servers seen yet (they show from the next model request)", "dim")]
    return [_mcp_line(server) for server in servers if isinstance(server, dict)]


def mcp_failures(view: Any) -> list[Text]:
    """The lines of the `mcp` projection's failed servers."""
    servers = view.get("servers") if isinstance(view, dict) else None
    failed = [s for s in servers or [] if isinstance(s, dict) and s.get("state") == "failed"]
    return [Text("mcp: ", "dim") + _mcp_line(server) for server in failed]


def _mcp_line(server: dict[str, Any]) -> Text:
    name, state = str(server.get("name", "")), str(server.get("state", ""))
    where = " ".join(str(server.get(k)) for k in ("transport", "scope") if server.get(k))
    line = Text(f"{name}: ", "bold")
    if state == "ready":
        line.append(f"ready, {int(server.get('tools', 0))} tools", "green")
    elif state == "failed":
        line.append(f"failed: {server.get('error', '')} (retrying)", "red")
    else:
        line.append(state, "yellow")
    if where:
        line.append(f"  ({where})", "dim")
    return line
