"""Pure decisions of the plan-mode controller: what a selection means given
the folded log, and what a switch records."""

from __future__ import annotations

import enum

from agenthost.sessionlog.v1 import events_pb2

from agenthost_core.folds import PLAN_POLICY_SECTION_ID
from agenthost_core.plan import PlanState

from .config import PlanModeConfig
from .events import plan_mode_event, plan_selection_event, switch_notice_event

# Where the policy sits among the system-prompt sections.
PLAN_POLICY_ORDER = 50


class SetAction(enum.Enum):
    COMMIT = "commit"
    QUEUE = "queue"
    CANCEL = "cancel"
    NOOP = "noop"


def decide_set(plan: PlanState, turn_open: bool, active: bool) -> SetAction:
    """The outcome table of Set (DESIGN.md, plan-mode)."""
    waiting = plan.pending
    if waiting is not None and active == plan.active:
        return SetAction.CANCEL
    if turn_open:
        effective = plan.active if waiting is None else waiting
        return SetAction.NOOP if active == effective else SetAction.QUEUE
    # Idle: no boundary is coming before the next prompt, so commit now.
    return SetAction.NOOP if active == plan.active else SetAction.COMMIT


def set_events(
    model_saw_plan: bool | None, action: SetAction, active: bool
) -> list[events_pb2.Event]:
    """What a decided Set records: the switch when committing, the selection
    (or the reverting one) when it waits for a boundary, nothing for a noop."""
    if action is SetAction.COMMIT:
        return switch_events(model_saw_plan, active, by_user=True)
    if action in (SetAction.QUEUE, SetAction.CANCEL):
        return [plan_selection_event(active)]
    return []


def switch_events(
    model_saw_plan: bool | None, active: bool, *, by_user: bool
) -> list[events_pb2.Event]:
    """plan/mode, plus a notice when the user's change contradicts what the
    last request showed the model (`model_saw_plan`: None before the first
    request; never for the exit tool, which the model itself asked for)."""
    events = [plan_mode_event(active)]
    model_saw_other = model_saw_plan is not None and model_saw_plan != active
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
