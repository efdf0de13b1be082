"""Custom slash commands: prompt files written as Claude Code users write
them become the session's commands. The real runtime over the local
OpenAI-compatible provider, real files in a real git repository and a user
config folder."""

from __future__ import annotations

import asyncio
import re
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agenthost.runtime.v1 import runtime_pb2 as rt

from services.agentruntime.models.tests.fake_provider import (
    DONE,
    FakeProvider,
    ProviderReply,
    finish_chunk,
    text_chunk,
)
from tests.support.provider_turns import adapter, logged, sent, text_reply
from tests.support.stack import Stack, running_stack

SID = "commanded"
# As Claude Code's documentation writes one (.claude/commands/review.md).
REVIEW = """---
description: Review a file for one kind of problem
argument-hint: FILE CONCERN
allowed-tools: Read, Grep
---

Review $1 with an eye on $2 only.
Everything asked: $ARGUMENTS
"""
STANDUP = "# Summarise what changed since yesterday\n\nList the commits of the last day.\n"
SECRET = "the stack's own secret notes"


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "config"
    (folder / "commands").mkdir(parents=True)
    (folder / "commands" / "standup.md").write_text(STANDUP)
    monkeypatch.setenv("AGENTHOST_CONFIG_DIR", str(folder))
    return folder


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".claude" / "commands").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".claude" / "commands" / "review.md").write_text(REVIEW)
    return root


@pytest.fixture
async def stack(
    tmp_path: Path, provider: FakeProvider, repo: Path, config: Path
) -> AsyncIterator[Stack]:
    async with running_stack(tmp_path / "data", model=adapter(provider)) as running:
        await running.log.create_session(SID, str(repo))
        yield running


async def run(stack: Stack, name: str, args: str | None = None) -> rt.ExecuteCommandResponse:
    request = rt.ExecuteCommandRequest(session_id=SID, name=name)
    if args is not None:
        request.args = args
    reply: rt.ExecuteCommandResponse = await stack.runtime.ExecuteCommand(request)
    return reply


async def listed(stack: Stack) -> dict[str, rt.CommandInfo]:
    reply = await stack.runtime.ListCommands(rt.ListCommandsRequest(session_id=SID))
    return {c.name: c for c in reply.commands}


async def test_a_command_file_runs_with_its_arguments(stack: Stack, provider: FakeProvider) -> None:
    commands = await listed(stack)
    review = commands["review"]
    assert review.description == "Review a file for one kind of problem (project)"
    assert review.usage == "/review FILE CONCERN"
    # No front matter: its first line describes it.
    assert commands["standup"].description == "Summarise what changed since yesterday (global)"

    provider.enqueue(text_reply("Reviewed."))
    reply = await run(stack, "review", "src/app.py security")
    assert reply.ok, reply.message
    await stack.wait_idle(SID)
    text = sent(provider)
    assert "Review src/app.py with an eye on security only." in text
    assert "Everything asked: src/app.py security" in text
    assert "$1" not in text and "argument-hint" not in text

    events = await logged(stack, SID)
    kinds = [e.WhichOneof("body") for e in events]
    run_at = kinds.index("command_run")
    assert kinds[run_at + 1 : run_at + 3] == ["turn_start", "user_message"]
    recorded = events[run_at].command_run
    assert (recorded.name, recorded.args) == ("review", "src/app.py security")
    assert recorded.source.path == ".claude/commands/review.md"
    assert recorded.source.digest.startswith("sha256:") and recorded.source.scope == "project"
    message = next(e.user_message for e in events[run_at:] if e.HasField("user_message"))
    assert message.text.startswith("Review src/app.py with an eye on security only.")

    # Arguments to a body that names none are added after it.
    provider.enqueue(text_reply("Summarised."))
    assert (await run(stack, "standup", "only the parser")).ok
    await stack.wait_idle(SID)
    assert "List the commits of the last day.\n\nARGUMENTS: only the parser" in sent(provider)


