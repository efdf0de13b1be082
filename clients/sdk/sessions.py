"""The list of an account's sessions as a client mirrors it (pure, no I/O).

Rows come from list replies and `session_added` frames. `blank` (no user
message accepted yet) only ever goes from true to false: on the first
accepted prompt, a `running` status frame (a blank session never runs), or a
list that says false. A stale `blank: true` (an older list, a late frame)
never re-blanks a session.
"""

from __future__ import annotations

from collections.abc import Iterable

from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.sessionlog.v1 import session_log_pb2 as sl


class SessionList:
    """The account's sessions; see the module docstring."""

    def __init__(self) -> None:
        self._rows: dict[str, sl.SessionSummary] = {}
        self._engaged: set[str] = set()

    def rows(self) -> list[sl.SessionSummary]:
        """Every row, most recently updated first."""
        return sorted(self._rows.values(), key=lambda s: s.updated_at.ToNanoseconds(), reverse=True)

    def get(self, session_id: str) -> sl.SessionSummary | None:
        """The row of a session, if the mirror has it."""
        return self._rows.get(session_id)

    def is_blank(self, session_id: str) -> bool:
        """Whether the mirror still shows the session blank."""
        row = self._rows.get(session_id)
        return row is not None and row.blank

    def apply_list(self, summaries: Iterable[sl.SessionSummary]) -> None:
        """A list reply: its rows, with blank kept false once it was."""
        for summary in summaries:
            self._put(summary)

    def on_frame(self, frame: gw.ConnectResponse) -> None:
        """A connection frame: rows added, sessions seen running."""
        kind = frame.WhichOneof("frame")
        if kind == "session_added":
            summary = sl.SessionSummary()
            summary.CopyFrom(frame.session_added.summary)
            summary.blank = frame.session_added.blank
            self._put(summary)
        elif kind == "session_status" and frame.session_status.running:
            self.engaged(frame.session_status.session_id)

    def engaged(self, session_id: str) -> None:
        """A prompt was accepted, or the session ran: it is blank no more."""
        self._engaged.add(session_id)
        row = self._rows.get(session_id)
        if row is not None:
            row.blank = False

    def _put(self, summary: sl.SessionSummary) -> None:
        row = sl.SessionSummary()
        row.CopyFrom(summary)
        if summary.id in self._engaged or not summary.blank:
            row.blank = False
            self._engaged.add(summary.id)
        self._rows[summary.id] = row
