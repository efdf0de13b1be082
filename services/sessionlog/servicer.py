"""gRPC adapter of the session log: requests in, domain calls, replies out."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import grpc
from agenthost.sessionlog.v1 import events_pb2 as ev
from agenthost.sessionlog.v1 import session_log_pb2 as pb
from agenthost.sessionlog.v1 import session_log_pb2_grpc as pb_grpc
from google.protobuf.timestamp_pb2 import Timestamp

from agenthost_core import folds
from services.common.batches import in_batches

from .domain import SessionLog
from .leases import Lease
from .port import (
    DEFAULT_HEARTBEAT_S,
    DEFAULT_MESSAGE_LIMIT,
    CaughtUp,
    Direction,
    Event,
    Heartbeat,
)

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["SessionLogService"].full_name

_DIRECTIONS = {
    pb.READ_DIRECTION_FORWARD: Direction.FORWARD,
    pb.READ_DIRECTION_BACKWARD: Direction.BACKWARD,
}


def _heartbeat_s(request: pb.SubscribeRequest | pb.SubscribeAllRequest) -> float:
    return request.heartbeat_ms / 1000 if request.HasField("heartbeat_ms") else DEFAULT_HEARTBEAT_S


def _lease(lease: Lease) -> pb.Lease:
    message = pb.Lease(session_id=lease.session_id, owner=lease.owner, token=lease.token)
    message.expires_at.FromMicroseconds(lease.expires_at_us)
    return message


def _heartbeat() -> pb.Heartbeat:
    now = Timestamp()
    now.GetCurrentTime()
    return pb.Heartbeat(time=now)


def _batch_reply(events: Sequence[Event]) -> pb.SubscribeAllResponse:
    # Into the reply's own batch: an EventBatch made first would be copied
    # into the reply again, a third of the time of making it.
    reply = pb.SubscribeAllResponse()
    reply.events.events.extend(events)
    return reply


class SharedBatchReplies:
    """The reply carrying a batch of committed events, made once for all the
    followers that are sent it. Every all-sessions follower (the projection
    service, the gateway's hub) reads the same events, and each copying them
    into replies of its own cost the embedded stack's batched appends a
    tenth of its loop. A batch is known by its events' positions: those name
    committed events, which never change. A reply is only ever sent
    (serialized), never changed, so sharing one is safe.

    Only the last batch is kept, and only one that fits one reply: the
    followers read each live batch one after the other (keeping eight found
    no more of them shared than keeping one), and a catch-up's big batches
    are not held once sent."""

    def __init__(self) -> None:
        self._key: tuple[int, ...] = ()
        self._reply: pb.SubscribeAllResponse | None = None

    def replies(self, events: Sequence[Event]) -> list[pb.SubscribeAllResponse]:
        key = tuple(event.position for event in events)
        if self._reply is not None and key == self._key:
            return [self._reply]
        replies = [_batch_reply(chunk) for chunk in in_batches(events)]
        if len(replies) == 1:
            self._key, self._reply = key, replies[0]
        return replies


class SessionLogServicer(pb_grpc.SessionLogServiceServicer):
    def __init__(self, log: SessionLog) -> None:
        self.log = log
        self._batch_replies = SharedBatchReplies()

    async def CreateSession(
        self, request: pb.CreateSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateSessionResponse:
        summary, created = await self.log.create_session(request.session_id or None, request.cwd)
        return pb.CreateSessionResponse(session=summary, created=created)

    async def GetSession(
        self, request: pb.GetSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetSessionResponse:
        return pb.GetSessionResponse(session=await self.log.get_session(request.session_id))

    async def LoadState(
        self, request: pb.LoadStateRequest, context: grpc.aio.ServicerContext
    ) -> pb.LoadStateResponse:
        state = await self.log.load_state(request.session_id)
        return pb.LoadStateResponse(
            state=folds.dump_state(state),
            fold_version=folds.STATE_VERSION,
            last_seq=state.last_seq,
        )

    async def Append(
        self, request: pb.AppendRequest, context: grpc.aio.ServicerContext
    ) -> pb.AppendResponse:
        expected = request.expected_last_seq if request.HasField("expected_last_seq") else None
        token = request.lease_token if request.HasField("lease_token") else None
        result = await self.log.append(
            request.session_id, request.events, expected, lease_token=token
        )
        return pb.AppendResponse(
            seqs=result.seqs, last_seq=result.last_seq, duplicate=result.duplicate
        )

    async def ReadEvents(
        self, request: pb.ReadEventsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReadEventsResponse:
        result = await self.log.read(
            request.session_id,
            from_seq=request.from_seq if request.HasField("from_seq") else None,
            direction=_DIRECTIONS[request.direction],
            limit=request.limit,
        )
        return pb.ReadEventsResponse(events=result.events, last_seq=result.last_seq)

    async def TailPage(
        self, request: pb.TailPageRequest, context: grpc.aio.ServicerContext
    ) -> pb.TailPageResponse:
        page = await self.log.tail_page(
            request.session_id,
            before_seq=request.before_seq if request.HasField("before_seq") else None,
            message_limit=(
                request.message_limit
                if request.HasField("message_limit")
                else DEFAULT_MESSAGE_LIMIT
            ),
        )
        return pb.TailPageResponse(
            events=page.events,
            has_more=page.has_more,
            before_seq=page.before_seq,
            last_seq=page.last_seq,
            session=page.session,
        )

    async def Subscribe(
        self, request: pb.SubscribeRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.SubscribeResponse]:
        after = request.after_seq if request.HasField("after_seq") else -1
        async for item in self.log.subscribe(request.session_id, after, _heartbeat_s(request)):
            if isinstance(item, CaughtUp):
                yield pb.SubscribeResponse(
                    caught_up=pb.CaughtUp(last_seq=item.last_seq, position=item.position)
                )
            elif isinstance(item, Heartbeat):
                yield pb.SubscribeResponse(heartbeat=_heartbeat())
            else:
                yield pb.SubscribeResponse(event=item)

    async def SubscribeAll(
        self, request: pb.SubscribeAllRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.SubscribeAllResponse]:
        after = request.after_position if request.HasField("after_position") else 0
        items = self.log.subscribe_all_batches(after, _heartbeat_s(request), request.from_end)
        async for item in items:
            if isinstance(item, CaughtUp):
                yield pb.SubscribeAllResponse(
                    caught_up=pb.CaughtUp(last_seq=item.last_seq, position=item.position)
                )
            elif isinstance(item, Heartbeat):
                yield pb.SubscribeAllResponse(heartbeat=_heartbeat())
            elif request.batched:
                for reply in self._batch_replies.replies(item):
                    yield reply
            else:
                for event in item:
                    yield pb.SubscribeAllResponse(event=event)

    async def ListSessions(
        self, request: pb.ListSessionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListSessionsResponse:
        sessions, token = await self.log.list_sessions(
            request.page_size if request.HasField("page_size") else 100,
            request.page_token,
            list(request.session_ids),
            running_only=request.running_only,
        )
        return pb.ListSessionsResponse(sessions=sessions, next_page_token=token)

    async def SearchSessions(
        self, request: pb.SearchSessionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.SearchSessionsResponse:
        return await self.log.search_sessions(request)

    async def DeleteSession(
        self, request: pb.DeleteSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteSessionResponse:
        await self.log.delete_session(request.session_id)
        return pb.DeleteSessionResponse()

    async def PutImages(
        self, request: pb.PutImagesRequest, context: grpc.aio.ServicerContext
    ) -> pb.PutImagesResponse:
        return pb.PutImagesResponse(
            images=await self.log.put_images(request.session_id, request.images)
        )

    async def ReadImage(
        self, request: pb.ReadImageRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReadImageResponse:
        image = await self.log.read_image(request.session_id, request.digest)
        ref = ev.ImageRef(digest=image.digest, media_type=image.media_type, size=len(image.data))
        return pb.ReadImageResponse(image=ref, data=image.data)

    async def ForkSession(
        self, request: pb.ForkSessionRequest, context: grpc.aio.ServicerContext
    ) -> pb.ForkSessionResponse:
        summary = await self.log.fork(
            request.session_id,
            request.up_to_seq if request.HasField("up_to_seq") else None,
            request.new_session_id or None,
        )
        return pb.ForkSessionResponse(session=summary)

    async def AcquireLease(
        self, request: pb.AcquireLeaseRequest, context: grpc.aio.ServicerContext
    ) -> pb.AcquireLeaseResponse:
        lease = await self.log.acquire_lease(
            request.session_id, request.owner, request.ttl_ms / 1000
        )
        return pb.AcquireLeaseResponse(lease=_lease(lease))

    async def RenewLease(
        self, request: pb.RenewLeaseRequest, context: grpc.aio.ServicerContext
    ) -> pb.RenewLeaseResponse:
        lease = await self.log.renew_lease(
            request.session_id, request.owner, request.token, request.ttl_ms / 1000
        )
        return pb.RenewLeaseResponse(lease=_lease(lease))

    async def ReleaseLease(
        self, request: pb.ReleaseLeaseRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReleaseLeaseResponse:
        released = await self.log.release_lease(request.session_id, request.owner, request.token)
        return pb.ReleaseLeaseResponse(released=released)
