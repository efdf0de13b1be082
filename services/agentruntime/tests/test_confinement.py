"""Commands that try to escape, under the real bubblewrap (no mocks).

Every folder lives under /var/tmp, not /tmp: a confined command gets a
private /tmp, which would hide a /tmp folder for the wrong reason. Each
escape is refused or confined, and the folders it aimed at are unchanged.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from services.agentruntime import confinement
from services.agentruntime.confinement import Jail, hidden_from_env, prepare, probe
from services.agentruntime.gates import FULL, READ_ONLY, WORKSPACE_WRITE
from services.agentruntime.shell import ShellResult, run_shell
from services.agentruntime.tests.jail import CONFINED, SECRET, TOKEN, Machine, absent

pytestmark = pytest.mark.skipif(
    probe() is not None, reason=f"commands cannot be confined here: {probe()}"
)


async def run(machine: Machine, command: str, jail: Jail, timeout_s: float = 10) -> ShellResult:
    result = await run_shell(command, machine.workspace, timeout_s=timeout_s, jail=jail)
    await confinement.settled()  # no cgroup left behind by this test
    return result


# -- escapes ------------------------------------------------------------------------------


@pytest.mark.parametrize("sandbox", CONFINED)
async def test_writing_to_the_home_folder_or_etc_is_refused(machine: Machine, sandbox: str) -> None:
    name = f"agenthost-escape-{uuid.uuid4().hex}"
    home = Path.home() / name
    result = await run(machine, f"touch ~/{name} /etc/{name}; echo done", machine.jail(sandbox))
    assert "Read-only file system" in result.output and "done" in result.output
    assert absent(home, Path("/etc") / name)


@pytest.mark.parametrize("sandbox", CONFINED)
async def test_the_data_directory_and_the_tokens_are_hidden(machine: Machine, sandbox: str) -> None:
    before = machine.snapshot()
    command = (
        f"ls -a {machine.data}; cat {machine.data}/token {machine.tokens_file}; "
        f"echo x > {machine.data}/planted; rm -f {machine.data}/sessionlog.db; echo end"
    )
    result = await run(machine, command, machine.jail(sandbox))
    assert TOKEN not in result.output and "sessionlog.db" not in result.output
    assert "end" in result.output
    assert machine.snapshot() == before


@pytest.mark.parametrize("sandbox", CONFINED)
async def test_another_sessions_folder_is_hidden(machine: Machine, sandbox: str) -> None:
    before = machine.snapshot()
    command = f"cat {machine.other}/notes.txt; echo x > {machine.other}/planted; echo end"
    result = await run(machine, command, machine.jail(sandbox))
    assert SECRET not in result.output and "end" in result.output
    assert machine.snapshot() == before


@pytest.mark.parametrize("sandbox", CONFINED)
async def test_a_symlink_in_the_workspace_does_not_lead_out(machine: Machine, sandbox: str) -> None:
    (machine.workspace / "out").symlink_to(machine.outside)
    (machine.workspace / "data").symlink_to(machine.data)
    before = machine.snapshot()
    command = "echo x > out/planted; cat data/token; echo end"
    result = await run(machine, command, machine.jail(sandbox))
    assert TOKEN not in result.output and "end" in result.output
    assert machine.snapshot() == before


@pytest.mark.parametrize("sandbox", CONFINED)
async def test_the_runtimes_processes_and_environment_are_out_of_sight(
    machine: Machine, sandbox: str
) -> None:
    result = await run(
        machine, f"cat /proc/{os.getpid()}/environ; ls /proc | wc -l", machine.jail(sandbox)
    )
    assert "AGENTHOST" not in result.output and "PATH=" not in result.output


@pytest.mark.parametrize("sandbox", CONFINED)
async def test_the_network_is_off_unless_the_session_turned_it_on(
    machine: Machine, sandbox: str
) -> None:
    connected = asyncio.Event()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    command = f"echo hi > /dev/tcp/127.0.0.1/{port} && echo reached"
    try:
        off = await run(machine, command, machine.jail(sandbox))
        assert "reached" not in off.output and not connected.is_set()
        on = await run(machine, command, machine.jail(sandbox, network=True))
        assert "reached" in on.output
        await asyncio.wait_for(connected.wait(), 5)
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("sandbox", CONFINED)
async def test_a_fork_bomb_meets_the_process_limit_and_the_call_ends(
    machine: Machine, sandbox: str
) -> None:
    # Each level waits, so the bomb stays at the limit until the timeout.
    bomb = "bomb() { bomb & bomb & wait; }; bomb"
    root = confinement._pids_cgroup_root() if os.geteuid() == 0 else None
    # This runtime's groups only: another on the machine (a second test run)
    # makes and removes its own meanwhile.
    ours = f"{confinement.CGROUP_PREFIX}{os.getpid()}-*"
    groups_before = set(root.glob(ours)) if root else set()
    result = await run(machine, bomb, machine.jail(sandbox, max_processes=32), 2)
    assert result.timed_out
    assert "Resource temporarily unavailable" in result.output or "retry" in result.output
    # Nothing of it is left: the limit's cgroup (root) was removed.
    await confinement.settled()
    if root is not None:
        assert set(root.glob(ours)) == groups_before


async def test_read_only_keeps_the_workspace_unchanged(machine: Machine) -> None:
    before = machine.snapshot()
    result = await run(machine, "echo x > made.txt; rm calc.py; echo end", machine.jail(READ_ONLY))
    assert "Read-only file system" in result.output and "end" in result.output
    assert machine.snapshot() == before


# -- what should work --------------------------------------------------------------------


async def test_workspace_write_runs_a_test_suite_that_writes_in_the_workspace(
    machine: Machine,
) -> None:
    (machine.workspace / "test_calc.py").write_text(
        "import unittest\nfrom calc import add\n\n"
        "class T(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
    )
    command = "python3 -m unittest -q test_calc 2>&1 && echo green > result.txt"
    result = await run(machine, command, machine.jail(WORKSPACE_WRITE))
    assert result.exit_code == 0, result.output
    assert (machine.workspace / "result.txt").read_text() == "green\n"


@pytest.mark.parametrize("sandbox", CONFINED)
async def test_a_compiler_writes_to_a_private_tmp(machine: Machine, sandbox: str) -> None:
    name = f"agenthost-build-{uuid.uuid4().hex}"
    command = (
        f"mkdir /tmp/{name} && printf 'print(6*7)' > /tmp/{name}/main.py && "
        f"python3 -m py_compile /tmp/{name}/main.py && python3 /tmp/{name}/main.py"
    )
    result = await run(machine, command, machine.jail(sandbox))
    assert result.exit_code == 0 and result.output.strip() == "42", result.output
    assert absent(Path("/tmp") / name)  # private: gone with the command


async def test_full_is_unconfined(machine: Machine) -> None:
    command = f"echo x > {machine.outside}/made && cat {machine.data}/token"
    result = await run(machine, command, machine.jail(FULL))
    assert result.exit_code == 0 and TOKEN in result.output
    assert (machine.outside / "made").exists()


# -- where confinement is impossible ----------------------------------------------------------


def test_without_bubblewrap_a_confined_command_is_refused_with_how_to_fix_it(
    machine: Machine,
) -> None:
    prepared = prepare(machine.jail(WORKSPACE_WRITE), ["/bin/true"], bwrap="/nonexistent/bwrap")
    assert prepared.refused is not None and prepared.argv == []
    assert prepared.refused.reason == confinement.NO_BWRAP
    assert "apt-get install bubblewrap" in prepared.refused.refusal()
    assert "/sandbox full" in prepared.refused.refusal()


def test_with_the_containers_proc_a_non_dumpable_runtime_keeps_its_environment(
    machine: Machine,
) -> None:
    """The fallback for a container whose /proc cannot be mounted afresh:
    the command sees the container's /proc, read-only, and the runtime
    keeps its environment closed all the same."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from services.agentruntime.confinement import make_non_dumpable\n"
            "import sys, time\nmake_non_dumpable()\nprint('ready', flush=True)\ntime.sleep(60)",
        ],
        env={**os.environ, "HOLDER_SECRET": SECRET},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        command = f"cat /proc/{holder.pid}/environ; cat /proc/{holder.pid}/cmdline; echo end"
        argv = confinement.bwrap_argv(
            machine.jail(WORKSPACE_WRITE), ["/bin/sh", "-c", command], proc=confinement.PROC_BOUND
        )
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        shown = done.stdout + done.stderr
        assert "end" in shown and "make_non_dumpable" in shown  # the process is there
        assert SECRET not in shown and "Permission denied" in shown
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("sandbox", CONFINED)
async def test_settings_files_inside_the_hidden_data_folder_leave_commands_runnable(
    machine: Machine, sandbox: str
) -> None:
    """`up` names the data folder's models.toml (and an mcp.json there) in
    its settings: hidden with the folder, they must not break the sandbox."""
    models, servers = machine.data / "models.toml", machine.data / "mcp.json"
    models.write_text(f'[providers.x]\napi_key = "{SECRET}"\n')
    servers.write_text(f'{{"mcpServers": {{}}, "key": "{SECRET}"}}')
    env = {
        "AGENTHOST_TOKENS_FILE": str(machine.tokens_file),
        "AGENTHOST_MODELS_FILE": str(models),
        "AGENTHOST_MCP_CONFIG": str(servers),
    }
    jail = Jail(sandbox, machine.workspace, hidden=(*hidden_from_env(env, machine.data),))
    result = await run(machine, f"cat calc.py {models} {servers}; echo end", jail)
    assert "def add" in result.output and "end" in result.output
    assert SECRET not in result.output and TOKEN not in result.output


