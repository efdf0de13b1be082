"""A unit that names the event kinds it reads (`kinds`) is passed the others
unapplied (folding.py), so each must be exactly what its fold reads: from
any state a run of arbitrary events reaches, an event of another kind gives
back the very same state."""

from __future__ import annotations

from typing import Any

from agenthost.sessionlog.v1 import events_pb2 as ev
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.planmode.projection_unit import PlanProjectionUnit
from services.projection.session_units import SESSION_UNITS
from services.projection.unit import ProjectionUnit, reads
from tests.support.fuzz import Pool, RequestDrawer

UNITS: list[ProjectionUnit[Any]] = [*SESSION_UNITS, PlanProjectionUnit()]
EVENT = ev.Event.DESCRIPTOR
KINDS = [field.name for field in EVENT.oneofs_by_name["body"].fields]


def test_every_unit_names_its_kinds_and_each_is_an_event_kind() -> None:
    for unit in UNITS:
        kinds = getattr(unit, "kinds", None)
        assert kinds, unit.key
        assert kinds <= set(KINDS), (unit.key, kinds - set(KINDS))


# No deadline: the property has no timing in it, and a busy machine has.
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_unit_is_not_changed_by_the_kinds_it_does_not_name(data: st.DataObject) -> None:
    drawer = RequestDrawer(data, Pool())
    run = [_event(drawer) for _ in range(data.draw(st.integers(0, 12), label="run"))]
    other = _event(drawer)
    for unit in UNITS:
        state = unit.init()
        for event in run:
            try:
                state = unit.apply(state, event)
            except Exception:  # an event the fold refuses: the engine drops the session
                continue
        if not reads(unit, other.WhichOneof("body")):
            assert unit.apply(state, other) is state, (unit.key, other.WhichOneof("body"))


def _event(drawer: RequestDrawer) -> ev.Event:
    event = drawer.message(EVENT)
    assert isinstance(event, ev.Event)  # the class the default pool holds for it
    return event
