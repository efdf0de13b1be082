"""A long session opened right after a restart: the services start from the
log's state checkpoint and read only what follows it, yet the next turn's
model request still carries the whole conversation (to a model whose window
holds it all, so no compaction stands in for its start)."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.gateway.v1 import gateway_pb2_grpc as gw_grpc

from clients.sdk import AgentHostClient
from clients.sdk.auth import authorized_channel
from services.agentruntime.models.base import UserMessage
from services.agentruntime.models.builtin import BuiltinAdapter
from services.embedded import EmbeddedStack
from services.sessionlog.client import SessionLogClient
from services.sessionlog.domain import CHECKPOINT_EVERY, LogStats
from services.sessionlog.store import SessionSummary
from tests.support.events import a_working_session

WAIT_S = 30.0
TURN = 12  # events of one turn of a_working_session
BATCH = 7 * TURN
EVENTS = 119 * BATCH  # whole turns: the log ends idle
# Tokens: room for every event's text, so the request is the whole log.
WHOLE_WINDOW = 10_000_000


def log_stats(stack: EmbeddedStack) -> LogStats:
    stats = stack.definitions["sessionlog"].stats
    assert isinstance(stats, LogStats)
    return stats


async def a_long_session(data_dir: Path, cwd: Path) -> str:
    """A session of EVENTS events of finished turns, left by a stopped stack."""
    stack = EmbeddedStack(data_dir, port_override=0, model=BuiltinAdapter())
    await stack.start()
    try:
        async with authorized_channel(stack.addresses["gateway"], stack.token()) as channel:
            gateway = gw_grpc.GatewayServiceStub(channel)
            created = await gateway.CreateSession(gw.CreateSessionRequest(cwd=str(cwd)))
            session: SessionSummary = created.session
            async with stack.channel("sessionlog") as log_channel:
                log = SessionLogClient(log_channel)
                source = a_working_session()
                for _ in range(EVENTS // BATCH):
                    await log.append(session.id, list(itertools.islice(source, BATCH)))
            # Looked at once before the restart, as a person would have.
            await gateway.OpenSession(gw.OpenSessionRequest(session_id=session.id))
        return session.id
    finally:
        await stack.stop()


async def test_a_cold_open_reads_the_checkpoint_tails_and_the_page(tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    session_id = await a_long_session(tmp_path / "data", cwd)

    model = BuiltinAdapter(context_window=WHOLE_WINDOW)
    stack = EmbeddedStack(tmp_path / "data", port_override=0, model=model)
    await stack.start()
    channel = authorized_channel(stack.addresses["gateway"], stack.token())
    client = AgentHostClient(stack.addresses["gateway"], stack.token())
    try:
        stats = log_stats(stack)
        before = stats.events_read
        opened = await gw_grpc.GatewayServiceStub(channel).OpenSession(
            gw.OpenSessionRequest(session_id=session_id)
        )
        assert opened.seq == EVENTS - 1 and not opened.running
        # The page, and for each service that folds the session (runtime,
        # plan mode, projections) at most the tail after its checkpoint.
        assert stats.events_read - before <= len(opened.events) + 3 * (CHECKPOINT_EVERY + BATCH)

        session = await client.open_session(session_id)
        await session.prompt("after the restart")
        await session.wait_until(lambda s: not s.running and s.last_seq > EVENTS, WAIT_S)
        said = [m.text for m in model.requests[-1].messages if isinstance(m, UserMessage)]
        assert said[0] == "task 0" and said[-1] == "after the restart"
        assert len(said) == EVENTS // TURN + 1  # every turn's task, from the first
    finally:
        await client.close()
        await channel.close()
        await asyncio.wait_for(stack.stop(), WAIT_S)
