"""The gateway's live side: one follower of each internal stream, fanned out
to the client connections of the account that owns each session.

Followers:
- the session log (every session, from the current end): session events,
  and the status frame each turn/start or turn/end implies, sent right after
  it, so a client never sees "idle" before the turn's end;
- the projection service (every session's changes): relayed as
  session_projection frames, the projection service being their only
  producer, never ahead of the session's events: a change at a seq this
  gateway has not relayed yet waits for that event (so `status` says idle
  only after the turn/end a client has seen); after a lost stream every
  client connection is ended, so clients resume with their cursors and read
  the values they missed;
- the live stream of every agent-runtime replica (runtimes.py): ephemeral
  text of running steps and commands, ordered against the logged records by
  LiveTexts.

Every event also goes to the gateway's kept plan states (kept_plans.py), which
answer `PlanMode` reads without a call.

Each reconnects on its own when the service behind it restarts; a client
that missed events repairs the gap from the log by seq, so nothing is lost
or doubled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import grpc
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.projection.v1 import projection_pb2 as pj
from agenthost.projection.v1 import projection_pb2_grpc
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2
from google.protobuf import struct_pb2

from agenthost_core.folds import running_after
from services.common.recent import Recent
from services.common.tasks import spawn
from services.sessionlog.port import CaughtUp, Heartbeat, SessionLogPort
from services.workspace.client import WorkspaceClient

from .kept_plans import KeptPlans
from .live import LiveTexts
from .runtimes import RESOLVE_EVERY_S, RuntimeReplicas

log = logging.getLogger("agenthost.gateway")

# Frames a slow client may have waiting before its stream is ended (it then
# reconnects with its cursors and catches up from the log).
CONNECTION_BUFFER = 10_000
RECONNECT_DELAYS_S = (0.1, 0.5, 2.0)
# Sessions whose last relayed seq the gateway remembers (the recently active).
RELAYED_KEPT = 10_000
# Sessions whose owner (or lack of one) the gateway remembers, the recently
# used first; a forgotten one is looked up again.
OWNERS_KEPT = 10_000

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
    # By session, the text frame of each live stream still waiting in
    # `frames`: the stream's next text joins it, so a client reading slower
    # than text arrives gets fewer, longer frames (nothing lost, nothing
    # reordered).
    _joinable: dict[str, dict[tuple[str, ...], Frame]] = field(default_factory=dict)

    def push(self, frame: Frame) -> None:
        if self.overflowed:
            return
        key = _live_key(frame)
        if key is None:
            self._end_joins(frame)  # what follows it must not move ahead of it
        else:
            waiting = self._joinable.get(key[0], {}).get(key)
            if waiting is not None and _join(waiting, frame):
                return
            frame = _copy(frame)  # its own: later text changes it (others got this one)
        try:
            self.frames.put_nowait(frame)
        except asyncio.QueueFull:
            self.close()
            return
        if key is not None:
            self._joinable.setdefault(key[0], {})[key] = frame

    async def next_frame(self, within_s: float) -> Frame | None:
        """The next frame (None: the stream ends), or TimeoutError after
        `within_s`. Not asyncio.wait_for: on Python 3.11 it runs every get as
        a task of its own (a cost per frame per stream, which the fan-out to
        many streams felt), and it can lose a cancel that lands as the frame
        arrives."""
        if self.frames.empty():
            async with asyncio.timeout(within_s):
                frame = await self.frames.get()
        else:
            frame = self.frames.get_nowait()
        key = None if frame is None else _live_key(frame)
        session = None if key is None else self._joinable.get(key[0])
        if session is not None and key is not None and session.get(key) is frame:
            del session[key]  # on its way: it no longer changes
            if not session:
                del self._joinable[key[0]]
        return frame

    def close(self) -> None:
        """End the stream (None); a client resumes from its cursors."""
        self.overflowed = True
        self._joinable.clear()
        if self.frames.full():
            self.frames = asyncio.Queue(1)
        self.frames.put_nowait(None)

    def _end_joins(self, frame: Frame) -> None:
        """No later text of `frame`'s session joins a frame queued before it."""
        kind = frame.WhichOneof("frame")
        session_id = getattr(getattr(frame, kind), "session_id", None) if kind else None
        if session_id is None:
            self._joinable.clear()
        else:
            self._joinable.pop(session_id, None)


def _live_key(frame: Frame) -> tuple[str, ...] | None:
    """The live stream a text frame belongs to (None: not live text)."""
    kind = frame.WhichOneof("frame")
    if kind == "assistant_delta":
        text = frame.assistant_delta
        return (text.session_id, text.turn_id, str(text.step), str(text.kind))
    if kind == "tool_output":
        output = frame.tool_output
        return (output.session_id, output.turn_id, output.call_id)
    return None


def _copy(frame: Frame) -> Frame:
    copied = Frame()
    copied.CopyFrom(frame)
    return copied


