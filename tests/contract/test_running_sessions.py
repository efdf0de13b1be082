"""Listing the sessions with an open turn (what a starting runtime recovers),
on every backend."""

from __future__ import annotations

from agenthost.sessionlog.v1 import events_pb2 as ev

from services.sessionlog.domain import SessionLog
from tests.support.events import turn_start, user


def turn_end(turn_id: str = "t") -> ev.Event:
    return ev.Event(turn_end=ev.TurnEnd(turn_id=turn_id, reason=ev.TURN_END_REASON_COMPLETED))


async def test_running_only_lists_the_sessions_whose_turn_is_open(log: SessionLog) -> None:
    for session_id in ("idle", "open", "ended", "lazy", "other-open"):
        await log.create_session(session_id, "/w")
    await log.append("idle", [user("hi")])
    await log.append("open", [turn_start(), user("go")])
    await log.append("ended", [turn_start(), user("go"), turn_end()])
    await log.append("other-open", [turn_start()])

    running, token = await log.list_sessions(running_only=True)
    assert sorted(s.id for s in running) == ["open", "other-open"] and token == ""
    only, _ = await log.list_sessions(session_ids=["open", "idle"], running_only=True)
    assert [s.id for s in only] == ["open"]
    first, token = await log.list_sessions(page_size=1, running_only=True)
    second, last = await log.list_sessions(page_size=1, page_token=token, running_only=True)
    assert sorted(s.id for s in first + second) == ["open", "other-open"] and last == ""

    await log.append("open", [turn_end()])
    assert [s.id for s in (await log.list_sessions(running_only=True))[0]] == ["other-open"]
