"""One process per service (services/supervisor.py) against every service in
one process (services/embedded.py): which should `agenthost up` run?

Both stacks run side by side, each built as `agenthost up` builds it (in a
process of its own, on free ports, with the built-in model), and they are
measured in alternating windows so both see the same machine load. In each
window a *probe* client (this process) times, on an idle session of its
own, a gateway PlanMode read and an append -> frame round (an event appended
through the session log until the gateway's live stream delivers it), while
a *load* process (its own interpreter, so this one stays free to measure)
runs 16 writers appending 20-event batches to another session:

- idle: no load;
- paced: the writers together append PACED_EVENTS_PER_S, a rate both
  stacks sustain, so latencies show how much one busy session slows the
  others rather than how long a queue has grown;
- flat-out: as fast as the stack takes them, for its throughput (events/s)
  and the stack's CPU time per event. Reads only: a frame of the idle
  session then waits behind the backlog of the busy one (see PROCESSES.md).

The session under load has no account, so the probe's stream carries none
of it; the session log, the projection service and the gateway all work for
it. Also measured: each stack's resident memory (the sum over its processes)
and start-up time (spawn until every service serves).

`python -m bench.processes [--smoke]` prints the table bench/PROCESSES.md
quotes; `run(smoke)` returns the numbers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import grpc
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.gateway.v1 import gateway_pb2_grpc as gw_grpc
from agenthost.sessionlog.v1 import events_pb2 as ev
from agenthost.sessionlog.v1 import session_log_pb2 as pb
from agenthost.sessionlog.v1 import session_log_pb2_grpc as pb_grpc

from clients.sdk.auth import authorized_channel
from services.common.client import open_channel

MODES = ("one-process", "processes")
WINDOWS = ("idle", "paced", "flat-out")
WRITERS = 16
BATCH = 20
PACED_EVENTS_PER_S = 500
STARTUP_TIMEOUT_S = 90.0


@dataclass(frozen=True)
class Size:
    """How many of everything: the full run, or a quick one for the tests."""

    rounds: int
    starts: int
    reads: int
    frames: int


FULL = Size(rounds=3, starts=3, reads=300, frames=60)
SMOKE = Size(rounds=1, starts=1, reads=20, frames=5)


@dataclass(frozen=True)
class Spread:
    p50_ms: float
    p99_ms: float

    @classmethod
    def of(cls, samples_s: list[float]) -> Spread:
        ordered = sorted(samples_s)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        return cls(statistics.median(ordered) * 1e3, p99 * 1e3)

    def __str__(self) -> str:
        return f"{self.p50_ms:.2f} / {self.p99_ms:.2f}"


@dataclass(frozen=True)
class ModeResult:
    mode: str
    reads: dict[str, Spread]  # PlanMode read by window, p50 / p99 ms
    frames: dict[str, Spread]  # append -> frame by window (idle and paced)
    events_per_s: float  # flat-out
    cpu_ms_per_event: float  # the stack's CPU time per event, flat-out
    rss_mb: float  # the whole stack, idle after start-up
    rss_loaded_mb: float  # the whole stack, the most seen under load
    start_s: float  # median start-up

    def report(self) -> str:
        reads = ", ".join(f"{w} {s}" for w, s in self.reads.items())
        frames = ", ".join(f"{w} {s}" for w, s in self.frames.items())
        return (
            f"{self.mode}: read p50/p99 ms {reads}; append->frame {frames}; "
            f"flat-out {self.events_per_s:.0f} events/s at {self.cpu_ms_per_event:.2f} ms "
            f"CPU each; RSS {self.rss_mb:.0f} MB ({self.rss_loaded_mb:.0f} loaded); "
            f"start-up {self.start_s:.2f} s"
        )


# -- the stack under test, in its own process ------------------------------------------


@dataclass
class Stack:
    mode: str
    process: asyncio.subprocess.Process
    addresses: dict[str, str]
    token: str  # the internal one
    data_dir: Path
    started_s: float

    @property
    def bearer(self) -> str:
        return (self.data_dir / "token").read_text().strip()

    def rss_mb(self) -> float:
        return tree_rss_bytes(self.process.pid) / 2**20

    def cpu_s(self) -> float:
        return tree_cpu_s(self.process.pid)

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            await self.process.wait()


async def start_stack(mode: str, data_dir: Path) -> Stack:
    """`python -m bench.processes serve MODE ...`: the stack as `up` builds
    it, on free ports, with an internal token we know (for the load)."""
    token = os.urandom(16).hex()
    began = time.perf_counter()
    process = await _bench_process("serve", mode, str(data_dir), token)
    assert process.stdout is not None
    async with asyncio.timeout(STARTUP_TIMEOUT_S):
        line = await process.stdout.readline()
    if not line:
        raise RuntimeError(f"the {mode} stack exited with {await process.wait()}")
    elapsed = time.perf_counter() - began
    return Stack(mode, process, json.loads(line)["addresses"], token, data_dir, elapsed)


async def _bench_process(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.processes",
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
    )


class Runnable(Protocol):
    """What `serve` needs of a stack (EmbeddedStack and Supervisor have it)."""

    addresses: dict[str, str]

    async def run_until_signalled(self, on_up: Callable[[], None] | None = None) -> None: ...


async def serve(mode: str, data_dir: Path, token: str) -> None:
    """The stack's process: up, one JSON line with the addresses, serve
    until SIGTERM."""
    from services.common.logs import configure_logging

    configure_logging("bench", "WARNING")
    stack: Runnable
    # Imported here: the supervisor's process loads none of the services.
    if mode == "processes":
        from services.supervisor import Supervisor

        stack = Supervisor(data_dir, port_override=0, internal_token=token)
    else:
        from services.embedded import EmbeddedStack

        stack = EmbeddedStack(data_dir, port_override=0, internal_token=token)

    def announce() -> None:
        print(json.dumps({"addresses": stack.addresses}), flush=True)

    await stack.run_until_signalled(on_up=announce)


def tree(root: int) -> list[int]:
    """A process and all its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        stat = _stat(int(entry.name)) if entry.name.isdigit() else []
        if stat:
            children.setdefault(int(stat[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        found.append(todo.pop())
        todo.extend(children.get(found[-1], []))
    return found


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name (state is [0])."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def tree_rss_bytes(root: int) -> int:
    """Resident memory of a process and all its descendants."""
    page = os.sysconf("SC_PAGE_SIZE")
    return sum(int(stat[21]) * page for pid in tree(root) if (stat := _stat(pid)))


def tree_cpu_s(root: int) -> float:
    """CPU time (user + system) a process and its descendants have used."""
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(int(stat[11]) + int(stat[12]) for pid in tree(root) if (stat := _stat(pid))) / ticks


# -- a client of the stack: a session of the account, its live stream ----------------


@dataclass(frozen=True)
class Access:
    """How a client reaches a stack (passed to the load process as JSON)."""

    addresses: dict[str, str]
    token: str  # the internal one, for the session log
    bearer: str
    cwd: str

    @classmethod
    def of(cls, stack: Stack) -> Access:
        return cls(stack.addresses, stack.token, stack.bearer, str(stack.data_dir))


@dataclass
class Client:
    """A session of the account (made through the gateway), the account's
    live stream, and the session log, to append to the session directly."""

    access: Access
    client_id: str
    # Without the stream, append_until_frame is not available.
    follow: bool = True
    session_id: str = ""
    _closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    # Frames of the session's events by seq, made by whichever side needs one first.
    _frames: dict[int, asyncio.Future[None]] = field(default_factory=dict)

    async def open(self) -> None:
        addresses = self.access.addresses
        gateway_channel = authorized_channel(addresses["gateway"], self.access.bearer)
        log_channel = open_channel(addresses["sessionlog"], self.access.token)
        self._closers += [gateway_channel.close, log_channel.close]
        self.gateway = gw_grpc.GatewayServiceStub(gateway_channel)
        self.log = pb_grpc.SessionLogServiceStub(log_channel)
        created = await self.gateway.CreateSession(gw.CreateSessionRequest(cwd=self.access.cwd))
        self.session_id = created.session.id
        if not self.follow:
            return
        stream = self.gateway.Connect(gw.ConnectRequest(client_id=self.client_id))
        await stream.read()  # connected: frames reach us from here on
        follower = asyncio.create_task(self._follow(stream))
        self._closers.append(lambda: _cancelled(follower, stream.cancel))

    async def close(self) -> None:
        for close in reversed(self._closers):
            await close()

    def _frame(self, seq: int) -> asyncio.Future[None]:
        if seq not in self._frames:
            self._frames[seq] = asyncio.get_running_loop().create_future()
        return self._frames[seq]

    async def _follow(self, stream: Any) -> None:
        # read(), as open() began: grpc.aio refuses a call read both ways.
        while (frame := await stream.read()) is not grpc.aio.EOF:
            event = frame.session_event
            if event.session_id == self.session_id:
                self._frame(event.seq).set_result(None)

    async def read(self) -> None:
        """The probe's read: the session's plan state, from the gateway."""
        await self.gateway.PlanMode(gw.PlanModeRequest(session_id=self.session_id))

    async def append_until_frame(self, events: list[ev.Event] | None = None) -> None:
        """Append (a title by default) and wait until the stream delivers it."""
        events = events or [ev.Event(session_title=ev.SessionTitle(title="probe"))]
        reply = await self.log.Append(pb.AppendRequest(session_id=self.session_id, events=events))
        async with asyncio.timeout(60):
            await self._frame(reply.last_seq)
        for seq in range(reply.last_seq - len(events) + 1, reply.last_seq + 1):
            self._frames.pop(seq, None)


async def _cancelled(task: asyncio.Task[None], cancel_stream: Callable[[], object]) -> None:
    cancel_stream()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def timed(call: Callable[[], Awaitable[object]], count: int) -> list[float]:
    samples = []
    for _ in range(count):
        began = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - began)
    return samples


# -- the load, in its own process -------------------------------------------------------


async def load(access: Access, events_per_s: float) -> None:
    """`python -m bench.processes load ACCESS RATE`: WRITERS writers of
    BATCH-event appends. Paced (RATE > 0): together RATE events/s to a
    session with no account, so no client's stream carries them. Flat-out
    (RATE 0): to a session of the account, each writer waiting until the
    stream delivers its batch before the next, so what is counted went all
    the way through. Prints "started" once the first batch is in and, on
    SIGTERM, one JSON line: events in how many seconds."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    client = Client(access, "bench-load", follow=events_per_s == 0)
    await client.open()
    try:
        append = await (_paced if events_per_s > 0 else _delivered)(client)
        await append()
        print("started", flush=True)
        period_s = WRITERS * BATCH / events_per_s if events_per_s > 0 else 0.0
        appended, began = [0], time.perf_counter()

        async def writer(offset_s: float) -> None:
            due = time.perf_counter() + offset_s
            while not stop.is_set():
                await asyncio.sleep(max(0.0, due - time.perf_counter()))  # pacing, not sync
                await append()
                appended[0] += BATCH
                due = max(due + period_s, time.perf_counter())  # missed slots are not made up

        running = [asyncio.create_task(writer(period_s * n / WRITERS)) for n in range(WRITERS)]
        await stop.wait()
        elapsed = time.perf_counter() - began
        await asyncio.gather(*running)
    finally:
        await client.close()
    print(json.dumps({"events": appended[0], "seconds": elapsed}), flush=True)


Append = Callable[[], Awaitable[object]]


async def _paced(client: Client) -> Append:
    created = await client.log.CreateSession(pb.CreateSessionRequest(cwd=client.access.cwd))
    request = pb.AppendRequest(session_id=created.session.id, events=_batch())
    return lambda: client.log.Append(request)


async def _delivered(client: Client) -> Append:
    batch = _batch()
    return lambda: client.append_until_frame(batch)


def _batch() -> list[ev.Event]:
    text = "a line of a long answer, " * 8
    source = ev.MessageSource(kind=ev.SOURCE_KIND_USER)
    return [ev.Event(user_message=ev.UserMessage(text=text, source=source))] * BATCH


@dataclass
class Window:
    """What the load did while it ran, and the stack's CPU time meanwhile."""

    events: int = 0
    seconds: float = 0.0
    cpu_s: float = 0.0


@asynccontextmanager
async def loaded(stack: Stack, events_per_s: float) -> AsyncIterator[Window]:
    """The load against `stack` while the block runs; the Window yielded is
    filled in when the block is done."""
    access = json.dumps(asdict(Access.of(stack)))
    process = await _bench_process("load", access, str(events_per_s))
    assert process.stdout is not None
    window = Window()
    try:
        async with asyncio.timeout(60):
            started = await process.stdout.readline()
        assert started.strip() == b"started", started
        cpu_before = stack.cpu_s()
        yield window
        window.cpu_s = stack.cpu_s() - cpu_before
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            out = await process.stdout.readline()
        await process.wait()
    report = json.loads(out)
    window.events, window.seconds = report["events"], report["seconds"]


# -- the run ----------------------------------------------------------------------------


@dataclass
class Samples:
    """Everything measured of one mode, pooled over the rounds."""

    starts: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    rss_loaded: list[float] = field(default_factory=list)
    reads: dict[str, list[float]] = field(default_factory=lambda: {w: [] for w in WINDOWS})
    frames: dict[str, list[float]] = field(default_factory=lambda: {w: [] for w in WINDOWS})
    throughput: list[float] = field(default_factory=list)
    cpu_per_event: list[float] = field(default_factory=list)

    def result(self, mode: str) -> ModeResult:
        return ModeResult(
            mode,
            {window: Spread.of(samples) for window, samples in self.reads.items()},
            {window: Spread.of(samples) for window, samples in self.frames.items() if samples},
            statistics.median(self.throughput),
            statistics.median(self.cpu_per_event) * 1e3,
            statistics.median(self.rss),
            max(self.rss_loaded),
            statistics.median(self.starts),
        )


async def run(smoke: bool = False) -> list[ModeResult]:
    size = SMOKE if smoke else FULL
    samples = {mode: Samples() for mode in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        await _time_starts(Path(tmp), size, samples)
        stacks = [await start_stack(mode, Path(tmp, mode)) for mode in MODES]
        try:
            for stack in stacks:
                samples[stack.mode].rss.append(stack.rss_mb())
            for round_ in range(size.rounds):
                # Alternate which mode goes first, so neither always follows the other.
                for stack in stacks[:: 1 if round_ % 2 == 0 else -1]:
                    await _measure_round(stack, size, samples[stack.mode])
        finally:
            for stack in stacks:
                await stack.stop()
    return [samples[mode].result(mode) for mode in MODES]


async def _time_starts(tmp: Path, size: Size, samples: dict[str, Samples]) -> None:
    for attempt in range(size.starts):
        for mode in MODES:
            stack = await start_stack(mode, tmp / f"start-{mode}-{attempt}")
            samples[mode].starts.append(stack.started_s)
            await stack.stop()


async def _measure_round(stack: Stack, size: Size, samples: Samples) -> None:
    await _probe(stack, size, samples, "idle")
    async with loaded(stack, PACED_EVENTS_PER_S):
        await _probe(stack, size, samples, "paced")
    async with loaded(stack, 0) as window:
        await _probe(stack, size, samples, "flat-out")
        samples.rss_loaded.append(stack.rss_mb())
    samples.throughput.append(window.events / window.seconds)
    samples.cpu_per_event.append(window.cpu_s / window.events)


async def _probe(stack: Stack, size: Size, samples: Samples, window: str) -> None:
    """The probe's timings in one window. Flat-out, the load's frames are on
    the account's streams, so the probe then only reads, without a stream."""
    probe = Client(Access.of(stack), "bench-probe", follow=window != "flat-out")
    await probe.open()
    try:
        await timed(probe.read, 10)  # warm-up: connections and caches
        samples.reads[window] += await timed(probe.read, size.reads)
        if window != "flat-out":
            samples.frames[window] += await timed(probe.append_until_frame, size.frames)
    finally:
        await probe.close()


def table(results: list[ModeResult]) -> str:
    """A Markdown table, one column per mode."""
    rows: list[tuple[str, Callable[[ModeResult], str]]] = [
        *((f"PlanMode read p50 / p99, {w} (ms)", _read(w)) for w in WINDOWS),
        *((f"append -> frame p50 / p99, {w} (ms)", _frame(w)) for w in WINDOWS[:2]),
        ("flat-out throughput (events/s)", lambda r: f"{r.events_per_s:.0f}"),
        ("stack CPU per event, flat-out (ms)", lambda r: f"{r.cpu_ms_per_event:.2f}"),
        (
            "resident memory, idle / loaded (MB)",
            lambda r: f"{r.rss_mb:.0f} / {r.rss_loaded_mb:.0f}",
        ),
        ("start-up (s)", lambda r: f"{r.start_s:.2f}"),
    ]
    head = ["| | " + " | ".join(r.mode for r in results) + " |", "|---" * (len(results) + 1) + "|"]
    body = [f"| {name} | " + " | ".join(cell(r) for r in results) + " |" for name, cell in rows]
    return "\n".join(head + body)


def _read(window: str) -> Callable[[ModeResult], str]:
    return lambda result: str(result.reads[window])


def _frame(window: str) -> Callable[[ModeResult], str]:
    return lambda result: str(result.frames[window])


def main(argv: list[str]) -> None:
    command = argv[0] if argv else "run"
    if command == "serve":
        asyncio.run(serve(argv[1], Path(argv[2]), argv[3]))
    elif command == "load":
        asyncio.run(load(Access(**json.loads(argv[1])), float(argv[2])))
    else:
        results = asyncio.run(run(smoke="--smoke" in argv))
        for result in results:
            print(result.report())
        print(table(results))


if __name__ == "__main__":
    main(sys.argv[1:])
