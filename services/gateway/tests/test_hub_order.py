"""The gateway relays a session's projection values never ahead of its
events: a client sees `status: running false` only after the turn/end."""

from __future__ import annotations

from typing import Any, cast

from agenthost.projection.v1 import projection_pb2 as pj
from agenthost.sessionlog.v1 import events_pb2 as ev
from google.protobuf import struct_pb2

from services.gateway.hub import Connection, Frame, Hub
from services.gateway.kept_plans import KeptPlans

SESSION, ACCOUNT = "s-1", "alice"


def hub_with_a_client() -> tuple[Hub, Connection]:
    unused = cast(Any, None)  # no follower runs: events and changes are fed by hand
    hub = Hub(unused, unused, unused, unused, KeptPlans())
    hub.set_owner(SESSION, ACCOUNT)
    connection = Connection(ACCOUNT, "client", 0)
    hub.attach(connection)
    return hub, connection


def turn_event(seq: int, body: str) -> ev.Event:
    event = ev.Event(session_id=SESSION, seq=seq)
    if body == "turn_start":
        event.turn_start.turn_id = "t-1"
    else:
        event.turn_end.turn_id = "t-1"
        event.turn_end.reason = ev.TURN_END_REASON_COMPLETED
    return event


def status_change(seq: int, running: bool) -> pj.SessionProjectionChange:
    value = struct_pb2.Value()
    value.struct_value.update({"running": running})
    return pj.SessionProjectionChange(session_id=SESSION, key="status", value=value, seq=seq)


def received(connection: Connection) -> list[str]:
    kinds = []
    while not connection.frames.empty():
        frame = connection.frames.get_nowait()
        assert isinstance(frame, Frame)
        kind = str(frame.WhichOneof("frame"))
        if kind == "session_event":
            kind = str(frame.session_event.event.WhichOneof("body"))
        elif kind == "session_projection":
            kind = f"{frame.session_projection.key}@{frame.session_projection.seq}"
        kinds.append(kind)
    return kinds


async def test_a_change_that_comes_before_its_event_waits_for_it() -> None:
    hub, connection = hub_with_a_client()
    await hub._on_event(turn_event(0, "turn_start"))
    await hub._on_change(status_change(1, running=False))  # the projection was quicker
    assert received(connection) == ["turn_start", "session_status"]
    await hub._on_event(turn_event(1, "turn_end"))
    assert received(connection) == ["turn_end", "session_status", "status@1"]


async def test_a_change_behind_the_log_goes_at_once() -> None:
    hub, connection = hub_with_a_client()
    await hub._on_event(turn_event(0, "turn_start"))
    await hub._on_event(turn_event(1, "turn_end"))
    received(connection)
    await hub._on_change(status_change(1, running=False))
    assert received(connection) == ["status@1"]


async def test_a_session_this_gateway_saw_no_event_of_is_not_held() -> None:
    hub, connection = hub_with_a_client()
    await hub._on_change(status_change(7, running=False))
    assert received(connection) == ["status@7"]
