"""The plan collaboration state of each agent (agent id == session id).

Stateless over the session log: the committed state is the last plan/mode
event, a selection made while a turn runs is the plan/selection recorded
after it, and both are read with the one fold of agenthost_core/folds.py.
So any replica serves any session, and a pending choice survives every
restart because the log does. The folded state is only a cache: calls for
one session are serialised in-process by a lock, and other writers of the
log (another replica, the runtime) are handled optimistically: every write
appends with the last seq it folded and re-decides after a miss. So a
decision on a cached state needs no read first: the append's expected seq
refuses it when the log has moved on (a Set on an idle agent is one append),
and only a decision that appends nothing reads the log to confirm it.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import NamedTuple, TypeVar

from agenthost.sessionlog.v1 import events_pb2

from agenthost_core.folds import SessionState, fold_events
from agenthost_core.plan import PlanState
from services.common.errors import DomainError, WrongExpectedSeq
from services.sessionlog.port import SessionLogPort

from .command import PlanCommand, parse_plan_args
from .config import PlanModeConfig
from .decisions import SetAction, decide_set, policy_sections, set_events, switch_events
from .errors import PlanModeInactive
from .events import command_done_event, command_run_event

logger = logging.getLogger(__name__)

R = TypeVar("R")

DEFAULT_CONFIG = PlanModeConfig()
# Appends retried after a WrongExpectedSeq before the miss is reported.
MAX_ATTEMPTS = 5
# Events per read while catching up with the log.
READ_PAGE = 1000
# Sessions whose folded state is kept in memory.
DEFAULT_CACHE_SIZE = 10_000


class SetOutcome(enum.Enum):
    COMMITTED = "committed"
    QUEUED = "queued"
    CANCELLED = "cancelled"
    NOOP = "noop"


class PlanSnapshot(NamedTuple):
    state: PlanState
    as_of_seq: int


class SetResult(NamedTuple):
    outcome: SetOutcome
    state: PlanState
    as_of_seq: int


class BoundaryResult(NamedTuple):
    # The state the coming model request is built with.
    state: PlanState
    sections: list[events_pb2.PromptSection]
    # False only when a queued selection could not be recorded (it stays pending).
    applied: bool
    as_of_seq: int


class CommandResult(NamedTuple):
    ok: bool
    message: str
    state: PlanState
    # The text the runtime steers as the next user message (`/plan <message>`).
    steer_text: str | None
    as_of_seq: int


class PlanModeController:
    def __init__(
        self,
        log: SessionLogPort,
        config: PlanModeConfig = DEFAULT_CONFIG,
        *,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        self._log = log
        self._config = config
        self._sessions = _SessionSlots(cache_size)

    async def get(self, session_id: str) -> PlanSnapshot:
        async with self._sessions.hold(session_id) as slot:
            await self._read(session_id, slot)
            return slot.snapshot()

    async def set(self, session_id: str, active: bool) -> SetResult:
        async with self._sessions.hold(session_id) as slot:
            return await self._optimistically(
                session_id, slot, lambda: self._set_once(session_id, slot, active)
            )

    async def set_when_idle(self, session_id: str, active: bool) -> SetResult | None:
        """`set` while the log shows no turn open; None, recording nothing,
        when one is. For a caller that loads the agent only when it matters:
        the open turn may be one a stopped runtime left, which loading ends."""
        async with self._sessions.hold(session_id) as slot:
            return await self._optimistically(
                session_id, slot, lambda: self._set_when_idle_once(session_id, slot, active)
            )

    async def apply_at_boundary(
        self, session_id: str, lease_token: int | None = None
    ) -> BoundaryResult:
        """Right before every model request. Never raises because a pending
        selection could not be recorded: the step runs with the committed
        state and the selection waits for the next boundary. The selection is
        appended under the runtime's `lease_token`: a deposed runtime's
        boundary records nothing."""
        async with self._sessions.hold(session_id) as slot:
            await self._read(session_id, slot)  # an unknown session fails here
            applied = await self._try_apply(session_id, slot, lease_token)
            state = slot.snapshot().state
            sections = policy_sections(self._config, state.active)
            return BoundaryResult(state, sections, applied, slot.state.last_seq)

    async def exit_plan_mode(self, session_id: str, lease_token: int | None = None) -> PlanSnapshot:
        """The approved exit tool's commit: no notice (the model asked for it),
        under the runtime's `lease_token` (LeaseLost for a deposed one)."""
        async with self._sessions.hold(session_id) as slot:
            await self._optimistically(
                session_id, slot, lambda: self._exit_once(session_id, slot, lease_token)
            )
            return slot.snapshot()

    async def run_plan_command(
        self, session_id: str, args: str | None, command_id: str = ""
    ) -> CommandResult:
        """`/plan`, `/plan <message>`, `/plan off`, recorded as command/run and
        command/done around the selection."""
        command_id = command_id or f"cmd-{uuid.uuid4().hex}"
        run = command_run_event(command_id, args or "")
        parsed = parse_plan_args(args)
        async with self._sessions.hold(session_id) as slot:
            await self._read(session_id, slot)  # unknown session: nothing is logged
            if not isinstance(parsed, PlanCommand):
                await self._append_unfolded(
                    session_id, slot, [run, command_done_event(command_id, False, parsed.message)]
                )
                return await self._command_result(session_id, slot, False, parsed.message, None)
            await self._append_unfolded(session_id, slot, [run])
            try:
                result = await self._optimistically(
                    session_id, slot, lambda: self._set_once(session_id, slot, parsed.active)
                )
            except DomainError as error:
                await self._append_unfolded(
                    session_id, slot, [command_done_event(command_id, False, error.message)]
                )
                return await self._command_result(session_id, slot, False, error.message, None)
            message = _outcome_message(result, parsed.active)
            await self._record_done(session_id, slot, command_id, message)
            return await self._command_result(session_id, slot, True, message, parsed.steer_text)

    # -- one attempt of each operation, on a caught-up slot ----------------------------

    async def _set_once(self, session_id: str, slot: _Slot, active: bool) -> SetResult:
        state = slot.state
        action = decide_set(state.plan, state.turn.open, active)
        events = set_events(state.model_saw_plan, action, active)
        if events:
            await self._append_folded(session_id, slot, events)
        else:
            await self._confirm(session_id, slot)
        snapshot = slot.snapshot()
        return SetResult(_OUTCOMES[action], snapshot.state, snapshot.as_of_seq)

    async def _set_when_idle_once(
        self, session_id: str, slot: _Slot, active: bool
    ) -> SetResult | None:
        if slot.state.turn.open:
            await self._confirm(session_id, slot)
            return None
        return await self._set_once(session_id, slot, active)

    async def _apply_once(self, session_id: str, slot: _Slot, lease_token: int | None) -> None:
        state = slot.state
        if state.plan.pending is not None:
            events = switch_events(state.model_saw_plan, state.plan.pending, by_user=True)
            await self._append_folded(session_id, slot, events, lease_token)
        else:
            await self._confirm(session_id, slot)

    async def _exit_once(self, session_id: str, slot: _Slot, lease_token: int | None) -> None:
        state = slot.state
        if not state.plan.active:
            await self._confirm(session_id, slot)
            raise PlanModeInactive(session_id)
        events = switch_events(state.model_saw_plan, False, by_user=False)
        await self._append_folded(session_id, slot, events, lease_token)

    # -- the log -----------------------------------------------------------------------

    async def _optimistically(
        self, session_id: str, slot: _Slot, attempt: Callable[[], Awaitable[R]]
    ) -> R:
        """Runs `attempt` on the folded state, read first only when it is
        behind the log; after a miss (WrongExpectedSeq: a concurrent append, or
        a cached state the log had moved past) decides again on a fresh read."""
        miss: WrongExpectedSeq | None = None
        for _ in range(MAX_ATTEMPTS):
            if slot.fold is _Fold.BEHIND:
                await self._read(session_id, slot)
            try:
                return await attempt()
            except WrongExpectedSeq as error:
                miss = error
        assert miss is not None
        raise miss

    async def _read(self, session_id: str, slot: _Slot) -> None:
        await self._catch_up(session_id, slot)
        slot.fold = _Fold.CURRENT

    async def _confirm(self, session_id: str, slot: _Slot) -> None:
        """Checks a decision that appends nothing as an append's expected seq
        would: a cached state is read up to the log's end, and when that
        moved it, the miss has the decision made again on what was read."""
        if slot.fold is not _Fold.CACHED:
            return
        expected = slot.state.last_seq
        await self._read(session_id, slot)
        if slot.state.last_seq != expected:
            raise WrongExpectedSeq(session_id, expected, slot.state.last_seq)

    async def _catch_up(self, session_id: str, slot: _Slot) -> None:
        """Folds what was appended since the slot's last seq; a new slot
        starts from the log's checkpointed state, not from seq 0."""
        if not slot.loaded:
            slot.state = await self._log.load_state(session_id)
            slot.loaded = True
        while True:
            after = slot.state.last_seq
            page = await self._log.read(session_id, from_seq=after + 1, limit=READ_PAGE)
            slot.state = fold_events(slot.state, page.events)
            if not page.events or slot.state.last_seq >= page.last_seq:
                return

    async def _append_folded(
        self,
        session_id: str,
        slot: _Slot,
        events: Sequence[events_pb2.Event],
        lease_token: int | None = None,
    ) -> None:
        """Appends right after the folded state and folds the batch locally."""
        expected = slot.state.last_seq
        try:
            result = await self._log.append(
                session_id, events, expected_last_seq=expected, lease_token=lease_token
            )
        except Exception:  # a miss, or an outcome unknown: the log may hold the batch
            slot.fold = _Fold.BEHIND
            raise
        if result.seqs == list(range(expected + 1, expected + 1 + len(events))):
            slot.state = fold_events(slot.state, events, result.seqs)
            slot.fold = _Fold.CURRENT
        else:
            slot.fold = _Fold.BEHIND

    async def _append_unfolded(
        self, session_id: str, slot: _Slot, events: Sequence[events_pb2.Event]
    ) -> None:
        """Appends wherever the log ends; the folded state is behind it then."""
        slot.fold = _Fold.BEHIND
        await self._log.append(session_id, events)

    async def _try_apply(self, session_id: str, slot: _Slot, lease_token: int | None) -> bool:
        try:
            await self._optimistically(
                session_id, slot, lambda: self._apply_once(session_id, slot, lease_token)
            )
        # Whatever failed (log append, contention), the model request must
        # still go out; the selection stays in the log for the next boundary.
        except Exception as error:
            _warn_not_applied(session_id, error)
            return False
        return True

    async def _record_done(
        self, session_id: str, slot: _Slot, command_id: str, message: str
    ) -> None:
        # The selection already took effect; a missing command/done is cosmetic.
        try:
            await self._append_unfolded(
                session_id, slot, [command_done_event(command_id, True, message)]
            )
        except Exception as error:
            logger.warning(
                "plan mode: could not record the end of /plan in %s: %s", session_id, error
            )

    async def _command_result(
        self, session_id: str, slot: _Slot, ok: bool, message: str, steer_text: str | None
    ) -> CommandResult:
        await self._read(session_id, slot)
        snapshot = slot.snapshot()
        return CommandResult(ok, message, snapshot.state, steer_text, snapshot.as_of_seq)


