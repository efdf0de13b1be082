"""Where `agenthost acp` finds the stack: the gateway and token the CLI would
use; when none answers there, it starts `agenthost up` in the background
(saying so on stderr: stdout carries the protocol) and stops it on exit."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from agenthost.gateway.v1 import gateway_pb2 as gw

from clients.cli.config import DEFAULT_GATEWAY, ConfigError, resolve_token, tls_roots
from clients.sdk import AgentHostClient, TransportError

# How long a gateway may take to answer the first call before it counts as absent.
PROBE_TIMEOUT_S = 3.0
UP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


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


@asynccontextmanager
async def gateway_for(address: str, token: str | None, data_dir: Path) -> AsyncIterator[Gateway]:
    """The gateway to use, started (and stopped at the end) when none answers."""
    with contextlib.suppress(ConfigError):
        found = Gateway(address, resolve_token(token, data_dir))
        if await _answers(found):
            yield found
            return
    say(f"no agenthost stack answers at {address}: starting one (data in {data_dir})")
    up = await asyncio.create_subprocess_exec(
        *_up_argv(address, data_dir),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=sys.stderr,
        start_new_session=True,
    )
    forward: asyncio.Task[None] | None = None
    try:
        addresses = await asyncio.wait_for(_up_line(up), UP_TIMEOUT_S)
        forward = asyncio.create_task(_to_stderr(up))
        started = Gateway(addresses["gateway"], resolve_token(token, data_dir))
        say(f"started the stack; its gateway is {started.address}")
        yield started
    except (TimeoutError, ConfigError) as error:
        raise StackUnavailable(f"the stack did not start: {error}") from None
    finally:
        if up.returncode is None:
            up.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(up.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                up.kill()
                await up.wait()
        if forward is not None:
            forward.cancel()


async def _up_line(up: asyncio.subprocess.Process) -> dict[str, str]:
    """The addresses of the JSON line `agenthost up` prints once it serves;
    its other lines go to stderr."""
    assert up.stdout is not None
    async for raw in up.stdout:
        line = raw.decode(errors="replace")
        if line.startswith('{"agenthost": "up"'):
            return dict(json.loads(line)["addresses"])
        sys.stderr.write(line)
    raise StackUnavailable(f"`agenthost up` exited with {await up.wait()}")


async def _to_stderr(up: asyncio.subprocess.Process) -> None:
    assert up.stdout is not None
    async for raw in up.stdout:
        sys.stderr.write(raw.decode(errors="replace"))
