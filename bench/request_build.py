"""Building a model request after a restart: a 10,000-event session whose
last compaction covers its first 9,000 events, against a 100-event session
with none.

Each sample is what a restarted runtime does before its first step: a new
agent loads the session's fold from the log's checkpointed state and builds
the request, its conversation read from the last compaction on (never from
seq 0). Both sessions are written in closed turns of four events through the
session log service as the stack runs it (its gRPC client, SQLite), and the
samples alternate between them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from agenthost.sessionlog.v1 import events_pb2 as ev

from bench.harness import Sizes, append_all, conversation, session_log_alone
from bench.ratio import Figure, Target, interleaved, latency_side
from services.agentruntime.agent import Agent
from services.agentruntime.live import LiveFeed
from services.agentruntime.models.builtin import BuiltinAdapter
from services.agentruntime.models.catalog import ModelCatalog
from services.agentruntime.runtime import base_section
from services.agentruntime.tools import ToolCatalog
from services.agentruntime.workspace_catalog import workspace_tools
from services.sessionlog.client import SessionLogClient

NAME = "request_build"
# Where the compaction falls, as a share of the big session's events.
COMPACTED_SHARE = 0.9


async def _compacted_session(log: SessionLogClient, session_id: str, events: int) -> None:
    """`events` events, a compaction covering the first COMPACTED_SHARE of them."""
    await log.create_session(session_id, "/bench")
    before = conversation(int(events * COMPACTED_SHARE))
    await append_all(log, session_id, before)
    up_to = (await log.get_session(session_id)).last_seq
    summary = ev.Compaction(
        summary="The user asked many questions; each was answered. " * 20,
        up_to_seq=up_to,
        trigger="auto",
    )
    after = conversation(events - len(before) - 1, first_turn=len(before) // 4)
    await append_all(log, session_id, [ev.Event(compaction=summary), *after])


def _builder(log: SessionLogClient, session_id: str) -> Callable[[], Awaitable[object]]:
    catalog = ToolCatalog(workspace_tools())

    async def build() -> object:
        agent = Agent(
            session_id,
            "/bench",
            log=log,
            models=ModelCatalog.of_adapter(BuiltinAdapter()),
            plan=None,
            catalog=catalog,
            live=LiveFeed(),
            base_sections=[base_section("/bench")],
            on_status=lambda _: None,
        )
        await agent.load()
        return await agent.next_request()

    return build


session_log = session_log_alone


async def prepared(sizes: Sizes, log: SessionLogClient) -> Callable[[], Awaitable[object]]:
    """The compacted session written through `log`; a build of its request."""
    await _compacted_session(log, "compacted", sizes.compacted_session)
    return _builder(log, "compacted")


async def run(sizes: Sizes, data_dir: Path) -> Figure:
    async with session_log_alone(data_dir) as log:
        big = await prepared(sizes, log)
        await log.create_session("small", "/bench")
        await append_all(log, "small", conversation(sizes.small_session))
        big_s, small_s = await interleaved(
            big, _builder(log, "small"), sizes.rounds, sizes.per_round // 4
        )
    compacted_at = int(sizes.compacted_session * COMPACTED_SHARE)
    return Figure(
        name=(
            f"model request built after a restart, {sizes.compacted_session}-event session "
            f"compacted at {compacted_at}"
        ),
        compared="p50",
        unit="ms",
        measured=latency_side(f"{sizes.compacted_session}-event session", big_s, "p50"),
        baseline=latency_side(f"{sizes.small_session}-event session", small_s, "p50"),
        target=Target("<=", 3.0),
        notes=(
            "each sample: a new agent loads the fold from the checkpointed state and builds "
            "the request from the last compaction on",
        ),
    )
