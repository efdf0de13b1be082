"""SessionLogPort over gRPC: what other services use to reach the session log."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

import grpc
from agenthost.sessionlog.v1 import events_pb2
from agenthost.sessionlog.v1 import session_log_pb2 as pb
from agenthost.sessionlog.v1 import session_log_pb2_grpc as pb_grpc
from google.protobuf.message import Message

from agenthost_core import folds
from services.common.client import (
    DEFAULT_TIMEOUT_S,
    call_timeout,
    peer_stream,
    raising_peer_errors,
)
from services.common.errors import NotReady
from services.common.status import error_info

from .leases import Lease
from .port import (
    DEFAULT_HEARTBEAT_S,
    DEFAULT_MESSAGE_LIMIT,
    AppendResult,
    BatchItem,
    CaughtUp,
    Direction,
    Event,
    Heartbeat,
    ReadResult,
    SessionSummary,
    StoredImage,
    SubscriptionItem,
    TailPage,
    flattened,
)

PEER = "sessionlog"
calls_peer = raising_peer_errors(PEER)

_DIRECTIONS = {
    Direction.FORWARD: pb.READ_DIRECTION_FORWARD,
    Direction.BACKWARD: pb.READ_DIRECTION_BACKWARD,
}


# Back-off between two sends of one batch while the log is away.
RETRY_FIRST_S, RETRY_MAX_S = 0.05, 1.0


def _refused(error: grpc.aio.AioRpcError) -> bool:
    """The log answered, refusing the call before doing anything (starting,
    or stopping gracefully)."""
    info = error_info(error)
    return info is not None and info.reason == NotReady.REASON


def _outcome_unknown(error: grpc.aio.AioRpcError) -> bool:
    """The log went away or was not serving (restarting): the batch may or may
    not have been written, and sending it again is safe."""
    code = error.code()
    if code == grpc.StatusCode.UNAVAILABLE:
        return True
    return code == grpc.StatusCode.UNKNOWN and "Stream removed" in (error.details() or "")


def _lease(message: pb.Lease) -> Lease:
    return Lease(
        message.session_id, message.owner, message.token, message.expires_at.ToMicroseconds()
    )


def _item(response: pb.SubscribeResponse | pb.SubscribeAllResponse) -> SubscriptionItem:
    kind = response.WhichOneof("message")
    if kind == "event":
        return response.event
    if kind == "caught_up":
        return CaughtUp(response.caught_up.last_seq, response.caught_up.position)
    return Heartbeat()


class SessionLogClient:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub = pb_grpc.SessionLogServiceStub(channel)

    async def _call(self, rpc: Any, request: Message, *, idempotent: bool = True) -> Any:
        """One unary call, sent again with back-off while the log restarts,
        until the call's time runs out: a restart of the log never fails a
        turn or a writer. A call the log refused unread (NOT_READY) is always
        sent again; one whose outcome is unknown only when sending it twice
        does what sending it once does (appends are, by their event ids)."""
        deadline = time.monotonic() + (call_timeout() or DEFAULT_TIMEOUT_S)
        delay = RETRY_FIRST_S
        while True:
            try:
                return await rpc(
                    request, timeout=max(deadline - time.monotonic(), 0.0), wait_for_ready=True
                )
            except grpc.aio.AioRpcError as error:
                again = _refused(error) or (idempotent and _outcome_unknown(error))
                if not again or time.monotonic() + delay >= deadline:
                    raise
            await asyncio.sleep(delay)  # back off before sending it again
            delay = min(delay * 2, RETRY_MAX_S)

    @calls_peer
    async def create_session(self, session_id: str | None, cwd: str) -> tuple[SessionSummary, bool]:
        reply = await self._call(
            self._stub.CreateSession,
            pb.CreateSessionRequest(session_id=session_id or "", cwd=cwd),
            idempotent=bool(session_id),
        )
        return reply.session, reply.created

    @calls_peer
    async def get_session(self, session_id: str) -> SessionSummary:
        reply: pb.GetSessionResponse = await self._call(
            self._stub.GetSession, pb.GetSessionRequest(session_id=session_id)
        )
        return reply.session

    @calls_peer
    async def load_state(self, session_id: str) -> folds.SessionState:
        reply: pb.LoadStateResponse = await self._call(
            self._stub.LoadState, pb.LoadStateRequest(session_id=session_id)
        )
        if reply.fold_version != folds.STATE_VERSION:
            # A log of another release: the caller folds the log from the start.
            return folds.SessionState()
        return folds.load_state(reply.state)

    @calls_peer
    async def append(
        self,
        session_id: str,
        events: Sequence[Event],
        expected_last_seq: int | None = None,
        *,
        lease_token: int | None = None,
    ) -> AppendResult:
        """Append a batch. Its events get ids here when they have none, so a
        batch whose outcome a restart of the log left unknown is sent again
        (the log answers the first outcome for ids it has), until the call's
        time runs out: a restart of the log never fails a writer."""
        request = pb.AppendRequest(session_id=session_id, events=events)
        batch_id = uuid.uuid4().hex  # one random draw per batch, not per event
        for n, event in enumerate(request.events):
            event.id = event.id or f"e-{batch_id}-{n}"
        if expected_last_seq is not None:
            request.expected_last_seq = expected_last_seq
        if lease_token is not None:
            request.lease_token = lease_token
        reply = await self._call(self._stub.Append, request)
        return AppendResult(list(reply.seqs), reply.last_seq, reply.duplicate)

    @calls_peer
    async def read(
        self,
        session_id: str,
        *,
        from_seq: int | None = None,
        direction: Direction = Direction.FORWARD,
        limit: int = 1000,
    ) -> ReadResult:
        request = pb.ReadEventsRequest(
            session_id=session_id, direction=_DIRECTIONS[direction], limit=limit
        )
        if from_seq is not None:
            request.from_seq = from_seq
        reply = await self._call(self._stub.ReadEvents, request)
        return ReadResult(list(reply.events), reply.last_seq)

    @calls_peer
    async def tail_page(
        self,
        session_id: str,
        *,
        before_seq: int | None = None,
        message_limit: int = DEFAULT_MESSAGE_LIMIT,
    ) -> TailPage:
        request = pb.TailPageRequest(session_id=session_id, message_limit=message_limit)
        if before_seq is not None:
            request.before_seq = before_seq
        reply = await self._call(self._stub.TailPage, request)
        return TailPage(
            list(reply.events), reply.has_more, reply.before_seq, reply.last_seq, reply.session
        )

    async def subscribe(
        self, session_id: str, after_seq: int = -1, heartbeat_s: float = DEFAULT_HEARTBEAT_S
    ) -> AsyncIterator[SubscriptionItem]:
        request = pb.SubscribeRequest(
            session_id=session_id, after_seq=after_seq, heartbeat_ms=int(heartbeat_s * 1000)
        )
        async for response in peer_stream(self._stub.Subscribe(request, wait_for_ready=True), PEER):
            yield _item(response)

    def subscribe_all(
        self,
        after_position: int = 0,
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
        from_end: bool = False,
    ) -> AsyncIterator[SubscriptionItem]:
        return flattened(self.subscribe_all_batches(after_position, heartbeat_s, from_end))

    async def subscribe_all_batches(
        self,
        after_position: int = 0,
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
        from_end: bool = False,
    ) -> AsyncGenerator[BatchItem, None]:
        request = pb.SubscribeAllRequest(
            after_position=after_position,
            heartbeat_ms=int(heartbeat_s * 1000),
            from_end=from_end,
            batched=True,
        )
        stream = self._stub.SubscribeAll(request, wait_for_ready=True)
        async for response in peer_stream(stream, PEER):
            if response.WhichOneof("message") == "events":
                yield list(response.events.events)
                continue
            item = _item(response)
            yield [item] if isinstance(item, Event) else item

    @calls_peer
    async def list_sessions(
        self,
        page_size: int = 100,
        page_token: str = "",
        session_ids: Sequence[str] = (),
        *,
        running_only: bool = False,
    ) -> tuple[list[SessionSummary], str]:
        reply = await self._call(
            self._stub.ListSessions,
            pb.ListSessionsRequest(
                page_size=page_size,
                page_token=page_token,
                session_ids=session_ids,
                running_only=running_only,
            ),
        )
        return list(reply.sessions), reply.next_page_token

    @calls_peer
    async def search_sessions(self, request: pb.SearchSessionsRequest) -> pb.SearchSessionsResponse:
        result: pb.SearchSessionsResponse = await self._call(self._stub.SearchSessions, request)
        return result

    @calls_peer
    async def delete_session(self, session_id: str) -> None:
        await self._call(
            self._stub.DeleteSession,
            pb.DeleteSessionRequest(session_id=session_id),
            idempotent=False,
        )

    @calls_peer
    async def put_images(
        self, session_id: str, inputs: Sequence[events_pb2.ImageInput]
    ) -> list[events_pb2.ImageRef]:
        request = pb.PutImagesRequest(session_id=session_id, images=inputs)
        reply: pb.PutImagesResponse = await self._call(
            self._stub.PutImages, request, idempotent=True
        )
        return list(reply.images)

    @calls_peer
    async def read_image(self, session_id: str, digest: str) -> StoredImage:
        request = pb.ReadImageRequest(session_id=session_id, digest=digest)
        reply: pb.ReadImageResponse = await self._call(
            self._stub.ReadImage, request, idempotent=True
        )
        return StoredImage(reply.image.digest, reply.image.media_type, reply.data)

    @calls_peer
    async def fork(
        self, session_id: str, up_to_seq: int | None = None, new_session_id: str | None = None
    ) -> SessionSummary:
        request = pb.ForkSessionRequest(session_id=session_id, new_session_id=new_session_id or "")
        if up_to_seq is not None:
            request.up_to_seq = up_to_seq
        reply: pb.ForkSessionResponse = await self._call(
            self._stub.ForkSession, request, idempotent=bool(new_session_id)
        )
        return reply.session

    # Lease calls are sent again when their outcome is unknown: a repeated
    # acquire or renew by the same owner answers what the first did, and a
    # repeated release finds the lease released (False, nothing changed).

    @calls_peer
    async def acquire_lease(self, session_id: str, owner: str, ttl_s: float) -> Lease:
        request = pb.AcquireLeaseRequest(session_id=session_id, owner=owner, ttl_ms=_ttl_ms(ttl_s))
        reply: pb.AcquireLeaseResponse = await self._call(self._stub.AcquireLease, request)
        return _lease(reply.lease)

    @calls_peer
    async def renew_lease(self, session_id: str, owner: str, token: int, ttl_s: float) -> Lease:
        request = pb.RenewLeaseRequest(
            session_id=session_id, owner=owner, token=token, ttl_ms=_ttl_ms(ttl_s)
        )
        reply: pb.RenewLeaseResponse = await self._call(self._stub.RenewLease, request)
        return _lease(reply.lease)

    @calls_peer
    async def release_lease(self, session_id: str, owner: str, token: int) -> bool:
        request = pb.ReleaseLeaseRequest(session_id=session_id, owner=owner, token=token)
        reply: pb.ReleaseLeaseResponse = await self._call(self._stub.ReleaseLease, request)
        return reply.released


def _ttl_ms(ttl_s: float) -> int:
    return round(ttl_s * 1000)
