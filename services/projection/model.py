"""Values the engine hands out: snapshots and watch frames."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .unit import View


class Snapshot(NamedTuple):
    """The views of one session as of `as_of_seq` (-1: the log is empty)."""

    as_of_seq: int
    values: dict[str, View]


@dataclass(frozen=True)
class Change:
    """The view of `key` became `value` by the event at `seq`.

    `value` is shared by every watcher of the session: treat it as read-only.
    """

    key: str
    value: View
    seq: int


@dataclass(frozen=True)
class CaughtUp:
    """End of a watch's catch-up: what follows is live, with seq > as_of_seq."""

    as_of_seq: int


WatchItem = Change | CaughtUp


@dataclass(frozen=True)
class SessionChange:
    """A change of one session's view, as every-session watchers see it."""

    session_id: str
    change: Change
