"""The one model every host of `make bench-peers` talks to: a local
OpenAI-compatible server that plays the same turn for each of them.

A turn is two model requests. The first (a user message last, tools
offered) is answered with one call of the host's shell tool, running
`Script.command`; the second (the tool's result last) with text in
`Script.chunks` pieces, sent at once (`pace_s` 0) or `pace_s` apart. A
request without tools (a title, a summary) gets a few words. Each answer
ends with its token usage.

It speaks both wires the hosts use:

- chat completions (`POST .../chat/completions`, `stream: true`): agenthost
  and opencode; SSE `chat.completion.chunk`s, a usage chunk, `[DONE]`;
- the Responses API (`POST .../responses`): Codex; SSE `response.*` events,
  the usage in `response.completed`.

Each text piece is `" t<microseconds>"`, the CLOCK_MONOTONIC time
(`time.perf_counter` on Linux, the same clock in every process) it was
written to the socket, so a client receiving it knows how long it took to
arrive (`sent_stamps`), however a host merges or splits the pieces.

`GET /bench/stats` says how many requests it served and how long they took
in all (`busy_s`): a turn's time less the model's is the host's overhead.
`POST /bench/script` changes the script (JSON with any of `chunks`,
`pace_ms`, `command`).

`python -m bench.peers.fake_model [--port N]` serves until stopped and prints
one JSON line with its port once it listens."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import secrets
import sys
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from aiohttp import web

MODEL = "bench-fake"
# The hosts' shell tools, as each names it; the first offered is called.
SHELL_TOOLS = ("shell", "bash", "exec_command", "shell_command")
_STAMP = re.compile(r" t(\d+)")
_MARK = "@@piece@@"


@dataclass(frozen=True)
class Script:
    chunks: int = 300
    pace_s: float = 0.0
    command: str = "echo bench"


def stamp() -> str:
    return f" t{time.perf_counter_ns() // 1000}"


def sent_stamps(text: str) -> list[float]:
    """The send times (perf_counter seconds) of the pieces in `text`."""
    return [int(m) / 1e6 for m in _STAMP.findall(text)]


# -- what to answer ------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str


def _tool_specs(tools: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """name -> JSON schema of the parameters, from either wire's tool list
    (chat nests them under `function`; the Responses API does not)."""
    specs: dict[str, Mapping[str, Any]] = {}
    for tool in tools:
        spec = tool.get("function", tool)
        if "name" in spec:
            specs[spec["name"]] = spec.get("parameters") or {}
    return specs


def shell_call(tools: Iterable[Mapping[str, Any]], command: str) -> ToolCall | None:
    """A call of the first shell tool offered, its arguments filled in from
    its schema: the command as a string or an argv, required strings
    otherwise (a description) get a short word."""
    specs = _tool_specs(tools)
    name = next((n for n in SHELL_TOOLS if n in specs), None)
    if name is None:
        return None
    properties: Mapping[str, Any] = specs[name].get("properties", {})
    arguments: dict[str, Any] = {}
    for key in ("command", "cmd"):
        if key in properties:
            kind = properties[key].get("type")
            arguments[key] = ["bash", "-lc", command] if kind == "array" else command
            break
    for key in specs[name].get("required", []):
        if key not in arguments and properties.get(key, {}).get("type") == "string":
            arguments[key] = "bench"
    return ToolCall(name, json.dumps(arguments))


def _chat_answers_tool(messages: list[Mapping[str, Any]]) -> bool:
    return bool(messages) and messages[-1].get("role") == "tool"


def _responses_answers_tool(items: Any) -> bool:
    if not isinstance(items, list) or not items:
        return False
    return str(items[-1].get("type", "")).endswith("call_output")


# -- the server ----------------------------------------------------------------------------


class FakeModel:
    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        self.requests = 0
        self.busy_s = 0.0
        self.app = web.Application(client_max_size=64 * 2**20)
        self.app.router.add_post("/{prefix:.*}chat/completions", self._chat)
        self.app.router.add_post("/{prefix:.*}responses", self._responses)
        self.app.router.add_get("/{prefix:.*}models", self._models)
        self.app.router.add_get("/bench/stats", self._stats)
        self.app.router.add_post("/bench/script", self._set_script)
        self._runner: web.AppRunner | None = None

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> int:
        self._runner = web.AppRunner(self.app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server
        assert server is not None and isinstance(server, asyncio.base_events.Server)
        return int(server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _stats(self, request: web.Request) -> web.Response:
        return web.json_response({"requests": self.requests, "busy_s": self.busy_s})

    async def _set_script(self, request: web.Request) -> web.Response:
        body = await request.json()
        changes: dict[str, Any] = {}
        if "chunks" in body:
            changes["chunks"] = int(body["chunks"])
        if "pace_ms" in body:
            changes["pace_s"] = float(body["pace_ms"]) / 1e3
        if "command" in body:
            changes["command"] = str(body["command"])
        self.script = replace(self.script, **changes)
        return web.json_response(asdict(self.script))

    async def _models(self, request: web.Request) -> web.Response:
        model = {"id": MODEL, "object": "model", "created": 0, "owned_by": "bench"}
        return web.json_response({"object": "list", "data": [model]})

    async def _stream(
        self, request: web.Request, events: AsyncIterator[bytes]
    ) -> web.StreamResponse:
        began = time.perf_counter()
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        counted = False
        try:
            async for event in events:
                await response.write(event)
            # Counted before the end goes out: a client that has the whole
            # answer finds it in the stats.
            self._count(began)
            counted = True
            await response.write_eof()
        finally:
            if not counted:
                self._count(began)
        return response

    def _count(self, began: float) -> None:
        self.requests += 1
        self.busy_s += time.perf_counter() - began

    async def _pieces(self) -> AsyncIterator[str]:
        """The text, piece by piece, each stamped as it goes out."""
        script = self.script
        due = time.perf_counter()
        for index in range(script.chunks):
            if index and script.pace_s:
                due += script.pace_s
                await asyncio.sleep(max(0.0, due - time.perf_counter()))  # the model's pace
            yield stamp()

    # -- chat completions

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        call = None
        if not _chat_answers_tool(body.get("messages", [])):
            call = shell_call(body.get("tools") or [], self.script.command)
        prompt_tokens = len(await request.read()) // 4
        return await self._stream(request, self._chat_events(call, prompt_tokens, body))

    async def _chat_events(
        self, call: ToolCall | None, prompt_tokens: int, body: Mapping[str, Any]
    ) -> AsyncIterator[bytes]:
        ident = f"chatcmpl-{secrets.token_hex(6)}"

        def chunk(delta: Mapping[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            payload = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": MODEL,
                "choices": [choice],
            }
            return _sse(payload)

        yield chunk({"role": "assistant", "content": ""})
        completion = 0
        if call is not None:
            tool = {
                "index": 0,
                "id": f"call_{secrets.token_hex(6)}",
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            yield chunk({"tool_calls": [tool]})
            yield chunk({}, "tool_calls")
            completion = 20
        else:
            # One chunk made per answer, the piece put in its place: what
            # the model costs per piece stays small beside the hosts.
            head, tail = chunk({"content": _MARK}).split(_MARK.encode())
            async for piece in self._text(body.get("tools")):
                yield head + piece.encode() + tail
                completion += 1
            yield chunk({}, "stop")
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": prompt_tokens + completion,
        }
        yield _sse(
            {
                "id": ident,
                "object": "chat.completion.chunk",
                "model": MODEL,
                "choices": [],
                "usage": usage,
            }
        )
        yield b"data: [DONE]\n\n"

    def _text(self, tools: Any) -> AsyncIterator[str]:
        return self._pieces() if tools else _words("Bench session")

    # -- Responses API

    async def _responses(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        call = None
        if not _responses_answers_tool(body.get("input")):
            call = shell_call(body.get("tools") or [], self.script.command)
        prompt_tokens = len(await request.read()) // 4
        return await self._stream(request, self._response_events(call, prompt_tokens, body))

    async def _response_events(
        self, call: ToolCall | None, prompt_tokens: int, body: Mapping[str, Any]
    ) -> AsyncIterator[bytes]:
        ident = f"resp_{secrets.token_hex(8)}"
        sequence = iter(range(1 << 30))

        def event(kind: str, **fields: Any) -> bytes:
            return _sse({"type": kind, "sequence_number": next(sequence), **fields}, kind)

        shell = {
            "id": ident,
            "object": "response",
            "model": MODEL,
            "status": "in_progress",
            "output": [],
        }
        yield event("response.created", response=shell)
        output: list[dict[str, Any]] = []
        completion = 0
        if call is not None:
            item: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{secrets.token_hex(6)}",
                "call_id": f"call_{secrets.token_hex(6)}",
                "name": call.name,
                "arguments": call.arguments,
                "status": "completed",
            }
            yield event(
                "response.output_item.added", output_index=0, item={**item, "arguments": ""}
            )
            yield event("response.output_item.done", output_index=0, item=item)
            output.append(item)
            completion = 20
        else:
            item_id = f"msg_{secrets.token_hex(6)}"
            started: dict[str, Any] = {
                "type": "message",
                "id": item_id,
                "role": "assistant",
                "status": "in_progress",
                "content": [],
            }
            yield event("response.output_item.added", output_index=0, item=started)
            part: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
            yield event(
                "response.content_part.added",
                item_id=item_id,
                output_index=0,
                content_index=0,
                part=part,
            )
            text: list[str] = []
            delta = _sse(
                {
                    "type": "response.output_text.delta",
                    "sequence_number": _MARK,
                    "item_id": item_id,
                    "output_index": 0,
                    "content_index": 0,
                    "delta": _MARK,
                },
                "response.output_text.delta",
            )
            head, middle, tail = delta.replace(
                f'"{_MARK}",'.encode(), f"{_MARK},".encode(), 1
            ).split(_MARK.encode())
            async for piece in self._text(body.get("tools")):
                text.append(piece)
                yield head + str(next(sequence)).encode() + middle + piece.encode() + tail
                completion += 1
            whole = "".join(text)
            yield event(
                "response.output_text.done",
                item_id=item_id,
                output_index=0,
                content_index=0,
                text=whole,
            )
            done_part = {**part, "text": whole}
            yield event(
                "response.content_part.done",
                item_id=item_id,
                output_index=0,
                content_index=0,
                part=done_part,
            )
            item = {**started, "status": "completed", "content": [done_part]}
            yield event("response.output_item.done", output_index=0, item=item)
            output.append(item)
        usage = {
            "input_tokens": prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt_tokens + completion,
        }
        completed = {**shell, "status": "completed", "output": output, "usage": usage}
        yield event("response.completed", response=completed)


async def _words(text: str) -> AsyncIterator[str]:
    for word in text.split():
        yield word + " "


def _sse(payload: Mapping[str, Any], event: str | None = None) -> bytes:
    data = json.dumps(payload, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {data}\n\n".encode()


async def _serve(port: int) -> None:
    model = FakeModel()
    bound = await model.start(port=port)
    print(json.dumps({"port": bound}), flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await model.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.peers.fake_model", description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    try:
        asyncio.run(_serve(args.port))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