_OUTCOMES = {
    SetAction.COMMIT: SetOutcome.COMMITTED,
    SetAction.QUEUE: SetOutcome.QUEUED,
    SetAction.CANCEL: SetOutcome.CANCELLED,
    SetAction.NOOP: SetOutcome.NOOP,
}


class _Fold(enum.Enum):
    """How far a slot's folded state can be trusted."""

    # Never read, or known to be behind the log: read before deciding.
    BEHIND = "behind"
    # Read in an earlier call; others may have appended since.
    CACHED = "cached"
    # Read, or appended to with the expected seq, in the call running now.
    CURRENT = "current"


@dataclass
class _Slot:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    state: SessionState = field(default_factory=SessionState)
    # The state came from the log's load_state (not yet for a new slot).
    loaded: bool = False
    fold: _Fold = _Fold.BEHIND
    # Callers holding or waiting for the lock; a slot in use is never evicted.
    users: int = 0

    def snapshot(self) -> PlanSnapshot:
        return PlanSnapshot(self.state.plan, self.state.last_seq)


class _SessionSlots:
    """Per-session folded state and lock, least recently used evicted first."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._slots: OrderedDict[str, _Slot] = OrderedDict()

    @asynccontextmanager
    async def hold(self, session_id: str) -> AsyncIterator[_Slot]:
        slot = self._slots.get(session_id) or _Slot()
        self._slots[session_id] = slot
        self._slots.move_to_end(session_id)
        slot.users += 1
        self._evict()
        try:
            async with slot.lock:
                if slot.fold is _Fold.CURRENT:
                    slot.fold = _Fold.CACHED  # the log may have moved on since
                yield slot
        finally:
            slot.users -= 1

    def _evict(self) -> None:
        if len(self._slots) <= self._capacity:
            return
        idle = [sid for sid, slot in self._slots.items() if slot.users == 0]
        for session_id in idle[: max(0, len(self._slots) - self._capacity)]:
            del self._slots[session_id]


def _warn_not_applied(session_id: str, error: Exception) -> None:
    logger.warning(
        "plan mode: the pending selection of session %s could not be recorded at this "
        "boundary; it stays pending for the next one: %s",
        session_id,
        error,
    )


def _outcome_message(result: SetResult, active: bool) -> str:
    mode = "on" if active else "off"
    if result.state.pending is not None:
        return f"Plan mode will turn {mode} before the next model request."
    if result.outcome is SetOutcome.COMMITTED:
        return f"Plan mode is {mode}."
    if result.outcome is SetOutcome.CANCELLED:
        return f"Cancelled the pending switch; plan mode stays {mode}."
    return f"Plan mode is already {mode}."
