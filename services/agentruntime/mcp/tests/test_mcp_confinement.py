"""Stdio MCP servers run confined like a workspace-write command, under the
real bubblewrap: the fault server (tests/mcp/fault_server.py) tries to write
outside its folder, read the stack's token, list another session's folder
and reach a loopback port; the reference server still works confined.

Folders live under /var/tmp, not /tmp: a confined server gets a private
/tmp, which would hide a /tmp folder for the wrong reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.agentruntime import confinement
from services.agentruntime.confinement import hidden_from_env, probe
from services.agentruntime.mcp import McpServers
from services.agentruntime.models.builtin import BuiltinAdapter, ScriptedReply, ScriptedToolCall
from services.agentruntime.runtime import AgentRuntime
from services.projection.session_units import MCP_UNIT
from services.sessionlog.domain import SessionLog
from tests.support.hosts import REPO

pytestmark = pytest.mark.skipif(
    probe() is not None, reason=f"servers cannot be confined here: {probe()}"
)

WAIT_S = 30.0
TOKEN = "tok-" + uuid.uuid4().hex
SECRET = "secret-" + uuid.uuid4().hex
PROBE = "probe-" + uuid.uuid4().hex
EVERYTHING = REPO / "tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js"


class Machine:
    """A session's folder, the stack's data directory with its token, a
    tokens file, another session's folder and a plain folder outside."""

    def __init__(self, base: Path) -> None:
        self.workspace = base / "workspace"
        self.data = base / "data"
        self.other = base / "other-workspace"
        self.outside = base / "outside"
        self.tokens_file = base / "tokens.json"
        for folder in (self.workspace, self.data, self.other, self.outside):
            folder.mkdir()
        (self.data / "token").write_text(TOKEN)
        (self.other / "notes.txt").write_text(SECRET)
        self.tokens_file.write_text(json.dumps({TOKEN: "local"}))
        # The stack's settings that name files.
        self.settings = {"AGENTHOST_TOKENS_FILE": str(self.tokens_file)}

    def hidden(self) -> tuple[Path, ...]:
        """What the runtime hides (service.py): the data dir and the *_FILE settings."""
        return hidden_from_env(self.settings, self.data)


@pytest.fixture
def machine() -> Iterator[Machine]:
    base = Path(tempfile.mkdtemp(prefix="agenthost-mcpjail-", dir="/var/tmp"))
    try:
        yield Machine(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
async def servers() -> AsyncIterator[McpServers]:
    mcp = McpServers(None)
    yield mcp
    await mcp.close()
    await confinement.settled()


def fault_server(**extra: Any) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", "tests.mcp.fault_server"],
        "env": {"PYTHONPATH": str(REPO)},
        **extra,
    }


def write_config(folder: Path, servers: dict[str, Any]) -> None:
    (folder / ".agenthost").mkdir(parents=True, exist_ok=True)
    (folder / ".agenthost/mcp.json").write_text(json.dumps({"mcpServers": servers}))


def call(tool: str, call_id: str, /, **args: Any) -> ScriptedToolCall:
    return ScriptedToolCall(tool, args, call_id=call_id)


async def run_turn(
    log: SessionLog, machine: Machine, servers: McpServers, calls: list[ScriptedToolCall]
) -> list[ev.Event]:
    """One turn of a session in machine.workspace (another session works in
    machine.other) whose model makes `calls`; its logged events."""
    await log.create_session("s", str(machine.workspace))
    await log.create_session("other", str(machine.other))
    model = BuiltinAdapter([ScriptedReply(tool_calls=calls), ScriptedReply(text="done")])
    runtime = AgentRuntime(log, model, hidden=machine.hidden(), mcp=servers)
    try:
        # Both sessions logged something: a session never written to is not
        # listed yet (lazy), so not known to be another's (neighbours.py).
        await runtime.update_settings("other", None, "never")
        await runtime.update_settings("s", None, "never")
        await runtime.prompt("s", "try things")
        async with asyncio.timeout(WAIT_S):
            async for status in runtime.watch_status("s"):
                if not status.running:
                    break
        return list((await log.read("s", limit=1000)).events)
    finally:
        await runtime.close()


def outputs(logged: list[ev.Event]) -> dict[str, str]:
    """Each call's answer (the fault server says "ok: ..." or "failed: ...")."""
    return {
        e.tool_result.call_id: e.tool_result.output or e.tool_result.error
        for e in logged
        if e.HasField("tool_result")
    }


