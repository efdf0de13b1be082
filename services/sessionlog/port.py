"""What other services may ask of the session log.

Both the in-process `SessionLog` (domain.py) and the gRPC `SessionLogClient`
(client.py) satisfy this protocol, so a service's domain code is written once
and runs embedded or against the remote session-log service. Errors are the
domain errors of services.common.errors (SessionNotFound, SessionConflict,
WrongExpectedSeq, EventIdConflict, LeaseLost), raised identically by both.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Protocol

from agenthost.sessionlog.v1 import events_pb2, session_log_pb2

from agenthost_core.folds import SessionState

from .leases import Lease

Event = events_pb2.Event
SessionSummary = session_log_pb2.SessionSummary

DEFAULT_MESSAGE_LIMIT = 50
DEFAULT_HEARTBEAT_S = 15.0


class Direction(enum.Enum):
    FORWARD = "forward"
    BACKWARD = "backward"


@dataclass(frozen=True)
class StoredImage:
    """An image as the log keeps it, content-addressed: `digest` is
    "sha256:<hex>" of `data` (agenthost_core/images.py)."""

    digest: str
    media_type: str
    data: bytes


@dataclass(frozen=True)
class AppendResult:
    seqs: list[int]
    last_seq: int
    # Every event id was already present: nothing was written.
    duplicate: bool


@dataclass(frozen=True)
class ReadResult:
    events: list[Event]
    last_seq: int


@dataclass(frozen=True)
class TailPage:
    events: list[Event]
    has_more: bool
    before_seq: int
    last_seq: int
    # The session as the page was read (session.last_seq == last_seq), so
    # a reader of the page needs no get_session of its own.
    session: SessionSummary


@dataclass(frozen=True)
class CaughtUp:
    """In-band marker: catch-up ended here, live delivery follows."""

    last_seq: int
    position: int


@dataclass(frozen=True)
class Heartbeat:
    pass


SubscriptionItem = Event | CaughtUp | Heartbeat
# The same with the events of one store read kept together (never empty).
BatchItem = list[Event] | CaughtUp | Heartbeat


async def flattened(
    batches: AsyncGenerator[BatchItem, None],
) -> AsyncGenerator[SubscriptionItem, None]:
    """A batched subscription as one item per event (closing it closes `batches`)."""
    async with aclosing(batches) as items:
        async for item in items:
            if isinstance(item, list):
                for event in item:
                    yield event
            else:
                yield item


class SessionLogPort(Protocol):
    async def create_session(
        self, session_id: str | None, cwd: str
    ) -> tuple[SessionSummary, bool]: ...

    async def get_session(self, session_id: str) -> SessionSummary: ...

    async def load_state(self, session_id: str) -> SessionState:
        """The fold as of the last event (its last_seq says which): where a
        cold reader starts before it reads the events that follow."""
        ...

    async def append(
        self,
        session_id: str,
        events: Sequence[Event],
        expected_last_seq: int | None = None,
        *,
        lease_token: int | None = None,
    ) -> AppendResult:
        """`lease_token`: the writer's session lease token; the append is
        refused (LeaseLost) unless it is the session's current one."""
        ...

    async def acquire_lease(self, session_id: str, owner: str, ttl_s: float) -> Lease:
        """Take the session's lease when it is free, expired or `owner`'s;
        answers the lease as it stands (another owner's when it is live)."""
        ...

    async def renew_lease(self, session_id: str, owner: str, token: int, ttl_s: float) -> Lease:
        """Extend `owner`'s lease while `token` is current; LeaseLost otherwise."""
        ...

    async def release_lease(self, session_id: str, owner: str, token: int) -> bool:
        """Give the lease up; False when `token` was no longer current."""
        ...

    async def read(
        self,
        session_id: str,
        *,
        from_seq: int | None = None,
        direction: Direction = Direction.FORWARD,
        limit: int = 1000,
    ) -> ReadResult: ...

    async def tail_page(
        self,
        session_id: str,
        *,
        before_seq: int | None = None,
        message_limit: int = DEFAULT_MESSAGE_LIMIT,
    ) -> TailPage: ...

    def subscribe(
        self, session_id: str, after_seq: int = -1, heartbeat_s: float = DEFAULT_HEARTBEAT_S
    ) -> AsyncIterator[SubscriptionItem]: ...

    def subscribe_all(
        self,
        after_position: int = 0,
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
        from_end: bool = False,
    ) -> AsyncIterator[SubscriptionItem]:
        """From `after_position`, or only new events when `from_end`."""
        ...

    def subscribe_all_batches(
        self,
        after_position: int = 0,
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
        from_end: bool = False,
    ) -> AsyncIterator[BatchItem]:
        """`subscribe_all` with the events of one read of the log kept
        together: a follower that folds them can take each run of one
        session's events at once."""
        ...

    async def list_sessions(
        self,
        page_size: int = 100,
        page_token: str = "",
        session_ids: Sequence[str] = (),
        *,
        running_only: bool = False,
    ) -> tuple[list[SessionSummary], str]: ...

    async def search_sessions(
        self, request: session_log_pb2.SearchSessionsRequest
    ) -> session_log_pb2.SearchSessionsResponse:
        """Full-text search over `request.session_ids` (search.py)."""
        ...

    async def fork(
        self, session_id: str, up_to_seq: int | None = None, new_session_id: str | None = None
    ) -> SessionSummary: ...

    async def delete_session(self, session_id: str) -> None:
        """The session and its log, gone. Raises SessionNotFound."""
        ...

    async def put_images(
        self, session_id: str, inputs: Sequence[events_pb2.ImageInput]
    ) -> list[events_pb2.ImageRef]:
        """Keep a prompt's images for the session; their references, in
        order (ImageRefused, ImageNotFound for an unknown digest)."""
        ...

    async def read_image(self, session_id: str, digest: str) -> StoredImage:
        """An image the session holds (ImageNotFound otherwise)."""
        ...
