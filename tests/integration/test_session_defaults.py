"""Defaults of new sessions through the real stack: the user's settings file,
the deployment's flags (`agenthost up --sandbox/--approvals/--network`) and
the workspace's `.agenthost/settings.json` apply to a new session, are
recorded in its log as coming from defaults, and every client sees them in
the `settings` projection; a workspace file cannot widen them; a malformed
file is reported, not fatal; an old session is untouched; a change made in
the session wins; a never-used session stays lazy when nothing differs."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agenthost_core.locations import ENV_CONFIG_DIR
from clients.sdk import AgentHostClient, Backoff, Session
from services.agentruntime.defaults import DEPLOYMENT, ENV_SANDBOX
from services.agentruntime.models.builtin import ScriptedReply, ScriptedToolCall
from services.agentruntime.settings_files import WORKSPACE_SETTINGS
from services.sessionlog.client import SessionLogClient
from tests.integration.test_cli import running_up
from tests.support.gateway import ALICE, GatewayHarness, running_gateway

WAIT_S = 10.0


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's agenthost config folder, as the runtime finds it."""
    folder = tmp_path / "config"
    folder.mkdir()
    monkeypatch.setenv(ENV_CONFIG_DIR, str(folder))
    return folder


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    (folder / ".agenthost").mkdir(parents=True)
    return folder


@pytest.fixture
async def harness(tmp_path: Path, config: Path) -> AsyncIterator[GatewayHarness]:
    async with running_gateway(tmp_path / "data") as running:
        yield running


@pytest.fixture
async def client(harness: GatewayHarness) -> AsyncIterator[AgentHostClient]:
    async with AgentHostClient(
        harness.address, ALICE, backoff=Backoff(initial_s=0.02, max_s=0.2)
    ) as opened:
        yield opened


async def new_session(client: AgentHostClient, folder: Path) -> Session:
    summary = await client.create_session(cwd=str(folder))
    session = await client.open_session(summary.id)
    await session.wait_until(lambda s: s.settings is not None, WAIT_S)
    return session


def write(path: Path, data: object) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


async def settings_events(harness: GatewayHarness, session_id: str) -> list[str]:
    """The origins of the session/settings events in the session's log."""
    log = SessionLogClient(harness.stack.channel("sessionlog"))
    read = await log.read(session_id, from_seq=0)
    return [str(e.session_settings.origin) for e in read.events if e.HasField("session_settings")]


