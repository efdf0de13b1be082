"""Long and interrupted model streams, end to end: the OpenAI-compatible
adapter against a fake provider (a real HTTP server in this process), the
runtime, the gateway's relay of `assistant_delta` frames, and the clients on
top of it (the SDK, raw gateway streams, the CLI in a pty against
`agenthost up` in its own process).

Waits are on events (frames, updates, terminal output), never on sleeps; the
only pauses are the fake provider's, which is what a slow model looks like.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pexpect
import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.gateway.v1 import gateway_pb2_grpc as gw_grpc
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev

from clients.sdk import (
    AgentHostClient,
    Backoff,
    ConnectionChanged,
    EventAppended,
    Session,
    TextStreamed,
    Update,
    Updates,
)
from clients.sdk.auth import authorized_channel
from services.agentruntime.models.openai_compat import OpenAICompatAdapter, OpenAICompatConfig
from services.agentruntime.models.tests.fake_provider import (
    DONE,
    FakeProvider,
    Pause,
    ProviderReply,
    StreamItem,
    chunk,
    finish_chunk,
    text_chunk,
    tool_fragment,
)
from services.embedded import EmbeddedStack
from services.gateway.accounts import TokenStore
from tests.support.hosts import REPO

# Generous: waits end as soon as what they wait for happens.
WAIT_S = 30.0
# The long answer: one content chunk a second for this many seconds.
LONG_S = 60
TOKEN = "token-alice"
MODEL = "deepseek-chat"
Frame = gw.ConnectResponse
ANSWER, REASONING = "answer", "reasoning"
KIND_NAMES = {rt.TEXT_KIND_ANSWER: ANSWER, rt.TEXT_KIND_REASONING: REASONING}


# -- the model -----------------------------------------------------------------------


@pytest.fixture
async def provider() -> AsyncIterator[FakeProvider]:
    server = FakeProvider()
    await server.start()
    yield server
    await server.stop()


def adapter(provider: FakeProvider, *, idle_timeout_s: float = 30.0) -> OpenAICompatAdapter:
    return OpenAICompatAdapter(
        OpenAICompatConfig(
            base_url=provider.url,
            model=MODEL,
            api_key="sk-test",
            max_attempts=2,
            backoff_initial_s=0.0,
            first_byte_timeout_s=WAIT_S,
            idle_timeout_s=idle_timeout_s,
        )
    )


def opening() -> dict[str, Any]:
    return chunk({"role": "assistant", "content": ""})


def reasoning_chunk(text: str) -> dict[str, Any]:
    return chunk({"reasoning_content": text, "content": None})


def reply_of(*items: StreamItem, finish: str = "stop") -> ProviderReply:
    return ProviderReply(stream=[opening(), *items, finish_chunk(finish), DONE])


def minute_pieces(tag: str) -> list[str]:
    return [f"{tag}{i:02d} " for i in range(LONG_S)]


def minute_reply(pieces: Sequence[str]) -> ProviderReply:
    """A content chunk every second for a minute, then the finish."""
    items: list[StreamItem] = []
    for piece in pieces:
        items += [text_chunk(piece), Pause(1.0)]
    return reply_of(*items)


# -- the stack and its clients --------------------------------------------------------------


@asynccontextmanager
async def gateway_stack(data_dir: Path, model: OpenAICompatAdapter) -> AsyncIterator[str]:
    """The embedded stack with the given adapter; the gateway's address."""
    stack = EmbeddedStack(
        data_dir, port_override=0, model=model, tokens=TokenStore({TOKEN: "alice"})
    )
    await stack.start()
    try:
        yield stack.addresses["gateway"]
    finally:
        await stack.stop()


@asynccontextmanager
async def sdk_client(address: str) -> AsyncIterator[AgentHostClient]:
    client = AgentHostClient(address, TOKEN, backoff=Backoff(initial_s=0.02, max_s=0.2))
    try:
        await client.connect(WAIT_S)
        yield client
    finally:
        await client.close()


async def new_session(client: AgentHostClient, cwd: Path) -> Session:
    await asyncio.to_thread(cwd.mkdir, parents=True, exist_ok=True)
    summary = await client.create_session(cwd=str(cwd))
    return await client.open_session(summary.id)


