"""What the other sessions cost a turn: the session log's list of every
session (what a confined command or a starting MCP server must not see) is
read only when something is to be confined, once for the callers that ask
together, and a turn in a folder starting no server never reads it. Over the
real SQLite session log."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from services.agentruntime.mcp import McpServers
from services.agentruntime.models.builtin import BuiltinAdapter
from services.agentruntime.neighbours import Neighbours
from services.agentruntime.runtime import AgentRuntime
from services.sessionlog.domain import SessionLog
from services.sessionlog.port import SessionSummary
from tests.support.events import user

WAIT_S = 10.0


def count_listings(log: SessionLog, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The page token of every list_sessions call on `log` from now on."""
    calls: list[str] = []
    list_sessions = log.list_sessions

    async def counted(
        page_size: int = 100,
        page_token: str = "",
        session_ids: Sequence[str] = (),
        *,
        running_only: bool = False,
    ) -> tuple[list[SessionSummary], str]:
        calls.append(page_token)
        return await list_sessions(page_size, page_token, session_ids, running_only=running_only)

    monkeypatch.setattr(log, "list_sessions", counted)
    return calls


async def idle(runtime: AgentRuntime, session_id: str) -> None:
    async with asyncio.timeout(WAIT_S):
        async for status in runtime.watch_status(session_id):
            if not status.running:
                return


async def test_turns_in_a_folder_starting_no_mcp_server_never_list_the_sessions(
    session_log: SessionLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listings = count_listings(session_log, monkeypatch)
    runtime = AgentRuntime(session_log, BuiltinAdapter(), mcp=McpServers(None))
    try:
        for n in range(3):
            await session_log.create_session(f"s{n}", str(tmp_path))
            await runtime.prompt(f"s{n}", "hello")
            await idle(runtime, f"s{n}")
    finally:
        await runtime.close()
    # Each step asked the MCP servers for its tools, none had to start.
    assert listings == []


async def test_commands_asking_together_share_one_listing_of_the_sessions(
    session_log: SessionLog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, second, third = (tmp_path / name for name in ("ours", "second", "third"))
    # Several sessions per folder, and one in the folder holding ours.
    for n, folder in enumerate([ours, second, third, ours, second, third, tmp_path]):
        await session_log.create_session(f"s{n}", str(folder))
        await session_log.append(f"s{n}", [user("hi")])  # listed once written
    listings = count_listings(session_log, monkeypatch)
    data = tmp_path / "data"
    neighbours = Neighbours(session_log, [data], ttl_s=3600)

    answers = await asyncio.gather(*(neighbours.hidden_from(ours) for _ in range(8)))

    assert answers == [(data, second, third)] * 8
    assert listings == [""]  # one listing, of one page
