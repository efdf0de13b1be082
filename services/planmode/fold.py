"""What the plan-mode controller needs to know about a session's log.

A pure, incremental fold: the controller keeps one `PlanLogState` per session
and folds only the events appended since its `last_seq`, so a call never
refolds the log from seq 0.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace

from agenthost.sessionlog.v1 import events_pb2

Event = events_pb2.Event

# The id of the system-prompt section plan mode contributes while active.
PLAN_POLICY_SECTION_ID = "plan:policy"


@dataclass(frozen=True)
class PlanLogState:
    # The value of the last plan/mode event; False when there is none.
    committed: bool = False
    # The seq of that plan/mode event (-1 when none): a selection queued before
    # it is outdated, whichever path made the commit.
    committed_seq: int = -1
    # A turn/start came after the last turn/end: selections wait for a boundary.
    turn_open: bool = False
    # Whether the last request/header carried the plan policy; None before any
    # request, when there is no model view to notify about.
    header_plan: bool | None = None
    last_seq: int = -1

    def dump(self) -> bytes:
        return json.dumps(
            {
                "committed": self.committed,
                "committed_seq": self.committed_seq,
                "turn_open": self.turn_open,
                "header_plan": self.header_plan,
                "last_seq": self.last_seq,
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def load(cls, data: bytes) -> PlanLogState:
        fields = json.loads(data)
        return cls(
            committed=bool(fields["committed"]),
            committed_seq=int(fields["committed_seq"]),
            turn_open=bool(fields["turn_open"]),
            header_plan=None if fields["header_plan"] is None else bool(fields["header_plan"]),
            last_seq=int(fields["last_seq"]),
        )


def apply_event(state: PlanLogState, event: Event) -> PlanLogState:
    """The state after one more event."""
    kind = event.WhichOneof("body")
    if kind == "plan_mode":
        state = replace(state, committed=event.plan_mode.active, committed_seq=event.seq)
    elif kind == "turn_start":
        state = replace(state, turn_open=True)
    elif kind == "turn_end":
        state = replace(state, turn_open=False)
    elif kind == "request_header":
        state = replace(state, header_plan=shows_plan_policy(event.request_header))
    return replace(state, last_seq=event.seq)


def fold_events(state: PlanLogState, events: Iterable[Event]) -> PlanLogState:
    """The state after a batch of events, in log order."""
    for event in events:
        state = apply_event(state, event)
    return state


def shows_plan_policy(header: events_pb2.RequestHeader) -> bool:
    return any(section.id == PLAN_POLICY_SECTION_ID for section in header.sections)