class Recorder:
    """Every update of one SDK session, in order, with its arrival time."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.seen: list[tuple[float, Update]] = []
        self._updates: Updates = session.updates()
        self._changed = asyncio.Event()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for update in self._updates:
            self.seen.append((time.monotonic(), update))
            self._changed.set()

    @property
    def updates(self) -> list[Update]:
        return [update for _, update in self.seen]

    async def until(self, predicate: Callable[[], bool], within: float = WAIT_S) -> None:
        async with asyncio.timeout(within):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

    def streamed(self, kind: str = ANSWER) -> list[tuple[float, TextStreamed]]:
        return [(at, u) for at, u in self.seen if isinstance(u, TextStreamed) and u.kind == kind]

    def text_so_far(self, kind: str = ANSWER) -> str:
        """The latest streamed text of `kind` (of whichever step streamed last)."""
        streamed = self.streamed(kind)
        return streamed[-1][1].text if streamed else ""

    def events(self, kind: str) -> list[ev.Event]:
        return [
            u.event
            for u in self.updates
            if isinstance(u, EventAppended) and u.event.WhichOneof("body") == kind
        ]

    async def turn_end(self, count: int = 1, within: float = WAIT_S) -> ev.TurnEnd:
        """The `count`-th turn/end this session took in (waiting for it)."""
        await self.until(lambda: len(self.events("turn_end")) >= count, within)
        return self.events("turn_end")[count - 1].turn_end

    async def close(self) -> None:
        self._updates.close()
        await asyncio.wait([self._task])


@asynccontextmanager
async def recording(session: Session) -> AsyncIterator[Recorder]:
    recorder = Recorder(session)
    try:
        yield recorder
    finally:
        await recorder.close()


class RawClient:
    """One raw gateway connection (generated stubs only): every frame, in order."""

    def __init__(self, address: str, client_id: str) -> None:
        self.channel = authorized_channel(address, TOKEN)
        self.stub = gw_grpc.GatewayServiceStub(self.channel)
        self.client_id = client_id
        self.generation = 0
        self.received: list[Frame] = []
        self._changed = asyncio.Event()
        self._call: Any = None
        self._reader: asyncio.Task[None] | None = None

    async def connect(self, cursors: dict[str, int] | None = None) -> None:
        call = self.stub.Connect(
            gw.ConnectRequest(
                client_id=self.client_id, generation=self.generation, cursors=cursors or {}
            )
        )
        first = await asyncio.wait_for(call.read(), WAIT_S)
        assert first.HasField("connected")
        self._call = call
        self._reader = asyncio.create_task(self._read(call))

    async def _read(self, call: Any) -> None:
        with suppress(grpc.aio.AioRpcError, asyncio.CancelledError):
            # read(), as connect() began: grpc.aio refuses a call read both ways.
            while (frame := await call.read()) is not grpc.aio.EOF:
                self.received.append(frame)
                self._changed.set()

    async def until(self, predicate: Callable[[], bool], within: float = WAIT_S) -> None:
        async with asyncio.timeout(within):
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

    def last_seq(self, session_id: str) -> int:
        return max(
            f.session_event.seq
            for f in self.received
            if f.HasField("session_event") and f.session_event.session_id == session_id
        )

    async def disconnect(self) -> None:
        if self._call is not None:
            self._call.cancel()
        if self._reader is not None:
            await asyncio.wait([self._reader])
        self._call = self._reader = None

    async def close(self) -> None:
        await self.disconnect()
        await self.channel.close()


@asynccontextmanager
async def raw_client(address: str, client_id: str) -> AsyncIterator[RawClient]:
    client = RawClient(address, client_id)
    try:
        yield client
    finally:
        await client.close()


def body(frame: Frame) -> str:
    """A frame's kind, and a session event's kind: "session_event:turn_end"."""
    kind = frame.WhichOneof("frame") or ""
    if kind == "session_event":
        return f"{kind}:{frame.session_event.event.WhichOneof('body')}"
    return kind


def deltas_of(frames: Sequence[Frame], kind: str = ANSWER) -> list[rt.AssistantDelta]:
    return [
        f.assistant_delta
        for f in frames
        if f.HasField("assistant_delta") and KIND_NAMES[f.assistant_delta.kind] == kind
    ]


def has(frames: Sequence[Frame], event_kind: str) -> bool:
    return any(body(f) == f"session_event:{event_kind}" for f in frames)


# -- what every client must see ----------------------------------------------------------


@dataclass
class StreamedStep:
    """One logged assistant/message and what streamed before it."""

    message: ev.AssistantMessage
    answer: str
    reasoning: str
    turn_id: str
    step: int


def sdk_steps(
    updates: Sequence[Update], already: dict[tuple[str, int, str], str] | None = None
) -> list[StreamedStep]:
    """Walks an SDK session's updates in order: each TextStreamed extends its
    stream by exactly its delta (nothing twice) and comes before its step's
    logged assistant/message, never after it. `already`: the text the session
    held when the updates began (its step: the running one)."""
    held: dict[tuple[str, int, str], str] = dict(already or {})
    closed: set[tuple[str, int, str]] = set()
    step: tuple[str, int] | None = next(((t, n) for t, n, _ in held), None)
    steps: list[StreamedStep] = []
    for index, update in enumerate(updates):
        if isinstance(update, TextStreamed):
            key = (update.turn_id, update.step, update.kind)
            assert key not in closed, f"update {index}: a delta of {key} after its message"
            so_far = held.get(key, "")
            assert update.delta, f"update {index}: an empty delta"
            assert update.text == so_far + update.delta, (index, so_far, update)
            held[key] = update.text
        elif isinstance(update, EventAppended):
            event = update.event
            if event.HasField("step_start"):
                step = (event.step_start.turn_id, event.step_start.step)
            elif event.HasField("assistant_message"):
                assert step is not None, "an assistant/message outside a step"
                turn_id, number = step
                closed |= {(turn_id, number, ANSWER), (turn_id, number, REASONING)}
                steps.append(
                    StreamedStep(
                        event.assistant_message,
                        held.get((turn_id, number, ANSWER), ""),
                        held.get((turn_id, number, REASONING), ""),
                        turn_id,
                        number,
                    )
                )
    return steps


def frame_steps(frames: Sequence[Frame], session_id: str) -> list[StreamedStep]:
    """The same on a raw stream, where the gateway's offsets must be exact:
    each delta starts where the text so far ends (a snapshot re-sends it from
    offset 0, and then must equal it)."""
    held: dict[tuple[str, int, str], str] = {}
    closed: set[tuple[str, int, str]] = set()
    step: tuple[str, int] | None = None
    steps: list[StreamedStep] = []
    for index, frame in enumerate(frames):
        if frame.HasField("assistant_delta"):
            delta = frame.assistant_delta
            if delta.session_id != session_id:
                continue
            key = (delta.turn_id, delta.step, KIND_NAMES[delta.kind])
            assert key not in closed, f"frame {index}: a delta of {key} after its message"
            so_far = held.get(key, "")
            if delta.offset == 0 and so_far and delta.text == so_far:
                continue  # the text so far again, after a reconnect
            assert delta.offset == len(so_far), (index, so_far, delta)
            assert delta.text, f"frame {index}: an empty delta"
            held[key] = so_far + delta.text
        elif frame.HasField("session_event") and frame.session_event.session_id == session_id:
            event = frame.session_event.event
            if event.HasField("step_start"):
                step = (event.step_start.turn_id, event.step_start.step)
            elif event.HasField("assistant_message"):
                assert step is not None, "an assistant/message outside a step"
                turn_id, number = step
                closed |= {(turn_id, number, ANSWER), (turn_id, number, REASONING)}
                steps.append(
                    StreamedStep(
                        event.assistant_message,
                        held.get((turn_id, number, ANSWER), ""),
                        held.get((turn_id, number, REASONING), ""),
                        turn_id,
                        number,
                    )
                )
    return steps


def assert_each_message_is_its_deltas(steps: Sequence[StreamedStep]) -> None:
    for streamed in steps:
        assert streamed.answer == streamed.message.text, streamed
        assert streamed.reasoning == streamed.message.reasoning, streamed


# -- agenthost up and chat, in their own processes ------------------------------------


@dataclass
class Up:
    gateway: str
    data_dir: Path
    env: dict[str, str]


def _read_up(
    process: subprocess.Popen[str], found: list[dict[str, str]], done: threading.Event
) -> None:
    """Read `up`'s output: `done` at its JSON line (or its end); keep draining."""
    assert process.stdout is not None
    for line in process.stdout:
        if not found and line.startswith('{"agenthost": "up"'):
            found.append(dict(json.loads(line)["addresses"]))
            done.set()
    done.set()