def mcp_servers(logged: list[ev.Event]) -> dict[str, Any]:
    state = MCP_UNIT.init()
    for event in logged:
        state = MCP_UNIT.apply(state, event)
    view: Any = MCP_UNIT.view(state)
    return {server["name"]: server for server in view["servers"]}


async def test_a_server_writes_in_its_folder_only_and_never_sees_the_hidden_paths(
    session_log: SessionLog, machine: Machine, servers: McpServers
) -> None:
    write_config(machine.workspace, {"jailed": fault_server()})
    calls = [
        call("mcp__jailed__write_file", "own", path=str(machine.workspace / "a.txt"), text="a"),
        call("mcp__jailed__write_file", "outside", path=str(machine.outside / "x"), text="x"),
        call("mcp__jailed__write_file", "data", path=str(machine.data / "x"), text="x"),
        call("mcp__jailed__write_file", "repo", path=str(REPO / f"x-{PROBE}"), text="x"),
        call("mcp__jailed__read_file", "token", path=str(machine.data / "token")),
        call("mcp__jailed__read_file", "tokens", path=str(machine.tokens_file)),
        call("mcp__jailed__list_dir", "data_dir", path=str(machine.data)),
        call("mcp__jailed__read_file", "notes", path=str(machine.other / "notes.txt")),
    ]
    found = outputs(await run_turn(session_log, machine, servers, calls))

    assert found["own"].startswith("ok") and (machine.workspace / "a.txt").read_text() == "a"
    for refused in ("outside", "data", "repo"):
        assert found[refused].startswith("failed: [Errno 30] Read-only"), found[refused]
    assert not (machine.outside / "x").exists() and not (machine.data / "x").exists()
    assert not (REPO / f"x-{PROBE}").exists()
    # The data directory is an empty folder, the tokens file /dev/null (empty,
    # or closed to a root runtime's capless server), the other session's
    # folder empty: neither the token nor its notes leak.
    assert found["data_dir"] == "ok: []"
    assert found["token"].startswith("failed: [Errno 2]")
    assert found["tokens"] in (
        "ok: ",
        f"failed: [Errno 13] Permission denied: '{machine.tokens_file}'",
    )
    assert found["notes"].startswith("failed: [Errno 2]")
    assert not any(TOKEN in text or SECRET in text for text in found.values())


async def test_the_network_is_off_unless_the_entry_turns_it_on(
    session_log: SessionLog, machine: Machine, servers: McpServers
) -> None:
    accepted = asyncio.Event()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set()
        writer.close()

    listener = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    write_config(
        machine.workspace,
        {"offline": fault_server(), "online": fault_server(network=True)},
    )
    calls = [
        call("mcp__offline__connect", "off", port=port),
        call("mcp__online__connect", "on", port=port),
    ]
    async with listener:
        found = outputs(await run_turn(session_log, machine, servers, calls))
        assert found["off"].startswith("failed: [Errno 111] Connection refused"), found["off"]
        assert found["on"] == f"ok: connected to {port}"
        async with asyncio.timeout(WAIT_S):
            await accepted.wait()


async def test_sandbox_full_runs_a_server_unconfined(
    session_log: SessionLog, machine: Machine, servers: McpServers
) -> None:
    write_config(machine.workspace, {"free": fault_server(sandbox="full")})
    calls = [call("mcp__free__write_file", "outside", path=str(machine.outside / "x"), text="x")]
    found = outputs(await run_turn(session_log, machine, servers, calls))
    assert found["outside"].startswith("ok") and (machine.outside / "x").read_text() == "x"


async def test_the_reference_server_works_confined(
    session_log: SessionLog, machine: Machine, servers: McpServers
) -> None:
    node = shutil.which("node")
    assert node and EVERYTHING.is_file(), "run `make mcp-test-servers` first"
    write_config(machine.workspace, {"everything": {"command": node, "args": [str(EVERYTHING)]}})
    calls = [call("mcp__everything__get-sum", "sum", a=2, b=3)]
    logged = await run_turn(session_log, machine, servers, calls)
    assert "5" in outputs(logged)["sum"]
    assert mcp_servers(logged)["everything"]["state"] == "ready"


