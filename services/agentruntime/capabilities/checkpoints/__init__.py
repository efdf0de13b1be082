"""Checkpoints of the session's folder, and the way back: /undo, /redo and
/rewind.

Right before a turn's first change runs (a file tool's write, a command),
the folder is snapshotted (snapshots.py, a shadow git repository in the
stack's data folder) and a checkpoint with that `before` is recorded; when
the turn ends, the folder is snapshotted again and the checkpoint is
recorded whole: `after` and the files that differ (added, modified,
deleted, with line counts), whatever changed them, `sed -i` and `rm` too.

- `/undo [N]` puts the files the last turn (or turn N) changed back as they
  were before it, and tells the model at its next request; `/redo` applies
  the last undone turn's changes again.
- `/rewind N [files|conversation|both]` takes the files back to before
  turn N+1, or the conversation (the model's view drops every later turn:
  a rewind event; the log keeps them), or both.
- `/diff [N]` shows the unified diff of the last turn's (or turn N's)
  changes, cut at DIFF_BYTES with a note.

With `--check`, /undo, /redo and /rewind change nothing and record nothing:
they say which files would be restored and which were changed since (what
a client asks the user to confirm before it sends `--force`).

A file changed by someone else since (its content is not what the turn
left, or what the undo left) is listed and left alone unless the command
is confirmed with `--force`. Everything is logged, so it works after a
restart, and the `checkpoints` projection lists the turns and their files.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Sequence
from pathlib import Path

from agenthost.sessionlog.v1 import events_pb2 as ev

from ...capability import (
    AgentHandle,
    Capability,
    Command,
    CommandResult,
    SessionPart,
    SessionScope,
)
from ...gates import Effect
from ...tools import Call, ToolContext
from .history import HISTORY_KINDS, History, TurnRecord, fold_history
from .snapshots import ShadowRepo, SnapshotError, shadow_dir

log = logging.getLogger("agenthost.runtime")
NAME = "checkpoints"
CHANGING = frozenset({Effect.WRITE, Effect.COMMAND})
DIFF_BYTES = 64 * 1024
FLAGS = frozenset({"--force", "--check"})
NOTICE = '[The user {did} your turn {number} ("{prompt}"): {what}]'


class Checkpoints(Capability):
    """One shadow repository per folder, under `root`."""

    name = NAME

    def __init__(self, root: Path) -> None:
        self._root = root
        self._repos: dict[Path, ShadowRepo] = {}
        # The `before` of each running turn that changed something, by
        # (session, turn): parts come and go with views, turns do not.
        self.befores: dict[tuple[str, str], str] = {}

    def repo(self, folder: Path) -> ShadowRepo:
        if folder not in self._repos:
            self._repos[folder] = ShadowRepo(shadow_dir(self._root, folder), folder)
        return self._repos[folder]

    def session(self, scope: SessionScope) -> SessionPart:
        return CheckpointsPart(self, scope)

    def commands(self) -> Sequence[Command]:
        return (
            Command(
                "undo",
                "Put back the files the last turn (or turn N) changed; --force also "
                "overwrites files changed since.",
                "/undo [N] [--force | --check]",
                self._undo,
            ),
            Command(
                "redo",
                "Apply the last undone turn's (or turn N's) changes again.",
                "/redo [N] [--force | --check]",
                self._redo,
            ),
            Command(
                "rewind",
                "Go back to the end of turn N: its files, the conversation, or both "
                "(the default); with no N, list the turns.",
                "/rewind [N [files|conversation|both]] [--force | --check]",
                self._rewind,
            ),
            Command(
                "diff",
                "Show the unified diff of the last turn's (or turn N's) changes.",
                "/diff [N]",
                self._diff,
            ),
        )

    # -- commands ------------------------------------------------------------------------

    async def _undo(self, agent: AgentHandle, args: str | None) -> CommandResult:
        words, force = _words(args)
        history = await read_history(agent)
        if agent.state.turn.open:
            return _failed(agent, "A turn is running: /undo once it has ended.")
        if words:
            turn = history.numbered(int(words[0])) if words[0].isdigit() else None
            if turn is None or not turn.changed or turn.rewound:
                return _failed(agent, f"Turn {words[0]} changed no files that can be undone.")
            if turn.undone:
                return _failed(agent, f"Turn {turn.number} is undone already.")
        else:
            turn = next((t for t in reversed(history.live()) if t.changed and not t.undone), None)
            if turn is None:
                return _failed(agent, "No turn has changes to undo.")
        return await self._restore(agent, turn, "undo", force, _checking(args))

    async def _redo(self, agent: AgentHandle, args: str | None) -> CommandResult:
        words, force = _words(args)
        history = await read_history(agent)
        if agent.state.turn.open:
            return _failed(agent, "A turn is running: /redo once it has ended.")
        if words:
            turn = history.numbered(int(words[0])) if words[0].isdigit() else None
            if turn is None or not turn.undone or turn.rewound:
                return _failed(agent, f"Turn {words[0]} is not an undone turn to redo.")
        else:
            turn = await last_undone(agent, history)
        if turn is None:
            return _failed(agent, "Nothing to redo.")
        return await self._restore(agent, turn, "redo", force, _checking(args))

    async def _restore(
        self, agent: AgentHandle, turn: TurnRecord, kind: str, force: bool, check: bool = False
    ) -> CommandResult:
        """Undo (back to `before`) or redo (to `after`) one turn's files."""
        paths = [f.path for f in turn.files]
        target, left = (turn.before, turn.after) if kind == "undo" else (turn.after, turn.before)
        repo = self.repo(agent.cwd)
        try:
            expected = await repo.blobs(left, paths)
            now = await repo.current(paths)
            skipped = [] if force else [p for p in paths if expected.get(p) != now.get(p)]
            restored = [p for p in paths if p not in skipped]
            if check:
                said = f"/{kind} would restore turn {turn.number} ({turn.prompt})"
                return CommandResult(
                    True, _check_said(said, restored, skipped), agent.state.last_seq
                )
            await repo.restore(target, restored)
        except SnapshotError as error:
            return _failed(agent, f"Could not {kind}: {error}")
        did = "undid" if kind == "undo" else "redid"
        what = _files_said(restored, skipped, kind)
        notice = NOTICE.format(did=did, number=turn.number, prompt=turn.prompt, what=what)
        seq = await agent.record(
            [
                ev.Event(
                    files_restored=ev.FilesRestored(
                        kind=kind, turn_id=turn.turn_id, restored=restored, skipped=skipped
                    )
                ),
                ev.Event(context_added=ev.ContextAdded(capability=NAME, text=notice)),
            ]
        )
        return CommandResult(True, _reply(kind, turn, restored, skipped), seq)

    async def _rewind(self, agent: AgentHandle, args: str | None) -> CommandResult:
        words, force = _words(args)
        history = await read_history(agent)
        if not words:
            return CommandResult(True, _turn_list(history), agent.state.last_seq)
        if agent.state.turn.open:
            return _failed(agent, "A turn is running: /rewind once it has ended.")
        mode = words[1] if len(words) > 1 else "both"
        if not words[0].isdigit() or mode not in ("files", "conversation", "both"):
            return _failed(agent, "usage: /rewind [N [files|conversation|both]] [--force]")
        number = int(words[0])
        kept = history.numbered(number) if number > 0 else None
        later = [t for t in history.live() if t.number > number]
        if (number > 0 and (kept is None or kept.rewound)) or not later:
            return _failed(agent, f"Turn {number} is not a turn with later turns to rewind.")
        events: list[ev.Event] = []
        said: list[str] = []
        restored: list[str] = []
        skipped: list[str] = []
        if _checking(args):
            if mode != "conversation":
                restored, skipped = await self._rewind_files(agent, later, force, check=True)
            said_check = f"/rewind would take the files back to the end of turn {number}"
            return CommandResult(
                True, _check_said(said_check, restored, skipped), agent.state.last_seq
            )
        if mode in ("files", "both"):
            restored, skipped = await self._rewind_files(agent, later, force)
            turn_id = kept.turn_id if kept is not None else ""
            events.append(
                ev.Event(
                    files_restored=ev.FilesRestored(
                        kind="rewind", turn_id=turn_id, restored=restored, skipped=skipped
                    )
                )
            )
            said.append(_files_said(restored, skipped, "rewind"))
            if mode == "files":
                text = f"[The user took the files back to how they were after turn {number}: "
                events.append(
                    ev.Event(
                        context_added=ev.ContextAdded(capability=NAME, text=text + said[-1] + "]")
                    )
                )
        if mode in ("conversation", "both"):
            events.append(await _rewind_event(agent, history, number, later))
            said.append(f"the conversation ends at turn {number} now")
        seq = await agent.record(events)
        lines = [f"Rewound to turn {number}: " + "; ".join(said) + "."]
        if restored:
            lines += ["Restored:", *(f"  {path}" for path in restored)]
        if skipped:
            lines.append(
                f"Left alone (changed since; /rewind {number} {mode} --force overwrites them):"
            )
            lines += [f"  {path}" for path in skipped]
        return CommandResult(True, "\n".join(lines), seq)

    async def _diff(self, agent: AgentHandle, args: str | None) -> CommandResult:
        words, _ = _words(args)
        history = await read_history(agent)
        if words:
            turn = history.numbered(int(words[0])) if words[0].isdigit() else None
            if turn is None or not turn.changed:
                return _failed(agent, f"Turn {words[0]} changed no files.")
        else:
            turn = next((t for t in reversed(history.live()) if t.changed), None)
            if turn is None:
                return _failed(agent, "No turn has changed files yet.")
        try:
            diff = await self.repo(agent.cwd).diff(turn.before, turn.after)
        except SnapshotError as error:
            return _failed(agent, f"Could not diff turn {turn.number}: {error}")
        head = f"Turn {turn.number} ({turn.prompt}): {len(turn.files)} file(s) changed"
        if turn.undone:
            head += " (undone since)"
        text = diff[:DIFF_BYTES].decode(errors="replace")
        if len(diff) > DIFF_BYTES:
            text = text.rsplit("\n", 1)[0] + (
                f"\n[diff cut at {DIFF_BYTES // 1024} KiB: {len(diff) - DIFF_BYTES} more bytes "
                "not shown]"
            )
        return CommandResult(True, f"{head}\n{text}".rstrip("\n"), agent.state.last_seq)

    async def _rewind_files(
        self, agent: AgentHandle, later: list[TurnRecord], force: bool, check: bool = False
    ) -> tuple[list[str], list[str]]:
        """Each file a later turn changed, back as it was before the first of
        them that changed it (unless someone changed it since the last)."""
        first: dict[str, TurnRecord] = {}
        last: dict[str, TurnRecord] = {}
        for turn in later:
            if turn.changed and not turn.undone:
                for f in turn.files:
                    first.setdefault(f.path, turn)
                    last[f.path] = turn
        repo = self.repo(agent.cwd)
        now = await repo.current(list(first))
        restored, skipped = [], []
        for path, turn in first.items():
            left = await repo.blobs(last[path].after, [path])
            if not force and left.get(path) != now.get(path):
                skipped.append(path)
                continue
            if not check:
                await repo.restore(turn.before, [path])
            restored.append(path)
        return restored, skipped


