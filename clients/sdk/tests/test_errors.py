"""The SDK's typed errors as a caller sees them."""

from __future__ import annotations

import grpc

from clients.sdk.errors import CUT_OFF, TransportError, error_from_rpc


def rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


def test_a_call_the_gateway_cut_off_reads_as_it_going_away_not_as_cancelled() -> None:
    error = error_from_rpc(rpc_error(grpc.StatusCode.CANCELLED, "CANCELLED"))
    assert isinstance(error, TransportError)
    assert (error.code, error.reason) == ("UNAVAILABLE", CUT_OFF)
    assert "may have taken effect" in str(error)


def test_an_unreachable_gateway_and_a_deadline_are_transport_errors_as_sent() -> None:
    for code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        error = error_from_rpc(rpc_error(code, "away"))
        assert isinstance(error, TransportError)
        assert (error.code, error.reason) == (code.name, "")
