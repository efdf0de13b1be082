"""Domain errors with stable reasons; the service runtime maps them to gRPC.

Domain code raises these and knows nothing about gRPC: each class names the
status code family, and `reason` is the stable `google.rpc.ErrorInfo` reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import ClassVar

from agenthost.common.v1 import errors_pb2

ERROR_DOMAIN = "agenthost"
REASON_PREFIX = "ERROR_REASON_"


@cache
def declared_reasons() -> frozenset[str]:
    """The wire reasons proto/agenthost/common/v1/errors.proto declares."""
    names = errors_pb2.ErrorReason.keys()
    return frozenset(
        n.removeprefix(REASON_PREFIX) for n in names if n != "ERROR_REASON_UNSPECIFIED"
    )


class UndeclaredReason(TypeError):
    """A DomainError class names a reason errors.proto does not declare."""


class DomainError(Exception):
    """A failure the caller can act on: a stable reason plus details.

    Subclasses that stand for one reason set REASON; they are registered so a
    client can rebuild the same exception type from a gRPC status."""

    status = "INTERNAL"
    REASON = ""
    by_reason: ClassVar[dict[str, type[DomainError]]] = {}

    def __init__(self, reason: str, message: str, **metadata: str | int) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.metadata = {key: str(value) for key, value in metadata.items()}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.REASON:
            # Fail at import: a reason is a contract, declared before it is raised.
            if cls.REASON not in declared_reasons():
                raise UndeclaredReason(
                    f"{cls.__name__}.REASON {cls.REASON!r} is not in errors.proto"
                )
            DomainError.by_reason[cls.REASON] = cls

    @classmethod
    def from_wire(cls, reason: str, message: str, metadata: dict[str, str]) -> DomainError:
        """The error as the server raised it, typed by its reason when known."""
        error = cls.__new__(cls)
        DomainError.__init__(error, reason, message, **metadata)
        return error


class NotFound(DomainError):
    status = "NOT_FOUND"


class AlreadyExists(DomainError):
    status = "ALREADY_EXISTS"


class FailedPrecondition(DomainError):
    status = "FAILED_PRECONDITION"


class InvalidArgument(DomainError):
    status = "INVALID_ARGUMENT"


class OutOfRange(DomainError):
    status = "OUT_OF_RANGE"


class Unavailable(DomainError):
    status = "UNAVAILABLE"


class Unauthenticated(DomainError):
    status = "UNAUTHENTICATED"


class NotReady(Unavailable):
    """The service is starting (its storage is not open yet) or stopping
    (try again: the restarted service or another replica answers)."""

    REASON = "NOT_READY"

    def __init__(self, what: str = "the service", service: str = "") -> None:
        # `service` names the refusing service (metadata), so an answer a
        # caller passes on still says who was not ready.
        named = {"service": service} if service else {}
        super().__init__(self.REASON, f"{service or what} is not serving now; try again", **named)


class InvalidRequest(InvalidArgument):
    """A value the rules of the contract let through but the service cannot
    take (e.g. beyond what a store holds); answered like a protovalidate
    violation, with a BadRequest naming `field`."""

    REASON = "INVALID_REQUEST"

    def __init__(self, field: str, description: str) -> None:
        super().__init__(self.REASON, f"invalid {field}: {description}", field=field)


class BadPageSize(InvalidArgument):
    """A page size or limit out of its range (below 1, say)."""

    REASON = "BAD_PAGE_SIZE"

    def __init__(self, field: str, description: str) -> None:
        super().__init__(self.REASON, f"{field} {description}", field=field)


class UnknownModel(InvalidArgument):
    """A model name the deployment's models file does not list."""

    REASON = "UNKNOWN_MODEL"

    def __init__(self, name: str, known: Sequence[str]) -> None:
        super().__init__(
            self.REASON,
            f"no model {name!r}; the configured models are: {', '.join(known)}",
            model=name,
            known=",".join(known),
        )


class PeerUnavailable(Unavailable):
    """A service this one depends on failed or could not be reached (retry).

    `peer` names it (a service name: `sessionlog`, `agentruntime`, …), so
    whoever reads the error knows which process to look at; `peer_code` is
    the status that service's call ended with."""

    REASON = "PEER_UNAVAILABLE"
    # When the failed call's target is not known (the edge's last resort).
    UNNAMED = "a service behind this one"

    def __init__(self, peer: str, peer_code: str) -> None:
        super().__init__(
            self.REASON,
            f"{peer} is unavailable ({peer_code}); try again",
            peer=peer,
            peer_code=peer_code,
        )


