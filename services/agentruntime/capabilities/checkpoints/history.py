"""A session's turns and what each changed in its folder, folded from the
whole log: the turns in order (number, prompt, where each ended), the
checkpoints of the turns that changed files, and which of those the user
undid, redid or rewound. The undo, redo and rewind commands read it, and it
is the `checkpoints` projection clients show (web: undo on a turn).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

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
        number = sum(1 for t in turns) + 1
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


def _checkpointed(turns: list[TurnRecord], checkpoint: ev.Checkpoint) -> list[TurnRecord]:
    files = tuple(
        FileRecord(f.path, f.change, f.lines_added, f.lines_removed, f.binary)
        for f in checkpoint.files
    )
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
            for t in state.live()
            if t.changed
        ]
    }


def load_history(data: dict[str, Any]) -> History:
    return History(
        tuple(
            TurnRecord(**{**t, "files": tuple(FileRecord(**f) for f in t["files"])})
            for t in data["turns"]
        )
    )


CHECKPOINTS_UNIT = FoldUnit(
    "checkpoints", 2, History, fold_history, history_view, load_history, HISTORY_KINDS
)
