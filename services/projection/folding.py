"""The folded state of one session: every unit's state, view and watermark.

Pure and synchronous: the engine feeds events in seq order and owns I/O,
locking and notification.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from agenthost.sessionlog.v1 import events_pb2

from .checkpoint_store import SessionCheckpoint, UnitCheckpoint
from .errors import ProjectionFailed
from .model import Change
from .unit import ProjectionUnit, View, copy_view, kinds_read

logger = logging.getLogger(__name__)


class OutOfOrderEvent(RuntimeError):
    """An event skipped ahead of the watermark: the caller must fill the gap first."""


@dataclass
class _Slot:
    unit: ProjectionUnit[Any]
    state: Any
    view: View
    # Last seq folded into `state`; a restored unit of another state_version
    # starts at -1 and is refolded while the others wait at the checkpoint.
    through_seq: int
    # Seq of the event that last changed `view`; -1 while it is the initial view.
    changed_at_seq: int
    # The kinds the unit reads (None: any), looked up once.
    kinds: frozenset[str] | None = field(init=False)

    def __post_init__(self) -> None:
        self.kinds = kinds_read(self.unit)

    def fold(self, event: events_pb2.Event) -> None:
        self.through_seq = event.seq
        state = self.unit.apply(self.state, event)
        if state is self.state:
            return
        self.state = state
        view = self.unit.view(state)
        if view != self.view:
            self.view = view
            self.changed_at_seq = event.seq


class SessionProjection:
    def __init__(self, session_id: str, slots: list[_Slot], watermark: int) -> None:
        self.session_id = session_id
        self._slots = slots
        self._last_seq = watermark
        self._watermark = self._lowest()
        # Events folded since the last checkpoint was taken, and how many
        # the next waits for at least (the engine's choice, by the last one's size).
        self.unsaved_events = 0
        self.checkpoint_spacing = 0

    @classmethod
    def restore(
        cls,
        session_id: str,
        units: Sequence[ProjectionUnit[Any]],
        checkpoint: SessionCheckpoint | None,
    ) -> SessionProjection:
        watermark = -1 if checkpoint is None else checkpoint.watermark
        saved = {} if checkpoint is None else checkpoint.units
        slots = [_restore_slot(session_id, u, saved.get(u.key), watermark) for u in units]
        return cls(session_id, slots, watermark)

    @property
    def watermark(self) -> int:
        """Every unit has folded every event up to here (kept as `apply`
        moves the slots: the engine asks for it several times an event)."""
        return self._watermark

    def _lowest(self) -> int:
        return min((slot.through_seq for slot in self._slots), default=self._last_seq)

    @property
    def level(self) -> bool:
        """All units stand at one seq (not in the middle of a refold)."""
        return all(slot.through_seq == self._last_seq for slot in self._slots)

    def apply(self, event: events_pb2.Event) -> None:
        """Fold one event into every unit that has not seen it yet (what it
        changed: `changes_after`)."""
        watermark = self.watermark
        if event.seq <= watermark:
            return
        if event.seq != watermark + 1:
            raise OutOfOrderEvent(
                f"session {self.session_id!r}: event {event.seq} after {watermark}"
            )
        kind = event.WhichOneof("body")
        try:
            for slot in self._slots:
                if slot.through_seq >= event.seq:
                    continue
                if slot.kinds is not None and kind not in slot.kinds:
                    slot.through_seq = event.seq  # it cannot change this unit
                    continue
                self._fold_slot(slot, event)
        except BaseException:
            self._watermark = self._lowest()
            raise
        # Every slot now stands at event.seq or beyond, and the lowest stood
        # right before it.
        self._watermark = event.seq
        self._last_seq = max(self._last_seq, event.seq)
        self.unsaved_events += 1

    def _fold_slot(self, slot: _Slot, event: events_pb2.Event) -> None:
        try:
            slot.fold(event)
        except Exception as error:
            raise ProjectionFailed(self.session_id, event.seq, slot.unit.key) from error

    def values(self, keys: Collection[str] | None = None) -> dict[str, View]:
        return {
            slot.unit.key: copy_view(slot.view)
            for slot in self._slots
            if keys is None or slot.unit.key in keys
        }

    def changes_after(self, after_seq: int) -> list[Change]:
        """The current view of every unit changed after `after_seq`, oldest
        change first: intermediate changes collapse, the latest value wins."""
        changed = [slot for slot in self._slots if slot.changed_at_seq > after_seq]
        changed.sort(key=lambda slot: slot.changed_at_seq)  # stable: unit order within a seq
        return [
            Change(slot.unit.key, copy_view(slot.view), slot.changed_at_seq) for slot in changed
        ]

    def checkpoint(self) -> SessionCheckpoint:
        if not self.level:
            raise RuntimeError(f"session {self.session_id!r} is mid-refold")
        units = {
            slot.unit.key: UnitCheckpoint(
                slot.unit.state_version, slot.unit.dump(slot.state), slot.changed_at_seq
            )
            for slot in self._slots
        }
        return SessionCheckpoint(self.session_id, self.watermark, units)


def _restore_slot(
    session_id: str,
    unit: ProjectionUnit[Any],
    saved: UnitCheckpoint | None,
    watermark: int,
) -> _Slot:
    if saved is not None and saved.state_version == unit.state_version:
        try:
            state = unit.load(saved.state)
        except Exception:
            # A checkpoint is only a cache: refold rather than fail the read.
            logger.warning(
                "unreadable checkpoint of %r for %r; refolding", unit.key, session_id, exc_info=True
            )
        else:
            return _Slot(unit, state, unit.view(state), watermark, saved.changed_at_seq)
    state = unit.init()
    return _Slot(unit, state, unit.view(state), -1, -1)
