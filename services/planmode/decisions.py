"""Pure decisions of the plan-mode controller: what a selection means given
the folded log and the stored pending selection, and what a switch records."""

from __future__ import annotations

import enum

from agenthost.sessionlog.v1 import events_pb2

from .config import PlanModeConfig
from .events import plan_mode_event, switch_notice_event
from .fold import PLAN_POLICY_SECTION_ID, PlanLogState
from .pending_store import PendingSelection

# Where the policy sits among the system-prompt sections.
PLAN_POLICY_ORDER = 50


class SetAction(enum.Enum):
    COMMIT = "commit"
    QUEUE = "queue"
    CANCEL = "cancel"
    NOOP = "noop"


def waiting_target(log: PlanLogState, stored: PendingSelection | None) -> bool | None:
    """The selection that still waits for a boundary, or None.

    A stored selection no longer waits once a plan/mode was recorded after it
    was made, or when it equals the committed value (a net-zero leftover)."""
    if stored is None or stored.queued_at_seq < log.committed_seq:
        return None
    return None if stored.active == log.committed else stored.active


def decide_set(log: PlanLogState, waiting: bool | None, active: bool) -> SetAction:
    """The outcome table of Set (DESIGN.md, plan-mode)."""
    if waiting is not None and active == log.committed:
        return SetAction.CANCEL
    if log.turn_open:
        effective = log.committed if waiting is None else waiting
        return SetAction.NOOP if active == effective else SetAction.QUEUE
    # Idle: no boundary is coming before the next prompt, so commit now.
    return SetAction.NOOP if active == log.committed else SetAction.COMMIT


def switch_events(log: PlanLogState, active: bool, *, by_user: bool) -> list[events_pb2.Event]:
    """plan/mode, plus a notice when the user's change contradicts what the
    last request showed the model (never before the first request, never for
    the exit tool, which the model itself asked for)."""
    events = [plan_mode_event(active)]
    model_saw_other = log.header_plan is not None and log.header_plan != active
    if by_user and model_saw_other:
        events.append(switch_notice_event(active))
    return events


def policy_sections(config: PlanModeConfig, active: bool) -> list[events_pb2.PromptSection]:
    """Inactive contributes nothing (no tokens)."""
    if not active:
        return []
    section = events_pb2.PromptSection(
        id=PLAN_POLICY_SECTION_ID, order=PLAN_POLICY_ORDER, text=config.section
    )
    return [section]
