"""`agenthost up --processes` runs each service in its own process
(services/supervisor.py) and keeps one command: it serves a prompt, one
Ctrl-C or SIGTERM stops every service, a service that dies takes the stack
down with a line naming it, and a supervisor killed outright leaves no
service behind. The default (every service in `up`'s process) keeps serving
and stopping the same way."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from clients.cli.config import tls_roots
from clients.sdk import AgentHostClient
from services.common.topology import SERVICES
from tests.integration.test_gateway_tls import self_signed
from tests.support.hosts import REPO, free_base_port, up_with_a_port_taken

TIMEOUT_S = 60.0


@dataclass
class Up:
    """A running `agenthost up`, its addresses and its service processes
    (by name: a pidfd each, so a reused pid cannot fool a check)."""

    process: subprocess.Popen[str]
    data_dir: Path
    addresses: dict[str, str]
    children: dict[str, int]
    pidfds: dict[str, int]
    stderr: list[str] = field(default_factory=list)

    @property
    def token(self) -> str:
        return (self.data_dir / "token").read_text().strip()

    def wait(self) -> int:
        return self.process.wait(TIMEOUT_S)

    def running(self, within_s: float = 0.0) -> list[str]:
        """The services whose process still runs after `within_s` seconds."""
        deadline = time.monotonic() + within_s
        left = dict(self.pidfds)
        while left:
            remaining = max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select(list(left.values()), [], [], remaining)
            if not ready:
                break
            left = {name: fd for name, fd in left.items() if fd not in ready}
        return sorted(left)


def _service_children(pid: int) -> dict[str, int]:
    """The `python -m services.<name>` processes whose parent is `pid`."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"-m" in argv:
            module = argv[argv.index(b"-m") + 1].decode()
            found[module.removeprefix("services.")] = int(entry.name)
    return found


def _drain(stream: object, lines: list[str], up_line: list[str], seen: threading.Event) -> None:
    for line in stream:  # type: ignore[attr-defined]
        lines.append(line.rstrip("\n"))
        if line.startswith('{"agenthost": "up"'):
            up_line.append(line)
            seen.set()
    seen.set()


@contextmanager
def agenthost_up(tmp_path: Path, *flags: str, env: dict[str, str] | None = None) -> Iterator[Up]:
    """`agenthost up --free-ports` in a session of its own (as a terminal
    runs it), its data in tmp_path; killed, with its services, if a test
    leaves it running."""
    data_dir = tmp_path / "data"
    command = [sys.executable, "-m", "clients.cli", "up", "--free-ports", *flags]
    process = subprocess.Popen(
        [*command, "--data-dir", str(data_dir)],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    stdout: list[str] = []
    stderr: list[str] = []
    up_line: list[str] = []
    seen = threading.Event()
    readers = [
        threading.Thread(target=_drain, args=(process.stdout, stdout, up_line, seen)),
        threading.Thread(target=_drain, args=(process.stderr, stderr, [], threading.Event())),
    ]
    for reader in readers:
        reader.start()
    up: Up | None = None
    try:
        seen.wait(TIMEOUT_S)
        assert up_line, f"agenthost up did not come up: {stdout} {stderr}"
        children = _service_children(process.pid)
        pidfds = {name: os.pidfd_open(pid) for name, pid in children.items()}
        addresses = json.loads(up_line[0])["addresses"]
        up = Up(process, data_dir, addresses, children, pidfds, stderr)
        yield up
    finally:
        _kill_all(process, up)
        for reader in readers:
            reader.join(TIMEOUT_S)
        for fd in up.pidfds.values() if up else ():
            os.close(fd)


def _kill_all(process: subprocess.Popen[str], up: Up | None) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    for name in up.running() if up else ():
        signal.pidfd_send_signal(up.pidfds[name], signal.SIGKILL)  # type: ignore[union-attr]


async def _prompt_through_the_gateway(up: Up, folder: Path, roots: bytes | None = None) -> None:
    """A session in `folder` (which exists) and a turn with the built-in model,
    through the SDK."""
    async with AgentHostClient(up.addresses["gateway"], up.token, tls_roots=roots) as client:
        summary = await client.create_session(cwd=str(folder))
        session = await client.open_session(summary.id)
        await session.prompt("hello, processes")

        def answered(_: object) -> bool:
            texts = [e.assistant_message.text for e in session.events]
            return "Echo: hello, processes" in texts

        await session.wait_until(answered, within=TIMEOUT_S)


def _stop_like_a_terminal(up: Up) -> None:
    os.killpg(up.process.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group


def _stop_like_a_service_manager(up: Up) -> None:
    up.process.send_signal(signal.SIGTERM)


@pytest.mark.parametrize("stop", [_stop_like_a_terminal, _stop_like_a_service_manager])
@pytest.mark.parametrize("mode", ["--processes", "--one-process"])
async def test_up_serves_a_prompt_and_one_signal_stops_every_service(
    tmp_path: Path, mode: str, stop: object
) -> None:
    with agenthost_up(tmp_path, mode) as up:
        assert sorted(up.children) == (sorted(SERVICES) if mode == "--processes" else [])
        assert set(up.addresses) == set(SERVICES)
        await _prompt_through_the_gateway(up, tmp_path)
        stop(up)  # type: ignore[operator]
        assert await asyncio.to_thread(up.wait) == 0
        # The supervisor waited for each of its children before exiting.
        assert up.running() == []
        assert not any("Traceback" in line for line in up.stderr), up.stderr


async def test_a_service_that_dies_stops_the_stack_with_a_line_naming_it(
    tmp_path: Path,
) -> None:
    with agenthost_up(tmp_path, "--processes") as up:
        os.kill(up.children["agentruntime"], signal.SIGKILL)
        assert await asyncio.to_thread(up.wait) == 1
        assert up.running() == []
        assert up.stderr[-1] == (
            "error: the agentruntime service exited unexpectedly (killed by SIGKILL); "
            "the other services are stopped"
        )


async def test_a_killed_supervisor_leaves_no_service_running(tmp_path: Path) -> None:
    with agenthost_up(tmp_path, "--processes") as up:
        up.process.kill()
        await asyncio.to_thread(up.wait)
        # Each service gets SIGTERM from the kernel and stops within its grace.
        assert await asyncio.to_thread(up.running, TIMEOUT_S) == []


async def test_the_gateway_alone_serves_tls_when_given_a_certificate(tmp_path: Path) -> None:
    files = self_signed(tmp_path)
    env = {"AGENTHOST_TLS_CERT_FILE": str(files.cert), "AGENTHOST_TLS_KEY_FILE": str(files.key)}
    with agenthost_up(tmp_path, "--processes", env=env) as up:
        roots = tls_roots({"AGENTHOST_GATEWAY_CA": str(files.cert)})
        await _prompt_through_the_gateway(up, tmp_path, roots)
        up.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(up.wait) == 0


def test_a_taken_port_of_an_internal_service_says_so_in_one_line(tmp_path: Path) -> None:
    base = free_base_port()
    session_log = base + 1
    stderr = up_with_a_port_taken(
        session_log, ["--processes", "--base-port", str(base)], tmp_path / "data"
    )
    assert stderr.splitlines() == [
        f"port {session_log} is in use; is agenthost already running? use --free-ports"
    ]
