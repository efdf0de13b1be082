"""The projection service over gRPC, for the gateway and other callers.

Values come back as the engine's JSON-shaped views, except that numbers
travel as google.protobuf.Value doubles (a count of 3 arrives as 3.0, which
compares equal).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import grpc
from agenthost.projection.v1 import projection_pb2 as pb
from agenthost.projection.v1 import projection_pb2_grpc as pb_grpc
from google.protobuf import json_format, struct_pb2

from services.common.client import call_timeout, peer_stream, raising_peer_errors

from .model import CaughtUp, Change, Snapshot, WatchItem
from .registry import UnitInfo
from .unit import View


def view_from_value(value: struct_pb2.Value) -> View:
    return cast(View, json_format.MessageToDict(value))


def _item(response: pb.WatchProjectionResponse) -> WatchItem:
    if response.WhichOneof("message") == "caught_up":
        return CaughtUp(response.caught_up.as_of_seq)
    change = response.change
    return Change(change.key, view_from_value(change.value), change.seq)


PEER = "projection"
calls_peer = raising_peer_errors(PEER)


@dataclass(frozen=True)
class Block:
    """A session's views as of `as_of_seq`, as the wire carries them (the
    gateway relays them to clients untouched)."""

    as_of_seq: int
    values: Mapping[str, struct_pb2.Value]


class ProjectionClient:
    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub = pb_grpc.ProjectionServiceStub(channel)

    @classmethod
    def over(cls, stub: pb_grpc.ProjectionServiceStub) -> ProjectionClient:
        """A client over a stub another part of the caller shares."""
        client = cls.__new__(cls)
        client._stub = stub
        return client

    @calls_peer
    async def block(
        self,
        session_id: str,
        keys: Sequence[str] = (),
        *,
        min_seq: int = -1,
        within_s: float | None = None,
    ) -> Block:
        """The views of `keys` (every unit when empty) as of the log's end,
        or as of `min_seq` or later (how far the caller read the log; -1:
        not at all), answered within `within_s` (the default call timeout
        when None). Raises SessionNotFound."""
        request = pb.GetProjectionRequest(session_id=session_id, keys=keys)
        if min_seq >= 0:
            request.min_seq = min_seq
        reply: pb.GetProjectionResponse = await self._stub.GetProjection(
            request,
            timeout=call_timeout(within_s) if within_s else call_timeout(),
            wait_for_ready=True,
        )
        return Block(reply.as_of_seq, reply.values)

    @calls_peer
    async def get(self, session_id: str, keys: Sequence[str] = ()) -> Snapshot:
        """The session's views as of `as_of_seq` (every unit when `keys` is
        empty; unknown keys are left out). Raises SessionNotFound."""
        reply: pb.GetProjectionResponse = await self._stub.GetProjection(
            pb.GetProjectionRequest(session_id=session_id, keys=keys),
            timeout=call_timeout(),
            wait_for_ready=True,
        )
        values = {key: view_from_value(value) for key, value in reply.values.items()}
        return Snapshot(reply.as_of_seq, values)

    async def watch(self, session_id: str, after_seq: int = -1) -> AsyncGenerator[WatchItem, None]:
        """Changes after `after_seq` (the latest value of each view changed
        since), then CaughtUp, then live changes. Resume with the last seq
        seen: no duplicate, no gap. Closing the iterator cancels the call.
        Raises SessionNotFound; WatchLagged and a stopping service end it
        with Unavailable (watch again from the last seq)."""
        call = self._stub.WatchProjection(
            pb.WatchProjectionRequest(session_id=session_id, after_seq=after_seq)
        )
        try:
            async for response in peer_stream(call, PEER):
                yield _item(response)
        finally:
            call.cancel()

    @calls_peer
    async def units(self) -> list[UnitInfo]:
        reply: pb.ListUnitsResponse = await self._stub.ListUnits(
            pb.ListUnitsRequest(), timeout=call_timeout(), wait_for_ready=True
        )
        return [UnitInfo(u.key, u.state_version) for u in reply.units]