class StorageUnavailable(Unavailable):
    """The service's storage refused the work (read-only, full, gone): try
    again; the service reports NOT_SERVING until it can write again."""

    REASON = "STORAGE_UNAVAILABLE"

    def __init__(self, error: str) -> None:
        super().__init__(self.REASON, f"storage is unavailable: {error}; try again", error=error)


class BadPageToken(InvalidArgument):
    """A page token the service did not hand out."""

    REASON = "BAD_PAGE_TOKEN"

    def __init__(self, token: str) -> None:
        super().__init__(
            self.REASON, f"page token {token!r} is not one we issued", field="page_token"
        )


class SessionNotFound(NotFound):
    REASON = "SESSION_NOT_FOUND"

    def __init__(self, session_id: str) -> None:
        super().__init__(
            "SESSION_NOT_FOUND", f"session {session_id!r} not found", session_id=session_id
        )


class SessionConflict(AlreadyExists):
    REASON = "SESSION_CONFLICT"

    def __init__(self, session_id: str, cwd: str) -> None:
        super().__init__(
            "SESSION_CONFLICT",
            f"session {session_id!r} exists with another cwd than {cwd!r}",
            session_id=session_id,
        )


class WrongExpectedSeq(FailedPrecondition):
    """An optimistic-concurrency miss; carries the log's current last seq."""

    REASON = "WRONG_EXPECTED_SEQ"

    def __init__(self, session_id: str, expected: int, current_last_seq: int) -> None:
        super().__init__(
            "WRONG_EXPECTED_SEQ",
            f"session {session_id!r} ends at seq {current_last_seq}, not {expected}",
            session_id=session_id,
            expected_last_seq=expected,
            current_last_seq=current_last_seq,
        )

    @property
    def current_last_seq(self) -> int:
        return int(self.metadata["current_last_seq"])


class EventIdConflict(FailedPrecondition):
    REASON = "EVENT_ID_CONFLICT"

    def __init__(self, session_id: str, event_id: str) -> None:
        super().__init__(
            "EVENT_ID_CONFLICT",
            f"event id {event_id!r} of session {session_id!r} was already "
            "used by a different batch",
            session_id=session_id,
            event_id=event_id,
        )


class LeaseLost(FailedPrecondition):
    """A session lease token that is no longer current: another runtime took
    the session over. FAILED_PRECONDITION, not ABORTED: ABORTED invites a
    retry of the read-modify-write, and a deposed owner must not retry; it
    stops, and only a new acquisition (a new token) lets it write again."""

    REASON = "LEASE_LOST"

    def __init__(self, session_id: str, token: int, current_token: int) -> None:
        super().__init__(
            self.REASON,
            f"lease token {token} of session {session_id!r} is not current "
            f"(current: {current_token})",
            session_id=session_id,
            token=token,
            current_token=current_token,
        )


class SessionOwnedElsewhere(Unavailable):
    """Another runtime replica holds the session's live lease: retry later or
    at another replica (`owner` says which holds it; `service` names the
    agent runtime as the service that cannot serve the session here)."""

    REASON = "SESSION_OWNED_ELSEWHERE"

    def __init__(self, session_id: str, owner: str, expires_at_us: int) -> None:
        super().__init__(
            self.REASON,
            f"session {session_id!r} runs on another runtime ({owner}); try again",
            session_id=session_id,
            owner=owner,
            expires_at_us=expires_at_us,
            service="agentruntime",
        )

    @property
    def expires_at_us(self) -> int:
        return int(self.metadata["expires_at_us"])


class ImageRefused(InvalidArgument):
    """An image sent with a prompt is none by its bytes, too large, or one
    too many: nothing is recorded."""

    REASON = "IMAGE_REFUSED"

    def __init__(self, image: str, why: str) -> None:
        super().__init__(self.REASON, f"cannot send image {image}: {why}", image=image, why=why)


class ImageNotFound(NotFound):
    """A digest names no image the session holds."""

    REASON = "IMAGE_NOT_FOUND"

    def __init__(self, digest: str) -> None:
        super().__init__(
            self.REASON, f"no image {digest} is stored for this session", digest=digest
        )


class ModelTakesNoImages(FailedPrecondition):
    """A prompt sends images to a session whose model takes none."""

    REASON = "MODEL_TAKES_NO_IMAGES"

    def __init__(self, model: str) -> None:
        super().__init__(
            self.REASON,
            f"the session's model {model!r} takes no images: choose a model that does "
            "(its models file entry says images = true), or send text only",
            model=model,
        )
