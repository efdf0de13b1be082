"""The contract of a projection unit: a named view folded from a session's log."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from agenthost.sessionlog.v1 import events_pb2

State = TypeVar("State")

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


def reads(unit: ProjectionUnit[Any], kind: str | None) -> bool:
    """Whether events of `kind` can change `unit`'s state."""
    kinds: frozenset[str] | None = getattr(unit, "kinds", None)
    return kinds is None or kind in kinds
