"""Where `agenthost acp` finds the stack: the gateway and token the CLI would
use; when none answers there, it starts `agenthost up` in the background,
detached, so the CLI, the web page and other editors share it and it keeps
serving after this editor closes (said on stderr: stdout carries the protocol)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from agenthost.gateway.v1 import gateway_pb2 as gw

from clients.cli.config import DEFAULT_GATEWAY, ConfigError, resolve_token, tls_roots
from clients.sdk import AgentHostClient, TransportError

# How long a gateway may take to answer the first call before it counts as absent.
PROBE_TIMEOUT_S = 3.0
UP_TIMEOUT_S = 60.0
UP_POLL_S = 0.1
# The started stack's output, in its data folder.
UP_LOG = "acp-up.log"


class StackUnavailable(Exception):
    pass


@dataclass(frozen=True)
class Gateway:
    address: str
    token: str


def say(text: str) -> None:
    print(f"agenthost acp: {text}", file=sys.stderr, flush=True)


async def _answers(gateway: Gateway) -> bool:
    client = AgentHostClient(gateway.address, gateway.token, tls_roots=tls_roots())
    try:
        await client.call(
            client.stub.ListWorkspaces, gw.ListWorkspacesRequest(), deadline=PROBE_TIMEOUT_S
        )
        return True
    except TransportError:
        return False
    finally:
        await client.close()


def _up_argv(address: str, data_dir: Path) -> list[str]:
    argv = [sys.executable, "-m", "clients.cli", "up", "--data-dir", str(data_dir)]
    if address != DEFAULT_GATEWAY:
        host, _, port = address.rpartition(":")
        if not port.isdigit() or host not in ("127.0.0.1", "localhost"):
            raise StackUnavailable(f"no gateway answers at {address}, and it is not one to start")
        argv += ["--base-port", port]
    return argv


async def gateway_for(address: str, token: str | None, data_dir: Path) -> Gateway:
    """The gateway to use: the one that answers, or one started for it."""
    with contextlib.suppress(ConfigError):
        found = Gateway(address, resolve_token(token, data_dir))
        if await _answers(found):
            return found
    say(f"no agenthost stack answers at {address}: starting one (data in {data_dir})")
    pid, addresses, log = await _start(_up_argv(address, data_dir), data_dir)
    try:
        started = Gateway(addresses["gateway"], resolve_token(token, data_dir))
    except ConfigError as error:
        raise StackUnavailable(f"the stack started without a token: {error}") from None
    say(
        f"agenthost runs in the background now (pid {pid}, gateway {started.address}, "
        f"log {log}); it keeps serving the CLI and other editors after this one closes "
        f"(stop it with: kill -INT {pid})"
    )
    return started


async def _start(argv: list[str], data_dir: Path) -> tuple[int, dict[str, str], Path]:
    """`agenthost up` detached (its own session, output to a log in the data
    folder): its pid and addresses once it serves, and the log's path."""
    up, log, offset = await asyncio.to_thread(_launch, argv, data_dir)
    try:
        async with asyncio.timeout(UP_TIMEOUT_S):
            while (addresses := _up_line(log, offset)) is None:
                if up.poll() is not None:
                    raise StackUnavailable(
                        f"`agenthost up` exited with {up.returncode}: {_tail(log, offset)}"
                    )
                # Polled: the stack says it is up only in its log.
                await asyncio.sleep(UP_POLL_S)
    except TimeoutError:
        up.send_signal(signal.SIGINT)
        raise StackUnavailable(f"the stack did not come up within {UP_TIMEOUT_S}s") from None
    return up.pid, addresses, log


def _launch(argv: list[str], data_dir: Path) -> tuple[subprocess.Popen[bytes], Path, int]:
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir / UP_LOG
    offset = log.stat().st_size if log.exists() else 0
    with log.open("ab") as output:
        up = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            start_new_session=True,
        )
    return up, log, offset


def _tail(log: Path, offset: int) -> str:
    return log.read_bytes()[offset:].decode(errors="replace").strip()


def _up_line(log: Path, offset: int) -> dict[str, str] | None:
    """The addresses of the JSON line `agenthost up` prints once it serves."""
    with log.open("rb") as text:
        text.seek(offset)
        for raw in text:
            line = raw.decode(errors="replace")
            if line.startswith('{"agenthost": "up"'):
                return dict(json.loads(line)["addresses"])
    return None
