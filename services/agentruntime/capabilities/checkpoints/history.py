"""A session's turns and what each changed in its folder, folded from the
whole log: the turns in order (number, prompt, where each ended), the
checkpoints of the turns that changed files, and which of those the user
undid, redid or rewound. The undo, redo and rewind commands read it
(History, every turn); the `checkpoints` projection clients show (web: undo
on a turn) folds only what its view shows (ChangedTurns), so that a long
session's projection stays small to fold, store and load.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, overload

from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import one_line
from services.projection.unit import FoldUnit

PROMPT_CHARS = 120


@dataclass(frozen=True)
class FileRecord:
    path: str
    change: str
    lines_added: int = 0
    lines_removed: int = 0
    binary: bool = False


@dataclass(frozen=True)
class TurnRecord:
    turn_id: str
    # 1 for the session's first turn.
    number: int
    prompt: str = ""
    # The seq of its turn/start and turn/end (-1 while it runs).
    start_seq: int = -1
    end_seq: int = -1
    before: str = ""
    after: str = ""
    files: tuple[FileRecord, ...] = ()
    # Its changes were undone (and not redone since).
    undone: bool = False
    # A rewind took it out of the conversation.
    rewound: bool = False

    @property
    def changed(self) -> bool:
        """Whether it has changes to undo or redo."""
        return bool(self.after and self.files)


@dataclass(frozen=True)
class History:
    turns: tuple[TurnRecord, ...] = ()

    def find(self, turn_id: str) -> TurnRecord | None:
        return next((t for t in self.turns if t.turn_id == turn_id), None)

    def numbered(self, number: int) -> TurnRecord | None:
        return next((t for t in self.turns if t.number == number), None)

    def live(self) -> list[TurnRecord]:
        """The turns the conversation still holds, oldest first."""
        return [t for t in self.turns if not t.rewound]


HISTORY_KINDS = frozenset(
    {"turn_start", "turn_end", "user_message", "checkpoint", "files_restored", "rewind"}
)


def fold_history(state: History, event: ev.Event) -> History:
    kind = event.WhichOneof("body")
    turns = list(state.turns)
    if kind == "turn_start":
        number = len(turns) + 1
        turns.append(TurnRecord(event.turn_start.turn_id, number, start_seq=event.seq))
    elif kind == "user_message" and turns and not turns[-1].prompt:
        if event.user_message.source.kind == ev.SOURCE_KIND_USER:
            turns[-1] = replace(turns[-1], prompt=one_line(event.user_message.text, PROMPT_CHARS))
    elif kind == "turn_end" and turns and turns[-1].turn_id == event.turn_end.turn_id:
        turns[-1] = replace(turns[-1], end_seq=event.seq)
    elif kind == "checkpoint":
        turns = _checkpointed(turns, event.checkpoint)
    elif kind == "files_restored":
        turns = _restored(turns, event.files_restored)
    elif kind == "rewind":
        turns = _rewound(turns, event.rewind.turn_id)
    else:
        return state
    new = History(tuple(turns))
    return state if new == state else new


def _files(checkpoint: ev.Checkpoint) -> tuple[FileRecord, ...]:
    return tuple(
        FileRecord(f.path, f.change, f.lines_added, f.lines_removed, f.binary)
        for f in checkpoint.files
    )


def _checkpointed(turns: list[TurnRecord], checkpoint: ev.Checkpoint) -> list[TurnRecord]:
    files = _files(checkpoint)
    return [
        replace(t, before=checkpoint.before, after=checkpoint.after, files=files)
        if t.turn_id == checkpoint.turn_id
        else t
        for t in turns
    ]


def _restored(turns: list[TurnRecord], restored: ev.FilesRestored) -> list[TurnRecord]:
    if restored.kind in ("undo", "redo"):
        if not restored.restored:
            return turns  # every file was left alone: the turn is as it was
        undone = restored.kind == "undo"
        return [replace(t, undone=undone) if t.turn_id == restored.turn_id else t for t in turns]
    # A rewind of the files undoes every turn after the one kept.
    kept = next((t.number for t in turns if t.turn_id == restored.turn_id), 0)
    return [replace(t, undone=True) if t.number > kept and t.changed else t for t in turns]


def _rewound(turns: list[TurnRecord], turn_id: str) -> list[TurnRecord]:
    kept = next((t.number for t in turns if t.turn_id == turn_id), 0)
    return [replace(t, rewound=True) if t.number > kept else t for t in turns]


def history_view(state: History) -> dict[str, Any]:
    """The `checkpoints` projection value: the turns of the conversation
    that changed files, each with its files and whether the user undid it
    (a turn that changed nothing changes no view: no frame per turn)."""
    return _turns_view(state.turns)


def _turns_view(turns: tuple[TurnRecord, ...]) -> dict[str, Any]:
    return {
        "turns": [
            {
                "turn_id": t.turn_id,
                "number": t.number,
                "prompt": t.prompt,
                "undone": t.undone,
                "files": [
                    {
                        "path": f.path,
                        "change": f.change,
                        "lines_added": f.lines_added,
                        "lines_removed": f.lines_removed,
                        "binary": f.binary,
                    }
                    for f in t.files
                ],
            }
            for t in turns
            if t.changed and not t.rewound
        ]
    }


def _record(data: dict[str, Any]) -> TurnRecord:
    return TurnRecord(**{**data, "files": tuple(FileRecord(**f) for f in data["files"])})


class TurnIds(Sequence[str]):
    """Every turn's id in order, a turn's number being its index + 1. The
    states folded on from one another share one list: the newest appends to
    it in place, each state reading only its own first `len` ids, so a
    turn's start costs no copy of every id before it. Adding to a state that
    is not the newest copies its ids first, leaving the other as it was."""

    __slots__ = ("_count", "_ids")

    def __init__(self, ids: list[str] | None = None, count: int | None = None) -> None:
        self._ids = [] if ids is None else ids
        self._count = len(self._ids) if count is None else count

    def add(self, turn_id: str) -> TurnIds:
        ids = self._ids if len(self._ids) == self._count else self._ids[: self._count]
        ids.append(turn_id)
        return TurnIds(ids, self._count + 1)

    def number(self, turn_id: str) -> int:
        """A turn's number (0: none, as for a rewind to before the first)."""
        try:
            return self._ids.index(turn_id, 0, self._count) + 1
        except ValueError:
            return 0

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return self._ids[: self._count][index]
        if not -self._count <= index < self._count:
            raise IndexError(index)
        return self._ids[index % self._count]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids[: self._count])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TurnIds):
            return NotImplemented
        if self._count != other._count:
            return False
        return self._ids is other._ids or self._ids[: self._count] == other._ids[: other._count]

    __hash__ = None  # type: ignore[assignment]  # equal by value, and grows in place

    def __repr__(self) -> str:
        return f"TurnIds({self._ids[: self._count]!r})"


