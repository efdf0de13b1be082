"""An internal request's INVALID_ARGUMENT, as the gateway restates it: the
public request's name and fields, with a BadRequest, no internal names."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from services.common.errors import DomainError, InvalidArgument, SessionNotFound
from services.gateway.internal_errors import restated
from services.sessionlog.client import SessionLogClient
from services.sessionlog.service import session_log_service
from tests.support.hosts import running_host


async def internal_refusal(tmp_path: Path) -> DomainError:
    """What a real session log answers to a read from a negative seq."""
    async with running_host("sessionlog", session_log_service(tmp_path / "log.db"), tmp_path) as (
        _,
        channel,
    ):
        log = SessionLogClient(channel)
        await log.create_session("s-1", "/work")
        with pytest.raises(InvalidArgument) as refused:
            await log.read("s-1", from_seq=-4)
    return refused.value


def details(status: grpc.Status) -> status_pb2.Status:
    (binary,) = [v for k, v in status.trailing_metadata if k == "grpc-status-details-bin"]
    assert isinstance(binary, bytes)
    return status_pb2.Status.FromString(binary)


def unpacked(packed: any_pb2.Any) -> error_details_pb2.BadRequest | None:
    bad_request = error_details_pb2.BadRequest()
    return bad_request if packed.Unpack(bad_request) else None


async def test_the_public_request_and_field_are_named(tmp_path: Path) -> None:
    error = await internal_refusal(tmp_path)
    assert "ReadEventsRequest" in error.message  # what a client must not see

    status = restated("Connect", gw.ConnectRequest(client_id="c"), error)

    assert status is not None and status.code == grpc.StatusCode.INVALID_ARGUMENT
    assert status.details.startswith("invalid ConnectRequest: cursors: ")
    assert "ReadEventsRequest" not in status.details and "from_seq" not in status.details
    (bad_request,) = [b for b in map(unpacked, details(status).details) if b is not None]
    assert [v.field for v in bad_request.field_violations] == ["cursors"]


async def test_a_field_with_no_public_counterpart_names_the_request(tmp_path: Path) -> None:
    error = await internal_refusal(tmp_path)

    status = restated("ExportSession", gw.ExportSessionRequest(session_id="s-1"), error)

    assert status is not None
    assert "from_seq" not in status.details
    (bad_request,) = [b for b in map(unpacked, details(status).details) if b is not None]
    assert [v.field for v in bad_request.field_violations] == [""]


def test_other_errors_pass_as_they_are() -> None:
    request = gw.OpenSessionRequest(session_id="s-1")
    assert restated("OpenSession", request, SessionNotFound("s-1")) is None
