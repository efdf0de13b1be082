"""The `plan` projection unit: `{active, pending}` folded from the log alone.

A `/plan` command/run records the user's wanted state before the service
acts, so a cold refold (host restart, another tab) shows a selection that
still waits for a boundary without asking the plan-mode service.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from agenthost.sessionlog.v1 import events_pb2

from services.projection.unit import View

from .command import PLAN_COMMAND_NAME, wants_active

Event = events_pb2.Event


@dataclass(frozen=True)
class PlanUnitState:
    committed: bool = False
    # The state the last recorded /plan asked for, until plan/mode commits it.
    wanted: bool | None = None
    # The command that set `wanted`, and what was wanted before it: a failed
    # command (command/done error) undoes only its own selection.
    wanted_by: str = ""
    wanted_before: bool | None = None


INITIAL = PlanUnitState()


class PlanProjectionUnit:
    key = "plan"
    state_version = 1

    def init(self) -> PlanUnitState:
        return INITIAL

    def apply(self, state: PlanUnitState, event: Event) -> PlanUnitState:
        kind = event.WhichOneof("body")
        if kind == "command_run":
            return _on_command_run(state, event.command_run)
        if kind == "command_done":
            return _on_command_done(state, event.command_done)
        if kind == "plan_mode":
            return _changed(state, PlanUnitState(committed=event.plan_mode.active))
        return state

    def view(self, state: PlanUnitState) -> View:
        pending = state.wanted is not None and state.wanted != state.committed
        return {"active": state.committed, "pending": pending}

    def dump(self, state: PlanUnitState) -> bytes:
        return json.dumps(
            {
                "committed": state.committed,
                "wanted": state.wanted,
                "wanted_by": state.wanted_by,
                "wanted_before": state.wanted_before,
            },
            sort_keys=True,
        ).encode()

    def load(self, data: bytes) -> PlanUnitState:
        fields: dict[str, Any] = json.loads(data)
        return PlanUnitState(
            committed=bool(fields["committed"]),
            wanted=_optional_bool(fields["wanted"]),
            wanted_by=str(fields["wanted_by"]),
            wanted_before=_optional_bool(fields["wanted_before"]),
        )


def _on_command_run(state: PlanUnitState, run: events_pb2.CommandRun) -> PlanUnitState:
    # A run without recorded args carries no selection (older writers).
    if run.name != PLAN_COMMAND_NAME or not run.HasField("args"):
        return state
    selected = replace(
        state,
        wanted=wants_active(run.args),
        wanted_by=run.command_id,
        wanted_before=state.wanted,
    )
    return _changed(state, selected)


def _on_command_done(state: PlanUnitState, done: events_pb2.CommandDone) -> PlanUnitState:
    failed = done.kind == events_pb2.COMMAND_DONE_KIND_ERROR
    if not failed or not state.wanted_by or done.command_id != state.wanted_by:
        return state
    undone = replace(state, wanted=state.wanted_before, wanted_by="", wanted_before=None)
    return _changed(state, undone)


def _changed(state: PlanUnitState, new: PlanUnitState) -> PlanUnitState:
    """Keeps the same object when nothing changed, as the engine relies on."""
    return state if new == state else new


def _optional_bool(value: object) -> bool | None:
    return None if value is None else bool(value)
