"""Background jobs and terminals that try to escape, under the real
bubblewrap: each is confined like a command of its session (the machine of
jail.py), the hidden paths stay hidden, the network setting holds and so
does the process limit, and the folders they aimed at are unchanged."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from services.agentruntime import confinement
from services.agentruntime.capabilities.jobs.background import BackgroundJob
from services.agentruntime.capabilities.jobs.terminal import Terminal
from services.agentruntime.confinement import Jail, probe
from services.agentruntime.shell import NotStarted
from services.agentruntime.tests.jail import CONFINED, SECRET, TOKEN, Machine

pytestmark = pytest.mark.skipif(
    probe() is not None, reason=f"commands cannot be confined here: {probe()}"
)

WAIT_S = 15.0
BOMB = "bomb() { bomb & bomb & wait; }; bomb"
# What bash says when fork() meets the process limit.
LIMITED = re.compile(r"Resource temporarily unavailable|retry")


async def job_output(machine: Machine, command: str, jail: Jail) -> str:
    """Run `command` as a background job; its output once it ended."""
    job = await BackgroundJob.start("job-1", command, machine.workspace, jail)
    assert not isinstance(job, NotStarted), job
    async with asyncio.timeout(WAIT_S):
        await job.exited()
    await confinement.settled()
    return job.output.read(0, 1 << 20).text


@asynccontextmanager
async def terminal(machine: Machine, jail: Jail) -> AsyncIterator[Terminal]:
    """The user's shell on a terminal in `jail`, closed after."""
    opened = await Terminal.open("term-1", "", machine.workspace, jail)
    assert not isinstance(opened, NotStarted), opened
    try:
        yield opened
    finally:
        await opened.terminate()
        async with asyncio.timeout(WAIT_S):
            await opened.exited()
        await confinement.settled()


async def typed(shell: Terminal, command: str) -> str:
    """Type `command; echo done-$((6*7))` and wait for done-42 (its echo
    reads done-$((6*7)), so only the shell's answer matches): the screen."""
    sent = await shell.send(f"{command}; echo done-$((6*7))\r", re.compile("done-42"), WAIT_S)
    assert sent.matched, shell.text()
    return shell.text(scrollback=200)


# -- hidden paths ----------------------------------------------------------------------------


@pytest.mark.parametrize("sandbox", CONFINED)
async def test_a_job_sees_neither_the_data_folder_nor_the_tokens_nor_another_session(
    machine: Machine, sandbox: str
) -> None:
    before = machine.snapshot()
    command = (
        f"ls -a {machine.data}; cat {machine.data}/token {machine.tokens_file} "
        f"{machine.other}/notes.txt; echo x > {machine.other}/planted; echo end"
    )
    output = await job_output(machine, command, machine.jail(sandbox))
    assert "end" in output
    assert TOKEN not in output and SECRET not in output and "sessionlog.db" not in output
    assert machine.snapshot() == before


@pytest.mark.parametrize("sandbox", CONFINED)
async def test_a_terminal_sees_neither_the_data_folder_nor_the_tokens_nor_another_session(
    machine: Machine, sandbox: str
) -> None:
    before = machine.snapshot()
    async with terminal(machine, machine.jail(sandbox)) as shell:
        screen = await typed(
            shell,
            f"ls -a {machine.data}; cat {machine.data}/token {machine.tokens_file} "
            f"{machine.other}/notes.txt; echo x > {machine.other}/planted",
        )
    assert TOKEN not in screen and SECRET not in screen and "sessionlog.db" not in screen
    assert machine.snapshot() == before


@pytest.mark.parametrize("sandbox", CONFINED)
async def test_the_runtimes_environment_is_out_of_a_terminals_sight(
    machine: Machine, sandbox: str
) -> None:
    async with terminal(machine, machine.jail(sandbox)) as shell:
        screen = await typed(shell, f"cat /proc/{os.getpid()}/environ; env | grep -c AGENTHOST_")
    # Neither the runtime's environment nor its secrets (AGENTHOST_*) are read.
    assert "PATH=" not in screen and re.search(r"^0$", screen, re.MULTILINE), screen


