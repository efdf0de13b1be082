"""The contract of a projection unit: a named view folded from a session's log."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from agenthost.sessionlog.v1 import events_pb2

from agenthost_core import folds

State = TypeVar("State")
S = TypeVar("S")

# A view is JSON-shaped (it travels as google.protobuf.Value).
View = dict[str, Any] | list[Any] | str | int | float | bool | None


class ProjectionUnit(Protocol[State]):
    """`apply` must return the very same state object when the event changes
    nothing, so the engine can skip the view comparison and the checkpoint.
    Bump `state_version` whenever `init`/`apply` change meaning: stored
    checkpoints of an older version are refolded from the log.

    A unit may also name the event kinds (Event body names) that can change
    its state, as `kinds` (a frozenset): the engine then applies only those
    and lets the others pass it unchanged (see `reads`)."""

    @property
    def key(self) -> str: ...

    @property
    def state_version(self) -> int: ...

    def init(self) -> State: ...

    def apply(self, state: State, event: events_pb2.Event) -> State: ...

    def view(self, state: State) -> View: ...

    def dump(self, state: State) -> bytes:
        """Serialize the state for a checkpoint."""
        ...

    def load(self, data: bytes) -> State:
        """Inverse of `dump`."""
        ...


def kinds_read(unit: ProjectionUnit[Any]) -> frozenset[str] | None:
    """The event kinds that can change `unit`'s state (None: any)."""
    kinds: frozenset[str] | None = getattr(unit, "kinds", None)
    return kinds


def reads(unit: ProjectionUnit[Any], kind: str | None) -> bool:
    """Whether events of `kind` can change `unit`'s state."""
    kinds = kinds_read(unit)
    return kinds is None or kind in kinds


def copy_view(view: View) -> View:
    """A copy of `view` no holder of the original can change: a view is
    JSON-shaped, so only its dicts and lists are copied (copy.deepcopy's
    generality costs several times more, once per change sent)."""
    if isinstance(view, dict):
        return {key: copy_view(value) for key, value in view.items()}
    if isinstance(view, list):
        return [copy_view(value) for value in view]
    return view


@dataclass(frozen=True)
class FoldUnit(Generic[S]):
    """A projection unit made of one fold of the session log."""

    key: str
    state_version: int
    initial: Callable[[], S]
    fold: Callable[[S, events_pb2.Event], S]
    show: Callable[[S], View]
    restore: Callable[[dict[str, Any]], S]
    # The event kinds `fold` reads (None: any): the fold's own constant.
    kinds: frozenset[str] | None = None

    def init(self) -> S:
        return self.initial()

    def apply(self, state: S, event: events_pb2.Event) -> S:
        return self.fold(state, event)

    def view(self, state: S) -> View:
        return self.show(state)

    def dump(self, state: S) -> bytes:
        return folds.dump_state(state)

    def load(self, data: bytes) -> S:
        return self.restore(json.loads(data))
