"""PlanModePort over the plan-mode service (remote) or its controller (embedded)."""

from __future__ import annotations

import logging

from agenthost.sessionlog.v1 import events_pb2

from services.common.errors import DomainError
from services.planmode.client import PlanModeClient
from services.planmode.config import PlanModeConfig
from services.planmode.controller import DEFAULT_CONFIG, PlanModeController
from services.planmode.decisions import policy_sections

from .ports import PlanCommandOutcome

log = logging.getLogger("agenthost.runtime")


class RemotePlanMode:
    """The runtime's view of the plan-mode service.

    A boundary never blocks the step: if plan mode cannot be reached, the step
    runs with the sections of the plan mode committed in the log (a warning is
    logged) and a selection stays pending in the log for the next boundary."""

    def __init__(self, client: PlanModeClient, config: PlanModeConfig = DEFAULT_CONFIG) -> None:
        self.client = client
        self.config = config

    async def boundary_sections(
        self, session_id: str, committed: bool, lease_token: int | None = None
    ) -> list[events_pb2.PromptSection]:
        try:
            reply = await self.client.apply_at_boundary(session_id, lease_token)
        except Exception as error:  # the step must run whatever plan mode's state
            log.warning(
                "plan-mode boundary failed (%s); step runs with the committed plan mode",
                error,
                extra={"session_id": session_id, "error": str(error)},
            )
            return policy_sections(self.config, committed)
        return list(reply.sections)

    async def is_active(self, session_id: str) -> bool:
        return (await self.client.get(session_id)).state.active

    async def exit_plan_mode(self, session_id: str, lease_token: int | None = None) -> None:
        await self.client.exit_plan_mode(session_id, lease_token)

    async def run_plan_command(self, session_id: str, args: str | None) -> PlanCommandOutcome:
        reply = await self.client.run_plan_command(session_id, args)
        return PlanCommandOutcome(
            reply.ok, reply.message, reply.steer_text if reply.HasField("steer_text") else None
        )


class EmbeddedPlanMode:
    """The same port over an in-process controller (tests, single-process tools)."""

    def __init__(self, controller: PlanModeController) -> None:
        self.controller = controller

    async def boundary_sections(
        self, session_id: str, committed: bool, lease_token: int | None = None
    ) -> list[events_pb2.PromptSection]:
        return (await self.controller.apply_at_boundary(session_id, lease_token)).sections

    async def is_active(self, session_id: str) -> bool:
        return (await self.controller.get(session_id)).state.active

    async def exit_plan_mode(self, session_id: str, lease_token: int | None = None) -> None:
        await self.controller.exit_plan_mode(session_id, lease_token)

    async def run_plan_command(self, session_id: str, args: str | None) -> PlanCommandOutcome:
        try:
            result = await self.controller.run_plan_command(session_id, args)
        except DomainError as error:
            return PlanCommandOutcome(False, error.message)
        return PlanCommandOutcome(result.ok, result.message, result.steer_text)
