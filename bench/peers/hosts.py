"""The three hosts of `make bench-peers`, each started as its own process
tree and driven through its long-lived API, the way its own clients do:

- agenthost: `agenthost up` (the embedded stack, one process), its gateway
  over gRPC: `CreateSession`, `Prompt`, one account-wide `Connect` stream
  (live text in `assistant_delta` frames, the turn's end in a
  `session_status` frame);
- opencode: `opencode serve`, its HTTP API: `POST /session`, `POST
  /session/:id/message` (answers when the turn is over), live text from
  the `GET /event` SSE stream (`message.part.delta`);
- Codex: `codex app-server`, JSON-RPC over stdio: `thread/start`,
  `turn/start`, `item/agentMessage/delta` and `turn/completed`
  notifications.

Each gets a home of its own under the run's folder (no user settings), the
fake model as its only model, commands unconfined and never asking. The
peers run their own native binaries from bench/peers/node_modules (the npm
packages' launchers are node scripts that only exec them)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import re
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import grpc
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.gateway.v1 import gateway_pb2_grpc as gw_grpc

from bench.peers.fake_model import MODEL
from clients.sdk.auth import authorized_channel

PEERS = Path(__file__).resolve().parent
REPO = PEERS.parents[1]
NODE_MODULES = PEERS / "node_modules"
READY_TIMEOUT_S = 60.0
TURN_TIMEOUT_S = 300.0
PROMPT = "Run the command, then answer."

# Called with the text a client received, as it arrives.
OnText = Callable[[str], None]


def _installed(path: Path) -> Path:
    if not path.exists():
        raise RuntimeError(f"{path} is missing: `make bench-peers` installs the peers (npm ci)")
    return path


def codex_binary() -> Path:
    found = sorted(NODE_MODULES.glob("@openai/codex-linux-*/vendor/*/bin/codex"))
    if not found:
        raise RuntimeError("codex is not installed: `make bench-peers` installs it (npm ci)")
    return found[0]


def opencode_binary() -> Path:
    return _installed(NODE_MODULES / "opencode-linux-x64" / "bin" / "opencode")


def package_version(name: str) -> str:
    manifest = NODE_MODULES / name / "package.json"
    return str(json.loads(manifest.read_text())["version"]) if manifest.exists() else "?"


@dataclass
class Host:
    """A host process tree and a client of it. `start` returns once the
    host answers its API; sessions are made and prompted through it."""

    name: str
    home: Path
    model_url: str  # the fake model's base URL, ending in /v1
    process: asyncio.subprocess.Process | None = None
    ready_s: float = 0.0
    _texts: dict[str, OnText] = field(default_factory=dict)
    # Reads what it prints after its ready line, so it never blocks on a full pipe.
    _drainer: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def workdir(self) -> Path:
        return self.home / "work"

    async def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        began = time.perf_counter()
        try:
            async with asyncio.timeout(READY_TIMEOUT_S):
                await self._start()
        except BaseException:
            await self.stop()  # nothing left running behind a failed start
            raise
        self.ready_s = time.perf_counter() - began

    async def _start(self) -> None:
        raise NotImplementedError

    async def new_session(self) -> str:
        raise NotImplementedError

    async def turn(self, session: str, on_text: OnText | None = None) -> None:
        """One prompt, until the host says the turn is over."""
        if on_text is not None:
            self._texts[session] = on_text
        try:
            async with asyncio.timeout(TURN_TIMEOUT_S):
                await self._turn(session)
        finally:
            self._texts.pop(session, None)

    async def _turn(self, session: str) -> None:
        raise NotImplementedError

    def _text(self, session: str, text: str) -> None:
        receiver = self._texts.get(session)
        if receiver is not None:
            receiver(text)

    async def close_client(self) -> None:
        pass

    async def stop(self) -> None:
        await self.close_client()
        if self._drainer is not None:
            self._drainer.cancel()
        process = self.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(20):
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()

    def _environment(self) -> dict[str, str]:
        """A home of its own: no settings of the machine's user."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTHOST_", "OPENAI_"))}
        env.update(
            HOME=str(self.home),
            XDG_CONFIG_HOME=str(self.home / ".config"),
            XDG_STATE_HOME=str(self.home / ".local/state"),
            XDG_DATA_HOME=str(self.home / ".local/share"),
            XDG_CACHE_HOME=str(self.home / ".cache"),
        )
        return env

    async def _spawn(self, *argv: str | Path, env: dict[str, str], **kwargs: Any) -> None:
        with (self.home / "stderr.log").open("wb") as stderr:  # what it said, if it fails
            self.process = await asyncio.create_subprocess_exec(
                *map(str, argv),
                cwd=self.workdir,
                env=env,
                stderr=stderr,
                start_new_session=True,
                limit=2**24,
                **kwargs,
            )