class CheckpointsPart(SessionPart):
    def __init__(self, capability: Checkpoints, scope: SessionScope) -> None:
        self._capability = capability
        self._scope = scope

    def _key(self, turn_id: str) -> tuple[str, str]:
        return (self._scope.session_id, turn_id)

    def observe(self, event: ev.Event) -> None:
        # A checkpoint begun in this view's turn (say, by a runtime that
        # stopped since): its `before` is what the turn's end compares with.
        if event.HasField("checkpoint") and not event.checkpoint.after:
            key = self._key(event.checkpoint.turn_id)
            self._capability.befores.setdefault(key, event.checkpoint.before)

    async def before_run(self, call: Call, context: ToolContext) -> list[ev.Event]:
        # A subagent's changes are its parent turn's too: snapshotted before it runs.
        if call.tool.effect not in CHANGING and not call.tool.delegates:
            return []
        key = self._key(context.turn_id)
        if key in self._capability.befores:
            return []
        try:
            before = await self._capability.repo(self._scope.cwd).snapshot()
        except (SnapshotError, OSError) as error:
            log.warning("no checkpoint for this turn: %s", error)
            return []
        self._capability.befores[key] = before
        started = ev.Checkpoint(turn_id=context.turn_id, before=before)
        return [ev.Event(checkpoint=started)]

    async def on_turn_end(self, turn_id: str, reason: ev.TurnEndReason.ValueType) -> list[ev.Event]:
        before = self._capability.befores.pop(self._key(turn_id), None) or await self._begun(
            turn_id
        )
        if not before:
            return []
        repo = self._capability.repo(self._scope.cwd)
        try:
            after = await repo.snapshot()
            changes = await repo.changes(before, after)
        except (SnapshotError, OSError) as error:
            log.warning("no checkpoint for this turn: %s", error)
            return []
        if not changes:
            return []
        files = [
            ev.FileChange(
                path=c.path,
                change=c.change,
                lines_added=c.lines_added,
                lines_removed=c.lines_removed,
                binary=c.binary,
            )
            for c in changes
        ]
        done = ev.Checkpoint(turn_id=turn_id, before=before, after=after, files=files)
        return [ev.Event(checkpoint=done)]

    async def _begun(self, turn_id: str) -> str:
        """The `before` a turn's checkpoint began with, read back from the log
        (a runtime that stopped during the turn, after a compaction)."""

        def begun(event: ev.Event) -> bool:
            return event.HasField("checkpoint") and event.checkpoint.turn_id == turn_id

        def started(event: ev.Event) -> bool:
            return event.HasField("turn_start") and event.turn_start.turn_id == turn_id

        found = await self._scope.find_back(begun, started)
        return found.checkpoint.before if found is not None and not found.checkpoint.after else ""


