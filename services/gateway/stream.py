"""The frames of one client's Connect stream: first, for each session the
client names with a cursor, what it missed (the logged events after the
cursor, the projection values as of then and the text so far of what runs
now), then the hub's live frames, with heartbeats while it is quiet.

A live event may arrive while the catch-up still reads the log: events the
catch-up already sent are skipped, and a gap between what was sent and a
live event (the hub delivered it before the log read ended) is filled from
the log, so the client gets every event once and in order."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from agenthost.gateway.v1 import gateway_pb2 as gw
from google.protobuf.timestamp_pb2 import Timestamp

from services.common.errors import InvalidArgument, SessionNotFound
from services.sessionlog.port import Direction, SessionLogPort

from .access import SessionAccess
from .hub import Connection, Frame, Hub, projection_frame
from .opening import Projections

# A reconnect whose cursor is further behind than this reopens the session.
MAX_CATCH_UP = 10_000
READ_BATCH = 1000


def heartbeat() -> Frame:
    now = Timestamp()
    now.GetCurrentTime()
    return Frame(heartbeat=now)


@dataclass
class StreamFrames:
    log: SessionLogPort
    access: SessionAccess
    projections: Projections
    hub: Hub
    heartbeat_s: float

    async def frames(self, connection: Connection, cursors: dict[str, int]) -> AsyncIterator[Frame]:
        """Everything after `connected`: catch-up per cursor, then live."""
        delivered: dict[str, int] = {}
        for session_id, cursor in sorted(cursors.items()):
            async for frame in self._catch_up(connection.account, session_id, cursor, delivered):
                yield frame
        async for frame in self.live(connection, delivered):
            yield frame

    async def _catch_up(
        self, account: str, session_id: str, cursor: int, delivered: dict[str, int]
    ) -> AsyncIterator[Frame]:
        try:
            await self.access.check(account, session_id)
            last_seq = (await self.log.get_session(session_id)).last_seq
        except (SessionNotFound, InvalidArgument):
            # Unknown and another account's read the same; a key the services
            # refuse never ends the stream of the other sessions.
            yield Frame(resync=gw.Resync(session_id=session_id, reason="unknown session"))
            return
        if cursor > last_seq or last_seq - cursor > MAX_CATCH_UP:
            yield Frame(
                resync=gw.Resync(session_id=session_id, reason="cursor too old or ahead of the log")
            )
            return
        async for frame in self._events_between(session_id, cursor, last_seq + 1):
            yield frame
        delivered[session_id] = last_seq
        for frame in await self._current_views(session_id, last_seq):
            yield frame

    async def _current_views(self, session_id: str, last_seq: int) -> list[Frame]:
        """What a resuming client may have missed besides events: the
        projection values as of `last_seq` (sent as events) or later (the
        higher seq wins on its side) and the text so far of what runs now."""
        frames = []
        block, _ = await self.projections.block_or_why(session_id, "resume", min_seq=last_seq)
        if block is not None:
            frames = [
                projection_frame(session_id, key, value, block.as_of_seq)
                for key, value in sorted(block.values.items())
            ]
        texts, outputs = self.hub.texts.snapshot(session_id)
        frames += [Frame(assistant_delta=text) for text in texts]
        frames += [Frame(tool_output=output) for output in outputs]
        return frames

    async def _events_between(
        self, session_id: str, after: int, before: int
    ) -> AsyncIterator[Frame]:
        """Session events with after < seq < before, read from the log."""
        while after + 1 < before:
            batch = (
                await self.log.read(
                    session_id,
                    from_seq=after + 1,
                    direction=Direction.FORWARD,
                    limit=min(READ_BATCH, before - after - 1),
                )
            ).events
            if not batch:
                return
            for event in batch:
                yield Frame(
                    session_event=gw.SessionEvent(session_id=session_id, seq=event.seq, event=event)
                )
            after = batch[-1].seq

    async def live(self, connection: Connection, delivered: dict[str, int]) -> AsyncIterator[Frame]:
        """The hub's frames after the catch-up, which sent each session's
        events through `delivered[session]`: an event sent already is
        skipped, one past a gap comes after the events of the gap."""
        while True:
            try:
                frame = await connection.next_frame(self.heartbeat_s)
            except TimeoutError:
                yield heartbeat()
                continue
            if frame is None:
                return
            if frame.HasField("session_event"):
                event = frame.session_event
                seen = delivered.get(event.session_id)
                if seen is not None and event.seq <= seen:
                    continue  # already sent during catch-up
                if seen is not None and event.seq > seen + 1:
                    async for missing in self._events_between(event.session_id, seen, event.seq):
                        yield missing
                delivered[event.session_id] = event.seq
            yield frame
