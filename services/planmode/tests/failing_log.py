"""Failure injection around the real session log: appends fail while an
outage is on, everything else reaches the log unchanged. It counts the loads,
reads and appends that reach the log (round trips a service would make)."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Sequence

from agenthost.sessionlog.v1 import events_pb2, session_log_pb2

from agenthost_core.folds import SessionState
from services.common.errors import Unavailable
from services.sessionlog.leases import Lease
from services.sessionlog.port import (
    DEFAULT_HEARTBEAT_S,
    DEFAULT_MESSAGE_LIMIT,
    AppendResult,
    BatchItem,
    Direction,
    Event,
    ReadResult,
    SessionLogPort,
    SessionSummary,
    StoredImage,
    SubscriptionItem,
    TailPage,
)


class AppendOutage:
    def __init__(self, log: SessionLogPort) -> None:
        self._log = log
        self.on = False
        self.calls: Counter[str] = Counter()

    async def append(
        self,
        session_id: str,
        events: Sequence[Event],
        expected_last_seq: int | None = None,
        *,
        lease_token: int | None = None,
    ) -> AppendResult:
        if self.on:
            raise Unavailable("SESSION_LOG_UNAVAILABLE", "the session log is unreachable")
        self.calls["append"] += 1
        return await self._log.append(
            session_id, events, expected_last_seq, lease_token=lease_token
        )

    async def create_session(self, session_id: str | None, cwd: str) -> tuple[SessionSummary, bool]:
        return await self._log.create_session(session_id, cwd)

    async def get_session(self, session_id: str) -> SessionSummary:
        return await self._log.get_session(session_id)

    async def load_state(self, session_id: str) -> SessionState:
        self.calls["load_state"] += 1
        return await self._log.load_state(session_id)

    async def read(
        self,
        session_id: str,
        *,
        from_seq: int | None = None,
        direction: Direction = Direction.FORWARD,
        limit: int = 1000,
    ) -> ReadResult:
        self.calls["read"] += 1
        return await self._log.read(session_id, from_seq=from_seq, direction=direction, limit=limit)

    async def tail_page(
        self,
        session_id: str,
        *,
        before_seq: int | None = None,
        message_limit: int = DEFAULT_MESSAGE_LIMIT,
    ) -> TailPage:
        return await self._log.tail_page(
            session_id, before_seq=before_seq, message_limit=message_limit
        )

    def subscribe(
        self, session_id: str, after_seq: int = -1, heartbeat_s: float = DEFAULT_HEARTBEAT_S
    ) -> AsyncIterator[SubscriptionItem]:
        return self._log.subscribe(session_id, after_seq, heartbeat_s)

    def subscribe_all(
        self,
        after_position: int = 0,
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
        from_end: bool = False,
    ) -> AsyncIterator[SubscriptionItem]:
        return self._log.subscribe_all(after_position, heartbeat_s, from_end)

    def subscribe_all_batches(
        self,
        after_position: int = 0,
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
        from_end: bool = False,
    ) -> AsyncIterator[BatchItem]:
        return self._log.subscribe_all_batches(after_position, heartbeat_s, from_end)

    async def list_sessions(
        self,
        page_size: int = 100,
        page_token: str = "",
        session_ids: Sequence[str] = (),
        *,
        running_only: bool = False,
    ) -> tuple[list[SessionSummary], str]:
        return await self._log.list_sessions(
            page_size, page_token, session_ids, running_only=running_only
        )

    async def search_sessions(
        self, request: session_log_pb2.SearchSessionsRequest
    ) -> session_log_pb2.SearchSessionsResponse:
        return await self._log.search_sessions(request)

    async def fork(
        self, session_id: str, up_to_seq: int | None = None, new_session_id: str | None = None
    ) -> SessionSummary:
        return await self._log.fork(session_id, up_to_seq, new_session_id)

    async def delete_session(self, session_id: str) -> None:
        await self._log.delete_session(session_id)

    async def put_images(
        self, session_id: str, inputs: Sequence[events_pb2.ImageInput]
    ) -> list[events_pb2.ImageRef]:
        return await self._log.put_images(session_id, inputs)

    async def read_image(self, session_id: str, digest: str) -> StoredImage:
        return await self._log.read_image(session_id, digest)

    async def acquire_lease(self, session_id: str, owner: str, ttl_s: float) -> Lease:
        return await self._log.acquire_lease(session_id, owner, ttl_s)

    async def renew_lease(self, session_id: str, owner: str, token: int, ttl_s: float) -> Lease:
        return await self._log.renew_lease(session_id, owner, token, ttl_s)

    async def release_lease(self, session_id: str, owner: str, token: int) -> bool:
        return await self._log.release_lease(session_id, owner, token)