# -- reading the history ------------------------------------------------------------------


async def read_history(agent: AgentHandle) -> History:
    history = History()
    async for event in agent.events(HISTORY_KINDS):
        history = fold_history(history, event)
    return history


async def last_undone(agent: AgentHandle, history: History) -> TurnRecord | None:
    """The turn undone most recently and not redone since."""
    latest: TurnRecord | None = None
    async for event in agent.events(frozenset({"files_restored"})):
        restored = event.files_restored
        if restored.kind == "undo":
            turn = history.find(restored.turn_id)
            if turn is not None and turn.undone and not turn.rewound:
                latest = turn
    return latest


async def _rewind_event(
    agent: AgentHandle, history: History, number: int, later: list[TurnRecord]
) -> ev.Event:
    """The rewind that ends the view after turn `number`: it starts again
    from the last compaction before that point still in the view."""
    kept = history.numbered(number) if number > 0 else None
    to_seq = kept.end_seq if kept is not None else later[0].start_seq - 1
    compaction = -1
    async for event in agent.events(frozenset({"compaction"})):
        if event.seq <= to_seq and agent.state.in_view(event.seq):
            compaction = event.seq
    turn_id = kept.turn_id if kept is not None else ""
    return ev.Event(
        rewind=ev.Rewind(turn_id=turn_id, to_seq=to_seq, view_compaction_seq=compaction)
    )