async def test_a_command_run_during_a_turn_is_queued(
    stack: Stack, provider: FakeProvider, repo: Path
) -> None:
    release = asyncio.Event()
    provider.enqueue(
        ProviderReply(stream=[text_chunk("Working"), release, finish_chunk("stop"), DONE]),
        text_reply("Reviewed."),
    )
    # Taken, its turn is open (and held by the provider until released).
    await stack.runtime.Prompt(rt.PromptRequest(session_id=SID, text="start"))
    # The file changed after the list was read: what runs is what is on disk.
    (repo / ".claude" / "commands" / "review.md").write_text("Look at $1 again.")
    reply = await run(stack, "review", "docs/")
    assert reply.ok and "queued" in reply.message
    release.set()
    await stack.wait_idle(SID)
    assert len(provider.requests) == 2
    assert sent(provider).endswith("Look at docs/ again.")
    events = await logged(stack, SID)
    queued = [e.input_queued for e in events if e.HasField("input_queued")]
    assert [q.text for q in queued] == ["Look at docs/ again."]


async def test_files_that_are_no_commands_are_listed_as_problems(
    stack: Stack, provider: FakeProvider, repo: Path, config: Path, tmp_path: Path
) -> None:
    commands = repo / ".claude" / "commands"
    (commands / "Review Code.md").write_text("Review it.")
    (commands / "compact.md").write_text("Never this: /compact is the runtime's.")
    (commands / "broken.md").write_text("---\ndescription: [unclosed\n---\nbody\n")
    (commands / "empty.md").write_text("---\ndescription: nothing\n---\n")
    (config / "commands" / "review.md").write_text("The user's own review, shadowed.")
    (commands / "frontend").mkdir()
    (commands / "frontend" / "component.md").write_text("Make a component named $1.")
    data = tmp_path / "data"
    (data / "notes.md").write_text(SECRET)
    (commands / "leak.md").symlink_to(data / "notes.md")

    names = set(await listed(stack))
    assert {"review", "standup", "component", "commands"} <= names
    assert not names & {"Review Code", "broken", "empty", "leak"}
    assert (await listed(stack))["component"].description.endswith("(project:frontend)")

    shown = await run(stack, "commands")
    assert shown.ok
    assert ".claude/commands/Review Code.md: 'Review Code' is not a command name" in shown.message
    assert ".claude/commands/compact.md: /compact is a built-in command" in shown.message
    assert ".claude/commands/broken.md: the front matter is not valid YAML" in shown.message
    assert ".claude/commands/empty.md: the file has no prompt" in shown.message
    assert ".claude/commands/leak.md: the file is hidden from the agent" in shown.message
    assert "review.md: /review is taken by .claude/commands/review.md" in shown.message
    assert re.search(r"^/review FILE CONCERN +\.claude/commands/review\.md$", shown.message, re.M)

    # The built-in runs, and nothing was sent to the model.
    compacted = await run(stack, "compact")
    assert not compacted.ok and "Nothing to compact" in compacted.message
    assert not provider.requests
    missing = stack.runtime.ExecuteCommand(rt.ExecuteCommandRequest(session_id=SID, name="broken"))
    with pytest.raises(Exception, match="no command /broken"):
        await missing

    provider.enqueue(text_reply("ok"))
    assert (await run(stack, "component", "Header")).ok
    await stack.wait_idle(SID)
    assert sent(provider).endswith("Make a component named Header.")
    assert all(SECRET not in sent(provider, n) for n in range(len(provider.requests)))


async def test_a_prompt_too_large_is_refused_before_anything_is_logged(
    stack: Stack, provider: FakeProvider, repo: Path
) -> None:
    (repo / ".claude" / "commands" / "long.md").write_text("x" * (250 * 1024) + " $ARGUMENTS")
    reply = await run(stack, "long", "y" * (20 * 1024))
    assert not reply.ok and "makes a prompt over 262144 bytes" in reply.message
    (repo / ".claude" / "commands" / "huge.md").write_text("x" * (300 * 1024))
    listing = await run(stack, "commands")
    assert "huge.md: the file is 307200 bytes; at most 262144 are read" in listing.message
    events = await logged(stack, SID)
    assert not any(e.HasField("command_run") for e in events) and not provider.requests
