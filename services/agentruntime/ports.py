"""What the runtime needs from plan mode.

The runtime calls plan mode at every boundary and from the exit tool and the
/plan command. Both the in-process controller and the gRPC client of the
plan-mode service are adapted to this protocol; a deployment without plan
mode passes None and the runtime runs without plan behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from agenthost.sessionlog.v1 import events_pb2


@dataclass(frozen=True)
class PlanCommandOutcome:
    ok: bool
    message: str
    # `/plan <message>`: the text to steer as the next user message.
    steer_text: str | None = None


class PlanModePort(Protocol):
    async def boundary_sections(
        self, session_id: str, committed: bool
    ) -> list[events_pb2.PromptSection]:
        """Apply a queued selection and return plan mode's prompt sections;
        when plan mode cannot answer, the sections of `committed` (the plan
        mode the runtime's fold of the log holds)."""
        ...

    async def is_active(self, session_id: str) -> bool: ...

    async def exit_plan_mode(self, session_id: str) -> None:
        """Commit the approved exit (no notice). Raises PLAN_MODE_INACTIVE."""
        ...

    async def run_plan_command(self, session_id: str, args: str | None) -> PlanCommandOutcome: ...