# -- what is said ---------------------------------------------------------------------------------


def _words(args: str | None) -> tuple[list[str], bool]:
    words = shlex.split(args or "")
    force = "--force" in words
    return [w for w in words if w not in FLAGS], force


def _checking(args: str | None) -> bool:
    return "--check" in shlex.split(args or "")


def _failed(agent: AgentHandle, message: str) -> CommandResult:
    return CommandResult(False, message, agent.state.last_seq)


def _files_said(restored: list[str], skipped: list[str], kind: str) -> str:
    shown = ", ".join(restored) if restored else "no files"
    what = "as before it" if kind == "undo" else "as it left them" if kind == "redo" else ""
    text = f"{shown} {what}".strip() if restored else "no files changed"
    if skipped:
        text += f"; left alone, changed since: {', '.join(skipped)}"
    return text


def _check_said(head: str, restored: list[str], skipped: list[str]) -> str:
    lines = [f"{head}: {len(restored)} file(s)", *(f"  {path}" for path in restored)]
    if skipped:
        lines.append("Changed since the turn (left alone unless --force):")
        lines += [f"  {path}" for path in skipped]
    return "\n".join(lines)


def _reply(kind: str, turn: TurnRecord, restored: list[str], skipped: list[str]) -> str:
    verb = "Undid" if kind == "undo" else "Redid"
    lines = [f"{verb} turn {turn.number} ({turn.prompt}): {len(restored)} file(s) restored"]
    lines += [f"  {path}" for path in restored]
    if skipped:
        lines.append(f"Left alone (changed since the turn; /{kind} --force overwrites them):")
        lines += [f"  {path}" for path in skipped]
    return "\n".join(lines)


def _turn_list(history: History) -> str:
    lines = []
    for turn in history.live():
        files = f"{len(turn.files)} file(s)" if turn.changed else "no file changes"
        undone = ", undone" if turn.undone else ""
        lines.append(f"{turn.number:>3}  {turn.prompt}  ({files}{undone})")
    if not lines:
        return "No turns yet."
    return "\n".join(
        [*lines, "/rewind N [files|conversation|both] goes back to the end of turn N."]
    )
