"""The `plan` projection unit: the shape of PlanModeState, `{active,
pending?}`, folded from the log alone by the one plan fold, so a cold refold
(host restart, another tab) shows a selection that still waits for a boundary
exactly as the plan-mode service reports it."""

from __future__ import annotations

import json

from agenthost.sessionlog.v1 import events_pb2

from agenthost_core.folds import PlanFold, dump_state, fold_plan, load_plan, plan_view
from services.projection.unit import View

PLAN_KEY = "plan"


class PlanProjectionUnit:
    key = PLAN_KEY
    # 2: the view became PlanModeState's shape and selections plan/selection events.
    state_version = 2

    def init(self) -> PlanFold:
        return PlanFold()

    def apply(self, state: PlanFold, event: events_pb2.Event) -> PlanFold:
        return fold_plan(state, event)

    def view(self, state: PlanFold) -> View:
        return plan_view(state)

    def dump(self, state: PlanFold) -> bytes:
        return dump_state(state)

    def load(self, data: bytes) -> PlanFold:
        return load_plan(json.loads(data))
