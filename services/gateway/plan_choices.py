"""Plan mode through the gateway: reads answered from the gateway's kept
plan states or the `plan` projection value (so PlanMode and the projection
never disagree), choices made through plan mode, and a prompt's plan
target, chosen before the prompt is sent and undone when the send is
refused. Every choice's seq is acknowledged to the kept plan states, so a
read right after it reflects it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol, TypeVar

from agenthost.planmode.v1 import plan_mode_pb2 as pm

from agenthost_core.plan import PlanState
from services.common.errors import DomainError
from services.planmode.projection_unit import PLAN_KEY
from services.projection.client import Block, view_from_value

from .kept_plans import KeptPlans

T = TypeVar("T")


class PlanModePeer(Protocol):
    """Plan mode as the gateway calls it (PlanModeClient over gRPC)."""

    async def get(self, session_id: str) -> pm.GetPlanModeResponse: ...

    async def set(
        self, session_id: str, active: bool, *, when_idle: bool = False
    ) -> pm.SetPlanModeResponse: ...


class ProjectionBlocks(Protocol):
    """The projection service's values (ProjectionClient)."""

    async def block(
        self,
        session_id: str,
        keys: Sequence[str] = (),
        *,
        min_seq: int = -1,
        within_s: float | None = None,
    ) -> Block: ...


class AgentLoader(Protocol):
    """Loading a session's agent (AgentLoads), which ends a turn a stopped
    runtime left open."""

    async def load(self, session_id: str) -> object: ...


class PlanRead(NamedTuple):
    # None: this deployment has no plan mode.
    state: PlanState | None
    seq: int


UNAVAILABLE = PlanRead(None, -1)


@dataclass(frozen=True)
class PlanChoices:
    # None: this deployment has no plan mode.
    plan: PlanModePeer | None
    kept: KeptPlans
    projections: ProjectionBlocks
    agents: AgentLoader

    async def read(self, session_id: str, at_least: int = -1) -> PlanRead:
        """The plan state as of `at_least` or later (a write the client saw)."""
        if self.plan is None:
            return UNAVAILABLE
        kept = await self.kept.read_soon(session_id, at_least)
        if kept is not None:
            return PlanRead(*kept)
        block = await self.projections.block(
            session_id, [PLAN_KEY], min_seq=self.kept.known_seq(session_id, at_least)
        )
        value = block.values.get(PLAN_KEY)
        if value is None:
            return PlanRead(None, block.as_of_seq)
        state = PlanState.from_view(view_from_value(value))
        self.kept.seed(session_id, state, block.as_of_seq)
        return PlanRead(state, block.as_of_seq)

    async def choose(self, session_id: str, active: bool) -> pm.SetPlanModeResponse | None:
        """A choice on an idle agent is one call to plan mode and one append:
        plan mode decides from the log, so the agent is not needed. Only while
        the log shows a turn open is the agent loaded first: the turn may be
        one a stopped runtime left open, which loading ends (the choice then
        commits instead of queueing). None: no plan mode here."""
        if self.plan is None:
            return None
        reply = await self._set(self.plan, session_id, active, when_idle=True)
        if reply.deferred:
            await self.agents.load(session_id)
            reply = await self._set(self.plan, session_id, active)
        return reply

    async def with_target(
        self, session_id: str, target: bool | None, send: Callable[[], Awaitable[T]]
    ) -> T:
        """`send` with plan mode set to `target` first (None: as it is); the
        choice is undone when `send` is refused."""
        if target is None or self.plan is None:
            return await send()
        before = PlanState.from_proto((await self.plan.get(session_id)).state)
        rollback = before.active if before.pending is None else before.pending
        await self._set(self.plan, session_id, target)
        try:
            return await send()
        except DomainError:
            await self._set(self.plan, session_id, rollback)
            raise

    async def _set(
        self, plan: PlanModePeer, session_id: str, active: bool, *, when_idle: bool = False
    ) -> pm.SetPlanModeResponse:
        reply = await plan.set(session_id, active, when_idle=when_idle)
        if not reply.deferred:
            self.kept.acknowledged(session_id, reply.as_of_seq)
        return reply
