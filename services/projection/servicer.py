"""gRPC adapter of the projection engine: requests in, engine calls, replies out."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
from agenthost.projection.v1 import projection_pb2 as pb
from agenthost.projection.v1 import projection_pb2_grpc as pb_grpc
from google.protobuf import struct_pb2

from services.common.batches import in_batches
from services.common.errors import NotReady

from .engine import ProjectionEngine
from .model import CaughtUp, SessionChange
from .unit import View

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["ProjectionService"].full_name


def view_to_value(view: View) -> struct_pb2.Value:
    """A JSON-shaped view as google.protobuf.Value (numbers travel as doubles)."""
    value = struct_pb2.Value()
    if view is None:
        value.null_value = struct_pb2.NULL_VALUE
    elif isinstance(view, bool):
        value.bool_value = view
    elif isinstance(view, int | float):
        value.number_value = view
    elif isinstance(view, str):
        value.string_value = view
    elif isinstance(view, dict):
        value.struct_value.SetInParent()  # an empty object is still an object
        value.struct_value.update(view)
    else:
        value.list_value.SetInParent()  # an empty list is still a list
        value.list_value.extend(view)
    return value


class ProjectionServicer(pb_grpc.ProjectionServiceServicer):
    """Serves the engine the service definition opens; until it is open (the
    server accepts calls before health turns SERVING) every call is
    UNAVAILABLE."""

    def __init__(self) -> None:
        self.engine: ProjectionEngine | None = None

    def _engine(self) -> ProjectionEngine:
        if self.engine is None:
            raise NotReady("the projection engine")
        return self.engine

    async def GetProjection(
        self, request: pb.GetProjectionRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetProjectionResponse:
        snapshot = await self._engine().get(
            request.session_id,
            list(request.keys) or None,
            request.min_seq if request.HasField("min_seq") else None,
        )
        return pb.GetProjectionResponse(
            as_of_seq=snapshot.as_of_seq,
            values={key: view_to_value(view) for key, view in snapshot.values.items()},
        )

    async def WatchProjection(
        self, request: pb.WatchProjectionRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WatchProjectionResponse]:
        after = request.after_seq if request.HasField("after_seq") else -1
        async for item in self._engine().watch(request.session_id, after):
            if isinstance(item, CaughtUp):
                yield pb.WatchProjectionResponse(
                    caught_up=pb.ProjectionCaughtUp(as_of_seq=item.as_of_seq)
                )
            else:
                change = pb.ProjectionChange(
                    key=item.key, value=view_to_value(item.value), seq=item.seq
                )
                yield pb.WatchProjectionResponse(change=change)

    async def WatchAllProjections(
        self, request: pb.WatchAllProjectionsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WatchAllProjectionsResponse]:
        async for item in self._engine().watch_all():
            if isinstance(item, CaughtUp):
                yield pb.WatchAllProjectionsResponse(live=pb.ProjectionCaughtUp(as_of_seq=-1))
                continue
            changes = [_session_change(each) for each in item]
            if request.batched:
                for batch in in_batches(changes):
                    reply = pb.SessionProjectionChanges(changes=batch)
                    yield pb.WatchAllProjectionsResponse(changes=reply)
            else:
                for change in changes:
                    yield pb.WatchAllProjectionsResponse(change=change)

    async def ListUnits(
        self, request: pb.ListUnitsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListUnitsResponse:
        units = [pb.Unit(key=u.key, state_version=u.state_version) for u in self._engine().units()]
        return pb.ListUnitsResponse(units=units)


def _session_change(item: SessionChange) -> pb.SessionProjectionChange:
    change = item.change
    return pb.SessionProjectionChange(
        session_id=item.session_id,
        key=change.key,
        value=view_to_value(change.value),
        seq=change.seq,
    )
