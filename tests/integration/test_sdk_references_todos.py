"""File references and the task list through the gateway, as a user of the
Python SDK sees them: the whole stack on loopback, a real project folder,
the scripted built-in model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clients.sdk import (
    InvalidArgumentError,
    PathEntry,
    Resource,
    Todo,
)
from services.agentruntime.models.base import UserMessage
from services.agentruntime.models.builtin import ScriptedReply
from tests.support.coding import WAIT_S, Coding, coding_stack, finished, tool

APP = "def answer():\n    return 41\n"


@pytest.fixture
async def coding(tmp_path: Path) -> AsyncIterator[Coding]:
    async with coding_stack(tmp_path) as stack:
        (stack.folder / "src").mkdir()
        (stack.folder / "src" / "app.py").write_text(APP)
        (stack.outside / "secret.txt").write_text("not for the agent")
        yield stack


def last_user_text(coding: Coding) -> str:
    messages = coding.requests[-1].messages
    return next(m.text for m in reversed(messages) if isinstance(m, UserMessage))


async def test_an_at_path_and_an_editors_text_reach_the_model(coding: Coding) -> None:
    session = await coding.session()
    coding.script(final="It returns 41.")
    draft = Resource((coding.folder / "notes.md").as_uri(), "an unsaved note")
    await session.prompt("what does @src/app.py return?", resources=[draft])
    await finished(session)
    sent = last_user_text(coding)
    assert sent.startswith("what does @src/app.py return?")
    assert "return 41" in sent and "an unsaved note" in sent
    [message] = [e.user_message for e in session.events if e.HasField("user_message")]
    assert [f.path for f in message.files] == ["src/app.py", "notes.md"]


async def test_a_path_outside_is_refused_with_its_reason_and_nothing_is_recorded(
    coding: Coding,
) -> None:
    session = await coding.session()
    outside = f"@../{coding.outside.name}/secret.txt"
    with pytest.raises(InvalidArgumentError) as refused:
        await session.prompt(f"read {outside}")
    assert refused.value.reason == "FILE_REFERENCE_REFUSED"
    assert f"cannot attach {outside}" in refused.value.message
    assert "outside the session folder" in refused.value.message
    assert session.events == [] and not coding.requests


async def test_paths_complete_within_the_folder(coding: Coding) -> None:
    # (Another account's call is refused as for an unknown session:
    # test_two_accounts.py probes every RPC.)
    session = await coding.session()
    listed = await session.list_paths("src/a")
    assert listed.entries == [PathEntry("src/app.py", False)] and not listed.truncated
    assert (await session.list_paths("../")).entries == []


async def test_the_task_list_shows_as_it_changes(coding: Coding) -> None:
    session = await coding.session()
    first = [
        {"content": "Read the code", "status": "in_progress"},
        {"content": "Fix it", "status": "pending"},
    ]
    second = [
        {"content": "Read the code", "status": "completed"},
        {"content": "Fix it", "status": "in_progress"},
    ]
    model = coding.harness.model
    model.enqueue(ScriptedReply(tool_calls=[tool("todo_write", "t1", todos=first)]))
    # The next step holds until the first list was seen.
    held = model.enqueue(
        ScriptedReply(tool_calls=[tool("todo_write", "t2", todos=second)], hold=True)
    )
    model.enqueue(ScriptedReply(text="Done."))
    await session.prompt("fix the code")
    await session.wait_until(
        lambda s: s.todos == [Todo("Read the code", "in_progress"), Todo("Fix it", "pending")],
        WAIT_S,
    )
    held.release()
    await session.wait_until(
        lambda s: s.todos == [Todo("Read the code", "completed"), Todo("Fix it", "in_progress")],
        WAIT_S,
    )
    await finished(session)
