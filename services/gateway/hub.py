"""The gateway's live side: one follower of each internal stream, fanned out
to the client connections of the account that owns each session.

Followers: the session log (every session, from the current end), the
runtime's status stream and its question stream. Each reconnects on its own
when the service behind it restarts; a client that missed events repairs
the gap from the log by seq, so nothing is lost or doubled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.runtime.v1 import runtime_pb2_grpc
from agenthost.sessionlog.v1 import events_pb2
from google.protobuf import struct_pb2

from services.sessionlog.port import CaughtUp, Heartbeat, SessionLogPort
from services.workspace.client import WorkspaceClient

from .plan_cache import PlanCache, PlanView

log = logging.getLogger("agenthost.gateway")

# Frames a slow client may have waiting before its stream is ended (it then
# reconnects with its cursors and catches up from the log).
CONNECTION_BUFFER = 10_000
RECONNECT_DELAYS_S = (0.1, 0.5, 2.0)
PLAN_KEY = "plan"

Frame = gw.ConnectResponse


@dataclass(eq=False)
class Connection:
    account: str
    client_id: str
    generation: int
    frames: asyncio.Queue[Frame | None] = field(
        default_factory=lambda: asyncio.Queue(CONNECTION_BUFFER)
    )
    overflowed: bool = False

    def push(self, frame: Frame) -> None:
        if self.overflowed:
            return
        try:
            self.frames.put_nowait(frame)
        except asyncio.QueueFull:
            self.close()

    def close(self) -> None:
        """End the stream (None); a client resumes from its cursors."""
        self.overflowed = True
        if self.frames.full():
            self.frames = asyncio.Queue(1)
        self.frames.put_nowait(None)


def plan_frame(session_id: str, view: PlanView) -> Frame:
    value = struct_pb2.Value()
    value.struct_value.update(view.as_value())
    return Frame(
        session_projection=gw.SessionProjection(
            session_id=session_id, key=PLAN_KEY, value=value, seq=view.seq
        )
    )


class Hub:
    def __init__(
        self,
        log: SessionLogPort,
        runtime: runtime_pb2_grpc.AgentRuntimeServiceStub,
        workspaces: WorkspaceClient,
        plans: PlanCache,
        refresh_plan: Callable[[str], Awaitable[None]] | None,
    ) -> None:
        self._log = log
        self._runtime = runtime
        self._workspaces = workspaces
        self.plans = plans
        self._refresh_plan = refresh_plan
        self._connections: dict[str, set[Connection]] = {}
        self._owners: dict[str, str | None] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self.live = asyncio.Event()
        # Where the log follower resumes after losing its stream (None: the end).
        self._position: int | None = None

    # -- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._forever("session log", self._follow_log)),
            asyncio.create_task(self._forever("runtime status", self._follow_status)),
            asyncio.create_task(self._forever("questions", self._follow_questions)),
        ]
        await asyncio.wait_for(self.live.wait(), 30)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for connections in self._connections.values():
            for connection in connections:
                connection.close()

    async def _forever(self, name: str, follow: Callable[[], Awaitable[None]]) -> None:
        attempt = 0
        while True:
            try:
                await follow()
                attempt = 0
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the peer restarted or is not up yet
                delay = RECONNECT_DELAYS_S[min(attempt, len(RECONNECT_DELAYS_S) - 1)]
                log.warning("lost the %s stream (%s); again in %ss", name, error, delay)
                attempt += 1
                await asyncio.sleep(delay)

    # -- connections -------------------------------------------------------------

    def attach(self, connection: Connection) -> None:
        """Add a connection; an older generation of the same client is ended."""
        connections = self._connections.setdefault(connection.account, set())
        for superseded in [
            c
            for c in connections
            if c.client_id == connection.client_id and c.generation < connection.generation
        ]:
            superseded.close()
            connections.discard(superseded)
        connections.add(connection)
        # Sessions nobody owned may belong to this account.
        self._owners = {s: a for s, a in self._owners.items() if a is not None}

    def detach(self, connection: Connection) -> None:
        self._connections.get(connection.account, set()).discard(connection)

    def known_owner(self, session_id: str) -> str | None:
        return self._owners.get(session_id)

    def set_owner(self, session_id: str, account: str) -> None:
        self._owners[session_id] = account

    def broadcast(self, account: str, frame: Frame) -> None:
        for connection in list(self._connections.get(account, ())):
            connection.push(frame)

    async def owner(self, session_id: str) -> str | None:
        if session_id in self._owners:
            return self._owners[session_id]
        found: str | None = None
        try:
            for account in list(self._connections):
                if await self._workspaces.find_session_workspace(account, session_id):
                    found = account
                    break
        except Exception as error:  # workspace service down: ask again next time
            log.warning("could not find the owner of %s: %s", session_id, error)
            return None
        self._owners[session_id] = found
        return found

    async def _send(self, session_id: str, frame: Frame) -> None:
        account = await self.owner(session_id)
        if account is not None:
            self.broadcast(account, frame)

    def announce_plan(self, account: str, session_id: str, view: PlanView | None) -> None:
        if view is not None:
            self.broadcast(account, plan_frame(session_id, view))

    # -- followers -------------------------------------------------------------------

    async def _follow_log(self) -> None:
        stream = self._log.subscribe_all(
            after_position=self._position or 0, from_end=self._position is None, heartbeat_s=5.0
        )
        async for item in stream:
            if isinstance(item, CaughtUp):
                self._position = item.position if self._position is None else self._position
                self.live.set()
            elif not isinstance(item, Heartbeat):
                await self._on_event(item)
                self._position = item.position

    async def _on_event(self, event: events_pb2.Event) -> None:
        session_id = event.session_id
        await self._send(
            session_id,
            Frame(session_event=gw.SessionEvent(session_id=session_id, seq=event.seq, event=event)),
        )
        kind = event.WhichOneof("body")
        if kind == "plan_mode":
            view = self.plans.committed(session_id, event.plan_mode.active, event.seq)
            if view is not None:
                await self._send(session_id, plan_frame(session_id, view))
        elif kind == "command_done" and self._refresh_plan is not None:
            # A /plan may have queued or cancelled a selection the log cannot show.
            try:
                await self._refresh_plan(session_id)
            except Exception as error:  # plan mode is down: the next read asks again
                log.warning("could not refresh the plan state of %s: %s", session_id, error)
                self.plans.forget(session_id)

    async def _follow_status(self) -> None:
        async for reply in self._runtime.WatchStatus(rt.WatchStatusRequest(), wait_for_ready=True):
            status = reply.status
            await self._send(
                status.session_id,
                Frame(
                    session_status=gw.SessionStatus(
                        session_id=status.session_id, running=status.running
                    )
                ),
            )

    async def _follow_questions(self) -> None:
        stream: AsyncIterator[rt.WatchQuestionsResponse] = self._runtime.WatchQuestions(
            rt.WatchQuestionsRequest(), wait_for_ready=True
        )
        async for reply in stream:
            if reply.HasField("asked"):
                await self._send(reply.asked.session_id, Frame(question=reply.asked))
            else:
                closed = reply.answered
                await self._send(
                    closed.session_id,
                    Frame(
                        question_closed=gw.QuestionClosed(
                            session_id=closed.session_id, question_id=closed.question_id
                        )
                    ),
                )