@dataclass(frozen=True)
class ChangedTurns:
    """What the `checkpoints` view is folded from: the records of the turns
    with a checkpoint (oldest first) and of the latest turn, whose prompt a
    checkpoint takes; every turn's id only, in order, for the numbers (a
    turn's is its index + 1) that undo-by-rewind and rewind compare. Its view
    is history_view's of the same events; its cost grows with the turns that
    changed files, not with every turn."""

    ids: TurnIds = field(default_factory=TurnIds)
    current: TurnRecord | None = None
    checkpointed: tuple[TurnRecord, ...] = ()

    def number(self, turn_id: str) -> int:
        """A turn's number (0: none, as for a rewind to before the first)."""
        return self.ids.number(turn_id)


def fold_changed_turns(state: ChangedTurns, event: ev.Event) -> ChangedTurns:
    kind = event.WhichOneof("body")
    current = state.current
    if kind == "turn_start":
        turn_id = event.turn_start.turn_id
        ids = state.ids.add(turn_id)
        current = TurnRecord(turn_id, len(ids), start_seq=event.seq)
        return ChangedTurns(ids, current, state.checkpointed)
    if kind == "user_message":
        if current is None or current.prompt:
            return state
        if event.user_message.source.kind != ev.SOURCE_KIND_USER:
            return state
        prompt = one_line(event.user_message.text, PROMPT_CHARS)
        return _changed(state, current.turn_id, lambda t: replace(t, prompt=prompt))
    if kind == "checkpoint":
        checkpoint = event.checkpoint
        files = _files(checkpoint)
        return _changed(
            state,
            checkpoint.turn_id,
            lambda t: replace(t, before=checkpoint.before, after=checkpoint.after, files=files),
            add=True,
        )
    if kind == "files_restored":
        restored = event.files_restored
        if restored.kind in ("undo", "redo"):
            if not restored.restored:
                return state  # every file was left alone: the turn is as it was
            undone = restored.kind == "undo"
            return _changed(state, restored.turn_id, lambda t: replace(t, undone=undone))
        # A rewind of the files undoes every turn after the one kept.
        kept = state.number(restored.turn_id)
        return _later(state, kept, lambda t: replace(t, undone=True) if t.changed else t)
    if kind == "rewind":
        kept = state.number(event.rewind.turn_id)
        return _later(state, kept, lambda t: replace(t, rewound=True))
    return state


def _changed(
    state: ChangedTurns,
    turn_id: str,
    change: Callable[[TurnRecord], TurnRecord],
    add: bool = False,
) -> ChangedTurns:
    """`change` made to the turn's record, where it is kept (the latest turn,
    the checkpointed ones); `add`: a turn not checkpointed yet is from now on."""
    current = state.current
    if current is not None and current.turn_id == turn_id:
        current = change(current)
    records = list(state.checkpointed)
    found = next((i for i, t in enumerate(records) if t.turn_id == turn_id), None)
    if found is not None:
        records[found] = change(records[found])
    elif add and current is not None and current.turn_id == turn_id:
        records.append(current)
    elif add and (number := state.number(turn_id)):
        # An earlier turn's (not seen here: the log writes a turn's checkpoints
        # within it): its prompt and seqs are not kept, its number is.
        records.append(change(TurnRecord(turn_id, number)))
        records.sort(key=lambda t: t.number)
    new = ChangedTurns(state.ids, current, tuple(records))
    return state if new == state else new


def _later(
    state: ChangedTurns, kept: int, change: Callable[[TurnRecord], TurnRecord]
) -> ChangedTurns:
    """`change` made to every kept record of a turn numbered after `kept`."""
    current = state.current
    if current is not None and current.number > kept:
        current = change(current)
    records = tuple(change(t) if t.number > kept else t for t in state.checkpointed)
    new = ChangedTurns(state.ids, current, records)
    return state if new == state else new


def changed_turns_view(state: ChangedTurns) -> dict[str, Any]:
    return _turns_view(state.checkpointed)


def load_changed_turns(data: dict[str, Any]) -> ChangedTurns:
    current = data["current"]
    return ChangedTurns(
        TurnIds(list(data["ids"])),
        None if current is None else _record(current),
        tuple(_record(t) for t in data["checkpointed"]),
    )


# What can change the view (a turn's end cannot).
CHANGED_TURNS_KINDS = HISTORY_KINDS - {"turn_end"}

CHECKPOINTS_UNIT = FoldUnit(
    "checkpoints",
    3,
    ChangedTurns,
    fold_changed_turns,
    changed_turns_view,
    load_changed_turns,
    CHANGED_TURNS_KINDS,
)
