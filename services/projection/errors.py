"""Typed failures of the projection domain (mapped to gRPC by the servicer)."""

from __future__ import annotations

from services.common.errors import AlreadyExists, DomainError, InvalidArgument, Unavailable


class UnitKeyConflict(AlreadyExists):
    """Two different units claim one key: their checkpoints would be mixed up."""

    def __init__(self, key: str, registered_version: int, offered_version: int) -> None:
        super().__init__(
            "UNIT_KEY_CONFLICT",
            f"projection unit {key!r} is already registered with state_version "
            f"{registered_version}; refusing another unit (state_version {offered_version})",
            key=key,
            registered_version=registered_version,
            offered_version=offered_version,
        )


class InvalidUnitKey(InvalidArgument):
    def __init__(self, key: str) -> None:
        super().__init__(
            "INVALID_UNIT_KEY", f"projection unit key {key!r} must be 1..64 characters", key=key
        )


class WatchLagged(Unavailable):
    """The watcher did not keep up; reconnect with the last seq it saw (the
    catch-up of the new watch then collapses what was missed, with no gap)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(
            "WATCH_LAGGED",
            f"watcher of session {session_id!r} fell too far behind; watch again from "
            "the last seq seen",
            session_id=session_id,
        )


class ProjectionFailed(DomainError):
    """A unit raised while folding; the session's in-memory state was dropped
    (it may have been half applied) and will be rebuilt from the log."""

    def __init__(self, session_id: str, seq: int, key: str) -> None:
        super().__init__(
            "PROJECTION_FAILED",
            f"projection unit {key!r} failed on event {seq} of session {session_id!r}",
            session_id=session_id,
            seq=seq,
            key=key,
        )
