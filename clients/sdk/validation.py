"""Replies and frames are checked with the contract's own rules (the
protovalidate annotations in the protos) before the SDK uses them."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.planmode.v1 import plan_mode_pb2 as pm
from agenthost.sessionlog.v1 import events_pb2
from google.protobuf.message import Message

from agenthost_core.folds import APPROVAL_POLICIES, ORIGIN_BUILT_IN, SANDBOXES
from agenthost_core.plan import InvalidPlanState

from .errors import INVALID_REPLY, InvalidReplyError
from .history import well_formed
from .plan import UNAVAILABLE, PlanState, PlanValue

if TYPE_CHECKING:
    import protovalidate


@functools.cache
def _validator() -> protovalidate.Validator:
    # protovalidate loads with the first message checked, not with the SDK:
    # a command that checks none (`agenthost workspace list`) never loads it.
    import protovalidate

    return protovalidate.Validator()


def violations(message: Message) -> list[str]:
    """The contract rules `message` breaks, as text."""
    found = _validator().collect_violations(message)
    return [f"{v.proto.rule_id}: {v.proto.message}" for v in found]


def plan_value(value: gw.PlanModeValue) -> PlanValue:
    """A reply's plan value; InvalidReplyError when it breaks the schema
    (e.g. `pending == active`)."""
    broken = violations(value)
    if broken:
        raise InvalidReplyError(
            f"plan value breaks the contract: {'; '.join(broken)}", reason=INVALID_REPLY
        )
    if not value.HasField("state"):
        return UNAVAILABLE
    return PlanValue(PlanState.from_proto(value.state))


def plan_value_of_view(view: Any) -> PlanValue:
    """A `plan` projection value ({active, pending?}, PlanModeState's shape)."""
    try:
        return PlanValue(PlanState.from_view(view))
    except InvalidPlanState as error:
        raise InvalidReplyError(
            f"plan value breaks the contract ({error}): {view!r}", reason=INVALID_REPLY
        ) from None


def sandbox_value(view: Any) -> str:
    """The sandbox of a `settings` projection value."""
    return _one_of(view, "sandbox", SANDBOXES.values())


def approvals_value(view: Any) -> str:
    """The approval policy of a `settings` projection value."""
    return _one_of(view, "approvals", APPROVAL_POLICIES.values())


def model_value(view: Any) -> str:
    """The model of a `settings` projection value ("" is the default model)."""
    value = view.get("model", "") if isinstance(view, dict) else None
    if not isinstance(value, str):
        raise InvalidReplyError(f"settings value breaks the contract: {view!r}")
    return value


def origin_value(view: Any) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """Where a `settings` projection value came from: its origin
    ("built-in" from a deployment that says none), sources and problems."""
    if not isinstance(view, dict):
        raise InvalidReplyError(f"settings value breaks the contract: {view!r}")
    origin, sources, problems = (
        view.get("origin", ORIGIN_BUILT_IN),
        view.get("sources", []),
        view.get("problems", []),
    )
    if not isinstance(origin, str) or not all(
        isinstance(items, list) and all(isinstance(item, str) for item in items)
        for items in (sources, problems)
    ):
        raise InvalidReplyError(f"settings value breaks the contract: {view!r}")
    return origin, tuple(sources), tuple(problems)


def _one_of(view: Any, key: str, names: Any) -> str:
    value = view.get(key) if isinstance(view, dict) else None
    if value not in set(names):
        raise InvalidReplyError(f"settings value breaks the contract: {view!r}")
    return str(value)


def wire_sandbox(name: str) -> Any:
    """The wire value of a sandbox name; ValueError for an unknown one."""
    return _wire(SANDBOXES, name, "sandbox")


def wire_approvals(name: str) -> Any:
    """The wire value of an approval policy name; ValueError for an unknown one."""
    return _wire(APPROVAL_POLICIES, name, "approval policy")


def _wire(names: dict[Any, str], name: str, what: str) -> Any:
    for value, known in names.items():
        if known == name:
            return value
    raise ValueError(f"unknown {what} {name!r}: one of {', '.join(names.values())}")


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
    """The events of `events` that a session may hold."""
    return [e for e in events if well_formed(e, session_id) and not violations(e)]
