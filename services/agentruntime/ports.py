"""What the runtime needs from plan mode.

The runtime calls plan mode at every boundary and from the exit tool and the
/plan command. Both the in-process controller and the gRPC client of the
plan-mode service are adapted to this protocol; a deployment without plan
mode passes None and the runtime runs without plan behaviour.
"""

from __future__ import annotations

from collections.abc import Sequence
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
        self, session_id: str, committed: bool, lease_token: int | None = None
    ) -> list[events_pb2.PromptSection]:
        """Apply a queued selection (appended under the runtime's session
        `lease_token`) and return plan mode's prompt sections; when plan mode
        cannot answer, the sections of `committed` (the plan mode the
        runtime's fold of the log holds)."""
        ...

    async def is_active(self, session_id: str) -> bool: ...

    async def exit_plan_mode(self, session_id: str, lease_token: int | None = None) -> None:
        """Commit the approved exit (no notice) under the runtime's session
        `lease_token`. Raises PLAN_MODE_INACTIVE, or LEASE_LOST."""
        ...

    async def run_plan_command(self, session_id: str, args: str | None) -> PlanCommandOutcome: ...


class WorkspaceMembersPort(Protocol):
    """Which sessions share a session's workspace (the workspace service,
    which knows memberships per account)."""

    async def workspace_members(self, session_id: str) -> tuple[str, Sequence[str]]:
        """The workspace's path and its other sessions; ("", []) when none."""
        ...
