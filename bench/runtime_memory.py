"""Resident memory of the agent runtime as sessions come and go: its RSS
after 10,000 sessions were opened one after another (each prompted once),
against its RSS after the first 100. Idle agents are unloaded (their lease
released, their state dropped), so what the runtime holds follows the
sessions in use, not every session it ever opened.

The runtime and the session log run as their own processes (as in a
deployment, the built-in model answering) so /proc tells the runtime's RSS
alone. The runtime's idle time is IDLE_S here (AGENTHOST_AGENT_IDLE_S): the
figure compresses hours of a real stack into a minute."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.runtime.v1 import runtime_pb2_grpc as rt_grpc
from grpc_health.v1 import health_pb2

from bench.harness import CALL_TIMEOUT_S, Sizes
from bench.memory import MIB, rss_bytes
from bench.ratio import Figure, Side, Target
from services.common.client import open_channel
from services.common.internal_auth import TOKEN_ENV, new_token
from services.sessionlog.client import SessionLogClient
from tests.support.hosts import ServiceProcess, wait_for_health

NAME = "runtime_memory"
IDLE_S = 1.0
OPENERS = 8  # sessions opened concurrently
TARGET = Target("<=", 1.3)


async def _open(
    log: SessionLogClient, runtime: rt_grpc.AgentRuntimeServiceStub, cwd: str, count: int
) -> None:
    """Open `count` sessions, each with one prompt (the built-in model echoes)."""
    queue = iter(range(count))

    async def opener() -> None:
        for _ in queue:  # shared iterator: each session opened once
            summary, _ = await log.create_session(None, cwd)
            await runtime.Prompt(
                rt.PromptRequest(session_id=summary.id, text="hello"), timeout=CALL_TIMEOUT_S
            )

    await asyncio.gather(*(opener() for _ in range(OPENERS)))


async def _measure(sizes: Sizes, data_dir: Path) -> tuple[int, int]:
    """The runtime's RSS after the first sessions, and after all of them."""
    token = new_token()
    session_log = ServiceProcess(
        "services.sessionlog",
        data_dir / "sessionlog",
        env={TOKEN_ENV: token, "AGENTHOST_SESSIONLOG_DSN": ""},
    )
    runtime = ServiceProcess(
        "services.agentruntime",
        data_dir / "agentruntime",
        env={
            TOKEN_ENV: token,
            "AGENTHOST_PLANMODE_ADDR": "none",
            "AGENTHOST_AGENT_IDLE_S": str(IDLE_S),
        },
    )
    started: list[ServiceProcess] = []
    try:
        log_address = await session_log.start()
        started.append(session_log)
        runtime.env["AGENTHOST_SESSIONLOG_ADDR"] = log_address
        runtime_address = await runtime.start()
        started.append(runtime)
        assert runtime.process is not None
        log_channel = open_channel(log_address, token)
        runtime_channel = open_channel(runtime_address, token)
        try:
            for channel in (log_channel, runtime_channel):
                await wait_for_health(channel, health_pb2.HealthCheckResponse.SERVING)
            log = SessionLogClient(log_channel)
            stub = rt_grpc.AgentRuntimeServiceStub(runtime_channel)
            cwd = str(data_dir)
            await _open(log, stub, cwd, sizes.runtime_first)
            first = rss_bytes(runtime.process.pid)
            await _open(log, stub, cwd, sizes.runtime_sessions - sizes.runtime_first)
            return first, rss_bytes(runtime.process.pid)
        finally:
            await log_channel.close()
            await runtime_channel.close()
    finally:
        for process in reversed(started):
            process.signal(signal.SIGTERM)
            try:
                await process.wait()
            finally:
                process.kill()


async def run(sizes: Sizes, data_dir: Path) -> Figure:
    first, full = await _measure(sizes, data_dir)
    return Figure(
        name=f"agent runtime resident memory, {sizes.runtime_sessions} sessions opened over time",
        compared="rss",
        unit="MiB",
        measured=Side(f"RSS after {sizes.runtime_sessions} sessions", full / MIB),
        baseline=Side(f"RSS after the first {sizes.runtime_first}", first / MIB),
        target=TARGET,
        notes=(
            f"each session prompted once; idle agents unloaded after {IDLE_S:g} s",
            "the runtime alone in its own process, the session log in another",
        ),
    )
