"""Domain errors <-> gRPC status with google.rpc.ErrorInfo / BadRequest details."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

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


# The details travel in trailing metadata (grpc-status-details-bin, base64)
# and the message once more in grpc-message (percent-encoded): a default
# client refuses trailers over 16 KiB (some already over its 8 KiB soft
# limit), so one answer stays a few KiB whatever the request held.
MAX_VIOLATIONS = 10
MAX_FIELD_BYTES = 128
MAX_DESCRIPTION_BYTES = 256
MAX_MESSAGE_BYTES = 512
MAX_METADATA_VALUE_BYTES = 256


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes (an ellipsis marks a cut)."""
    encoded = text.encode()
    if len(encoded) <= limit:
        return text
    return encoded[: limit - 3].decode(errors="ignore") + "..."


def domain_error_status(error: DomainError) -> grpc.Status:
    metadata = {k: clip(v, MAX_METADATA_VALUE_BYTES) for k, v in error.metadata.items()}
    info = error_details_pb2.ErrorInfo(reason=error.reason, domain=ERROR_DOMAIN, metadata=metadata)
    details = [_packed(info)]
    if error.status == "INVALID_ARGUMENT":
        # Every INVALID_ARGUMENT carries a BadRequest, so a client reads one
        # shape; an error that names no field is about the request as a whole.
        details.insert(0, _packed(_bad_request([(error.metadata.get("field", ""), error.message)])))
    status = status_pb2.Status(
        code=getattr(code_pb2, error.status),
        message=clip(error.message, MAX_MESSAGE_BYTES),
        details=details,
    )
    return rpc_status.to_status(status)


def bad_request_status(violations: Sequence[tuple[str, str]], message: str) -> grpc.Status:
    """INVALID_ARGUMENT listing each (field path, description): the first
    MAX_VIOLATIONS of them, and how many there were (ErrorInfo metadata
    `violations`)."""
    total = len(violations)
    if total > MAX_VIOLATIONS:
        message = f"({MAX_VIOLATIONS} of {total} violations) {message}"
    info = error_details_pb2.ErrorInfo(
        reason="INVALID_REQUEST", domain=ERROR_DOMAIN, metadata={"violations": str(total)}
    )
    status = status_pb2.Status(
        code=code_pb2.INVALID_ARGUMENT,
        message=clip(message, MAX_MESSAGE_BYTES),
        details=[_packed(_bad_request(violations[:MAX_VIOLATIONS])), _packed(info)],
    )
    return rpc_status.to_status(status)


def _bad_request(violations: Iterable[tuple[str, str]]) -> error_details_pb2.BadRequest:
    return error_details_pb2.BadRequest(
        field_violations=[
            error_details_pb2.BadRequest.FieldViolation(
                field=clip(field, MAX_FIELD_BYTES),
                description=clip(description, MAX_DESCRIPTION_BYTES),
            )
            for field, description in violations
        ]
    )


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