@asynccontextmanager
async def agenthost_up(data_dir: Path, provider: FakeProvider) -> AsyncIterator[Up]:
    """`agenthost up` in its own process, its model the fake provider (which
    runs in this process, on this event loop)."""
    env = {
        **os.environ,
        "AGENTHOST_MODEL_BASE_URL": provider.url,
        "AGENTHOST_MODEL": MODEL,
        "AGENTHOST_MODEL_API_KEY": "sk-test",
        "AGENTHOST_MODEL_CONNECT_TIMEOUT_S": "10",
        "AGENTHOST_MODEL_FIRST_BYTE_TIMEOUT_S": "30",
        "AGENTHOST_MODEL_IDLE_TIMEOUT_S": "10",
        "AGENTHOST_MODEL_TOTAL_TIMEOUT_S": "300",
        "AGENTHOST_MODEL_MAX_ATTEMPTS": "2",
        "NO_COLOR": "1",
        "TERM": "xterm",
        # pexpect's terminal does not answer cursor position requests.
        "PROMPT_TOOLKIT_NO_CPR": "1",
    }
    for name in ("AGENTHOST_TOKEN", "AGENTHOST_BUILTIN_SCRIPT", "AGENTHOST_GATEWAY"):
        env.pop(name, None)
    process = subprocess.Popen(
        [sys.executable, "-m", "clients.cli", "up", "--free-ports", "--data-dir", str(data_dir)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    found: list[dict[str, str]] = []
    done = threading.Event()
    reader = threading.Thread(target=_read_up, args=(process, found, done), daemon=True)
    reader.start()
    try:
        await asyncio.to_thread(done.wait, WAIT_S)
        assert found, f"agenthost up did not come up (exit {process.poll()})"
        gateway = found[0]["gateway"]
        yield Up(gateway, data_dir, {**env, "AGENTHOST_GATEWAY": gateway})
    finally:
        await asyncio.to_thread(_stop, process)
        await asyncio.to_thread(reader.join, WAIT_S)


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# CSI and OSC sequences, charset selection, carriage returns.
TERMINAL_CODES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\r"
)


def screen_text(raw: str) -> str:
    return TERMINAL_CODES.sub("", raw)


@dataclass
class ChatRun:
    """What a person at the terminal saw, and when (time.monotonic())."""

    sent_at: float = 0.0
    first_piece_at: float = 0.0
    last_piece_at: float = 0.0
    output: str = ""
    exitstatus: int | None = None


@dataclass
class ChatDriver:
    """`agenthost chat` in a pty, driven on a worker thread (so the event
    loop keeps serving the fake provider)."""

    up: Up
    project: Path
    child: pexpect.spawn[str] | None = None
    run: ChatRun = field(default_factory=ChatRun)
    _log: io.StringIO = field(default_factory=io.StringIO)

    def long_answer(self, prompt: str, pieces: Sequence[str]) -> ChatRun:
        child = self.child = pexpect.spawn(
            sys.executable,
            [
                *("-m", "clients.cli", "chat"),
                *("--data-dir", str(self.up.data_dir), "--workspace", str(self.project)),
            ],
            cwd=str(REPO),
            env=self.up.env,
            encoding="utf-8",
            timeout=WAIT_S,
            dimensions=(60, 200),
        )
        child.logfile_read = self._log
        try:
            child.expect_exact("plan: off")
            child.expect_exact(">")
            child.sendline(prompt)
            self.run.sent_at = time.monotonic()
            child.expect_exact(pieces[0].strip())
            self.run.first_piece_at = time.monotonic()
            child.expect_exact(pieces[-1].strip(), timeout=LONG_S + WAIT_S)
            self.run.last_piece_at = time.monotonic()
            # The prompt is back once the turn is over (or it failed).
            index = child.expect_exact([">", "turn failed"])
            assert index == 0, "the turn failed"
            child.sendline("/quit")
            child.expect_exact("bye")
            child.expect(pexpect.EOF)
        finally:
            child.close()
            self.run.exitstatus = child.exitstatus
            self.run.output = self._log.getvalue()
        return self.run

    def kill(self) -> None:
        """From the test's thread: end the chat (its driver's waits then end)."""
        if self.child is not None and self.child.isalive():
            self.child.terminate(force=True)


@contextmanager
def chat_driver(up: Up, project: Path) -> Iterator[ChatDriver]:
    project.mkdir(parents=True, exist_ok=True)
    driver = ChatDriver(up, project)
    try:
        yield driver
    finally:
        driver.kill()


async def logged_session_of(up: Up) -> list[ev.Event]:
    """The one session `up` holds, its log read through its gateway."""
    token = (up.data_dir / "token").read_text().strip()
    async with AgentHostClient(up.gateway, token) as client:
        sessions = await client.list_sessions()
        assert len(sessions) == 1, sessions
        reply: gw.OpenSessionResponse = await client.call(
            client.stub.OpenSession, gw.OpenSessionRequest(session_id=sessions[0].id)
        )
        return list(reply.events)


# -- 1. a minute-long answer ------------------------------------------------------------


# The answer streams for a minute by design; its own waits bound the rest.
@pytest.mark.timeout(LONG_S + 4 * WAIT_S + 60)
async def test_a_minute_long_answer_streams_to_the_sdk_and_the_cli(tmp_path: Path) -> None:
    """Two minute-long streams at once: one through an in-process stack to the
    SDK, one through `agenthost up` to `agenthost chat` in a terminal."""
    sdk_model, cli_model = FakeProvider(), FakeProvider()
    await sdk_model.start()
    await cli_model.start()
    sdk_pieces, cli_pieces = minute_pieces("sdk-"), minute_pieces("cli-")
    sdk_model.enqueue(minute_reply(sdk_pieces))
    cli_model.enqueue(minute_reply(cli_pieces))
    try:
        async with (
            agenthost_up(tmp_path / "up", cli_model) as up,
            gateway_stack(tmp_path / "stack", adapter(sdk_model, idle_timeout_s=10.0)) as address,
            sdk_client(address) as client,
        ):
            session = await new_session(client, tmp_path / "sdk-project")
            with chat_driver(up, tmp_path / "cli-project") as driver:
                chatting = asyncio.ensure_future(
                    asyncio.to_thread(driver.long_answer, "tell me a long story", cli_pieces)
                )
                async with recording(session) as recorder:
                    prompted_at = time.monotonic()
                    await session.prompt("tell me a long story")
                    end = await recorder.turn_end(within=LONG_S + WAIT_S)
                    finished_at = time.monotonic()
                run = await asyncio.wait_for(chatting, LONG_S + 2 * WAIT_S)
            cli_log = await logged_session_of(up)
    finally:
        await sdk_model.stop()
        await cli_model.stop()

    # The SDK: deltas spread over the minute, all before the logged message.
    assert end.reason == ev.TURN_END_REASON_COMPLETED, end
    whole = "".join(sdk_pieces)
    streamed = recorder.streamed()
    times = [at for at, _ in streamed]
    assert times, "no TextStreamed update"
    assert times[0] - prompted_at < 15, "the first delta came late"
    assert times[-1] - times[0] > LONG_S - 10, "the deltas did not spread over the minute"
    tens = {int((at - times[0]) // 10) for at in times}
    assert set(range(LONG_S // 10)) <= tens, f"10 s windows with deltas: {sorted(tens)}"
    assert finished_at - prompted_at > LONG_S - 5
    steps = sdk_steps(recorder.updates)
    assert [s.message.text for s in steps] == [whole]
    assert_each_message_is_its_deltas(steps)
    assert "".join(u.delta for _, u in streamed) == whole
    order = [
        "delta" if isinstance(u, TextStreamed) else u.event.WhichOneof("body")
        for u in recorder.updates
        if isinstance(u, TextStreamed)
        or (isinstance(u, EventAppended) and u.event.HasField("assistant_message"))
    ]
    assert order == ["delta"] * len(streamed) + ["assistant_message"]

    # The CLI: the text showed early, the whole answer at the end, no failure.
    screen = screen_text(run.output)
    assert run.exitstatus == 0, screen[-2000:]
    assert run.first_piece_at - run.sent_at < 15, "the first text showed late"
    assert run.last_piece_at - run.first_piece_at > LONG_S - 10, "the text did not stream"
    assert "assistant: " + "".join(cli_pieces).rstrip() in screen, screen[-2000:]
    assert "turn failed" not in screen
    ends = [e.turn_end for e in cli_log if e.HasField("turn_end")]
    assert [e.reason for e in ends] == [ev.TURN_END_REASON_COMPLETED], ends
    messages = [e.assistant_message.text for e in cli_log if e.HasField("assistant_message")]
    assert messages == ["".join(cli_pieces)]


# -- 2. the idle limit -----------------------------------------------------------------------


async def test_a_stalled_stream_hits_the_idle_limit_and_the_next_prompt_works(
    tmp_path: Path, provider: FakeProvider
) -> None:
    stalled = asyncio.Event()  # never set: the provider stops sending for good
    provider.enqueue(
        ProviderReply(stream=[opening(), text_chunk("Partial "), text_chunk("answer"), stalled]),
        reply_of(text_chunk("Recovered "), text_chunk("fine.")),
    )
    async with (
        gateway_stack(tmp_path / "stack", adapter(provider, idle_timeout_s=0.5)) as address,
        sdk_client(address) as client,
        raw_client(address, "raw-idle") as raw,
    ):
        await raw.connect()
        session = await new_session(client, tmp_path / "project")
        async with recording(session) as recorder:
            await session.prompt("start")
            end = await recorder.turn_end()
            assert end.reason == ev.TURN_END_REASON_ERROR, end
            assert "idle limit" in end.error and "AGENTHOST_MODEL_IDLE_TIMEOUT_S" in end.error
            assert "0.5 s" in end.error, end.error
            # The client saw the partial text, before the turn ended.
            seen: list[str] = []
            for update in recorder.updates:
                if isinstance(update, TextStreamed):
                    seen.append(update.delta)
                elif isinstance(update, EventAppended) and update.event.HasField("turn_end"):
                    seen.append("turn_end")
            assert "".join(seen[:-1]) == "Partial answer" and seen[-1] == "turn_end", seen
            await asyncio.wait_for(provider.disconnected.wait(), WAIT_S)
            # Nothing of the failed step lingers, for this client or a new one.
            await session.wait_until(lambda s: not s.running, WAIT_S)
            assert session.live.texts == {}
            opened: gw.OpenSessionResponse = await raw.stub.OpenSession(
                gw.OpenSessionRequest(session_id=session.id), timeout=WAIT_S
            )
            assert list(opened.live) == []

            await session.prompt("again")
            second = await recorder.turn_end(2)
            assert second.reason == ev.TURN_END_REASON_COMPLETED, second
            steps = sdk_steps(recorder.updates)
            assert [s.message.text for s in steps][-1:] == ["Recovered fine."]
            assert_each_message_is_its_deltas(steps)
        await raw.until(lambda: sum(has([f], "turn_end") for f in raw.received) >= 2)
    raw_deltas = [d.text for d in deltas_of(raw.received)]
    assert "".join(raw_deltas) == "Partial answer" + "Recovered fine."
    assert len(provider.requests) == 2


# -- 3. several steps, with reasoning -----------------------------------------------------------


async def test_deltas_of_every_step_come_in_order_before_the_logged_message(
    tmp_path: Path, provider: FakeProvider
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("hello from the notes\n")
    provider.enqueue(
        reply_of(
            reasoning_chunk("The user wants "),
            reasoning_chunk("the notes."),
            text_chunk("Let me "),
            text_chunk("read them."),
            tool_fragment(0, call_id="call_1", name="read_file", arguments='{"path": '),
            tool_fragment(0, arguments='"notes.txt"}'),
            finish="tool_calls",
        ),
        reply_of(
            reasoning_chunk("Now the "),
            reasoning_chunk("folder."),
            text_chunk("And the "),
            Pause(0.05),
            text_chunk("folder."),
            tool_fragment(0, call_id="call_2", name="list_dir", arguments='{"path": "."}'),
            finish="tool_calls",
        ),
        reply_of(
            reasoning_chunk("Both "),
            Pause(0.05),
            reasoning_chunk("seen; "),
            reasoning_chunk("answer."),
            text_chunk("The notes "),
            text_chunk("say hello, "),
            Pause(0.05),
            text_chunk("in notes.txt — ünïcode ✓."),
        ),
    )
    async with (
        gateway_stack(tmp_path / "stack", adapter(provider)) as address,
        sdk_client(address) as client,
        raw_client(address, "raw-steps") as raw,
    ):
        await raw.connect()
        session = await new_session(client, project)
        async with recording(session) as recorder:
            await session.prompt("what do the notes say?")
            end = await recorder.turn_end()
        await raw.until(lambda: has(raw.received, "turn_end"))
    assert end.reason == ev.TURN_END_REASON_COMPLETED, end

    expected = [
        ("Let me read them.", "The user wants the notes."),
        ("And the folder.", "Now the folder."),
        ("The notes say hello, in notes.txt — ünïcode ✓.", "Both seen; answer."),
    ]
    for steps in (sdk_steps(recorder.updates), frame_steps(raw.received, session.id)):
        assert [(s.message.text, s.message.reasoning) for s in steps] == expected
        assert [s.step for s in steps] == [0, 1, 2]
        assert_each_message_is_its_deltas(steps)
    # The tools ran between the steps (the read found the file).
    results = [e.tool_result for e in recorder.events("tool_result")]
    assert [r.call_id for r in results] == ["call_1", "call_2"]
    assert all(r.ok for r in results), results
    # Within a step, the reasoning streamed before the answer.
    frames = [f for f in raw.received if f.HasField("assistant_delta")]
    for number in (0, 1, 2):
        kinds = [
            KIND_NAMES[f.assistant_delta.kind] for f in frames if f.assistant_delta.step == number
        ]
        assert kinds == sorted(kinds, key=lambda k: k != REASONING), kinds


# -- 4. joining a step mid-stream ------------------------------------------------------------


def paused_reply(gate: asyncio.Event) -> ProviderReply:
    return reply_of(
        reasoning_chunk("Thinking "),
        reasoning_chunk("it over. "),
        text_chunk("Hello "),
        text_chunk("partial "),
        gate,
        text_chunk("and the rest."),
    )


SO_FAR, REST = "Hello partial ", "and the rest."
REASONED = "Thinking it over. "


async def test_a_client_that_reconnects_mid_step_gets_the_partial_text_once(
    tmp_path: Path, provider: FakeProvider
) -> None:
    gate = asyncio.Event()
    provider.enqueue(paused_reply(gate))
    async with (
        gateway_stack(tmp_path / "stack", adapter(provider)) as address,
        sdk_client(address) as client,
        raw_client(address, "raw-resume") as raw,
    ):
        heard: list[tuple[int, Frame]] = []
        client.add_listener(lambda frame: heard.append((client.generation, frame)))
        await raw.connect()
        session = await new_session(client, tmp_path / "project")
        async with recording(session) as recorder:
            await session.prompt("hi")
            await recorder.until(
                lambda: (
                    recorder.text_so_far() == SO_FAR and recorder.text_so_far(REASONING) == REASONED
                )
            )
            await raw.until(lambda: "".join(d.text for d in deltas_of(raw.received)) == SO_FAR)

            # The SDK cuts its stream and resumes with its cursor.
            before = len(recorder.seen)
            generation = await client.reconnect(WAIT_S)

            def resumed() -> list[Frame]:
                return [f for g, f in heard if g == generation]

            await client.wait_for(
                lambda: (
                    len(deltas_of(resumed())) >= 1 and len(deltas_of(resumed(), REASONING)) >= 1
                ),
                WAIT_S,
            )
            # The raw stream resumes with a cursor too (a new generation).
            cursor = raw.last_seq(session.id)
            await raw.disconnect()
            mark = len(raw.received)
            raw.generation += 1
            await raw.connect({session.id: cursor})
            await raw.until(lambda: len(deltas_of(raw.received[mark:])) >= 1)

            gate.set()
            end = await recorder.turn_end()
            await raw.until(lambda: has(raw.received[mark:], "turn_end"))
        assert end.reason == ev.TURN_END_REASON_COMPLETED, end
        assert any(
            isinstance(u, ConnectionChanged) and u.connected for _, u in recorder.seen[before:]
        )

    # The SDK: the resumed stream began with the text so far at offset 0...
    first = deltas_of(resumed())[0]
    assert (first.offset, first.text) == (0, SO_FAR)
    first_reasoning = deltas_of(resumed(), REASONING)[0]
    assert (first_reasoning.offset, first_reasoning.text) == (0, REASONED)
    # ... which the session already had: it showed only the new part, once.
    steps = sdk_steps(recorder.updates)
    assert [s.message.text for s in steps] == [SO_FAR + REST]
    assert_each_message_is_its_deltas(steps)
    after = [u for _, u in recorder.seen[before:] if isinstance(u, TextStreamed)]
    assert "".join(u.delta for u in after) == REST
    assert all((SO_FAR + REST).startswith(u.text) for _, u in recorder.streamed())
    assert recorder.streamed()[-1][1].text == SO_FAR + REST

    # The raw stream: the text so far at offset 0 first, then only the rest.
    resumed_raw = raw.received[mark:]
    answer = deltas_of(resumed_raw)
    assert (answer[0].offset, answer[0].text) == (0, SO_FAR)
    assert [(d.offset, d.text) for d in answer[1:]] == [(len(SO_FAR), REST)]
    reasoning = deltas_of(resumed_raw, REASONING)
    assert [(d.offset, d.text) for d in reasoning] == [(0, REASONED)]
    kinds = [body(f) for f in resumed_raw]
    assert kinds.index("assistant_delta") < kinds.index("session_event:assistant_message")
    assert [s.message.text for s in frame_steps(raw.received, session.id)] == [SO_FAR + REST]


async def test_a_client_that_opens_the_session_mid_step_gets_the_text_so_far(
    tmp_path: Path, provider: FakeProvider
) -> None:
    gate = asyncio.Event()
    provider.enqueue(paused_reply(gate))
    async with (
        gateway_stack(tmp_path / "stack", adapter(provider)) as address,
        sdk_client(address) as client,
        raw_client(address, "raw-open") as raw,
    ):
        session = await new_session(client, tmp_path / "project")
        async with recording(session) as recorder:
            await session.prompt("hi")
            await recorder.until(
                lambda: (
                    recorder.text_so_far() == SO_FAR and recorder.text_so_far(REASONING) == REASONED
                )
            )
            turn_id, step = recorder.streamed()[-1][1].turn_id, recorder.streamed()[-1][1].step

            # A raw OpenSession: the text so far in `live`, at offset 0.
            opened: gw.OpenSessionResponse = await raw.stub.OpenSession(
                gw.OpenSessionRequest(session_id=session.id), timeout=WAIT_S
            )
            assert opened.running
            live = {KIND_NAMES[d.kind]: d for d in opened.live}
            assert set(live) == {ANSWER, REASONING}
            for kind, text in ((ANSWER, SO_FAR), (REASONING, REASONED)):
                got = live[kind]
                assert (got.turn_id, got.step, got.offset, got.text) == (turn_id, step, 0, text)
            assert not any(e.HasField("assistant_message") for e in opened.events)

            # A second SDK client opening now holds the text so far, and then the rest.
            async with sdk_client(address) as late:
                late_session = await late.open_session(session.id)
                assert late_session.running
                assert late_session.live.text_of(turn_id, step) == SO_FAR
                assert late_session.live.text_of(turn_id, step, REASONING) == REASONED
                async with recording(late_session) as late_recorder:
                    gate.set()
                    end = await recorder.turn_end()
                    late_end = await late_recorder.turn_end()
    assert end.reason == late_end.reason == ev.TURN_END_REASON_COMPLETED
    held = {(turn_id, step, ANSWER): SO_FAR, (turn_id, step, REASONING): REASONED}
    for steps in (sdk_steps(recorder.updates), sdk_steps(late_recorder.updates, held)):
        assert [s.message.text for s in steps] == [SO_FAR + REST]
        assert_each_message_is_its_deltas(steps)
    late_streamed = [u for _, u in late_recorder.streamed()]
    assert "".join(u.delta for u in late_streamed) == REST
    assert [u.text for u in late_streamed][-1:] == [SO_FAR + REST]
    assert late_recorder.streamed(REASONING) == []


# -- 5. many small chunks, and a cancel mid-stream ------------------------------------------------

BURST = 300


async def test_a_burst_of_small_chunks_reaches_every_client_exactly_in_fewer_frames(
    tmp_path: Path, provider: FakeProvider
) -> None:
    """The model's chunks come faster than a reader reads: clients get its
    text exactly, in order, merged into fewer frames than chunks."""
    pieces = [f"w{i}{'ü' if i % 7 == 0 else ''} " for i in range(BURST)]
    provider.enqueue(reply_of(*(text_chunk(p) for p in pieces)))
    async with (
        gateway_stack(tmp_path / "stack", adapter(provider)) as address,
        sdk_client(address) as client,
        raw_client(address, "raw-burst") as raw,
    ):
        await raw.connect()
        session = await new_session(client, tmp_path / "project")
        async with recording(session) as recorder:
            await session.prompt("hi")
            end = await recorder.turn_end()
        await raw.until(lambda: has(raw.received, "turn_end"))
    assert end.reason == ev.TURN_END_REASON_COMPLETED, end
    for steps in (sdk_steps(recorder.updates), frame_steps(raw.received, session.id)):
        assert [s.message.text for s in steps] == ["".join(pieces)]
        assert_each_message_is_its_deltas(steps)
    assert 1 <= len(deltas_of(raw.received)) < BURST


async def test_a_cancel_mid_stream_leaves_clients_the_text_the_model_sent(
    tmp_path: Path, provider: FakeProvider
) -> None:
    """Cancelled while pieces wait for their frame: every client still gets
    the text the model sent before the cancel, once, before the logged
    (partial) message, and nothing after it."""
    never = asyncio.Event()
    sent = ["Once ", "upon ", "a ", "time, ", "a ", "cancel."]
    provider.enqueue(reply_of(*(text_chunk(p) for p in sent), never))
    async with (
        gateway_stack(tmp_path / "stack", adapter(provider)) as address,
        sdk_client(address) as client,
        raw_client(address, "raw-cancel") as raw,
    ):
        await raw.connect()
        session = await new_session(client, tmp_path / "project")
        async with recording(session) as recorder:
            await session.prompt("a story")
            await recorder.until(lambda: recorder.text_so_far().startswith("Once "))
            assert await session.cancel()
            end = await recorder.turn_end()
        await raw.until(lambda: has(raw.received, "turn_end"))
    assert end.reason == ev.TURN_END_REASON_CANCELLED, end
    (kept,) = [e.assistant_message.text for e in recorder.events("assistant_message")]
    # What the runtime had read of the model when the cancel came (all of it, mostly).
    assert kept.startswith("Once ") and "".join(sent).startswith(kept), kept
    for steps in (sdk_steps(recorder.updates), frame_steps(raw.received, session.id)):
        assert [s.message.text for s in steps] == [kept]
        assert_each_message_is_its_deltas(steps)
