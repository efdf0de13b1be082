"""Assertions on gRPC failures as a client sees them."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import grpc

from services.common.status import error_info, field_violations


async def expect_rpc_error(call: Awaitable[Any], code: grpc.StatusCode) -> grpc.aio.AioRpcError:
    try:
        await call
    except grpc.aio.AioRpcError as error:
        assert error.code() == code, f"expected {code}, got {error.code()}: {error.details()}"
        return error
    raise AssertionError(f"expected {code}, the call succeeded")


def reason_of(error: grpc.aio.AioRpcError) -> str:
    info = error_info(error)
    assert info is not None, "the status carries no google.rpc.ErrorInfo"
    return str(info.reason)


def violated_fields(error: grpc.aio.AioRpcError) -> list[str]:
    return [field for field, _ in field_violations(error)]
