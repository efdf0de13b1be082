"""The plan state of one session as a client sees it, behind its fences.

Pure logic (no I/O): `PlanTracker` is fed the `plan` projection values the
client receives (the page's block, live frames, the values a resumed stream
sends), the replies of plan queries and selections, and reconnects, in
whatever order they arrive, and decides what the snapshot shows:

- projection values and replies are full states stamped with the log seq
  they reflect, folded from the log by the same code; the higher seq wins
  (a reply older than a value already known does not replace it);
- generation fence: a reply to a request begun before a reconnect is dropped;
- request fence: queries and selections share one monotonic request number;
  a reply older than one already applied is dropped;
- a projection block without a `plan` key, or an "unavailable" reply, means
  the deployment has no plan mode; any `plan` value says it has;
- a failed query or selection leaves the state as it was; the latest
  selection's failure is kept (`selection_failed`) until a newer selection,
  so a prompt that targets plan mode can be refused before it is sent.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field

# The SDK's plan state is the one plan type (re-exported).
from agenthost_core.plan import PlanState as PlanState

# Decisions kept for inspection (tests, debugging).
DECISIONS_KEPT = 512


@dataclass(frozen=True)
class PlanValue:
    """What one reply said: plan mode is unavailable in this deployment
    (`state` None), or its state."""

    state: PlanState | None

    @property
    def available(self) -> bool:
        """Whether the deployment has plan mode."""
        return self.state is not None


UNAVAILABLE = PlanValue(None)


@dataclass(frozen=True)
class SessionPlan:
    """The snapshot a session shows. `available` is None until a reply said
    whether the deployment has plan mode; `state` is None unless it has."""

    available: bool | None
    state: PlanState | None
    # The log seq the state reflects (-1 when none); views compare without it.
    seq: int = field(default=-1, compare=False)

    def describe(self) -> str:
        """`unknown`, `unavailable`, or the state (`on`, `off → on (pending)`)."""
        if self.available is None:
            return "unknown"
        if not self.available or self.state is None:
            return "unavailable"
        return self.state.describe()


class RequestKind(enum.Enum):
    """What a plan request was."""

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
    """What the fences made of a reply, a failure or a projection value."""

    APPLIED = "applied"
    # A reply older than a projection value already known: the value wins
    # (the reply still confirms that plan mode exists).
    NEWER_KNOWN = "older than a known value"
    OLDER_REQUEST = "older than an applied request"
    SUPERSEDED = "begun before a reconnect"
    FAILED = "failed; state kept"
    VALUE_APPLIED = "projection value applied"
    VALUE_OLD = "projection value not newer than the state"


@dataclass(frozen=True)
class Decision:
    """One verdict, with the request and seq it was about."""

    verdict: Verdict
    # The request a reply or failure answered; None for projection values.
    ticket: PlanTicket | None = None
    # The log seq of the reply or value.
    seq: int | None = None
    # Whether the snapshot changed.
    changed: bool = False

    @property
    def applied(self) -> bool:
        """Whether the input counted (the snapshot may still be unchanged)."""
        return self.verdict in (Verdict.APPLIED, Verdict.VALUE_APPLIED, Verdict.NEWER_KNOWN)


class PlanTracker:
    """The plan fences of one session; see the module docstring."""

    def __init__(self, generation: int = 0) -> None:
        self._generation = generation
        self._issued = 0
        self._applied_number = 0
        self._available: bool | None = None
        self._state: PlanState | None = None
        self._state_seq = -1
        self._newest_selection = 0
        self._failed_selection: PlanTicket | None = None
        self._in_flight: dict[int, PlanTicket] = {}
        self.decisions: deque[Decision] = deque(maxlen=DECISIONS_KEPT)

    # -- what the session shows ----------------------------------------------------

    @property
    def view(self) -> SessionPlan:
        """The snapshot: availability, state and the seq it reflects."""
        return SessionPlan(self._available, self._state, self._state_seq)

    @property
    def generation(self) -> int:
        """The connection generation requests are fenced by."""
        return self._generation

    @property
    def in_flight(self) -> list[PlanTicket]:
        """Requests begun and not answered yet, oldest first."""
        return sorted(self._in_flight.values(), key=lambda t: t.number)

    @property
    def selection_failed(self) -> PlanTicket | None:
        """The newest selection, when it failed (None once a newer one began)."""
        return self._failed_selection

    def decision_for(self, ticket: PlanTicket) -> Decision | None:
        """The verdict on a request, if it was decided."""
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
        if kind is RequestKind.SELECT:
            self._newest_selection = ticket.number
            self._failed_selection = None
        return ticket

    def reconnected(self, generation: int) -> None:
        """The connection's generation grew: requests begun before are superseded."""
        self._generation = max(self._generation, generation)

    def on_reply(self, ticket: PlanTicket, value: PlanValue, seq: int) -> Decision:
        """A query's or selection's answer, behind the fences."""
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
        if seq < self._state_seq:
            return self._decide(Verdict.NEWER_KNOWN, ticket, seq, before)
        self._state, self._state_seq = value.state, seq
        return self._decide(Verdict.APPLIED, ticket, seq, before)

    def on_projection(self, value: PlanValue, seq: int) -> Decision:
        """A `plan` projection value as of `seq` (UNAVAILABLE: the block had
        no `plan` key); applied unless the state already reflects a newer seq."""
        if seq < self._state_seq:
            return self._decide(Verdict.VALUE_OLD, seq=seq)
        before = self.view
        self._available, self._state, self._state_seq = value.available, value.state, seq
        return self._decide(Verdict.VALUE_APPLIED, seq=seq, before=before)

    def superseded(self, ticket: PlanTicket, seq: int | None = None) -> Decision:
        """A reply the caller itself found superseded by a reconnect."""
        self._in_flight.pop(ticket.number, None)
        return self._decide(Verdict.SUPERSEDED, ticket, seq)

    def on_failure(self, ticket: PlanTicket) -> Decision:
        """A failed request (business error or transport): the state stays."""
        self._in_flight.pop(ticket.number, None)
        if ticket.generation < self._generation:
            return self._decide(Verdict.SUPERSEDED, ticket)
        if ticket.kind is RequestKind.SELECT and ticket.number == self._newest_selection:
            self._failed_selection = ticket
        return self._decide(Verdict.FAILED, ticket)

    def reset(self) -> None:
        """The history was replaced (a resync): the replacement's values count
        even if their seq is lower."""
        self._state_seq = -1

    def _decide(
        self,
        verdict: Verdict,
        ticket: PlanTicket | None = None,
        seq: int | None = None,
        before: SessionPlan | None = None,
    ) -> Decision:
        changed = before is not None and before != self.view
        decision = Decision(verdict, ticket, seq, changed)
        self.decisions.append(decision)
        return decision
