"""The `checkpoints` projection shows what the full history shows, for any
log, while holding only the turns that changed files."""

from __future__ import annotations

from typing import Any

from agenthost.sessionlog.v1 import events_pb2 as ev
from hypothesis import given, settings
from hypothesis import strategies as st

from services.agentruntime.capabilities.checkpoints.history import (
    CHECKPOINTS_UNIT,
    ChangedTurns,
    History,
    fold_history,
    history_view,
)


@st.composite
def logs(draw: st.DrawFn) -> list[ev.Event]:
    """Turns as the runtime writes them (a checkpoint within its turn), with
    undos, redos and rewinds of any earlier turn in between."""
    events: list[ev.Event] = []
    turns: list[str] = []
    for step in range(draw(st.integers(0, 40))):
        kind = draw(
            st.sampled_from(["turn", "turn", "undo", "redo", "files_rewind", "rewind", "end"])
        )
        target = draw(st.sampled_from(["", *turns])) if turns else ""
        if kind == "turn":
            turn_id = f"turn-{step}"
            turns.append(turn_id)
            events.append(ev.Event(turn_start=ev.TurnStart(turn_id=turn_id)))
            source = draw(st.sampled_from([ev.SOURCE_KIND_USER, ev.SOURCE_KIND_UNSPECIFIED]))
            message = ev.UserMessage(text=f"prompt {step}", source=ev.MessageSource(kind=source))
            started = ev.Event(checkpoint=ev.Checkpoint(turn_id=turn_id, before="b"))
            prompt = ev.Event(user_message=message)
            # The runtime checkpoints before the first request, after the
            # prompt; either order must fold alike.
            events += [prompt, started] if draw(st.booleans()) else [started, prompt]
            if draw(st.booleans()):
                files = [ev.FileChange(path=f"f{step}", change="modified", lines_added=1)]
                if draw(st.booleans()):
                    files = []  # a turn whose snapshot changed nothing
                done = ev.Checkpoint(turn_id=turn_id, before="b", after=f"a{step}", files=files)
                events.append(ev.Event(checkpoint=done))
        elif kind in ("undo", "redo", "files_rewind"):
            restored = draw(st.sampled_from([[], ["f"]]))
            kind_name = "rewind" if kind == "files_rewind" else kind
            body = ev.FilesRestored(kind=kind_name, turn_id=target, restored=restored)
            events.append(ev.Event(files_restored=body))
        elif kind == "rewind":
            events.append(ev.Event(rewind=ev.Rewind(turn_id=target, to_seq=-1)))
        elif turns:
            events.append(ev.Event(turn_end=ev.TurnEnd(turn_id=turns[-1])))
    for seq, event in enumerate(events):
        event.seq = seq
    return events


def _folded(events: list[ev.Event]) -> tuple[History, Any]:
    history, changed = History(), CHECKPOINTS_UNIT.init()
    for event in events:
        history = fold_history(history, event)
        changed = CHECKPOINTS_UNIT.apply(changed, event)
    return history, changed


@settings(max_examples=300, deadline=None)
@given(logs())
def test_the_view_is_the_full_historys(events: list[ev.Event]) -> None:
    history, changed = _folded(events)
    assert CHECKPOINTS_UNIT.view(changed) == history_view(history)


@settings(max_examples=100, deadline=None)
@given(logs(), st.data())
def test_a_stored_state_folds_on_as_the_one_kept_in_memory(
    events: list[ev.Event], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(0, len(events)))
    _, before = _folded(events[:cut])
    stored = CHECKPOINTS_UNIT.load(CHECKPOINTS_UNIT.dump(before))
    assert stored == before
    for event in events[cut:]:
        stored = CHECKPOINTS_UNIT.apply(stored, event)
    assert stored == _folded(events)[1]


def test_a_turn_that_changed_nothing_leaves_no_record_but_its_id() -> None:
    events = [ev.Event(seq=n, turn_start=ev.TurnStart(turn_id=f"t{n}")) for n in range(1000)]
    _, changed = _folded(events)
    assert isinstance(changed, ChangedTurns)
    assert changed.checkpointed == () and len(changed.ids) == 1000
    assert CHECKPOINTS_UNIT.view(changed) == {"turns": []}


@settings(max_examples=100, deadline=None)
@given(logs(), logs(), logs())
def test_states_folded_on_from_one_state_keep_their_own_turns(
    start: list[ev.Event], one: list[ev.Event], other: list[ev.Event]
) -> None:
    """The states of one fold share their turn ids (TurnIds): folding two
    logs on from the same state, a step of each in turn, leaves each its own
    turns and the state they started from as it was."""
    _, shared = _folded(start)
    dumped = CHECKPOINTS_UNIT.dump(shared)
    first, second = shared, shared
    for step in range(max(len(one), len(other))):
        if step < len(one):
            first = CHECKPOINTS_UNIT.apply(first, one[step])
        if step < len(other):
            second = CHECKPOINTS_UNIT.apply(second, other[step])
    assert first == _folded(start + one)[1]
    assert second == _folded(start + other)[1]
    assert CHECKPOINTS_UNIT.dump(shared) == dumped
    assert CHECKPOINTS_UNIT.dump(second) == CHECKPOINTS_UNIT.dump(_folded(start + other)[1])
