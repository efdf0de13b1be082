"""The agent folds its own appends from its copies when nobody wrote in
between, and reads the log when somebody did: either way its state is the
log's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from agenthost.sessionlog.v1 import events_pb2 as ev

from services.agentruntime.models.builtin import BuiltinAdapter, ScriptedReply, ScriptedToolCall
from services.agentruntime.runtime import AgentRuntime
from services.agentruntime.tests.test_turns import idle
from services.sessionlog.domain import SessionLog
from services.sessionlog.port import AppendResult, Event, SessionLogPort


class WatchedLog:
    """The session log, counting the agent's appends and reads; `slip_in`
    is appended by "someone else" just before the agent's next append."""

    def __init__(self, log: SessionLog) -> None:
        self._log = log
        self.appends = 0
        self.reads = 0
        self.slip_in: Event | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)

    async def append(
        self,
        session_id: str,
        events: Sequence[Event],
        expected_last_seq: int | None = None,
        *,
        lease_token: int | None = None,
    ) -> AppendResult:
        if self.slip_in is not None:
            await self._log.append(session_id, [self.slip_in])
            self.slip_in = None
        self.appends += 1
        return await self._log.append(
            session_id, events, expected_last_seq, lease_token=lease_token
        )

    async def read(self, *args: Any, **kwargs: Any) -> Any:
        self.reads += 1
        return await self._log.read(*args, **kwargs)


def _calling_model() -> BuiltinAdapter:
    """Two turns, each a tool call and an answer after it."""
    call = ScriptedReply(tool_calls=[ScriptedToolCall("list_files", {"path": "."})])
    return BuiltinAdapter([call, ScriptedReply(text="done"), call, ScriptedReply(text="done")])


async def test_a_turn_nobody_else_writes_to_reads_back_none_of_its_appends(
    session_log: SessionLog, session: str
) -> None:
    log = WatchedLog(session_log)
    runtime = AgentRuntime(cast(SessionLogPort, log), _calling_model())
    await runtime.prompt(session, "first")  # loads the session and its view
    await idle(runtime, session)
    log.appends = log.reads = 0

    await runtime.prompt(session, "second")
    await idle(runtime, session)

    # What is read is the turn's own look-ups (each boundary asks whether
    # anyone else wrote), not one read per append.
    assert log.appends >= 5
    assert log.reads < log.appends
    agent = await runtime.resume(session)
    assert agent.state == await session_log.load_state(session)
    await runtime.close()


async def test_an_event_another_writer_slips_between_the_agents_appends_is_folded_in_order(
    session_log: SessionLog, session: str
) -> None:
    log = WatchedLog(session_log)
    runtime = AgentRuntime(cast(SessionLogPort, log), _calling_model())
    await runtime.prompt(session, "first")
    await idle(runtime, session)

    renamed = ev.Event(id="rename-1", session_title=ev.SessionTitle(title="renamed by hand"))
    log.slip_in = renamed  # lands before the agent's first append of the turn
    await runtime.prompt(session, "second")
    await idle(runtime, session)

    agent = await runtime.resume(session)
    assert log.slip_in is None
    assert agent.state.title == "renamed by hand"
    assert agent.state == await session_log.load_state(session)
    await runtime.close()