# -- agenthost --------------------------------------------------------------------------


class AgentHost(Host):
    def __init__(self, home: Path, model_url: str) -> None:
        super().__init__("agenthost", home, model_url)
        self._requests = itertools.count(1)
        self._done: dict[str, asyncio.Future[None]] = {}
        self._running: set[str] = set()
        self._stream: Any = None
        self._follower: asyncio.Task[None] | None = None
        self._channel: grpc.aio.Channel | None = None

    async def _start(self) -> None:
        data = self.home / "data"
        env = self._environment() | {"AGENTHOST_MODEL_API_KEY": "bench"}
        await self._spawn(
            REPO / ".venv" / "bin" / "agenthost",
            "up",
            "--data-dir",
            data,
            "--free-ports",
            "--model",
            MODEL,
            "--model-base-url",
            self.model_url,
            "--sandbox",
            "full",
            "--approvals",
            "never",
            "--network",
            "on",
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
        )
        assert self.process is not None and self.process.stdout is not None
        address = None
        while address is None:
            line = (await self.process.stdout.readline()).decode()
            if not line:
                raise RuntimeError(
                    f"agenthost up exited with {await self.process.wait()}, see {self.home}"
                )
            if found := re.search(r"gateway\s+grpc://(\S+)", line):
                address = found[1]
        # The banner lists the services once all of them serve; drain the rest.
        self._drainer = asyncio.get_running_loop().create_task(_drain(self.process.stdout))
        self._channel = authorized_channel(address, (data / "token").read_text().strip())
        self.gateway = gw_grpc.GatewayServiceStub(self._channel)
        self._stream = self.gateway.Connect(gw.ConnectRequest(client_id="bench"))
        await self._stream.read()  # connected: frames reach us from here on
        self._follower = asyncio.get_running_loop().create_task(self._follow())

    async def _follow(self) -> None:
        while (frame := await self._stream.read()) is not grpc.aio.EOF:
            kind = frame.WhichOneof("frame")
            if kind == "assistant_delta":
                self._text(frame.assistant_delta.session_id, frame.assistant_delta.text)
            elif kind == "session_status":
                status = frame.session_status
                if status.running:
                    self._running.add(status.session_id)
                elif status.session_id in self._running:
                    self._running.discard(status.session_id)
                    done = self._done.pop(status.session_id, None)
                    if done is not None and not done.done():
                        done.set_result(None)

    async def new_session(self) -> str:
        created = await self.gateway.CreateSession(gw.CreateSessionRequest(cwd=str(self.workdir)))
        return str(created.session.id)

    async def _turn(self, session: str) -> None:
        done = self._done[session] = asyncio.get_running_loop().create_future()
        fence = gw.RequestFence(client_id="bench", generation=0, request_id=next(self._requests))
        await self.gateway.Prompt(gw.PromptRequest(session_id=session, text=PROMPT, fence=fence))
        await done

    async def close_client(self) -> None:
        if self._stream is not None:
            self._stream.cancel()
        if self._follower is not None:
            self._follower.cancel()
            await asyncio.gather(self._follower, return_exceptions=True)
        if self._channel is not None:
            await self._channel.close()
        self._stream = self._follower = self._channel = None


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass


# -- opencode ---------------------------------------------------------------------------


class OpenCode(Host):
    def __init__(self, home: Path, model_url: str) -> None:
        super().__init__("opencode", home, model_url)
        self._http: aiohttp.ClientSession | None = None
        self._events: asyncio.Task[None] | None = None
        self.base = ""

    def _config(self) -> dict[str, Any]:
        provider = {
            "npm": "@ai-sdk/openai-compatible",
            "name": "bench",
            "options": {"baseURL": self.model_url, "apiKey": "bench"},
            "models": {MODEL: {"name": MODEL, "tool_call": True}},
        }
        return {
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False,
            "share": "disabled",
            "model": f"bench/{MODEL}",
            "small_model": f"bench/{MODEL}",
            "permission": {"bash": "allow", "edit": "allow", "webfetch": "allow"},
            "provider": {"bench": provider},
        }

    async def _start(self) -> None:
        (self.workdir / "opencode.json").write_text(json.dumps(self._config()))
        env = self._environment() | {
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        }
        await self._spawn(
            opencode_binary(),
            "serve",
            "--hostname",
            "127.0.0.1",
            "--port",
            "0",
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
        )
        assert self.process is not None and self.process.stdout is not None
        while not self.base:
            line = (await self.process.stdout.readline()).decode()
            if not line:
                raise RuntimeError(
                    f"opencode serve exited with {await self.process.wait()}, see {self.home}"
                )
            if found := re.search(r"listening on (http://\S+)", line):
                self.base = found[1].rstrip("/")
        self._drainer = asyncio.get_running_loop().create_task(_drain(self.process.stdout))
        self._http = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None),
            connector=aiohttp.TCPConnector(limit=0),
        )
        connected = asyncio.get_running_loop().create_future()
        self._events = asyncio.get_running_loop().create_task(self._follow(connected))
        await connected

    async def _follow(self, connected: asyncio.Future[None]) -> None:
        assert self._http is not None
        async with self._http.get(f"{self.base}/event") as response:
            connected.set_result(None)
            async for raw in response.content:
                line = raw.decode()
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[6:])
                if event.get("type") == "message.part.delta":
                    properties = event["properties"]
                    if properties.get("field") == "text":
                        self._text(properties["sessionID"], properties["delta"])

    async def new_session(self) -> str:
        assert self._http is not None
        async with self._http.post(f"{self.base}/session", json={}) as response:
            response.raise_for_status()
            return str((await response.json())["id"])

    async def _turn(self, session: str) -> None:
        assert self._http is not None
        body = {"parts": [{"type": "text", "text": PROMPT}]}
        async with self._http.post(f"{self.base}/session/{session}/message", json=body) as response:
            response.raise_for_status()
            await response.read()

    async def close_client(self) -> None:
        if self._events is not None:
            self._events.cancel()
            await asyncio.gather(self._events, return_exceptions=True)
        if self._http is not None:
            await self._http.close()
        self._events = self._http = None


# -- Codex ------------------------------------------------------------------------------

# JSON-RPC error of app-server's full ingress queue: "retry later".
OVERLOADED = -32001


class Overloaded(Exception):
    pass


