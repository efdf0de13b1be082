"""The plan state: the one type every side uses (the log's fold, plan mode,
the projection, the gateway, the SDKs' sessions), with its one converter to
and from each wire form: the `PlanModeState` message and the `plan`
projection value `{active, pending?}` (the same shape as JSON)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from agenthost.planmode.v1 import plan_mode_pb2


class InvalidPlanState(ValueError):
    """A plan state that breaks the contract (`pending` equal to `active`,
    or a value of the wrong shape)."""


@dataclass(frozen=True)
class PlanState:
    """`active` is the committed value (the last plan/mode of the log);
    `pending`, when not None, is the selected target waiting for the next
    model-request boundary, and then always differs from `active`."""

    active: bool = False
    pending: bool | None = None

    def __post_init__(self) -> None:
        if self.pending is not None and self.pending == self.active:
            raise InvalidPlanState("pending must differ from active")

    @property
    def is_pending(self) -> bool:
        """Whether a selection waits for the next boundary."""
        return self.pending is not None

    def selecting(self, target: bool) -> PlanState:
        """The state once `target` is selected: pending while it differs
        from the committed value (choosing the committed one cancels)."""
        return PlanState(self.active, None if target == self.active else target)

    def describe(self) -> str:
        """`off`, `on`, or `off → on (pending)`."""
        now = _on_off(self.active)
        if self.pending is None:
            return now
        return f"{now} → {_on_off(self.pending)} (pending)"

    # -- the wire ----------------------------------------------------------------------

    def view(self) -> dict[str, bool]:
        """The `plan` projection value: `{active, pending?}`."""
        view = {"active": self.active}
        if self.pending is not None:
            view["pending"] = self.pending
        return view

    @classmethod
    def from_view(cls, view: object) -> PlanState:
        """A `plan` projection value (decoded JSON); InvalidPlanState when it
        breaks the contract."""
        if not isinstance(view, Mapping):
            raise InvalidPlanState(f"not a plan value: {view!r}")
        active, pending = view.get("active"), view.get("pending")
        if not isinstance(active, bool) or not isinstance(pending, bool | None):
            raise InvalidPlanState(f"not a plan value: {dict(view)!r}")
        return cls(active, pending)

    def to_proto(self) -> plan_mode_pb2.PlanModeState:
        message = plan_mode_pb2.PlanModeState(active=self.active)
        if self.pending is not None:
            message.pending = self.pending
        return message

    @classmethod
    def from_proto(cls, message: plan_mode_pb2.PlanModeState) -> PlanState:
        """InvalidPlanState when it breaks the contract."""
        return cls(message.active, message.pending if message.HasField("pending") else None)


def _on_off(active: bool) -> str:
    return "on" if active else "off"
