"""The plan state of the sessions the gateway follows, kept current from the
events it already receives so a PlanMode read needs no downstream call.

The plan-mode service is the authority (it knows selections queued through
SetPlanMode, which the log does not show); its replies seed and correct the
cache, and each committed plan/mode event moves it forward between them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlanView:
    active: bool
    # Present only while a selection waits for the next boundary.
    pending: bool | None
    seq: int

    def as_value(self) -> dict[str, bool]:
        return {"active": self.active, "pending": self.pending is not None}


class PlanCache:
    def __init__(self) -> None:
        self._views: dict[str, PlanView] = {}

    def get(self, session_id: str) -> PlanView | None:
        return self._views.get(session_id)

    def authoritative(
        self, session_id: str, active: bool, pending: bool | None, as_of_seq: int
    ) -> PlanView | None:
        """A plan-mode reply; ignored when a newer commit was already seen.
        Returns the view when it changed."""
        current = self._views.get(session_id)
        if current is not None and current.seq > as_of_seq:
            return None
        return self._put(session_id, PlanView(active, pending, as_of_seq))

    def committed(self, session_id: str, active: bool, seq: int) -> PlanView | None:
        """A plan/mode event: the commit clears any pending selection."""
        if session_id not in self._views:
            return None  # not followed yet: the first read asks plan mode
        return self._put(session_id, PlanView(active, None, seq))

    def forget(self, session_id: str) -> None:
        self._views.pop(session_id, None)

    def _put(self, session_id: str, view: PlanView) -> PlanView | None:
        before = self._views.get(session_id)
        self._views[session_id] = view
        if before is not None and (before.active, before.pending) == (view.active, view.pending):
            return None
        return view
