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


def latest_of_each(changes: list[Change]) -> list[Change]:
    """One change per key, its latest, in the order those were made: what a
    watcher needs of events folded together (the higher seq wins anyway)."""
    if len(changes) < 2:
        return changes
    seen: set[str] = set()
    kept = []
    for change in reversed(changes):
        if change.key not in seen:
            seen.add(change.key)
            kept.append(change)
    kept.reverse()
    return kept


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
