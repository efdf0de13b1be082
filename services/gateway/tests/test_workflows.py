"""The gateway's workflows as plain Python, without a server: the summaries
a session list is made of (read from the real SQLite session log), and
whether a session shows as running when it opens."""

from __future__ import annotations

import pytest
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev
from google.protobuf import json_format, struct_pb2

from services.gateway import listing
from services.gateway.opening import running_of
from services.projection.client import Block
from services.sessionlog.domain import SessionLog


def user(text: str) -> ev.Event:
    return ev.Event(user_message=ev.UserMessage(text=text))


async def test_a_list_reads_durable_sessions_by_pages_and_lazy_ones_alone(
    session_log: SessionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listing, "LIST_CHUNK", 2)  # several pages of ids, each paged
    for name in ("a", "b", "c", "lazy"):
        await session_log.create_session(name, "/w")
    for name in ("a", "b", "c"):
        await session_log.append(name, [user(f"hi {name}")])
    found = await listing.summaries(session_log, ["a", "b", "c", "lazy", "gone"])
    assert sorted(s.id for s in found) == ["a", "b", "c", "lazy"]
    assert {s.id: s.blank for s in found}["lazy"] is True


def status_block(running: bool | None) -> Block:
    values = {}
    if running is not None:
        values["status"] = json_format.ParseDict({"running": running}, struct_pb2.Value())
    return Block(7, values)


@pytest.mark.parametrize(
    ("agent", "block", "shown"),
    [
        (None, None, False),  # nothing known: not running
        (rt.AgentStatus(running=True), None, True),  # the agent says so
        (rt.AgentStatus(running=True), status_block(False), False),  # the block's seq wins
        (None, status_block(True), True),
        (rt.AgentStatus(running=False), status_block(None), False),  # no status unit
    ],
)
def test_an_opened_session_runs_as_the_status_value_says_else_as_the_agent_says(
    agent: rt.AgentStatus | None, block: Block | None, shown: bool
) -> None:
    assert running_of(agent, block) is shown
