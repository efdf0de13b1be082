"""A test driver that writes to the real session log what the agent runtime
would, plus small readers of the log."""

from __future__ import annotations

from dataclasses import dataclass

from agenthost.sessionlog.v1 import events_pb2

from services.planmode.controller import BoundaryResult, PlanModeController
from services.planmode.tests.builders import request_header, turn_end, turn_start
from services.sessionlog.port import SessionLogPort

Event = events_pb2.Event


@dataclass
class RuntimeDriver:
    """Turns and model requests of one session, as the runtime records them."""

    log: SessionLogPort
    controller: PlanModeController
    session_id: str

    async def start_turn(self) -> None:
        await self.log.append(self.session_id, [turn_start()])

    async def end_turn(self) -> None:
        await self.log.append(self.session_id, [turn_end()])

    async def model_request(self) -> BoundaryResult:
        """The boundary, then the request header built with its sections."""
        boundary = await self.controller.apply_at_boundary(self.session_id)
        await self.log.append(self.session_id, [request_header(boundary.sections)])
        return boundary


async def read_all(log: SessionLogPort, session_id: str, after_seq: int = -1) -> list[Event]:
    result = await log.read(session_id, from_seq=after_seq + 1, limit=100_000)
    return result.events


async def last_seq(log: SessionLogPort, session_id: str) -> int:
    return (await log.get_session(session_id)).last_seq


async def plan_mode_values(log: SessionLogPort, session_id: str) -> list[bool]:
    events = await read_all(log, session_id)
    return [e.plan_mode.active for e in events if e.HasField("plan_mode")]


async def notices(log: SessionLogPort, session_id: str) -> list[str]:
    events = await read_all(log, session_id)
    return [
        e.user_message.text
        for e in events
        if e.HasField("user_message") and e.user_message.source.form == "notice"
    ]