async def test_each_source_applies_to_a_new_session_and_is_shown(
    harness: GatewayHarness,
    client: AgentHostClient,
    config: Path,
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    user = write(config / "settings.json", {"approvals": "never", "hooks": {"Stop": []}})
    monkeypatch.setenv(ENV_SANDBOX, "read-only")
    await harness.stack.restart("agentruntime")  # it reads the deployment's flags at start
    # The workspace narrows the approvals, and cannot widen the sandbox.
    workspace = write(
        project / WORKSPACE_SETTINGS, {"approvals": "ask-for-commands", "sandbox": "full"}
    )
    session = await new_session(client, project)
    settings = session.settings
    assert settings is not None
    assert (settings.sandbox, settings.approvals, settings.network) == (
        "read-only",
        "ask-for-commands",
        False,
    )
    assert settings.origin == "defaults"
    assert settings.sources == (str(user), DEPLOYMENT, str(workspace))
    assert settings.problems == (
        f"{workspace}: sandbox 'full' would widen the deployment's 'read-only'; ignored",
    )
    # Every client reads them from the log: a fresh client sees the same.
    async with AgentHostClient(harness.address, ALICE) as other:
        again = await other.open_session(session.id)
        assert again.settings == settings and again.settings.origin == "defaults"
    # And the runtime acts on them: the sandbox refuses a file change.
    harness.model.enqueue(
        ScriptedReply(
            tool_calls=[ScriptedToolCall("write_file", {"path": "a.txt", "content": "a"})]
        )
    )
    harness.model.enqueue(ScriptedReply(text="Could not."))
    await session.prompt("write a.txt")
    await session.wait_until(lambda s: not s.running and len(s.events) > 4, WAIT_S)
    results = [e.tool_result for e in session.events if e.HasField("tool_result")]
    assert ["sandbox is read-only" in r.error for r in results] == [True]
    assert not (project / "a.txt").exists()


async def test_a_malformed_file_is_reported_and_not_fatal(
    client: AgentHostClient, config: Path, project: Path
) -> None:
    user = write(config / "settings.json", "{not json")
    session = await new_session(client, project)
    assert session.settings is not None
    assert (session.settings.sandbox, session.settings.approvals) == ("workspace-write", "ask")
    [problem] = session.settings.problems
    assert problem.startswith(f"{user}: is not valid JSON")
    # The session works as ever.
    await session.prompt("hello")
    await session.wait_until(lambda s: not s.running and len(s.events) > 3, WAIT_S)
    assert [
        e.assistant_message.text for e in session.events if e.HasField("assistant_message")
    ] == ["Echo: hello"]


async def test_an_old_session_is_untouched_and_a_change_made_in_the_session_wins(
    harness: GatewayHarness, client: AgentHostClient, config: Path, project: Path
) -> None:
    old = await new_session(client, project)
    await old.prompt("before any defaults")
    await old.wait_until(lambda s: not s.running and len(s.events) > 3, WAIT_S)
    write(config / "settings.json", {"sandbox": "read-only", "network": True})
    blank = await new_session(client, project)
    assert blank.settings is not None and blank.settings.origin == "defaults"
    changed = await blank.set_settings(sandbox="full")
    assert (changed.sandbox, changed.network, changed.origin) == ("full", True, "session")
    # Restarted, the runtime loads both sessions anew from their logs.
    await harness.stack.restart("agentruntime")

    async with AgentHostClient(harness.address, ALICE) as other:
        reopened_old = await other.open_session(old.id)
        assert reopened_old.settings is not None
        assert reopened_old.settings.origin == "built-in"
        assert reopened_old.settings.sandbox == "workspace-write"
        reopened = await other.open_session(blank.id)
        # Still blank, but its log has a change of its own: never re-defaulted.
        assert reopened.settings is not None
        assert (reopened.settings.sandbox, reopened.settings.origin) == ("full", "session")
    assert await settings_events(harness, old.id) == []
    defaults, session = "2", "1"  # SETTINGS_ORIGIN_DEFAULTS, SETTINGS_ORIGIN_SESSION
    assert await settings_events(harness, blank.id) == [defaults, session]


async def test_a_never_used_session_stays_lazy_when_no_default_differs(
    harness: GatewayHarness, client: AgentHostClient, config: Path, project: Path
) -> None:
    # A settings file that sets only what the built-in defaults are.
    write(config / "settings.json", {"sandbox": "workspace-write", "approvals": "ask"})
    write(project / WORKSPACE_SETTINGS, {"network": False})
    session = await new_session(client, project)
    assert session.settings is not None and session.settings.origin == "built-in"
    log = SessionLogClient(harness.stack.channel("sessionlog"))
    assert (await log.get_session(session.id)).last_seq == -1  # nothing appended
    # Once they differ, the next new session records them (one event).
    write(config / "settings.json", {"approvals": "never"})
    other = await client.create_session(cwd=str(project))
    opened = await client.open_session(other.id)
    await opened.wait_until(lambda s: s.settings is not None, WAIT_S)
    assert (await log.get_session(other.id)).last_seq == 0
    assert opened.settings is not None and opened.settings.approvals == "never"


@pytest.mark.parametrize("mode", ["--one-process", "--processes"])
async def test_agenthost_up_flags_lie_over_the_user_file(tmp_path: Path, mode: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    config = tmp_path / "config"
    config.mkdir()
    user = write(config / "settings.json", {"approvals": "never", "sandbox": "full"})
    flags = (mode, "--sandbox", "read-only", "--network", "on")
    with running_up(tmp_path, None, *flags, env={ENV_CONFIG_DIR: str(config)}) as up:
        token = (up.data_dir / "token").read_text().strip()
        async with AgentHostClient(up.gateway, token) as client:
            session = await new_session(client, project)
    settings = session.settings
    assert settings is not None
    assert (settings.sandbox, settings.approvals, settings.network) == ("read-only", "never", True)
    assert (settings.origin, settings.sources) == ("defaults", (str(user), DEPLOYMENT))
