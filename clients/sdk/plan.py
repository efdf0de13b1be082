"""The plan state of one session as a client sees it, behind its fences.

Pure logic (no I/O): `PlanTracker` is fed the replies of plan queries and
selections, the committed `plan/mode` events the client receives (live,
caught up after a reconnect, or recovered by gap repair) and reconnects, in
whatever order they arrive, and decides what the snapshot shows:

- the full-state query is the source of truth; `plan/mode` events are the
  commit signal in between;
- generation fence: a reply to a request begun before a reconnect is dropped;
- request fence: queries and selections share one monotonic request number;
  a reply older than one already applied is dropped;
- event-version fence: a reply whose log seq is older than a committed
  `plan/mode` already known does not replace it (the commit wins);
- events change the state only once a reply confirmed that this deployment
  has plan mode; before that a commit is held and used when one does;
- a failed query or selection leaves the state as it was;
- malformed events are ignored; of a batch of events (a history window, a
  catch-up, a repaired gap) the latest valid commit by seq counts.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from agenthost.sessionlog.v1 import events_pb2

# Decisions kept for inspection (tests, debugging).
DECISIONS_KEPT = 512


@dataclass(frozen=True)
class PlanState:
    """`active` is the committed value; `pending`, when not None, is the
    selected target waiting for the next model-request boundary (and then
    always differs from `active`)."""

    active: bool
    pending: bool | None = None

    def __post_init__(self) -> None:
        if self.pending is not None and self.pending == self.active:
            raise ValueError("pending must differ from active")

    @property
    def is_pending(self) -> bool:
        return self.pending is not None

    def describe(self) -> str:
        """`off`, `on`, or `off → on (pending)`."""
        now = _on_off(self.active)
        if self.pending is None:
            return now
        return f"{now} → {_on_off(self.pending)} (pending)"


def _on_off(active: bool) -> str:
    return "on" if active else "off"


@dataclass(frozen=True)
class PlanValue:
    """What one reply said: plan mode is unavailable in this deployment
    (`state` None), or its state."""

    state: PlanState | None

    @property
    def available(self) -> bool:
        return self.state is not None


UNAVAILABLE = PlanValue(None)


@dataclass(frozen=True)
class PlanView:
    """The snapshot a session shows. `available` is None until a reply said
    whether the deployment has plan mode; `state` is None unless it has."""

    available: bool | None
    state: PlanState | None
    # The log seq the state reflects (-1 when none); views compare without it.
    seq: int = field(default=-1, compare=False)

    def describe(self) -> str:
        if self.available is None:
            return "unknown"
        if not self.available or self.state is None:
            return "unavailable"
        return self.state.describe()


class RequestKind(enum.Enum):
    OPEN = "open"
    QUERY = "query"
    SELECT = "select"


@dataclass(frozen=True)
class PlanTicket:
    """One plan request: its number in the session's one monotonic sequence
    and the connection generation it was begun in."""

    number: int
    generation: int
    kind: RequestKind


class Verdict(enum.Enum):
    APPLIED = "applied"
    # A reply older than a committed plan/mode already known: the commit wins
    # (the reply still confirms that plan mode exists).
    COMMIT_WINS = "overtaken by a commit"
    OLDER_REQUEST = "older than an applied request"
    SUPERSEDED = "begun before a reconnect"
    FAILED = "failed; state kept"
    COMMIT_APPLIED = "commit applied"
    COMMIT_HELD = "commit held until plan mode is confirmed"
    COMMIT_OLD = "commit not newer than the state"
    MALFORMED = "malformed; ignored"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    # The request a reply or failure answered; None for events.
    ticket: PlanTicket | None = None
    # The log seq of the reply or event.
    seq: int | None = None
    # Whether the snapshot changed.
    changed: bool = False

    @property
    def applied(self) -> bool:
        return self.verdict in (Verdict.APPLIED, Verdict.COMMIT_APPLIED, Verdict.COMMIT_WINS)


@dataclass(frozen=True)
class Commit:
    seq: int
    active: bool


def plan_commit(event: events_pb2.Event) -> Commit | None:
    """The commit a valid `plan/mode` event records, else None."""
    if event.WhichOneof("body") != "plan_mode" or event.seq < 0:
        return None
    return Commit(event.seq, event.plan_mode.active)


def is_malformed_plan_event(event: events_pb2.Event) -> bool:
    return event.WhichOneof("body") == "plan_mode" and event.seq < 0


class PlanTracker:
    def __init__(self, generation: int = 0) -> None:
        self._generation = generation
        self._issued = 0
        self._applied_number = 0
        self._available: bool | None = None
        self._state: PlanState | None = None
        self._state_seq = -1
        # The latest valid commit known, applied or held.
        self._commit: Commit | None = None
        self._in_flight: dict[int, PlanTicket] = {}
        self.decisions: deque[Decision] = deque(maxlen=DECISIONS_KEPT)

    # -- what the session shows ----------------------------------------------------

    @property
    def view(self) -> PlanView:
        return PlanView(self._available, self._state, self._state_seq)

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def commit(self) -> Commit | None:
        """The latest committed plan/mode known (applied, or held)."""
        return self._commit

    @property
    def in_flight(self) -> list[PlanTicket]:
        return sorted(self._in_flight.values(), key=lambda t: t.number)

    def decision_for(self, ticket: PlanTicket) -> Decision | None:
        for decision in reversed(self.decisions):
            if decision.ticket == ticket:
                return decision
        return None

    # -- inputs ------------------------------------------------------------------------

    def begin(self, kind: RequestKind, generation: int | None = None) -> PlanTicket:
        """A new query, selection or open, numbered after every earlier one."""
        self._issued += 1
        ticket = PlanTicket(
            self._issued, self._generation if generation is None else generation, kind
        )
        self._in_flight[ticket.number] = ticket
        return ticket

    def reconnected(self, generation: int) -> None:
        """The connection's generation grew: requests begun before are superseded."""
        self._generation = max(self._generation, generation)

    def on_reply(self, ticket: PlanTicket, value: PlanValue, seq: int) -> Decision:
        self._in_flight.pop(ticket.number, None)
        if ticket.generation < self._generation:
            return self._decide(Verdict.SUPERSEDED, ticket, seq)
        if ticket.number <= self._applied_number:
            return self._decide(Verdict.OLDER_REQUEST, ticket, seq)
        before = self.view
        self._applied_number = ticket.number
        if value.state is None:
            self._available, self._state, self._state_seq = False, None, seq
            return self._decide(Verdict.APPLIED, ticket, seq, before)
        self._available = True
        commit = self._commit
        if commit is not None and seq < commit.seq:
            if self._state is None or self._state_seq < commit.seq:
                self._state, self._state_seq = PlanState(commit.active), commit.seq
            return self._decide(Verdict.COMMIT_WINS, ticket, seq, before)
        self._state, self._state_seq = value.state, seq
        return self._decide(Verdict.APPLIED, ticket, seq, before)

    def superseded(self, ticket: PlanTicket, seq: int | None = None) -> Decision:
        """A reply the caller itself found superseded by a reconnect."""
        self._in_flight.pop(ticket.number, None)
        return self._decide(Verdict.SUPERSEDED, ticket, seq)

    def on_failure(self, ticket: PlanTicket) -> Decision:
        """A failed request (business error or transport): the state stays."""
        self._in_flight.pop(ticket.number, None)
        if ticket.generation < self._generation:
            return self._decide(Verdict.SUPERSEDED, ticket)
        return self._decide(Verdict.FAILED, ticket)

    def on_events(self, events: Iterable[events_pb2.Event]) -> Decision | None:
        """Events received in any way; the latest valid commit by seq counts.
        None when the batch holds no plan/mode event at all."""
        latest: Commit | None = None
        malformed = False
        for event in events:
            if is_malformed_plan_event(event):
                malformed = True
                continue
            commit = plan_commit(event)
            if commit is not None and (latest is None or commit.seq > latest.seq):
                latest = commit
        if latest is None:
            return self._decide(Verdict.MALFORMED) if malformed else None
        return self._on_commit(latest)

    def _on_commit(self, commit: Commit) -> Decision:
        known = self._commit
        if known is not None and commit.seq <= known.seq:
            return self._decide(Verdict.COMMIT_OLD, seq=commit.seq)
        self._commit = commit
        if self._available is not True:
            return self._decide(Verdict.COMMIT_HELD, seq=commit.seq)
        if commit.seq <= self._state_seq:
            return self._decide(Verdict.COMMIT_OLD, seq=commit.seq)
        before = self.view
        self._state, self._state_seq = PlanState(commit.active), commit.seq
        return self._decide(Verdict.COMMIT_APPLIED, seq=commit.seq, before=before)

    def reset_events(self) -> None:
        """The history was replaced (a resync): forget the commit seen so far,
        so the replacement window's commit counts even if its seq is lower."""
        self._commit = None
        if self._state is not None:
            self._state_seq = -1

    def _decide(
        self,
        verdict: Verdict,
        ticket: PlanTicket | None = None,
        seq: int | None = None,
        before: PlanView | None = None,
    ) -> Decision:
        changed = before is not None and before != self.view
        decision = Decision(verdict, ticket, seq, changed)
        self.decisions.append(decision)
        return decision
