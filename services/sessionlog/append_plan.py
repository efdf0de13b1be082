"""What one wave of appends writes, and what each caller is answered.

Every backend commits a wave the same way (group_commit.py): read what the
store holds for the wave's sessions and event ids, plan here, write the plan,
commit. The plan applies the append rules of store.SessionStore.append to
each batch in arrival order, against the store as the earlier batches of the
wave left it, so a wave answers exactly what the same batches would answer
one transaction each: idempotency first (a batch whose ids are all present
returns their seqs), then the writer's lease token (leases.py), then the
expected seq, then gapless seqs from the session's last one. A refused batch
adds nothing to the plan, so it cannot touch its neighbours. The rules live
here once, and the backends differ only in SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from services.common.errors import EventIdConflict, WrongExpectedSeq

from .leases import check_token
from .port import AppendResult
from .store import (
    Event,
    EventRow,
    SessionHeader,
    SessionRow,
    TouchRow,
    event_row,
    session_row,
    touch_row,
)

# A caller's answer: its result, or the error its batch failed with.
Outcome = AppendResult | Exception


@dataclass(frozen=True)
class AppendRequest:
    """One caller's batch, as SessionStore.append receives it."""

    header: SessionHeader
    events: Sequence[Event]
    expected_last_seq: int | None
    now_us: int
    # The writer's session lease token (None: an unfenced writer).
    lease_token: int | None = None


@dataclass(frozen=True)
class Stored:
    """What the store holds for a wave, read in the wave's transaction."""

    # The last seq of each of the wave's sessions the store holds.
    last_seqs: dict[str, int]
    # The seq of each of the wave's (session id, event id) pairs already stored.
    seqs: dict[tuple[str, str], int]
    # The current lease token of each of the wave's sessions that has a lease.
    lease_tokens: dict[str, int] = field(default_factory=dict)


def wanted_ids(requests: Sequence[AppendRequest]) -> dict[str, list[str]]:
    """The event ids a wave names, by session: what `Stored.seqs` must cover."""
    wanted: dict[str, dict[str, None]] = {}
    for request in requests:
        ids = wanted.setdefault(request.header.id, {})
        ids.update(dict.fromkeys(e.id for e in request.events))
    return {session_id: list(ids) for session_id, ids in wanted.items()}


@dataclass
class WavePlan:
    """Rows to write, in this order, and each caller's outcome in arrival order."""

    outcomes: list[Outcome] = field(default_factory=list)
    new_sessions: list[SessionRow] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)
    # The event each row of `events` stores, in the same order.
    written: list[Event] = field(default_factory=list)
    touches: list[TouchRow] = field(default_factory=list)

    @property
    def touched_sessions(self) -> list[str]:
        return list(dict.fromkeys(touch[-1] for touch in self.touches))


def plan_wave(stored: Stored, requests: Sequence[AppendRequest]) -> WavePlan:
    wave = _Wave(stored)
    for request in requests:
        try:
            wave.plan.outcomes.append(wave.add(request))
        except Exception as error:  # this batch's own failure: the others go on
            wave.plan.outcomes.append(error)
    return wave.plan


class _Wave:
    """The store as the wave's accepted batches have changed it so far."""

    def __init__(self, stored: Stored) -> None:
        self.last_seqs = dict(stored.last_seqs)
        self.seqs = dict(stored.seqs)
        self.lease_tokens = stored.lease_tokens
        self.plan = WavePlan()

    def add(self, request: AppendRequest) -> AppendResult:
        session_id = request.header.id
        last_seq = self.last_seqs.get(session_id, -1)
        ids = [e.id for e in request.events]
        present = {i: self.seqs[session_id, i] for i in ids if (session_id, i) in self.seqs}
        if present:
            if len(present) != len(ids):
                raise EventIdConflict(session_id, next(i for i in ids if i in present))
            return AppendResult([present[i] for i in ids], last_seq, duplicate=True)
        check_token(session_id, request.lease_token, self.lease_tokens.get(session_id))
        if request.expected_last_seq is not None and request.expected_last_seq != last_seq:
            raise WrongExpectedSeq(session_id, request.expected_last_seq, last_seq)
        seqs = list(range(last_seq + 1, last_seq + 1 + len(ids)))
        self._accept(request, seqs)
        return AppendResult(seqs, seqs[-1], duplicate=False)

    def _accept(self, request: AppendRequest, seqs: list[int]) -> None:
        session_id = request.header.id
        # Rows first: an event that cannot be stored fails before the wave changes.
        rows = [event_row(session_id, s, e) for s, e in zip(seqs, request.events, strict=True)]
        touch = touch_row(session_id, request.events, seqs[-1], request.now_us)
        if session_id not in self.last_seqs:
            self.plan.new_sessions.append(session_row(request.header, request.now_us))
        self.plan.events += rows
        self.plan.written += request.events
        self.plan.touches.append(touch)
        self.last_seqs[session_id] = seqs[-1]
        self.seqs.update({(session_id, row[2]): row[1] for row in rows})
