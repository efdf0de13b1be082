"""A subagent's session, as clients of the gateway see it: lists leave it
out but for its parent's, its owner opens it (its transcript), and another
account cannot."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clients.sdk import AgentHostClient, NotFoundError
from services.agentruntime.models.builtin import ScriptedReply
from tests.support.coding import Coding, coding_stack, finished, tool
from tests.support.gateway import BOB


@pytest.fixture
async def coding(tmp_path: Path) -> AsyncIterator[Coding]:
    async with coding_stack(tmp_path) as stack:
        yield stack


async def test_a_subagents_session_is_listed_under_its_parent_and_opened_by_its_owner(
    coding: Coding,
) -> None:
    model = coding.harness.model
    model.enqueue(ScriptedReply(tool_calls=[tool("task", "t1", description="look", prompt="look")]))
    model.enqueue(ScriptedReply(text="the child's answer"))
    model.enqueue(ScriptedReply(text="Done."))
    client = coding.client()
    session = await coding.session(client=client)
    await session.prompt("delegate")
    await finished(session)

    listed = await client.list_sessions()
    assert [s.id for s in listed] == [session.id]
    (child,) = await client.list_subagents(session.id)
    assert child.id != session.id and child.cwd == str(coding.folder)
    opened = await client.open_session(child.id)
    texts = [e.assistant_message.text for e in opened.events if e.HasField("assistant_message")]
    assert texts == ["the child's answer"]
    await session.wait_until(lambda s: s.projections.get("subagents") is not None, 10)
    parent_view = session.projections.get("subagents")
    assert isinstance(parent_view, dict)
    assert [c["session_id"] for c in parent_view["children"]] == [child.id]
    assert parent_view["children"][0]["running"] is False

    other = AgentHostClient(coding.harness.address, BOB)
    try:
        with pytest.raises(NotFoundError):
            await other.open_session(child.id)
        with pytest.raises(NotFoundError):
            await other.list_subagents(session.id)
    finally:
        await other.close()
