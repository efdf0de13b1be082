"""What the chat shows of the way back and of subagents: the turns a
/rewind picks from (each prompt with the files it changed), the files a
restore would overwrite though someone changed them since, a turn's diff,
and the session's subagents (/agents) with their usage."""

from __future__ import annotations

import re

from rich.text import Text

from clients.sdk import Subagent, TurnCheckpoint

from . import render

# The lines /diff shows at most (the service cuts a diff at 64 KiB too).
DIFF_LINES = 400
FILES_NAMED = 3
# A line of the session's `/rewind` list: "  3  the prompt  (2 file(s), undone)".
_LISTED = re.compile(r"^\s*(\d+)  (.*)  \((.*)\)$")
REWIND_CHOICES = {
    "c": "files",
    "code": "files",
    "files": "files",
    "o": "conversation",
    "conversation": "conversation",
    "b": "both",
    "both": "both",
    "": "both",
}


def listed_turns(message: str) -> list[tuple[int, str]]:
    """The turns of the session's `/rewind` list: number and prompt."""
    found = []
    for line in message.splitlines():
        matched = _LISTED.match(line)
        if matched:
            found.append((int(matched.group(1)), matched.group(2)))
    return found


def files_said(turn: TurnCheckpoint | None) -> str:
    if turn is None or not turn.files:
        return "no file changes"
    names = ", ".join(f.path for f in turn.files[:FILES_NAMED])
    more = f" and {len(turn.files) - FILES_NAMED} more" if len(turn.files) > FILES_NAMED else ""
    undone = ", undone" if turn.undone else ""
    count = f"{len(turn.files)} file{'s' if len(turn.files) != 1 else ''}"
    return f"{count}: {names}{more}{undone}"


def picker_lines(turns: list[tuple[int, str]], checkpoints: list[TurnCheckpoint]) -> list[str]:
    """One line per turn: its number, its prompt, the files it changed."""
    changed = {t.number: t for t in checkpoints}
    width = max((len(prompt) for _, prompt in turns), default=0)
    width = min(width, 60)
    return [
        f"  {number:>3}  {prompt[:60]:<{width}}  ({files_said(changed.get(number))})"
        for number, prompt in turns
    ]


def overwrite_lines(skipped: tuple[str, ...]) -> list[str]:
    return [
        "Changed since by someone other than the agent:",
        *(f"  {path}" for path in skipped),
    ]


def diff_lines(text: str) -> Text:
    return render.diff_text(text, DIFF_LINES)


def subagent_label(child: Subagent | None) -> str:
    if child is None:
        return "a subagent"
    return f"subagent {child.agent_type} · {child.description}"


def usage_said(child: Subagent) -> str:
    if not child.requests:
        return "no requests yet"
    tokens = render.tokens(child.prompt_tokens + child.completion_tokens)
    cost = f" · {render.dollars(child.cost)}" if child.cost is not None else ""
    return f"{child.requests} request{'s' if child.requests != 1 else ''} · {tokens} tokens{cost}"


def agents_lines(children: list[Subagent]) -> list[str]:
    """/agents: each subagent of the session, oldest first."""
    if not children:
        return ["No subagents in this session yet."]
    kinds = max(len(c.agent_type) for c in children)
    what = min(max(len(c.description) for c in children), 50)
    return [
        f"  {c.agent_type:<{kinds}}  {c.description[:50]:<{what}}  {c.state:<7}  "
        f"{usage_said(c)}  ({c.session_id})"
        for c in children
    ]
