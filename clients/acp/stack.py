"""Where `agenthost acp` finds the stack: the gateway and token the CLI would
use (AGENTHOST_GATEWAY, else the address `agenthost up` recorded in the data
folder, else the default); when none answers there, it starts `agenthost up` in the background,
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

from clients.cli.config import (
    DEFAULT_GATEWAY,
    ConfigError,
    GatewayAddress,
    find_gateway,
    resolve_token,
    token_source,
)
from clients.cli.reach import WrongGateway, answers

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


def _up_argv(found: GatewayAddress, data_dir: Path) -> list[str]:
    """`agenthost up` on the address the user named, else on the default ports
    (clients find it there, or through the address file it writes)."""
    argv = [sys.executable, "-m", "clients.cli", "up", "--data-dir", str(data_dir)]
    if found.given and found.address != DEFAULT_GATEWAY:
        host, _, port = found.address.rpartition(":")
        if not port.isdigit() or host not in ("127.0.0.1", "localhost"):
            raise StackUnavailable(
                f"no gateway answers at {found.address} (from {found.source}), "
                "and it is not one to start"
            )
        argv += ["--base-port", port]
    return argv


async def gateway_for(given: str | None, token: str | None, data_dir: Path) -> Gateway:
    """The gateway to use: the one that answers, or one started for it."""
    found = find_gateway(given, data_dir)
    with contextlib.suppress(ConfigError):
        candidate = Gateway(found.address, resolve_token(token, data_dir))
        try:
            if await answers(found, candidate.token, token_source(token, data_dir)):
                return candidate
        except WrongGateway as error:
            raise StackUnavailable(str(error)) from None
    say(
        f"no agenthost stack answers at {found.address}: starting one (data in {data_dir}; "
        f"the address came from {found.source})"
    )
    pid, addresses, log = await _start(_up_argv(found, data_dir), data_dir)
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