async def test_a_server_runs_confined_when_the_data_folder_holds_the_settings_files(
    session_log: SessionLog, machine: Machine
) -> None:
    """The deployment's mcp.json and models.toml in the data folder, as `up`
    names them: hidden with the folder, the server still starts confined."""
    node = shutil.which("node")
    assert node and EVERYTHING.is_file(), "run `make mcp-test-servers` first"
    deployment = machine.data / "mcp.json"
    deployment.write_text(
        json.dumps({"mcpServers": {"everything": {"command": node, "args": [str(EVERYTHING)]}}})
    )
    (machine.data / "models.toml").write_text("[providers]\n")
    machine.settings["AGENTHOST_MODELS_FILE"] = str(machine.data / "models.toml")
    machine.settings["AGENTHOST_MCP_CONFIG"] = str(deployment)
    servers = McpServers(deployment)
    try:
        calls = [call("mcp__everything__get-sum", "sum", a=2, b=3)]
        logged = await run_turn(session_log, machine, servers, calls)
    finally:
        await servers.close()
    assert "5" in outputs(logged)["sum"]
    assert mcp_servers(logged)["everything"]["state"] == "ready"


async def test_without_bubblewrap_the_server_is_failed_with_how_to_fix_it_never_unconfined(
    session_log: SessionLog, machine: Machine
) -> None:
    servers = McpServers(None, bwrap="/nonexistent/bwrap")
    marker = machine.outside / "ran"
    write_config(
        machine.workspace,
        {
            "jailed": {
                "command": "/bin/sh",
                "args": ["-c", f"touch {marker}"],
            }
        },
    )
    try:
        logged = await run_turn(session_log, machine, servers, [])
    finally:
        await servers.close()
    server = mcp_servers(logged)["jailed"]
    assert server["state"] == "failed"
    assert "CONFINEMENT_NO_BWRAP" in server["error"]
    assert "apt-get install bubblewrap" in server["error"]
    assert '"sandbox": "full"' in server["error"]
    assert not marker.exists()


@pytest.mark.skipif(
    os.geteuid() != 0 or confinement._pids_cgroup_root() is None,
    reason="the pids cgroups are a root runtime's process limit",
)
async def test_a_root_runtimes_server_has_a_process_limit_removed_when_it_stops(
    machine: Machine,
) -> None:
    root = confinement._pids_cgroup_root()
    assert root is not None
    ours = f"{confinement.CGROUP_PREFIX}{os.getpid()}-*"
    servers = McpServers(None)
    write_config(machine.workspace, {"jailed": fault_server()})
    before = set(root.glob(ours))

    async def hidden() -> tuple[Path, ...]:
        return machine.hidden()

    try:
        snapshot = await servers.snapshot(machine.workspace, hidden)
        assert [s.state for s in snapshot.servers] == ["ready"]
        (group,) = set(root.glob(ours)) - before
        assert (group / "pids.max").read_text().strip() == str(confinement.DEFAULT_MAX_PROCESSES)
    finally:
        await servers.close()
        await confinement.settled()
    assert set(root.glob(ours)) == before


async def test_a_server_whose_files_are_under_tmp_still_runs_confined() -> None:
    """The jail's private /tmp must not hide the server's own code: a checkout
    (or virtualenv) under /tmp, named on its command line, stays readable,
    while the rest of the host's /tmp stays hidden."""
    from services.agentruntime.mcp.config import ServerConfig
    from services.agentruntime.mcp.launch import stdio_launch

    home = Path(tempfile.mkdtemp(prefix="agenthost-server-", dir="/tmp"))
    stray = Path(tempfile.mkdtemp(prefix="agenthost-stray-", dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="agenthost-work-", dir="/var/tmp"))
    try:
        (stray / "secret").write_text("not for the server\n")
        script = home / "server.py"
        script.write_text(
            "import pathlib, sys\n"
            f"print(pathlib.Path({str(stray / 'secret')!r}).exists())\n"
            "print('server code ran')\n"
        )
        config = ServerConfig("own", "deployment", command=sys.executable, args=(str(script),))
        prepared = stdio_launch(config, work)
        try:
            import subprocess

            ran = await asyncio.to_thread(
                subprocess.run, prepared.argv, capture_output=True, text=True, timeout=30
            )
        finally:
            await prepared.cleanup()
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.splitlines() == ["False", "server code ran"]
    finally:
        for folder in (home, stray, work):
            shutil.rmtree(folder, ignore_errors=True)