# -- the network ----------------------------------------------------------------------------


@asynccontextmanager
async def listener() -> AsyncIterator[tuple[int, asyncio.Event]]:
    """A port on the host's loopback, and whether anything connected to it."""
    connected = asyncio.Event()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connected.set()
        writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], connected
    finally:
        server.close()
        await server.wait_closed()


def reach(port: int) -> str:
    return f"(echo hi > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo REACHED-$((40+2))"


@pytest.mark.parametrize("sandbox", CONFINED)
async def test_a_jobs_network_is_off_unless_the_session_turned_it_on(
    machine: Machine, sandbox: str
) -> None:
    async with listener() as (port, connected):
        off = await job_output(machine, reach(port), machine.jail(sandbox))
        assert "REACHED-42" not in off and not connected.is_set()
        on = await job_output(machine, reach(port), machine.jail(sandbox, network=True))
        assert "REACHED-42" in on
        await asyncio.wait_for(connected.wait(), WAIT_S)


@pytest.mark.parametrize("sandbox", CONFINED)
async def test_a_terminals_network_is_off_unless_the_session_turned_it_on(
    machine: Machine, sandbox: str
) -> None:
    async with listener() as (port, connected):
        async with terminal(machine, machine.jail(sandbox)) as shell:
            off = await typed(shell, reach(port))
        assert "REACHED-42" not in off and not connected.is_set()
        async with terminal(machine, machine.jail(sandbox, network=True)) as shell:
            on = await typed(shell, reach(port))
        assert "REACHED-42" in on
        await asyncio.wait_for(connected.wait(), WAIT_S)


# -- the process limit ------------------------------------------------------------------------


def our_cgroups() -> set[str]:
    """This runtime's pids cgroups (root), to see none is left behind."""
    root = confinement._pids_cgroup_root() if os.geteuid() == 0 else None
    if root is None:
        return set()
    return {group.name for group in root.glob(f"{confinement.CGROUP_PREFIX}{os.getpid()}-*")}


@pytest.mark.parametrize("sandbox", CONFINED)
async def test_a_fork_bomb_job_meets_the_process_limit_and_is_killed_whole(
    machine: Machine, sandbox: str
) -> None:
    groups_before = our_cgroups()
    job = await BackgroundJob.start(
        "job-1", BOMB, machine.workspace, machine.jail(sandbox, max_processes=32)
    )
    assert not isinstance(job, NotStarted), job
    async with asyncio.timeout(WAIT_S):
        while not LIMITED.search(job.output.read(0, 1 << 20).text):
            await job.output.grown()
        await job.terminate()
        _, signal = await job.exited()
    assert signal is not None
    await confinement.settled()
    assert our_cgroups() == groups_before


@pytest.mark.parametrize("sandbox", CONFINED)
async def test_a_fork_bomb_typed_into_a_terminal_meets_the_process_limit(
    machine: Machine, sandbox: str
) -> None:
    groups_before = our_cgroups()
    async with terminal(machine, machine.jail(sandbox, max_processes=32)) as shell:
        sent = await shell.send(f"{BOMB}\r", LIMITED, WAIT_S)
        assert sent.matched, shell.text()
    assert our_cgroups() == groups_before


# -- what should work -----------------------------------------------------------------------


async def test_a_terminal_in_workspace_write_changes_the_workspace_only(machine: Machine) -> None:
    async with terminal(machine, machine.jail(CONFINED[1])) as shell:
        screen = await typed(shell, f"echo made > made.txt; touch {machine.outside}/x")
    assert "Read-only file system" in screen
    assert (machine.workspace / "made.txt").read_text() == "made\n"
    assert not (machine.outside / "x").exists()
