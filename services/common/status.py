"""Domain errors <-> gRPC status with google.rpc.ErrorInfo / BadRequest details."""

from __future__ import annotations

from collections.abc import Iterable

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from .errors import (
    ERROR_DOMAIN,
    AlreadyExists,
    DomainError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OutOfRange,
    Unauthenticated,
    Unavailable,
)

_BY_STATUS: dict[str, type[DomainError]] = {
    cls.status: cls
    for cls in (
        NotFound,
        AlreadyExists,
        FailedPrecondition,
        InvalidArgument,
        OutOfRange,
        Unavailable,
        Unauthenticated,
    )
}


def _packed(message: error_details_pb2.ErrorInfo | error_details_pb2.BadRequest) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def domain_error_status(error: DomainError) -> grpc.Status:
    """The error's status with its ErrorInfo; an INVALID_ARGUMENT also carries
    a BadRequest (the field from the error's `field` metadata, empty when the
    error names none), so a client reads every refused request one way."""
    info = error_details_pb2.ErrorInfo(
        reason=error.reason, domain=ERROR_DOMAIN, metadata=error.metadata
    )
    details = [_packed(info)]
    if error.status == "INVALID_ARGUMENT":
        violation = error_details_pb2.BadRequest.FieldViolation(
            field=error.metadata.get("field", ""), description=error.message
        )
        bad_request = error_details_pb2.BadRequest(field_violations=[violation])
        details.insert(0, _packed(bad_request))
    status = status_pb2.Status(
        code=getattr(code_pb2, error.status), message=error.message, details=details
    )
    return rpc_status.to_status(status)


def bad_request_status(violations: Iterable[tuple[str, str]], message: str) -> grpc.Status:
    """INVALID_ARGUMENT listing each (field path, description)."""
    bad_request = error_details_pb2.BadRequest(
        field_violations=[
            error_details_pb2.BadRequest.FieldViolation(field=field, description=description)
            for field, description in violations
        ]
    )
    info = error_details_pb2.ErrorInfo(reason="INVALID_REQUEST", domain=ERROR_DOMAIN)
    status = status_pb2.Status(
        code=code_pb2.INVALID_ARGUMENT,
        message=message,
        details=[_packed(bad_request), _packed(info)],
    )
    return rpc_status.to_status(status)


def status_details(error: grpc.aio.AioRpcError | grpc.RpcError) -> status_pb2.Status | None:
    """The rich status a server attached to a failed call, if any."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            return status_pb2.Status.FromString(value)
    return None


def error_info(error: grpc.aio.AioRpcError | grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    status = status_details(error)
    for detail in status.details if status else ():
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            return info
    return None


def field_violations(error: grpc.RpcError) -> list[tuple[str, str]]:
    status = status_details(error)
    for detail in status.details if status else ():
        bad_request = error_details_pb2.BadRequest()
        if detail.Unpack(bad_request):
            return [(v.field, v.description) for v in bad_request.field_violations]
    return []


def domain_error_from(error: grpc.aio.AioRpcError) -> DomainError | None:
    """Rebuild the domain error a service raised, so remote and embedded
    callers handle the same exception types."""
    info = error_info(error)
    if info is None or info.domain != ERROR_DOMAIN:
        return None
    cls = DomainError.by_reason.get(info.reason) or _BY_STATUS.get(error.code().name, DomainError)
    return cls.from_wire(info.reason, error.details() or "", dict(info.metadata))
