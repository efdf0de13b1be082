"""A client that reads slower than live text arrives gets the same text in
fewer frames: a stream's text joins its frame still waiting to be sent,
never one already on its way, and never past another frame of the session."""

from __future__ import annotations

from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.gateway.hub import Connection, Frame

WAIT_S = 5.0


def text(session: str, offset: int, piece: str, step: int = 1) -> Frame:
    delta = rt.AssistantDelta(session_id=session, turn_id="t", step=step, offset=offset, text=piece)
    return Frame(assistant_delta=delta)


def event(session: str) -> Frame:
    return Frame(session_event=gw.SessionEvent(session_id=session, seq=1, event=ev.Event()))


async def queued(connection: Connection) -> list[str]:
    """What the connection sends now, one line a frame."""
    shown = []
    while not connection.frames.empty():
        frame = await connection.next_frame(WAIT_S)
        assert frame is not None
        if frame.HasField("assistant_delta"):
            delta = frame.assistant_delta
            shown.append(f"{delta.session_id} text@{delta.offset}:{delta.text}")
        else:
            shown.append(f"{frame.session_event.session_id} event")
    return shown


async def test_text_waiting_to_be_sent_is_joined_into_one_frame() -> None:
    connection = Connection("alice", "c", 1)
    for offset, piece in ((0, "Hel"), (3, "lo, "), (7, "world")):
        connection.push(text("a", offset, piece))
    assert await queued(connection) == ["a text@0:Hello, world"]


async def test_a_frame_on_its_way_is_never_changed() -> None:
    connection = Connection("alice", "c", 1)
    connection.push(text("a", 0, "Hel"))
    sent = await connection.next_frame(WAIT_S)
    connection.push(text("a", 3, "lo"))

    assert sent is not None and sent.assistant_delta.text == "Hel"
    assert await queued(connection) == ["a text@3:lo"]


async def test_text_never_moves_ahead_of_its_sessions_other_frames() -> None:
    connection = Connection("alice", "c", 1)
    connection.push(text("a", 0, "one "))
    connection.push(text("b", 0, "other "))
    connection.push(event("a"))
    connection.push(text("a", 4, "two"))
    connection.push(text("b", 6, "session"))
    assert await queued(connection) == [
        "a text@0:one ",
        "b text@0:other session",
        "a event",
        "a text@4:two",
    ]


async def test_text_that_does_not_follow_on_is_not_joined() -> None:
    connection = Connection("alice", "c", 1)
    connection.push(text("a", 0, "one"))
    connection.push(text("a", 0, "answer", step=2))
    connection.push(text("a", 9, "gap"))
    assert await queued(connection) == ["a text@0:one", "a text@0:answer", "a text@9:gap"]


async def test_clients_of_one_account_each_get_all_the_text() -> None:
    fast, slow = Connection("alice", "c1", 1), Connection("alice", "c2", 1)
    first = text("a", 0, "Hel")
    fast.push(first)
    slow.push(first)
    assert await queued(fast) == ["a text@0:Hel"]
    second = text("a", 3, "lo")
    fast.push(second)
    slow.push(second)
    assert await queued(fast) == ["a text@3:lo"]
    assert await queued(slow) == ["a text@0:Hello"]
