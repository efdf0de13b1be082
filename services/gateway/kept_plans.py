"""The `plan` value of recently read sessions, kept current by the gateway's
own follower of the log, so a `PlanMode` read is answered without a call.

A read through the projection service costs two calls in sequence (the
gateway's, and the projection's read of the log's end that makes a read
right after an append reflect it); a plan read is what every client makes on
open, on reconnect and on every toggle. The gateway already receives every
event of every session in log order (its hub relays them to clients), so it
joins a snapshot to that stream the way Kubernetes' list+watch does by
resource version: the projection's `plan` value as of seq V is the seed, and
the relayed events after V fold into it with the one plan fold
(`agenthost_core.folds.fold_plan`).

A kept value answers only while it is provably as new as anything this
gateway knows of the session:
- it has folded every event the follower received for the session (an event
  that skips a seq drops it, as does a seed older than what was received);
- it is at or past every write this gateway acknowledged for the session
  (read-your-writes: the follower may not have delivered that write yet).
A read right after this gateway's own write waits (briefly) for the follower
to deliver it. Otherwise the caller reads through the projection (at least
as of what this gateway knows, so the projection spares its own read when
it folded that far) and seeds the view with the answer.

A write made through another gateway replica is reflected once this
gateway's follower delivers it, as every live frame is; each reply carries
the seq it is as of. A client that saw such a write acknowledged names its
seq (`at_least`), and the read waits for it or reads through the projection
as of it.

The projection's `plan` value is the whole plan state the fold keeps
(`{active, pending?}`), so seeding from it loses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from agenthost.sessionlog.v1 import events_pb2

from agenthost_core.folds import fold_plan
from agenthost_core.plan import PlanState
from services.common.recent import Recent

# Sessions whose plan (or last received seq) the gateway keeps, recently used
# first; a forgotten one is read through the projection again.
KEPT = 10_000
# How long a read waits for the follower to deliver a write this gateway
# acknowledged, before it reads through the projection instead.
CATCH_UP_S = 1.0


@dataclass
class _Tracked:
    # The last event seq the follower received (-1: none yet).
    received: int = -1
    # The highest seq of a write this gateway acknowledged (-1: none).
    acknowledged: int = -1
    # The plan folded through `as_of` (None: not known here).
    plan: PlanState | None = None
    as_of: int = -1


class KeptPlans:
    def __init__(self, kept: int = KEPT) -> None:
        self._sessions: Recent[str, _Tracked] = Recent(kept)
        # Set (and replaced) on every event the follower delivers.
        self._advanced = asyncio.Event()

    def _tracked(self, session_id: str) -> _Tracked:
        tracked = self._sessions.recall(session_id)
        if tracked is None:
            tracked = _Tracked()
            self._sessions.remember(session_id, tracked)
        return tracked

    def on_event(self, event: events_pb2.Event) -> None:
        """An event of the follower's stream (in log order per session)."""
        advanced, self._advanced = self._advanced, asyncio.Event()
        advanced.set()
        tracked = self._tracked(event.session_id)
        tracked.received = max(tracked.received, event.seq)
        if tracked.plan is None or event.seq <= tracked.as_of:
            return
        if event.seq != tracked.as_of + 1:  # a gap: what it held is unknown
            tracked.plan = None
            return
        tracked.plan = fold_plan(tracked.plan, event)
        tracked.as_of = event.seq

    def acknowledged(self, session_id: str, seq: int) -> None:
        """A write this gateway acknowledged landed at `seq`."""
        tracked = self._tracked(session_id)
        tracked.acknowledged = max(tracked.acknowledged, seq)

    def known_seq(self, session_id: str, at_least: int = -1) -> int:
        """The newest seq this gateway knows the session has (-1: none), or
        `at_least` when the caller knows of a newer one."""
        tracked = self._sessions.get(session_id)
        known = -1 if tracked is None else max(tracked.received, tracked.acknowledged)
        return max(known, at_least)

    async def read_soon(
        self, session_id: str, at_least: int = -1, within_s: float = CATCH_UP_S
    ) -> tuple[PlanState, int] | None:
        """`read` as of `at_least` or later, once the follower delivered what
        this gateway acknowledged (it trails the write's reply by little):
        waited for at most `within_s`, as long as the kept view can still
        catch up."""
        loop = asyncio.get_running_loop()
        until = loop.time() + within_s
        while (kept := self.read(session_id, at_least)) is None:
            tracked = self._sessions.get(session_id)
            behind_only_the_follower = (
                tracked is not None
                and tracked.plan is not None
                and tracked.as_of >= tracked.received
            )
            if not behind_only_the_follower or loop.time() >= until:
                return None
            advanced = self._advanced
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout_at(until):
                    await advanced.wait()
        return kept

    def read(self, session_id: str, at_least: int = -1) -> tuple[PlanState, int] | None:
        """The plan view and the seq it is as of, when it is as new as
        anything this gateway (or the caller: `at_least`) knows of the
        session; else None."""
        tracked = self._sessions.get(session_id)
        if tracked is None or tracked.plan is None:
            return None
        if tracked.as_of < max(tracked.received, tracked.acknowledged, at_least):
            return None
        self._sessions.recall(session_id)  # now the most recently used
        return tracked.plan, tracked.as_of

    def seed(self, session_id: str, plan: PlanState, as_of: int) -> None:
        """The projection's plan view as of `as_of`: kept when nothing newer
        reached this gateway already (else it would miss those events)."""
        tracked = self._tracked(session_id)
        if as_of < max(tracked.received, tracked.acknowledged):
            return
        if tracked.plan is not None and as_of <= tracked.as_of:
            return
        tracked.plan = plan
        tracked.as_of = as_of
