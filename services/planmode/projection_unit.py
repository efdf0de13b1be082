"""The `plan` projection unit: the shape of PlanModeState, `{active,
pending?}`, folded from the log alone by the one plan fold, so a cold refold
(host restart, another tab) shows a selection that still waits for a boundary
exactly as the plan-mode service reports it."""

from __future__ import annotations

import json

from agenthost.sessionlog.v1 import events_pb2

from agenthost_core.folds import PLAN_KINDS, dump_state, fold_plan, load_plan
from agenthost_core.plan import PlanState
from services.projection.unit import View

PLAN_KEY = "plan"


class PlanProjectionUnit:
    key = PLAN_KEY
    # 2: the view became PlanModeState's shape and selections plan/selection events.
    # 3: the state is the plan state itself (what the model saw is not kept).
    state_version = 3
    kinds = PLAN_KINDS

    def init(self) -> PlanState:
        return PlanState()

    def apply(self, state: PlanState, event: events_pb2.Event) -> PlanState:
        return fold_plan(state, event)

    def view(self, state: PlanState) -> View:
        return state.view()

    def dump(self, state: PlanState) -> bytes:
        return dump_state(state)

    def load(self, data: bytes) -> PlanState:
        return load_plan(json.loads(data))
