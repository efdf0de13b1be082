"""`agenthost up --processes`: every service in its own process, supervised.

Why it exists: the embedded stack (embedded.py) runs the six services in one
interpreter, so one GIL, one event loop, one core. As processes they cost
no extra serialization (they talk gRPC on loopback either way), but memory
(an interpreter each: about five times the stack's) and start-up time, and
in return the stack can use more than one core.

Why it is not the default: measured on two cores (bench/processes.py, the
numbers in bench/PROCESSES.md), that buys throughput when a session runs
flat out, not isolation. Every service works for every session (the
projection service folds and the gateway follows every event), so an idle
session's reads and frames cross the same busy services in either layout,
and with more busy processes than cores each hop also waits for a core.
It is for a machine with cores to spare under sustained load.

What stays as in the embedded default: one command, one Ctrl-C, the same
ports, data folder, bearer token (the gateway makes DATA_DIR/token for the
account "local"), TLS for the gateway, its port for browsers and their
origins, model settings and output. The
supervisor starts each service as `python -m services.<name>` once the peers
it calls are serving (topology.PEERS), hands it its address (port 0 with
--free-ports: the child's "listening" log line says which port it got), the
data folder and a fresh internal token, and relays its warnings and errors.

Stopping: children run in their own process group, so a terminal's Ctrl-C
(SIGINT to the foreground group) reaches only the supervisor, which stops
them once each, in reverse start order (SIGTERM, SIGKILL past the grace). A
child that ends on its own stops the others and ends the supervisor with
ChildExited naming it. A supervisor killed too hard to do any of this is
still followed by its children: each asked the kernel for SIGTERM when its
parent dies (PR_SET_PDEATHSIG, services/common/main.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from services.common.config import (
    LOOPBACK,
    TLS_CERT_ENV,
    TLS_KEY_ENV,
    WEB_FILES_ENV,
    WEB_LISTEN_ENV,
    WEB_ORIGINS_ENV,
    TlsFiles,
    web_client_files,
)
from services.common.internal_auth import TOKEN_ENV, new_token
from services.common.main import SUPERVISOR_ENV
from services.common.server import PortInUse, port_in_use
from services.common.tasks import serve_until_signalled
from services.common.topology import ADDRESS_ENV, DEFAULT_PORTS, DEFAULT_WEB_PORT, PEERS, SERVICES

DEFAULT_HOST = "127.0.0.1"
START_TIMEOUT_S = 60.0
# Each service's shutdown grace (as in the embedded stack), and how long past
# it a child may take to exit before it is killed.
GRACE_S = 2.0
KILL_AFTER_S = GRACE_S + 5.0
# Quiet, but with the lifecycle lines the supervisor waits for.
CHILD_LOG_LEVEL = "WARNING,agenthost.server=INFO"
RELAYED_LEVELS = frozenset({"warning", "error", "critical"})
# Of agenthost's own variables the children get only those the embedded stack
# reads too (the model's, the lease period, the stack's database, new
# sessions' defaults and where the user's settings are); the
# supervisor sets the rest, so a shell set up for a deployment (a service's own
# DSN, tokens file, peers) does not rewire `agenthost up`.
PASSED_PREFIXES = (
    "AGENTHOST_MODEL",
    "AGENTHOST_BUILTIN_SCRIPT",
    "AGENTHOST_LEASE_S",
    "AGENTHOST_DATABASE_",
    "AGENTHOST_MCP_CONFIG",
    # New sessions' defaults: `up`'s flags and the user's config folder.
    "AGENTHOST_DEFAULT_",
    "AGENTHOST_CONFIG_DIR",
)
# StreamReader's line limit: a log line carrying a traceback can be long.
LINE_LIMIT = 1 << 20


class StackFailed(Exception):
    """The stack cannot run; the message says why in one line."""


class ChildExited(StackFailed):
    """A service process ended on its own, or before it served."""

    def __init__(self, name: str, returncode: int, starting: bool) -> None:
        self.name, self.returncode, self.starting = name, returncode, starting
        when = "while starting" if starting else "unexpectedly"
        super().__init__(f"the {name} service exited {when} ({describe_exit(returncode)})")


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}"
    return f"exit code {returncode}"


@dataclass(eq=False)
class Child:
    name: str
    process: asyncio.subprocess.Process
    listening: asyncio.Future[str]
    serving: asyncio.Event = field(default_factory=asyncio.Event)
    # Where it serves browsers (its "web listening" line), if it does.
    web_url: str | None = None
    reader: asyncio.Task[None] | None = None


@dataclass
class Supervisor:
    data_dir: Path
    host: str = DEFAULT_HOST
    # 0: every child on a free port; None: the default ports.
    port_override: int | None = None
    gateway_tls: TlsFiles | None = None
    internal_token: str = field(default_factory=new_token)
    # The environment the children inherit (filtered, see PASSED_PREFIXES).
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    # Preset entries choose those services' addresses (`up --base-port`).
    addresses: dict[str, str] = field(default_factory=dict)
    # The gateway's port for browsers (None: the default, or a free one with
    # port_override 0) and the origins allowed to call it (as embedded.py).
    web_listen: str | None = None
    web_origins: tuple[str, ...] = (LOOPBACK,)
    # The web client's files the gateway serves there (as embedded.py).
    web_files: Path | None = field(default_factory=lambda: web_client_files(os.environ))
    children: dict[str, Child] = field(default_factory=dict)
    # Where the children's warnings and errors go.
    relay: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr))

    async def start(self) -> None:
        """Start every service; raises PortInUse, having started none, when a
        port is taken (the gateway's first), ChildExited when a child ends
        before it serves. A failed or cancelled start stops what it started."""
        listens = [self._listen(n) for n in sorted(SERVICES, key=lambda n: n != "gateway")]
        for listen in [*listens, self._web_listen()]:
            if port_in_use(listen):
                raise PortInUse(listen)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            await self._start_in_waves()
        except BaseException:
            await self.stop()
            raise

    async def _start_in_waves(self) -> None:
        """Each wave: the services whose peers all serve, started together."""
        found: dict[str, str] = {}
        while len(found) < len(SERVICES):
            wave = [n for n in SERVICES if n not in found and set(PEERS[n]) <= set(found)]
            try:
                async with asyncio.TaskGroup() as group:
                    tasks = {n: group.create_task(self._start_child(n, found)) for n in wave}
            except BaseExceptionGroup as failed:
                raise failed.exceptions[0] from None  # the first failure says it
            found.update({name: task.result() for name, task in tasks.items()})
        # Preset keys keep their place (as the embedded stack's do); the rest
        # come in start order.
        for name in SERVICES:
            self.addresses[name] = found[name]

    def _listen(self, name: str) -> str:
        port = DEFAULT_PORTS[name] if self.port_override is None else self.port_override
        return self.addresses.get(name, f"{self.host}:{port}")

    def _web_listen(self) -> str:
        port = DEFAULT_WEB_PORT if self.port_override is None else self.port_override
        return self.web_listen or f"{self.host}:{port}"

    @property
    def confinement(self) -> str:
        """Whether the agent's commands can be confined here (probed once:
        the runtime child runs on this machine, as this user)."""
        from services.agentruntime.confinement import describe

        return describe()

    @property
    def web_url(self) -> str | None:
        """Where browsers reach the gateway, once it serves."""
        gateway = self.children.get("gateway")
        return gateway.web_url if gateway is not None else None

    async def _start_child(self, name: str, peers: Mapping[str, str]) -> str:
        """Spawn one service and wait until it serves; its address."""
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            f"services.{name}",
            env=self._child_env(name, peers),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            limit=LINE_LIMIT,
            process_group=0,  # out of reach of the terminal's Ctrl-C
        )
        child = Child(name, process, asyncio.get_running_loop().create_future())
        self.children[name] = child
        child.reader = asyncio.create_task(self._read(child), name=f"read {name}")
        serving = asyncio.ensure_future(child.serving.wait())
        exited = asyncio.ensure_future(process.wait())
        try:
            await asyncio.wait(
                {serving, exited}, timeout=START_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            serving.cancel()
            exited.cancel()
        if process.returncode is not None:
            raise ChildExited(name, process.returncode, starting=True)
        if not child.serving.is_set() or not child.listening.done():
            raise StackFailed(f"the {name} service did not start within {START_TIMEOUT_S:.0f} s")
        return child.listening.result()

    def _child_env(self, name: str, peers: Mapping[str, str]) -> dict[str, str]:
        env = {
            key: value
            for key, value in self.env.items()
            if not key.startswith("AGENTHOST_") or key.startswith(PASSED_PREFIXES)
        }
        env.update(
            {
                "AGENTHOST_LISTEN": self._listen(name),
                "AGENTHOST_DATA_DIR": str(self.data_dir),
                "AGENTHOST_GRACE_S": str(GRACE_S),
                "AGENTHOST_LOG_LEVEL": CHILD_LOG_LEVEL,
                TOKEN_ENV: self.internal_token,
                SUPERVISOR_ENV: str(os.getpid()),
            }
        )
        env.update({ADDRESS_ENV[peer]: address for peer, address in peers.items()})
        if name == "gateway":
            env[WEB_LISTEN_ENV] = self._web_listen()
            env[WEB_ORIGINS_ENV] = ",".join(self.web_origins)
            if self.web_files is not None:
                env[WEB_FILES_ENV] = str(self.web_files)
        if name == "gateway" and self.gateway_tls is not None:
            env[TLS_CERT_ENV] = str(self.gateway_tls.cert)
            env[TLS_KEY_ENV] = str(self.gateway_tls.key)
        return env

    async def _read(self, child: Child) -> None:
        """Follow a child's log lines to its end: note its address and when
        it serves, relay its warnings and errors (and anything not JSON)."""
        stream = child.process.stderr
        assert stream is not None
        while True:
            try:
                raw = await stream.readline()
            except ValueError:  # longer than LINE_LIMIT: dropped
                continue
            if not raw:
                return
            self._take(child, raw.decode(errors="replace").rstrip("\n"))

    def _take(self, child: Child, line: str) -> None:
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if not isinstance(entry, dict):
            self.relay(line)  # not a service's log line (e.g. gRPC's own)
            return
        if entry.get("msg") == "listening" and not child.listening.done():
            child.listening.set_result(str(entry.get("address")))
        elif entry.get("msg") == "web listening":
            child.web_url = str(entry.get("address"))
        elif entry.get("msg") == "serving":
            child.serving.set()
        if entry.get("level") in RELAYED_LEVELS:
            self.relay(line)

    async def stop(self) -> None:
        """Stop the children in reverse start order, each once."""
        for name in reversed(SERVICES):
            child = self.children.get(name)
            if child is not None:
                await self._stop_child(child)

    async def _stop_child(self, child: Child) -> None:
        process = child.process
        if process.returncode is None:
            try:
                process.send_signal(signal.SIGTERM)
                async with asyncio.timeout(KILL_AFTER_S):
                    await process.wait()
            except ProcessLookupError:
                pass  # it has just exited
            except TimeoutError:
                process.kill()
            await process.wait()
        if child.reader is not None:
            # Its last lines are relayed before we go on (unless something it
            # started still holds its stderr).
            await asyncio.wait({child.reader}, timeout=KILL_AFTER_S)
            child.reader.cancel()

    async def wait_for_exit(self) -> ChildExited:
        """Wait until a child ends; which one and how."""
        waits = {
            asyncio.ensure_future(child.process.wait()): name
            for name, child in self.children.items()
        }
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        first = next(iter(done))
        return ChildExited(waits[first], first.result(), starting=False)

    async def run_until_signalled(self, on_up: Callable[[], None] | None = None) -> None:
        """Start, call `on_up`, supervise until SIGTERM or SIGINT, then stop.
        A signal during start-up cuts it short; a failed start or a child
        that ends on its own is raised (ChildExited) once all are stopped."""
        await serve_until_signalled(self.start, self.stop, on_up=on_up, serve=self._supervise)

    async def _supervise(self, signalled: asyncio.Event) -> None:
        exited = asyncio.ensure_future(self.wait_for_exit())
        stopping = asyncio.ensure_future(signalled.wait())
        try:
            await asyncio.wait({exited, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if exited.done():
                raise exited.result()
        finally:
            stopping.cancel()
            exited.cancel()
