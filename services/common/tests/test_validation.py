"""Requests are checked against their rules through protobuf-py
(validation.py): whatever a request holds, the violations found are the
ones protovalidate finds reading the request in place, field path and
rule included, for every request of every service."""

from __future__ import annotations

import uuid

import protovalidate
import pytest
from agenthost.gateway.v1 import gateway_pb2
from agenthost.planmode.v1 import plan_mode_pb2
from agenthost.projection.v1 import projection_pb2
from agenthost.runtime.v1 import runtime_pb2
from agenthost.sessionlog.v1 import events_pb2 as ev
from agenthost.sessionlog.v1 import session_log_pb2
from agenthost.workspace.v1 import workspace_pb2
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.common.validation import RequestRules, described, violations_of
from tests.support.fuzz import Pool, RequestDrawer

REQUESTS: dict[str, Descriptor] = {
    method.input_type.full_name: method.input_type
    for module in (
        gateway_pb2,
        plan_mode_pb2,
        projection_pb2,
        runtime_pb2,
        session_log_pb2,
        workspace_pb2,
    )
    for service in module.DESCRIPTOR.services_by_name.values()
    for method in service.methods
}
in_place = protovalidate.Validator()
# Every request read as protobuf-py, however small (the service reads small
# ones in place).
rules = RequestRules(in_place_bytes=-1)


def found_in_place(request: Message) -> list[tuple[str, str]]:
    return described(in_place.collect_violations(request))


@pytest.mark.parametrize("name", sorted(REQUESTS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_request_breaks_the_same_rules_as_read_in_place(
    name: str, data: st.DataObject
) -> None:
    request = RequestDrawer(data, Pool()).message(REQUESTS[name])
    # The same violations; a map's entries come in no set order.
    assert sorted(rules.violations(request)) == sorted(found_in_place(request))


def test_a_long_append_names_each_broken_event() -> None:
    good = ev.Event(turn_start=ev.TurnStart(turn_id="t"))
    events = [good] * 100
    events[3] = ev.Event()  # no body
    events[70] = ev.Event(id="not an id!", turn_start=ev.TurnStart(turn_id="t" * 200))
    request = session_log_pb2.AppendRequest(session_id=str(uuid.uuid4()), events=events)
    broken = violations_of(request)
    assert [path for path, _ in broken] == [
        "events[3].body",
        "events[70].id",
        "events[70].turn_start.turn_id",
    ]
    assert broken == found_in_place(request)
    assert (
        violations_of(session_log_pb2.AppendRequest(session_id=str(uuid.uuid4()), events=[good]))
        == []
    )
