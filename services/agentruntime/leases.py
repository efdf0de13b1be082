"""The session leases a runtime holds: one per live agent.

Several runtime replicas may serve one session log; a session's agent runs
only on the replica that holds its lease (services/sessionlog/leases.py).
The runtime takes the lease before it loads the agent, renews it in the
background at a third of its length, writes every append with its token, and
gives it up on a graceful stop. When the log says the lease is lost (another
replica took the session over after it expired), the agent is dropped: the
log refuses its writes anyway, so it must not go on.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping

from services.common.config import seconds_from_env
from services.common.errors import LeaseLost, SessionOwnedElsewhere
from services.common.tasks import spawn
from services.sessionlog.leases import Lease
from services.sessionlog.port import SessionLogPort

log = logging.getLogger("agenthost.runtime")

ENV_LEASE_S = "AGENTHOST_LEASE_S"
DEFAULT_LEASE_S = 10.0
# Renewals per lease length: two may fail in a row before the lease expires.
RENEWALS_PER_LEASE = 3


def lease_s_from_env(env: Mapping[str, str]) -> float:
    """AGENTHOST_LEASE_S: how long a session lease lasts unless renewed."""
    return seconds_from_env(env, ENV_LEASE_S, DEFAULT_LEASE_S, 3600)


class SessionLeases:
    """The leases of one runtime replica, held under its owner id: the
    address peers reach the replica at, once it listens (`serve_at`). The id
    says where a session runs, so a gateway turned away by another replica
    knows whom to ask (services/gateway/runtimes.py); and it stays the same
    across a restart at the same address, so a replica killed without giving
    its leases up takes its sessions back at once instead of waiting for
    them to expire (its dead incarnation writes nothing more)."""

    def __init__(
        self,
        log: SessionLogPort,
        on_lost: Callable[[str], None],
        lease_s: float = DEFAULT_LEASE_S,
    ) -> None:
        # Until the replica listens (a runtime used in-process keeps it).
        self.owner = f"runtime-{uuid.uuid4().hex}"
        self.lease_s = lease_s
        self._log = log
        self._on_lost = on_lost
        self._held: dict[str, Lease] = {}
        self._renewers: dict[str, asyncio.Task[None]] = {}

    def serve_at(self, address: str) -> None:
        """Own leases as the replica at `address` (before any is taken)."""
        self.owner = address

    def token(self, session_id: str) -> int | None:
        lease = self._held.get(session_id)
        return None if lease is None else lease.token

    async def acquire(self, session_id: str) -> int:
        """The session's lease, renewed from now on; its token. Raises
        SessionOwnedElsewhere while another replica holds it live."""
        lease = await self._log.acquire_lease(session_id, self.owner, self.lease_s)
        if lease.owner != self.owner:
            raise SessionOwnedElsewhere(session_id, lease.owner, lease.expires_at_us)
        self._held[session_id] = lease
        if session_id not in self._renewers:
            self._renewers[session_id] = spawn(self._renew(session_id), name=f"lease-{session_id}")
        return lease.token

    def lost(self, session_id: str, token: int) -> None:
        """The log refused `token`: forget the lease and tell the runtime
        (once, whoever noticed first: a renewal or an append; a late refusal
        of an older token leaves a lease taken again since alone)."""
        held = self._held.get(session_id)
        if held is None or held.token != token:
            return
        del self._held[session_id]
        renewer = self._renewers.pop(session_id, None)
        if renewer is not None and renewer is not asyncio.current_task():
            renewer.cancel()
        log.warning("session lease lost to another runtime", extra={"session_id": session_id})
        self._on_lost(session_id)

    async def release(self, session_id: str) -> None:
        """Give the lease up, so the next owner need not wait for its expiry."""
        renewer = self._renewers.pop(session_id, None)
        if renewer is not None:
            renewer.cancel()
            await asyncio.gather(renewer, return_exceptions=True)
        lease = self._held.pop(session_id, None)
        if lease is None:
            return
        try:
            await self._log.release_lease(session_id, self.owner, lease.token)
        except Exception as error:  # it expires on its own
            log.warning("session lease not released: %s", error, extra={"session_id": session_id})

    async def release_all(self) -> None:
        await asyncio.gather(*(self.release(session_id) for session_id in list(self._held)))

    async def _renew(self, session_id: str) -> None:
        while session_id in self._held:
            # A period, not synchronisation: the renewal is due a third into the lease.
            await asyncio.sleep(self.lease_s / RENEWALS_PER_LEASE)
            lease = self._held.get(session_id)
            if lease is None:
                return
            try:
                renewed = await self._log.renew_lease(
                    session_id, self.owner, lease.token, self.lease_s
                )
            except LeaseLost:
                self.lost(session_id, lease.token)
                return
            except Exception as error:  # the log away: try again next period
                log.warning(
                    "session lease not renewed: %s", error, extra={"session_id": session_id}
                )
                continue
            if session_id in self._held:
                self._held[session_id] = renewed