def _join(waiting: Frame, later: Frame) -> bool:
    """Append `later`'s text to the queued `waiting` when it follows on."""
    old = waiting.assistant_delta if waiting.HasField("assistant_delta") else waiting.tool_output
    new = later.assistant_delta if later.HasField("assistant_delta") else later.tool_output
    if old.offset + len(old.text) != new.offset:
        return False
    old.text += new.text
    return True


def projection_frame(session_id: str, key: str, value: struct_pb2.Value, seq: int) -> Frame:
    projection = gw.SessionProjection(session_id=session_id, key=key, value=value, seq=seq)
    return Frame(session_projection=projection)


class Hub:
    def __init__(
        self,
        log: SessionLogPort,
        runtime: RuntimeReplicas,
        projection: projection_pb2_grpc.ProjectionServiceStub,
        workspaces: WorkspaceClient,
        plans: KeptPlans,
    ) -> None:
        self._log = log
        self._plans = plans
        self._runtime = runtime
        self._projection = projection
        self._workspaces = workspaces
        self.texts = LiveTexts()
        self._connections: dict[str, set[Connection]] = {}
        self._owners: Recent[str, str | None] = Recent(OWNERS_KEPT)
        # The step each session runs now (from its step/start), for LiveTexts;
        # bounded too: a runtime that died mid-turn never sends its turn/end.
        self._steps: Recent[str, tuple[str, int]] = Recent(RELAYED_KEPT)
        self._tasks: list[asyncio.Task[None]] = []
        self.live = asyncio.Event()
        # Where the log follower resumes after losing its stream (None: the end).
        self._position: int | None = None
        self._projection_followed = False
        # The last event seq relayed per session (recently active ones), and
        # the projection frames that wait for a later event of theirs.
        self._relayed: OrderedDict[str, int] = OrderedDict()
        self._parked: dict[str, list[tuple[int, Frame]]] = {}

    # -- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        self._tasks = [
            spawn(self._forever("session log", self._follow_log), name="hub-log"),
            spawn(self._forever("projections", self._follow_projections), name="hub-projections"),
            spawn(self._follow_every_runtime(), name="hub-live"),
        ]
        async with asyncio.timeout(30):
            await self.live.wait()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.close_all()

    def close_all(self) -> None:
        """End every client stream (clients resume with their cursors)."""
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

    @contextlib.contextmanager
    def attached(self, connection: Connection) -> Iterator[Connection]:
        """The connection gets frames for the block's duration."""
        self.attach(connection)
        try:
            yield connection
        finally:
            self.detach(connection)

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
        for unowned in [s for s, a in self._owners.items() if a is None]:
            del self._owners[unowned]

    def detach(self, connection: Connection) -> None:
        self._connections.get(connection.account, set()).discard(connection)

    def known_owner(self, session_id: str) -> str | None:
        return self._owners.get(session_id)

    def set_owner(self, session_id: str, account: str) -> None:
        self._owners.remember(session_id, account)

    def broadcast(self, account: str, frame: Frame) -> None:
        for connection in list(self._connections.get(account, ())):
            connection.push(frame)

    async def owner(self, session_id: str) -> str | None:
        if session_id in self._owners:
            self._owners.move_to_end(session_id)
            return self._owners[session_id]
        found: str | None = None
        try:
            for account in list(self._connections):
                if await self._workspaces.owns_session(account, session_id):
                    found = account
                    break
        except Exception as error:  # workspace service down: ask again next time
            log.warning("could not find the owner of %s: %s", session_id, error)
            return None
        self._owners.remember(session_id, found)
        return found

    async def _send(self, session_id: str, *frames: Frame) -> None:
        account = await self.owner(session_id)
        if account is not None:
            for frame in frames:
                self.broadcast(account, frame)

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
        self._plans.on_event(event)
        deltas = self._closing_deltas(event)  # kept in step with the log either way
        released = self._released(session_id, event.seq)
        account = await self.owner(session_id)
        # The frames are built only for an account someone is connected as:
        # most events, appended where nobody watches, cost no copy.
        if account is not None and self._connections.get(account):
            for frame in [*deltas, *self._frames_of(event), *released]:
                self.broadcast(account, frame)

    def _released(self, session_id: str, seq: int) -> list[Frame]:
        """Note `seq` as relayed; the parked projection frames it lets go."""
        self._relayed[session_id] = seq
        self._relayed.move_to_end(session_id)
        if len(self._relayed) > RELAYED_KEPT:
            forgotten, _ = self._relayed.popitem(last=False)
            self._parked.pop(forgotten, None)
        parked = self._parked.pop(session_id, [])
        later = [(at, frame) for at, frame in parked if at > seq]
        if later:
            self._parked[session_id] = later
        return [frame for at, frame in parked if at <= seq]

    def _ahead_of_the_log(self, session_id: str, seq: int, frame: Frame) -> bool:
        """Park a projection frame whose event this gateway has not relayed yet
        (sessions it has seen no event of are not held: nothing to wait for)."""
        relayed = self._relayed.get(session_id)
        if relayed is None or seq <= relayed:
            return False
        self._parked.setdefault(session_id, []).append((seq, frame))
        return True

    def _frames_of(self, event: events_pb2.Event) -> list[Frame]:
        """The frames of the event itself (after its closing deltas)."""
        session_id = event.session_id
        frames = [
            Frame(session_event=gw.SessionEvent(session_id=session_id, seq=event.seq, event=event))
        ]
        running = running_after(event)
        if running is not None:
            frames.append(
                Frame(session_status=gw.SessionStatus(session_id=session_id, running=running))
            )
        return frames

    def _closing_deltas(self, event: events_pb2.Event) -> list[Frame]:
        """Keep LiveTexts in step with the log; the live frames owed before `event`."""
        session_id, kind = event.session_id, event.WhichOneof("body")
        step = self._steps.get(session_id)
        if kind == "step_start":
            self._steps.remember(session_id, (event.step_start.turn_id, event.step_start.step))
        elif kind == "assistant_message" and step is not None:
            message = event.assistant_message
            owed = self.texts.finish_step(session_id, *step, message.text, message.reasoning)
            return [Frame(assistant_delta=d) for d in owed]
        elif kind == "tool_call" and step is not None:
            self.texts.start_output(session_id, step[0], event.tool_call)
        elif kind == "tool_result" and step is not None:
            outputs = self.texts.finish_output(session_id, step[0], event.tool_result)
            return [Frame(tool_output=d) for d in outputs]
        elif kind == "turn_end":
            self._steps.pop(session_id, None)
            self.texts.finish_turn(session_id, event.turn_end.turn_id)
        return []

    async def _follow_projections(self) -> None:
        stream: AsyncIterator[pj.WatchAllProjectionsResponse] = (
            self._projection.WatchAllProjections(
                pj.WatchAllProjectionsRequest(batched=True), wait_for_ready=True
            )
        )
        async for reply in stream:
            if reply.HasField("live"):
                if self._projection_followed:
                    # Changes may have been missed while the stream was down.
                    self.close_all()
                self._projection_followed = True
                continue
            # One change to a message from a projection service that predates
            # `batched` (a rolling upgrade).
            changes = [reply.change] if reply.HasField("change") else reply.changes.changes
            for change in changes:
                await self._on_change(change)

    async def _on_change(self, change: pj.SessionProjectionChange) -> None:
        frame = projection_frame(change.session_id, change.key, change.value, change.seq)
        if not self._ahead_of_the_log(change.session_id, change.seq, frame):
            await self._send(change.session_id, frame)

    async def _follow_every_runtime(self) -> None:
        """One follower of live text per runtime replica known, started as
        replicas are learned or resolved, stopped as they go."""
        following: dict[str, asyncio.Task[None]] = {}
        try:
            while True:
                self._runtime.learned.clear()
                wanted = await self._runtime.replicas()
                for address in wanted - following.keys():
                    following[address] = spawn(
                        self._follow_live_at(address), name=f"hub-live-{address}"
                    )
                for address in following.keys() - wanted:
                    following.pop(address).cancel()
                for address in [a for a, task in following.items() if task.done()]:
                    del following[address]
                # A period for resolving again, or a new owner learned.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(RESOLVE_EVERY_S):
                        await self._runtime.learned.wait()
        finally:
            for task in following.values():
                task.cancel()
            await asyncio.gather(*following.values(), return_exceptions=True)

    async def _follow_live_at(self, address: str) -> None:
        """Follow one replica: one the target resolves to is waited for and
        followed again after each loss; an owner learned from a call only
        while it answers (a call sent to it again follows it again). A lost
        stream may mean a replica gone: its sessions are placed afresh."""
        attempt = 0
        while True:
            try:
                await self._follow_live(address, wait_for_ready=address in self._runtime.resolved)
                attempt, why = 0, "it ended"
            except grpc.aio.AioRpcError as error:
                attempt, why = attempt + 1, error.code().name
            self._runtime.lost(address)
            if address not in self._runtime.resolved:
                return
            delay = RECONNECT_DELAYS_S[min(attempt, len(RECONNECT_DELAYS_S) - 1)]
            log.warning("lost the live text of %s (%s); again in %ss", address, why, delay)
            await asyncio.sleep(delay)

    async def _follow_live(self, address: str, wait_for_ready: bool) -> None:
        stream: AsyncIterator[rt.WatchLiveResponse] = self._runtime.stub(address).WatchLive(
            rt.WatchLiveRequest(), wait_for_ready=wait_for_ready
        )
        async for reply in stream:
            if reply.HasField("assistant"):
                account = await self.owner(reply.assistant.session_id)
                text = self.texts.text(reply.assistant)
                if account is not None and text is not None:
                    self.broadcast(account, Frame(assistant_delta=text))
            else:
                account = await self.owner(reply.tool_output.session_id)
                output = self.texts.output(reply.tool_output)
                if account is not None and output is not None:
                    self.broadcast(account, Frame(tool_output=output))
