"""What streaming costs the host: its CPU per streamed chunk when the
model's chunks come 5 ms apart (a real model's pace), and the time from the
model's first chunk to a client's first text, with live text sent in frames
(services/agentruntime/live.py) against the same stack sending every piece
at once (AGENTHOST_LIVE_FRAME_MS=0), both measured in the same run.

Each side is `agenthost up` in its own process (so /proc tells its CPU
alone: user + system of the whole process), the OpenAI-compatible adapter
pointed at a fake provider in this process (a real HTTP server), and one
SDK client watching the session. The turns take turns between the two
sides. In a turn the provider sends its opening chunk and holds the text
until the bench lets it go; the clock starts then, the first chunk goes at
once and the others follow PACE_S apart. The CPU counted is the host's from
that moment until the client holds all of the text, divided by the chunks."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import Sizes
from bench.ratio import Figure, Side, Target, latency_side
from clients.sdk import AgentHostClient, TextStreamed
from services.agentruntime.live import FRAME_ENV
from services.agentruntime.models.tests.fake_provider import (
    DONE,
    FakeProvider,
    Pause,
    ProviderReply,
    StreamItem,
    chunk,
    finish_chunk,
    text_chunk,
)

NAME = "streaming"
PACE_S = 0.005
WAIT_S = 120.0
MODEL = "bench-model"


@dataclass
class Host:
    """One `agenthost up` and the client watching its session."""

    label: str
    pid: int
    client: AgentHostClient
    cpu_s: list[float]
    first_text_s: list[float]


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@asynccontextmanager
async def _up(
    data_dir: Path, provider: FakeProvider, frame_ms: str | None
) -> AsyncIterator[tuple[int, str, str]]:
    """`agenthost up` on a fresh folder: its pid, gateway address and token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTHOST_")}
    env |= {
        "AGENTHOST_MODEL_BASE_URL": provider.url,
        "AGENTHOST_MODEL": MODEL,
        "AGENTHOST_MODEL_API_KEY": "sk-bench",
    }
    if frame_ms is not None:
        env[FRAME_ENV] = frame_ms
    command = [sys.executable, "-m", "clients.cli", "up", "--free-ports", "--data-dir"]
    process = await asyncio.create_subprocess_exec(
        *command,
        str(data_dir),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
    )
    assert process.stdout is not None
    try:
        async with asyncio.timeout(WAIT_S):
            while not (line := await process.stdout.readline()).startswith(b'{"agenthost": "up"'):
                if process.stdout.at_eof():
                    raise RuntimeError("agenthost up ended before it was ready")
        gateway = json.loads(line)["addresses"]["gateway"]
        token = (data_dir / "token").read_text().strip()
        drain = asyncio.create_task(_drain(process.stdout))
        yield process.pid, gateway, token
        drain.cancel()
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
        await process.wait()


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass


def _reply(gate: asyncio.Event, pieces: list[str]) -> ProviderReply:
    items: list[StreamItem] = [chunk({"role": "assistant", "content": ""}), gate]
    for index, piece in enumerate(pieces):
        if index:
            items.append(Pause(PACE_S))
        items.append(text_chunk(piece))
    return ProviderReply(stream=[*items, finish_chunk("stop"), DONE])


async def _turn(host: Host, provider: FakeProvider, cwd: Path, chunks: int, number: int) -> None:
    pieces = [f"w{number}.{i} " for i in range(chunks)]
    whole = "".join(pieces)
    gate, asked = asyncio.Event(), asyncio.Event()

    def respond(body: dict[str, Any]) -> ProviderReply:
        asked.set()
        return _reply(gate, pieces)

    provider.responder = respond
    summary = await host.client.create_session(cwd=str(cwd))
    session = await host.client.open_session(summary.id)
    updates = session.updates()
    try:
        await session.prompt(f"turn {number}")
        async with asyncio.timeout(WAIT_S):
            await asked.wait()
            started, cpu = time.perf_counter(), _cpu_s(host.pid)
            gate.set()
            first: float | None = None
            async for update in updates:
                if isinstance(update, TextStreamed) and update.kind == "answer":
                    if first is None:
                        first = time.perf_counter() - started
                    if update.text == whole:
                        break
        host.cpu_s.append((_cpu_s(host.pid) - cpu) / chunks)
        assert first is not None
        host.first_text_s.append(first)
        await session.wait_until(lambda s: not s.running, WAIT_S)
    finally:
        updates.close()


async def run(sizes: Sizes, data_dir: Path) -> list[Figure]:
    chunks = 300 if sizes.rounds >= 10 else 30
    turns = sizes.rounds
    provider = FakeProvider()
    await provider.start()
    cwd = data_dir / "work"
    cwd.mkdir(parents=True, exist_ok=True)
    try:
        async with (
            _up(data_dir / "frames", provider, None) as (framed_pid, framed_at, framed_token),
            _up(data_dir / "pieces", provider, "0") as (bare_pid, bare_at, bare_token),
        ):
            hosts = []
            for label, pid, address, token in (
                ("frames (the default)", framed_pid, framed_at, framed_token),
                ("every piece at once", bare_pid, bare_at, bare_token),
            ):
                client = AgentHostClient(address, token)
                await client.connect(WAIT_S)
                hosts.append(Host(label, pid, client, [], []))
            try:
                for host in hosts:  # a warm-up turn each
                    await _turn(host, provider, cwd, chunks, 0)
                    host.cpu_s.clear()
                    host.first_text_s.clear()
                for number in range(1, turns + 1):
                    order = hosts if number % 2 else list(reversed(hosts))
                    for host in order:
                        await _turn(host, provider, cwd, chunks, number)
            finally:
                for host in hosts:
                    await host.client.close()
    finally:
        await provider.stop()
    framed, bare = hosts
    notes = (
        f"{turns} turns of each side, taking turns; {chunks} chunks {PACE_S * 1e3:g} ms apart",
        "agenthost up in its own process each, the fake OpenAI-compatible provider in the bench's",
    )
    return [
        Figure(
            name=f"host CPU per streamed chunk, chunks {PACE_S * 1e3:g} ms apart",
            compared="median",
            unit="ms",
            measured=_cpu_side(framed),
            baseline=_cpu_side(bare),
            target=Target("<=", 1.0),
            notes=notes,
        ),
        Figure(
            name="the model's first chunk to the client's first text",
            compared="p50",
            unit="ms",
            measured=latency_side(framed.label, framed.first_text_s, "p50"),
            baseline=latency_side(bare.label, bare.first_text_s, "p50"),
            target=Target("<=", 1.25),
            notes=("the first piece of a step is never held for a frame",),
        ),
    ]


def _cpu_side(host: Host) -> Side:
    return Side(host.label, statistics.median(host.cpu_s) * 1e3, samples=len(host.cpu_s))
