"""Replies and frames are checked with the contract's own rules (the
protovalidate annotations in the protos) before the SDK uses them."""

from __future__ import annotations

import protovalidate
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.planmode.v1 import plan_mode_pb2 as pm
from agenthost.sessionlog.v1 import events_pb2
from google.protobuf.message import Message

from .errors import InvalidReplyError
from .history import well_formed
from .plan import UNAVAILABLE, PlanState, PlanValue

_validator = protovalidate.Validator()


def violations(message: Message) -> list[str]:
    return [f"{v.proto.rule_id}: {v.proto.message}" for v in _validator.collect_violations(message)]


def plan_value(value: gw.PlanModeValue) -> PlanValue:
    """A reply's plan value; InvalidReplyError when it breaks the schema
    (e.g. `pending == active`)."""
    broken = violations(value)
    if broken:
        raise InvalidReplyError(
            f"plan value breaks the contract: {'; '.join(broken)}", reason="INVALID_REPLY"
        )
    if not value.HasField("state"):
        return UNAVAILABLE
    state = value.state
    return PlanValue(PlanState(state.active, state.pending if state.HasField("pending") else None))


def outcome_name(outcome: int) -> str:
    """A SetPlanMode outcome: `committed`, `queued`, `cancelled`, `noop`."""
    name: str = pm.SetOutcome.Name(outcome)  # type: ignore[arg-type]
    return name.removeprefix("SET_OUTCOME_").lower()


def frame_event(frame: gw.SessionEvent, session_id: str) -> events_pb2.Event | None:
    """The event a `session_event` frame carries, or None when the frame is
    malformed: another session, seqs that disagree, no body, or an event
    that breaks the schema."""
    if frame.session_id != session_id or not frame.HasField("event"):
        return None
    event = frame.event
    if event.seq != frame.seq or not well_formed(event, session_id) or violations(event):
        return None
    return event


def valid_events(events: list[events_pb2.Event], session_id: str) -> list[events_pb2.Event]:
    return [e for e in events if well_formed(e, session_id) and not violations(e)]