async def test_a_settings_file_outside_the_data_folder_is_hidden(machine: Machine) -> None:
    servers = machine.outside / "mcp.json"
    servers.write_text(f'{{"key": "{SECRET}"}}')
    env = {"AGENTHOST_MCP_CONFIG": str(servers)}
    jail = Jail(WORKSPACE_WRITE, machine.workspace, hidden=hidden_from_env(env, machine.data))
    result = await run(machine, f"cat {servers}; echo end", jail)
    assert SECRET not in result.output and "end" in result.output


async def test_a_workspace_inside_the_hidden_data_folder_stays_usable(machine: Machine) -> None:
    workspace = machine.data / "workspaces" / "project"
    workspace.mkdir(parents=True)
    jail = Jail(WORKSPACE_WRITE, workspace, hidden=(machine.data,))
    command = f"echo made > made.txt && cat {machine.data}/token; touch {machine.data}/x; echo end"
    result = await run_shell(command, workspace, timeout_s=10, jail=jail)
    assert TOKEN not in result.output and "Read-only file system" in result.output
    assert "end" in result.output and (workspace / "made.txt").read_text() == "made\n"
    assert absent(machine.data / "x")


@pytest.mark.skipif(
    os.geteuid() != 0 or confinement._pids_cgroup_root() is None,
    reason="the pids cgroups are a root runtime's process limit",
)
def test_a_runtime_sweeps_the_cgroups_a_dead_runtime_left() -> None:
    root = confinement._pids_cgroup_root()
    assert root is not None
    dead_pid = subprocess.Popen(["/bin/true"])  # a pid that has ended
    dead_pid.wait()
    dead = root / f"{confinement.CGROUP_PREFIX}{dead_pid.pid}-test"
    ours = root / f"{confinement.CGROUP_PREFIX}{os.getpid()}-test"
    dead.mkdir()
    ours.mkdir()
    try:
        confinement.sweep_cgroups(root)
        assert not dead.exists() and ours.exists()
    finally:
        for group in (dead, ours):
            if group.exists():
                group.rmdir()
