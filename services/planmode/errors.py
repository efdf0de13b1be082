"""Plan-mode domain errors (mapped to gRPC by the service runtime)."""

from __future__ import annotations

from services.common.errors import FailedPrecondition


class PlanModeInactive(FailedPrecondition):
    """exit_plan_mode was called while the session is not in plan mode."""

    REASON = "PLAN_MODE_INACTIVE"

    def __init__(self, session_id: str) -> None:
        super().__init__(
            "PLAN_MODE_INACTIVE",
            f"session {session_id!r} is not in plan mode",
            session_id=session_id,
        )
