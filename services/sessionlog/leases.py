"""Session leases: which runtime replica owns a session's live agent.

A lease is (session, owner, token, expiry). The token is a fencing token, in
the manner of Temporal's shard range ids: it grows with every acquisition that
is not the live owner taking its own lease again, and the log refuses an
append that carries any token but the current one (append_plan.py checks it
in the append's own transaction). So once a successor acquired the session, a
deposed owner, however late its writes arrive, writes nothing.

The rules live here once; a backend reads the session's lease row, applies
one of these changes and writes the row back in one transaction, serialised
with the append waves (group_commit.py; on PostgreSQL under the append lock,
so replicas of the log agree too). A lease row outlives its release (owner "",
expired) and its session, so a token is never handed out twice for one id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from services.common.errors import LeaseLost


@dataclass(frozen=True)
class Lease:
    session_id: str
    # "" once released.
    owner: str
    token: int
    expires_at_us: int

    def live(self, now_us: int) -> bool:
        return bool(self.owner) and now_us < self.expires_at_us


# A change of one session's lease row: the row as stored (None: never leased)
# to the row to store and the lease to answer. Raises to change nothing.
LeaseChange = Callable[[Lease | None], tuple[Lease, Lease]]


def acquire(session_id: str, owner: str, ttl_us: int, now_us: int) -> LeaseChange:
    """Free, expired or the caller's own live lease: the caller's, until now
    + ttl (a new token unless it was the caller's live one). Held live by
    another: unchanged, answered as it stands."""

    def change(current: Lease | None) -> tuple[Lease, Lease]:
        expires = now_us + ttl_us
        if current is None:
            taken = Lease(session_id, owner, 1, expires)
        elif not current.live(now_us):
            taken = Lease(session_id, owner, current.token + 1, expires)
        elif current.owner == owner:
            taken = Lease(session_id, owner, current.token, expires)
        else:
            return current, current
        return taken, taken

    return change


def renew(session_id: str, owner: str, token: int, ttl_us: int, now_us: int) -> LeaseChange:
    """Extend the lease while `token` is its current one and `owner` holds it
    (an expired lease nobody took over is still the owner's: its token is
    current, so it may renew); LeaseLost otherwise."""

    def change(current: Lease | None) -> tuple[Lease, Lease]:
        if current is None or current.token != token or current.owner != owner:
            raise LeaseLost(session_id, token, current.token if current else 0)
        renewed = Lease(session_id, owner, token, now_us + ttl_us)
        return renewed, renewed

    return change


def release(session_id: str, owner: str, token: int) -> LeaseChange:
    """Give the lease up when `token` is current (the token is kept, so the
    next owner gets a higher one); otherwise change nothing."""

    def change(current: Lease | None) -> tuple[Lease, Lease]:
        if current is None or current.token != token or current.owner != owner:
            raise LeaseLost(session_id, token, current.token if current else 0)
        released = Lease(session_id, "", token, 0)
        return released, released

    return change


def check_token(session_id: str, token: int | None, current: int | None) -> None:
    """An append's lease token against the session's current one (None: the
    writer holds no lease, e.g. a client or plan mode, and is not fenced)."""
    if token is not None and token != current:
        raise LeaseLost(session_id, token, current or 0)
