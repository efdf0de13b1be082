"""The session list mirror: blank only ever goes from true to false."""

from __future__ import annotations

from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.sessionlog.v1 import session_log_pb2 as sl

from clients.sdk.sessions import SessionList


def summary(session_id: str, *, blank: bool, updated_s: int = 1) -> sl.SessionSummary:
    row = sl.SessionSummary(id=session_id, cwd="/p", blank=blank)
    row.updated_at.FromSeconds(updated_s)
    return row


def added(session_id: str) -> gw.ConnectResponse:
    return gw.ConnectResponse(
        session_added=gw.SessionAdded(summary=summary(session_id, blank=True), blank=True)
    )


def running(session_id: str) -> gw.ConnectResponse:
    return gw.ConnectResponse(session_status=gw.SessionStatus(session_id=session_id, running=True))


def test_a_stale_blank_list_never_reblanks_an_accepted_prompt() -> None:
    mirror = SessionList()
    mirror.apply_list([summary("s1", blank=True)])
    mirror.engaged("s1")  # the first prompt was accepted
    mirror.apply_list([summary("s1", blank=True)])  # a list read before it
    assert mirror.is_blank("s1") is False


def test_a_running_frame_ends_blank_even_before_the_row_arrives() -> None:
    mirror = SessionList()
    mirror.on_frame(running("s1"))
    mirror.on_frame(added("s1"))  # a late session_added says blank
    assert mirror.is_blank("s1") is False


def test_a_list_that_says_false_ends_blank_for_good() -> None:
    mirror = SessionList()
    mirror.on_frame(added("s1"))
    assert mirror.is_blank("s1") is True
    mirror.apply_list([summary("s1", blank=False)])
    mirror.on_frame(added("s1"))
    assert mirror.is_blank("s1") is False


def test_rows_are_most_recently_updated_first() -> None:
    mirror = SessionList()
    mirror.apply_list(
        [summary("old", blank=False, updated_s=1), summary("new", blank=True, updated_s=9)]
    )
    assert [row.id for row in mirror.rows()] == ["new", "old"]