class Codex(Host):
    def __init__(self, home: Path, model_url: str) -> None:
        super().__init__("codex", home, model_url)
        self._ids = itertools.count(1)
        self._calls: dict[int, asyncio.Future[Any]] = {}
        self._done: dict[str, asyncio.Future[None]] = {}
        self._reader: asyncio.Task[None] | None = None
        self.retries = 0  # requests refused as overloaded and sent again

    def _config(self) -> str:
        return "\n".join(
            [
                f'model = "{MODEL}"',
                'model_provider = "bench"',
                'approval_policy = "never"',
                'sandbox_mode = "danger-full-access"',
                "check_for_update_on_startup = false",
                "[model_providers.bench]",
                'name = "bench"',
                f'base_url = "{self.model_url}"',
                'wire_api = "responses"',
                "",
            ]
        )

    async def _start(self) -> None:
        codex_home = self.home / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        (codex_home / "config.toml").write_text(self._config())
        binary = codex_binary()
        # As its launcher does: its own tools (rg) first on PATH.
        path = f"{binary.parents[1] / 'codex-path'}{os.pathsep}{os.environ.get('PATH', '')}"
        env = self._environment() | {"CODEX_HOME": str(codex_home), "PATH": path}
        await self._spawn(
            binary,
            "app-server",
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        self._reader = asyncio.get_running_loop().create_task(self._read())
        await self._call("initialize", {"clientInfo": {"name": "bench", "version": "1"}})
        self._notify("initialized")

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")

    def _notify(self, method: str) -> None:
        self._send({"method": method})

    async def _call(self, method: str, params: dict[str, Any]) -> Any:
        """A request; refused as overloaded (its ingress queue is bounded),
        sent again after a growing, jittered delay, as its docs ask."""
        for attempt in itertools.count():
            ident = next(self._ids)
            answer = self._calls[ident] = asyncio.get_running_loop().create_future()
            self._send({"id": ident, "method": method, "params": params})
            try:
                return await answer
            except Overloaded:
                self.retries += 1
                delay = min(0.01 * 2**attempt, 1.0)
                await asyncio.sleep(delay * (0.5 + random.random()))  # backoff, not sync
        raise AssertionError("unreachable")

    async def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while line := await self.process.stdout.readline():
            message = json.loads(line)
            method = message.get("method")
            if method is None:
                answer = self._calls.pop(message["id"])
                error = message.get("error")
                if error is not None and error.get("code") == OVERLOADED:
                    answer.set_exception(Overloaded())
                elif error is not None:
                    answer.set_exception(RuntimeError(f"codex: {error}"))
                else:
                    answer.set_result(message.get("result"))
            elif method == "item/agentMessage/delta":
                self._text(message["params"]["threadId"], message["params"]["delta"])
            elif method == "turn/completed":
                done = self._done.pop(message["params"]["threadId"], None)
                if done is not None and not done.done():
                    done.set_result(None)
            elif "id" in message:  # a request to the client (an approval): never expected
                self._send({"id": message["id"], "error": {"code": -32601, "message": "no"}})
        gone = RuntimeError(f"codex app-server exited (see {self.home / 'stderr.log'})")
        for waiting in [*self._calls.values(), *self._done.values()]:
            if not waiting.done():
                waiting.set_exception(gone)

    async def new_session(self) -> str:
        started = await self._call(
            "thread/start",
            {
                "cwd": str(self.workdir),
                "approvalPolicy": "never",
                "sandbox": "danger-full-access",
            },
        )
        return str(started["thread"]["id"])

    async def _turn(self, session: str) -> None:
        done = self._done[session] = asyncio.get_running_loop().create_future()
        text = {"type": "text", "text": PROMPT}
        await self._call("turn/start", {"threadId": session, "input": [text]})
        await done

    async def close_client(self) -> None:
        if self.process is not None and self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
            self._reader = None


HOSTS: dict[str, type[Host]] = {"agenthost": AgentHost, "opencode": OpenCode, "codex": Codex}


def make(name: str, home: Path, model_url: str) -> Host:
    cls: Any = HOSTS[name]
    host: Host = cls(home, model_url)
    return host


def versions() -> dict[str, str]:
    return {
        "agenthost": "this checkout",
        "opencode": package_version("opencode-linux-x64"),
        "codex": package_version("@openai/codex"),
        "python": sys.version.split()[0],
    }
