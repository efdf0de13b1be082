"""Internal INVALID_ARGUMENT answers, restated in the public request's terms.

The gateway validates every public request against its own rules, so the
internal requests it makes from one should pass theirs. Should one not (a
rule that differs, a value the gateway computed), the internal answer names
an internal message and its fields (`invalid ReadEventsRequest: from_seq
...`): meaningless to a client, and a leak of internals. The gateway answers
instead INVALID_ARGUMENT INVALID_REQUEST about the public request, with a
BadRequest: each violation under the public field it came from (a field of
the same name, or the method's rename below), else under the whole request
(field "").
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, TypeVar

import grpc
from agenthost.gateway.v1 import gateway_pb2 as gw
from google.protobuf.message import Message

from services.common.errors import DomainError, InvalidArgument
from services.common.status import bad_request_status, field_violations

INVALID_REQUEST = "INVALID_REQUEST"
# Internal field -> public field, per method, where the names differ.
RENAMES: Mapping[str, Mapping[str, str]] = {
    "Connect": {"session_id": "cursors", "from_seq": "cursors"},
    "CreateSession": {"path": "cwd"},
}
UNNAMED = "an internal request made from it was refused"

C = TypeVar("C", bound=type)


def restated(method: str, request: Message, error: DomainError) -> grpc.Status | None:
    """The public answer for an internal request's INVALID_REQUEST (None
    for every other error: those carry no internal names)."""
    if not isinstance(error, InvalidArgument) or error.reason != INVALID_REQUEST:
        return None
    cause = error.__cause__
    found = field_violations(cause) if isinstance(cause, grpc.RpcError) else []
    public = set(request.DESCRIPTOR.fields_by_name)
    renames = RENAMES.get(method, {})
    violations = [
        (_public_field(path, public, renames), description) for path, description in found
    ] or [("", UNNAMED)]
    listed = "; ".join(f"{path or 'request'}: {why}" for path, why in violations)
    return bad_request_status(violations, f"invalid {request.DESCRIPTOR.name}: {listed}")


def _public_field(path: str, public: set[str], renames: Mapping[str, str]) -> str:
    top = path.split(".", 1)[0].split("[", 1)[0]
    if top in public:
        return path
    return renames.get(top, "")


def restating_internal_errors(cls: C) -> C:
    """Wrap every GatewayService method of the servicer class `cls`."""
    service = gw.DESCRIPTOR.services_by_name["GatewayService"]
    for method in service.methods:
        behavior = getattr(cls, method.name)
        wrap = _stream if method.server_streaming else _unary
        setattr(cls, method.name, wrap(method.name, behavior))
    return cls


async def _restate(
    name: str, request: Message, error: InvalidArgument, context: grpc.aio.ServicerContext
) -> None:
    """Abort with the error restated in the public request's terms, or raise
    it as it is when it names nothing of that request."""
    status = restated(name, request, error)
    if status is None:
        raise error
    await context.abort(status.code, status.details, status.trailing_metadata)


def _unary(name: str, behavior: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(behavior)
    async def wrapped(self: Any, request: Message, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await behavior(self, request, context)
        except InvalidArgument as error:
            await _restate(name, request, error, context)

    return wrapped


def _stream(name: str, behavior: Callable[..., AsyncIterator[Any]]) -> Callable[..., Any]:
    @functools.wraps(behavior)
    async def wrapped(
        self: Any, request: Message, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        try:
            async for reply in behavior(self, request, context):
                yield reply
        except InvalidArgument as error:
            await _restate(name, request, error, context)

    return wrapped
