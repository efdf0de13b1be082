"""Checkpoints, undo, redo and rewind, through the real runtime over the
local OpenAI-compatible provider: file tools and confined commands (real
bubblewrap) change the folder, and the folder comes back byte for byte."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agenthost.planmode.v1 import plan_mode_pb2 as pm
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.agentruntime.models.openai_compat import OpenAICompatAdapter, OpenAICompatConfig
from services.agentruntime.models.tests.fake_provider import (
    DONE,
    FakeProvider,
    ProviderReply,
    finish_chunk,
    text_chunk,
    tool_fragment,
    usage_chunk,
)
from tests.support.stack import Stack, running_stack

SID = "work"


def adapter(provider: FakeProvider) -> OpenAICompatAdapter:
    return OpenAICompatAdapter(
        OpenAICompatConfig(
            base_url=provider.url,
            model="fake",
            max_attempts=1,
            first_byte_timeout_s=10.0,
            idle_timeout_s=10.0,
            context_window=64000,
        )
    )


def text_reply(text: str) -> ProviderReply:
    return ProviderReply(stream=[text_chunk(text), finish_chunk("stop"), usage_chunk(500, 5), DONE])


def calls_reply(*calls: tuple[str, dict[str, Any]]) -> ProviderReply:
    fragments = [
        tool_fragment(n, call_id=f"call-{n}-{name}", name=name, arguments=json.dumps(args))
        for n, (name, args) in enumerate(calls)
    ]
    return ProviderReply(stream=[*fragments, finish_chunk("tool_calls"), usage_chunk(500, 5), DONE])


def edit(path: str, old: str, new: str) -> tuple[str, dict[str, Any]]:
    return "edit_file", {"path": path, "old_string": old, "new_string": new}


def shell(command: str) -> tuple[str, dict[str, Any]]:
    return "shell", {"command": command}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "a.py").write_text("def a():\n    return 1\n")
    (folder / "b.py").write_text("def b():\n    return 2\n")
    (folder / "c.txt").write_text("colour: red\nsize: big\n")
    (folder / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(folder / "run.sh", 0o755)
    return folder


def contents(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file's bytes and mode, but agenthost's own folder."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), stat.S_IMODE(p.stat().st_mode))
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".agenthost" not in p.parts
    }


@pytest.fixture
async def stack(tmp_path: Path, provider: FakeProvider, project: Path) -> AsyncIterator[Stack]:
    async with running_stack(tmp_path / "data", model=adapter(provider)) as running:
        await running.log.create_session(SID, str(project))
        # Changes and commands run without asking: this is about undoing them.
        await running.runtime.UpdateSettings(
            rt.UpdateSettingsRequest(session_id=SID, approvals=ev.APPROVAL_POLICY_NEVER)
        )
        yield running


async def turn(stack: Stack, text: str) -> None:
    await stack.runtime.Prompt(rt.PromptRequest(session_id=SID, text=text))
    await stack.wait_idle(SID)


async def command(stack: Stack, name: str, args: str = "") -> rt.ExecuteCommandResponse:
    request = rt.ExecuteCommandRequest(session_id=SID, name=name)
    if args:
        request.args = args
    reply: rt.ExecuteCommandResponse = await stack.runtime.ExecuteCommand(request)
    return reply


async def logged(stack: Stack, kind: str) -> list[ev.Event]:
    events = (await stack.log.read(SID, limit=1000)).events
    return [e for e in events if e.WhichOneof("body") == kind]


async def restart_everything(stack: Stack, provider: FakeProvider) -> None:
    for name in stack.embedded.names:
        if name == "agentruntime":  # a stopped runtime closed its model's client
            stack.embedded.model = adapter(provider)
        await stack.restart(name)


async def the_busy_turn(stack: Stack, provider: FakeProvider) -> None:
    """Two edits with edit_file, a sed -i and an rm, in one turn."""
    provider.enqueue(
        calls_reply(
            edit("a.py", "return 1", "return 10"),
            edit("b.py", "return 2", "return 20"),
            shell("sed -i 's/red/blue/' c.txt"),
            shell("rm run.sh"),
        ),
        text_reply("Done."),
    )
    await turn(stack, "change everything")


async def test_undo_and_redo_a_turn_of_edits_and_commands_across_a_restart(
    stack: Stack, provider: FakeProvider, project: Path
) -> None:
    before = contents(project)
    await the_busy_turn(stack, provider)
    after = contents(project)
    assert after != before and "run.sh" not in after

    (checkpoint,) = [e.checkpoint for e in await logged(stack, "checkpoint") if e.checkpoint.after]
    assert {(f.path, f.change) for f in checkpoint.files} == {
        ("a.py", "modified"),
        ("b.py", "modified"),
        ("c.txt", "modified"),
        ("run.sh", "deleted"),
    }
    changed = {f.path: (f.lines_added, f.lines_removed) for f in checkpoint.files}
    assert changed["a.py"] == (1, 1) and changed["run.sh"] == (0, 2)

    await restart_everything(stack, provider)
    undone = await command(stack, "undo")
    assert undone.ok, undone.message
    assert contents(project) == before  # byte for byte, run.sh's mode too

    # The model is told at its next request.
    provider.enqueue(text_reply("I see."))
    await turn(stack, "what happened?")
    told = provider.requests[-1].body["messages"]
    assert any("undid your turn 1" in str(m.get("content")) for m in told)

    await restart_everything(stack, provider)
    redone = await command(stack, "redo")
    assert redone.ok, redone.message
    assert contents(project) == after


async def test_undo_leaves_a_file_the_user_changed_since_and_says_so(
    stack: Stack, provider: FakeProvider, project: Path
) -> None:
    await the_busy_turn(stack, provider)
    (project / "a.py").write_text("def a():\n    return 'mine'\n")
    undone = await command(stack, "undo")
    assert undone.ok and "a.py" in undone.message and "--force" in undone.message
    assert (project / "a.py").read_text() == "def a():\n    return 'mine'\n"
    assert (project / "b.py").read_text() == "def b():\n    return 2\n"
    (restored,) = [e.files_restored for e in await logged(stack, "files_restored")]
    assert list(restored.skipped) == ["a.py"] and "a.py" not in restored.restored


async def test_rewind_to_turn_two_of_five(
    stack: Stack, provider: FakeProvider, project: Path
) -> None:
    snapshots = [contents(project)]
    for number in range(1, 6):
        provider.enqueue(
            calls_reply(shell(f"echo {number} >> log.txt")), text_reply(f"answer {number}")
        )
        await turn(stack, f"prompt {number}")
        snapshots.append(contents(project))
        if number == 3:
            await stack.plan.SetPlanMode(pm.SetPlanModeRequest(session_id=SID, active=True))
            await stack.runtime.UpdateSettings(
                rt.UpdateSettingsRequest(session_id=SID, sandbox=ev.SANDBOX_READ_ONLY)
            )
    listed = await command(stack, "rewind")
    assert "prompt 2" in listed.message and "prompt 5" in listed.message

    rewound = await command(stack, "rewind", "2")
    assert rewound.ok, rewound.message
    assert contents(project) == snapshots[2]  # as before turn 3

    provider.enqueue(text_reply("back at two"))
    await turn(stack, "where are we?")
    said = [str(m.get("content") or "") for m in provider.requests[-1].body["messages"]]
    text = "\n".join(said)
    assert "prompt 1" in text and "prompt 2" in text and "answer 2" in text
    assert "prompt 3" not in text and "answer 5" not in text
    # Plan mode and settings stay as the log says (set during turn 3).
    state = await stack.plan.GetPlanMode(pm.GetPlanModeRequest(session_id=SID))
    assert state.state.active
    settings = await stack.runtime.UpdateSettings(rt.UpdateSettingsRequest(session_id=SID))
    assert settings.settings.sandbox == ev.SANDBOX_READ_ONLY
    # The log kept every turn.
    assert len(await logged(stack, "turn_start")) == 6


async def test_a_read_only_turn_takes_no_snapshot(
    stack: Stack, provider: FakeProvider, project: Path
) -> None:
    provider.enqueue(calls_reply(("read_file", {"path": "a.py"})), text_reply("read"))
    await turn(stack, "read a.py")
    assert await logged(stack, "checkpoint") == []
    nothing = await command(stack, "undo")
    assert not nothing.ok and "No turn has changes" in nothing.message


async def test_check_says_what_would_be_left_alone_and_changes_nothing(
    stack: Stack, provider: FakeProvider, project: Path
) -> None:
    await the_busy_turn(stack, provider)
    (project / "a.py").write_text("def a():\n    return 'mine'\n")
    after = contents(project)
    checked = await command(stack, "undo", "--check")
    assert checked.ok, checked.message
    lines = checked.message.splitlines()
    assert lines[0] == "/undo would restore turn 1 (change everything): 3 file(s)"
    assert lines[-2:] == ["Changed since the turn (left alone unless --force):", "  a.py"]
    assert contents(project) == after and await logged(stack, "files_restored") == []
    rewind = await command(stack, "rewind", "0 files --check")
    assert rewind.ok and rewind.message.splitlines()[-1] == "  a.py"
    assert contents(project) == after and await logged(stack, "files_restored") == []


async def test_diff_shows_a_turns_changes_cut_at_a_bound(
    stack: Stack, provider: FakeProvider, project: Path
) -> None:
    await the_busy_turn(stack, provider)
    diff = await command(stack, "diff", "1")
    assert diff.ok, diff.message
    assert diff.message.splitlines()[0] == "Turn 1 (change everything): 4 file(s) changed"
    assert "-    return 1\n+    return 10" in diff.message
    assert "deleted file mode 100755" in diff.message
    big = "x" * 100 + "\n"
    provider.enqueue(
        calls_reply(("write_file", {"path": "big.txt", "content": big * 1000})),
        text_reply("wrote"),
    )
    await turn(stack, "write a big file")
    cut = await command(stack, "diff")
    assert cut.ok and cut.message.startswith("Turn 2 (write a big file)")
    assert len(cut.message.encode()) < 70 * 1024
    assert cut.message.endswith("more bytes not shown]")
    nothing = await command(stack, "diff", "7")
    assert not nothing.ok and nothing.message == "Turn 7 changed no files."
