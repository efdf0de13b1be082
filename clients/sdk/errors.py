"""Typed errors of the SDK, rebuilt from the gateway's gRPC statuses.

The gateway answers with a gRPC status code plus `google.rpc.ErrorInfo{reason}`
(and `google.rpc.BadRequest` for invalid requests); the SDK turns them into
exception classes a caller can catch by meaning: `StaleRequestError` for a
fenced-out request, `NotFoundError`, `AgentBusyError`, `TransportError` when
the gateway could not be reached or did not answer in time, and so on.

The wire reasons are declared in proto/agenthost/common/v1/errors.proto; the
SDK matches those in SERVER_REASONS. SDK_REASONS are the SDK's own (a request
refused or a reply dropped before or after the wire), never sent by a server;
tests/contract/test_error_reasons.py checks both against the proto.
"""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2, status_pb2

# Reasons a server sends that the SDK turns into their own error classes.
STALE = "STALE"
AGENT_BUSY = "AGENT_BUSY"
QUESTION_ANSWERED = "QUESTION_ANSWERED"
UNKNOWN_MODEL = "UNKNOWN_MODEL"
# An image is no image by its bytes, too large, or one too many (the SDK
# refuses a file's so before sending it, as the gateway would).
IMAGE_REFUSED = "IMAGE_REFUSED"
# The session's model takes no images: a prompt with images is refused.
MODEL_TAKES_NO_IMAGES = "MODEL_TAKES_NO_IMAGES"
SERVER_REASONS = (
    STALE,
    AGENT_BUSY,
    QUESTION_ANSWERED,
    UNKNOWN_MODEL,
    IMAGE_REFUSED,
    MODEL_TAKES_NO_IMAGES,
)
# Reasons of errors the SDK raises itself.
PLAN_SELECTION_FAILED = "PLAN_SELECTION_FAILED"
HISTORY_GAP = "HISTORY_GAP"
INVALID_REPLY = "INVALID_REPLY"
CUT_OFF = "CUT_OFF"
SDK_REASONS = (PLAN_SELECTION_FAILED, HISTORY_GAP, INVALID_REPLY, CUT_OFF)


class AgentHostError(Exception):
    """A failed gateway call: the gRPC code name, the stable reason, details."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "UNKNOWN",
        reason: str = "",
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        self.metadata = dict(metadata or {})

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code}/{self.reason or '-'}: {self.message})"


class StaleRequestError(AgentHostError):
    """The gateway fenced the request out (reason STALE): it came from a
    superseded connection generation, or it is older than a request already
    applied to the session. Nothing was applied."""


class NotFoundError(AgentHostError):
    """Unknown session or workspace (or one of another account)."""


class UnauthenticatedError(AgentHostError):
    """No valid bearer token."""


class InvalidArgumentError(AgentHostError):
    """The request broke a schema rule; `violations` lists (field, why)."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "INVALID_ARGUMENT",
        reason: str = "",
        metadata: dict[str, str] | None = None,
        violations: list[tuple[str, str]] | None = None,
    ) -> None:
        super().__init__(message, code=code, reason=reason, metadata=metadata)
        self.violations = list(violations or [])


class UnknownModelError(InvalidArgumentError):
    """A model name the deployment does not configure (metadata `known`:
    the configured names, comma-separated); the settings did not change."""


class FailedPreconditionError(AgentHostError):
    """The request does not fit the current state (e.g. PLAN_MODE_INACTIVE)."""


class AgentBusyError(FailedPreconditionError):
    """A send while a turn runs (queue or steer instead)."""


class QuestionAnsweredError(FailedPreconditionError):
    """The question already has its answer (another client's came first)."""


class TransportError(AgentHostError):
    """The gateway could not be reached, went away during the call (reason
    CUT_OFF), or did not answer in time (UNAVAILABLE, DEADLINE_EXCEEDED)."""


class InvalidReplyError(AgentHostError):
    """A reply broke the contract's schema rules; it was not used."""


class SupersededError(AgentHostError):
    """This client's connection generation was superseded by another
    connection with the same client id; the client stops reconnecting."""


class ClientClosedError(AgentHostError):
    """The client was closed."""


class PlanSelectionFailedError(AgentHostError):
    """A prompt targeted plan mode while the session's latest plan selection
    had failed; it was not sent. Select again first."""


class HistoryGapError(AgentHostError):
    """An older history page did not end right before the loaded window; it
    was not used, and the history can still load older pages."""


_TRANSPORT_CODES = {"UNAVAILABLE", "DEADLINE_EXCEEDED"}


def _status_details(error: grpc.aio.AioRpcError) -> status_pb2.Status | None:
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            status: status_pb2.Status = status_pb2.Status.FromString(value)
            return status
    return None


def error_from_rpc(error: grpc.aio.AioRpcError) -> AgentHostError:
    """The typed SDK error for a failed call."""
    code = error.code().name if error.code() is not None else "UNKNOWN"
    message = error.details() or code
    if code == "CANCELLED":
        return _cut_off(message)
    reason = ""
    metadata: dict[str, str] = {}
    violations: list[tuple[str, str]] = []
    status = _status_details(error)
    for detail in status.details if status is not None else ():
        info = error_details_pb2.ErrorInfo()
        if detail.Unpack(info):
            reason, metadata = info.reason, dict(info.metadata)
            continue
        bad_request = error_details_pb2.BadRequest()
        if detail.Unpack(bad_request):
            violations = [(v.field, v.description) for v in bad_request.field_violations]
    if reason == STALE:
        return StaleRequestError(message, code=code, reason=reason, metadata=metadata)
    if reason == AGENT_BUSY:
        return AgentBusyError(message, code=code, reason=reason, metadata=metadata)
    if reason == QUESTION_ANSWERED:
        return QuestionAnsweredError(message, code=code, reason=reason, metadata=metadata)
    if reason == UNKNOWN_MODEL:
        return UnknownModelError(message, code=code, reason=reason, metadata=metadata)
    if code == "INVALID_ARGUMENT":
        return InvalidArgumentError(
            message, code=code, reason=reason, metadata=metadata, violations=violations
        )
    kinds: dict[str, type[AgentHostError]] = {
        "NOT_FOUND": NotFoundError,
        "UNAUTHENTICATED": UnauthenticatedError,
        "FAILED_PRECONDITION": FailedPreconditionError,
    }
    kind = kinds.get(code, TransportError if code in _TRANSPORT_CODES else AgentHostError)
    return kind(message, code=code, reason=reason, metadata=metadata)


def _cut_off(message: str) -> TransportError:
    """A call the far side cancelled. The gateway never answers CANCELLED
    itself (the SDK's own cancellations raise asyncio.CancelledError): gRPC
    cancels the calls that reach a server as it shuts down, before any
    handler sees them, and the calls a stop's grace period cuts short. To the
    caller that is the gateway going away mid-call, like a dropped
    connection: UNAVAILABLE, and the call may or may not have taken effect."""
    return TransportError(
        f"the gateway went away during the call ({message}); it may have taken effect",
        code="UNAVAILABLE",
        reason=CUT_OFF,
    )
