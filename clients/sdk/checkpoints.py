"""The way back and the helpers: a session's turns with the files each
changed (the `checkpoints` projection), what /undo, /redo and /rewind
restored or left alone, a turn's diff (/diff), and the subagents a session
started (the `subagents` projection)."""

from __future__ import annotations

from dataclasses import dataclass

from .projection import JsonValue

REWIND_WHAT = ("files", "conversation", "both")


@dataclass(frozen=True)
class FileChange:
    """One file a turn changed."""

    path: str
    # "added", "modified" or "deleted".
    change: str
    lines_added: int = 0
    lines_removed: int = 0
    binary: bool = False


@dataclass(frozen=True)
class TurnCheckpoint:
    """A turn of the conversation that changed files."""

    turn_id: str
    # 1 for the session's first turn.
    number: int
    # Its prompt, on one line, cut.
    prompt: str
    files: tuple[FileChange, ...]
    # The user undid it (and did not redo it since).
    undone: bool = False


@dataclass(frozen=True)
class Restored:
    """What /undo, /redo or /rewind did (or, checked, would do)."""

    ok: bool
    # What the command said (for a person).
    message: str
    seq: int
    # The files put back.
    restored: tuple[str, ...] = ()
    # Changed since by someone else: left alone (`force` overwrites them).
    skipped: tuple[str, ...] = ()
    # Only checked: nothing changed, nothing recorded.
    checked: bool = False


@dataclass(frozen=True)
class TurnDiff:
    """A turn's changes as a unified diff."""

    ok: bool
    # The turn's number, 0 when there is none to show.
    turn: int
    # The diff (cut at the service's bound, with a note saying so).
    text: str
    # Why there is none (ok False), or "" .
    message: str = ""

    @property
    def cut(self) -> bool:
        """Whether the diff was cut at the service's bound (its note says so)."""
        return self.text.endswith("more bytes not shown]")


@dataclass(frozen=True)
class Subagent:
    """A subagent a session's `task` call started: a child session."""

    session_id: str
    # "general", "explore", or an agent file's name.
    agent_type: str
    description: str
    # The task call that started it last (a follow-up is another call).
    call_id: str
    running: bool
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None

    @property
    def state(self) -> str:
        """ "running" or "done", as /agents shows it."""
        return "running" if self.running else "done"


def checkpoints_value(view: JsonValue) -> list[TurnCheckpoint]:
    """The turns of a `checkpoints` projection value (malformed ones left out)."""
    turns = view.get("turns") if isinstance(view, dict) else None
    if not isinstance(turns, list):
        return []
    found = []
    for turn in turns:
        if not isinstance(turn, dict) or not isinstance(turn.get("files"), list):
            continue
        try:
            files = tuple(
                FileChange(
                    str(f["path"]),
                    str(f["change"]),
                    int(f.get("lines_added", 0)),
                    int(f.get("lines_removed", 0)),
                    bool(f.get("binary", False)),
                )
                for f in turn["files"]
                if isinstance(f, dict)
            )
            found.append(
                TurnCheckpoint(
                    str(turn["turn_id"]),
                    int(turn["number"]),
                    str(turn.get("prompt", "")),
                    files,
                    bool(turn.get("undone", False)),
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    return found


def subagents_value(view: JsonValue) -> list[Subagent]:
    """The children of a `subagents` projection value, oldest first."""
    children = view.get("children") if isinstance(view, dict) else None
    if not isinstance(children, list):
        return []
    found = []
    for child in children:
        if not isinstance(child, dict):
            continue
        try:
            cost = child.get("cost")
            found.append(
                Subagent(
                    str(child["session_id"]),
                    str(child.get("agent_type", "")),
                    str(child.get("description", "")),
                    str(child.get("call_id", "")),
                    bool(child.get("running", False)),
                    int(child.get("requests", 0)),
                    int(child.get("prompt_tokens", 0)),
                    int(child.get("completion_tokens", 0)),
                    None if cost is None else float(cost),
                )
            )
        except (KeyError, TypeError, ValueError):
            continue
    return found


def restored_from(ok: bool, message: str, seq: int, checked: bool) -> Restored:
    """A command's reply read: the indented paths under its first line are
    the restored ones, those under "Left alone" / "Changed since" the
    skipped ones (the checkpoints capability's reply form)."""
    restored: list[str] = []
    skipped: list[str] = []
    into = restored
    for line in message.splitlines()[1:] if ok else ():
        if line.startswith("  "):
            into.append(line[2:])
        elif line.startswith(("Left alone", "Changed since")):
            into = skipped
        else:
            into = restored
    return Restored(ok, message, seq, tuple(restored), tuple(skipped), checked)


def diff_from(ok: bool, message: str) -> TurnDiff:
    """/diff's reply: "Turn N (prompt): K file(s) changed", then the diff."""
    if not ok:
        return TurnDiff(False, 0, "", message)
    head, _, text = message.partition("\n")
    number = head.removeprefix("Turn ").split(" ", 1)[0]
    return TurnDiff(True, int(number) if number.isdigit() else 0, text, head)
