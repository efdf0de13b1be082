"""How the chat shows a session's work, as plain functions of its events:
one compact line per tool call (`read x.py:1-80`, `edit x.py (+3 -1)`,
`$ pytest -q (exit 1)`), diffs, questions and turn endings."""

from __future__ import annotations

import json
from typing import Any

from agenthost.sessionlog.v1 import events_pb2 as ev
from rich.text import Text

from agenthost_core.folds import Question
from clients.sdk import ModelInfo, Usage

APPROVAL_CHOICES = (
    "[y] allow once  [a] allow for this session  [s] always allow (session rule)  "
    "[w] always allow (workspace rule)  [n] deny"
)
REVIEW_CHOICES = "Approve the plan? [a] approve  [k] keep planning  [d] dismiss"
DIFF_LINES_SHOWN = 40


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
    shown = " ".join(f"{k}={v!r}" for k, v in args.items())
    return f"{call.name} {shown}".strip()


def result_line(result: ev.ToolResult) -> str:
    """The one line a finished call leaves (its display summary)."""
    summary = result.display.summary if result.HasField("display") else ""
    if result.ok:
        return summary or "done"
    error = (result.error or "failed").strip().splitlines()
    first = error[0] if error else "failed"
    return f"{summary}: {first}" if summary else first


def diff_text(diff: str) -> Text:
    """A unified diff, coloured, cut to DIFF_LINES_SHOWN lines."""
    lines = diff.splitlines()
    text = Text()
    for line in lines[:DIFF_LINES_SHOWN]:
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
        if line.startswith(("+++", "---", "@@")):
            style = "dim"
        text.append(line + "\n", style=style)
    if len(lines) > DIFF_LINES_SHOWN:
        text.append(f"… {len(lines) - DIFF_LINES_SHOWN} more lines\n", style="dim")
    return text


def turn_end_line(end: ev.TurnEnd) -> tuple[str, str] | None:
    """The line and style a turn's end leaves (None when it just completed)."""
    if end.reason == ev.TURN_END_REASON_CANCELLED:
        return "turn cancelled", "yellow"
    if end.reason == ev.TURN_END_REASON_ERROR:
        return f"turn failed: {_one_line(end.error)}", "red"
    if end.reason == ev.TURN_END_REASON_INTERRUPTED:
        return "turn interrupted (the runtime stopped)", "yellow"
    return None


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
