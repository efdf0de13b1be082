"""The agent's task list (`todo_write`, Claude Code's TodoWrite shape): the
real runtime over the local OpenAI-compatible provider writes, updates and
keeps it through a compaction and a restart of every service; the `todos`
projection folds it from the log."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.agentruntime.capabilities.todos import CARRIED_HEADING, TODOS_UNIT
from services.agentruntime.models.tests.fake_provider import (
    DONE,
    FakeProvider,
    ProviderReply,
    finish_chunk,
    tool_fragment,
    usage_chunk,
)
from tests.integration.test_instructions import adapter, sent, text_reply
from tests.support.stack import Stack, running_stack

SID = "todos"
FIRST = [
    {"content": "Read the parser", "status": "in_progress"},
    {"content": "Fix the off-by-one", "status": "pending"},
    {"content": "Run the tests", "status": "pending"},
]
SECOND = [
    {"content": "Read the parser", "status": "completed"},
    {"content": "Fix the off-by-one", "status": "in_progress"},
    {"content": "Run the tests", "status": "pending"},
]


def todo_reply(call_id: str, todos: Any) -> ProviderReply:
    fragment = tool_fragment(
        0, call_id=call_id, name="todo_write", arguments=json.dumps({"todos": todos})
    )
    return ProviderReply(stream=[fragment, finish_chunk("tool_calls"), usage_chunk(500, 5), DONE])


@pytest.fixture
async def stack(
    tmp_path: Path, provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Stack]:
    monkeypatch.setenv("AGENTHOST_CONFIG_DIR", str(tmp_path / "config"))
    project = tmp_path / "project"
    project.mkdir()
    async with running_stack(tmp_path / "data", model=adapter(provider)) as running:
        await running.log.create_session(SID, str(project))
        yield running


async def turn(stack: Stack, text: str) -> None:
    await stack.runtime.Prompt(rt.PromptRequest(session_id=SID, text=text))
    await stack.wait_idle(SID)


async def logged(stack: Stack) -> list[ev.Event]:
    return list((await stack.log.read(SID, limit=1000)).events)


def projected(events: list[ev.Event]) -> Any:
    state = TODOS_UNIT.init()
    for event in events:
        state = TODOS_UNIT.apply(state, event)
    return TODOS_UNIT.view(state)


def results(events: list[ev.Event]) -> dict[str, ev.ToolResult]:
    return {e.tool_result.call_id: e.tool_result for e in events if e.HasField("tool_result")}


async def test_a_turn_writes_its_task_list_then_updates_it(
    stack: Stack, provider: FakeProvider
) -> None:
    provider.enqueue(todo_reply("t1", FIRST), todo_reply("t2", SECOND), text_reply("Working."))
    await turn(stack, "fix the parser")
    events = await logged(stack)
    written = [e for e in events if e.HasField("todos_updated")]
    assert [w.todos_updated.call_id for w in written] == ["t1", "t2"]
    # Each right after its call's result.
    for update in written:
        before = events[events.index(update) - 1]
        assert before.tool_result.call_id == update.todos_updated.call_id
    assert results(events)["t2"].output.startswith("Task list updated (1/3 done).")
    assert results(events)["t2"].display.summary == "todos: 1/3 done"
    assert projected(events) == {"items": SECOND}
    # The model saw its own result.
    assert "[x] Read the parser" in sent(provider)


@pytest.mark.parametrize(
    ("todos", "said"),
    [
        (
            [{"content": "Plan", "status": "pending"}, {"content": " ", "status": "pending"}],
            "item 2 is empty",
        ),
        (
            [{"content": "Plan", "status": "pending"}, {"content": "plan", "status": "completed"}],
            "item 2 repeats item 1",
        ),
        ([{"content": "Plan", "status": "done"}], "status must be one of pending"),
        ("Plan; Test", "todos must be a list"),
    ],
)
async def test_a_bad_list_is_refused_with_a_tool_error(
    stack: Stack, provider: FakeProvider, todos: Any, said: str
) -> None:
    provider.enqueue(todo_reply("t1", FIRST), todo_reply("bad", todos), text_reply("ok"))
    await turn(stack, "plan it")
    events = await logged(stack)
    refused = results(events)["bad"]
    assert not refused.ok and said in refused.error
    assert "The task list was not changed" in refused.error
    # The list stays what it was; the model is told why.
    assert [e.todos_updated.call_id for e in events if e.HasField("todos_updated")] == ["t1"]
    assert projected(events) == {"items": FIRST}
    assert said in sent(provider)


async def test_the_list_survives_a_compaction_and_a_restart_of_every_service(
    stack: Stack, provider: FakeProvider
) -> None:
    provider.enqueue(todo_reply("t1", SECOND), text_reply("On it."))
    await turn(stack, "fix the parser")

    async def compact(summary: str) -> None:
        provider.enqueue(text_reply(summary))
        reply = await stack.runtime.ExecuteCommand(
            rt.ExecuteCommandRequest(session_id=SID, name="compact")
        )
        assert reply.ok, reply.message

    await compact("We planned the parser fix.")
    provider.enqueue(text_reply("still on it"))
    await turn(stack, "go on")
    after_cut = sent(provider)
    assert CARRIED_HEADING in after_cut
    assert "[x] Read the parser\n[>] Fix the off-by-one\n[ ] Run the tests" in after_cut
    assert after_cut.index(CARRIED_HEADING) < after_cut.index("We planned the parser fix.")

    for name in stack.embedded.names:
        if name == "agentruntime":  # a stopped runtime closed its model's client
            stack.embedded.model = adapter(provider)
        await stack.restart(name)
    # A second cut after the restart: the view that starts at the first
    # one knows the list from it alone.
    await compact("Still the parser fix.")
    provider.enqueue(text_reply("and after the restart"))
    await turn(stack, "after the restart")
    assert sent(provider).count("[>] Fix the off-by-one") == 1
    assert projected(await logged(stack)) == {"items": SECOND}
