"""Coding turns through the gateway, as a user of the SDK sees them.

A `Coding` stack is the whole embedded stack on loopback (tests.support.gateway)
plus a real project folder the sessions are created in, and a folder next to
it that no tool may touch unless the sandbox is "full". The model is the
scripted built-in adapter: `script` queues one reply per step, each calling
the given tools, then a closing text. The readers below say what the log
shows of the calls (tool/call, tool/result, question/asked) and what the
model was sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from agenthost.projection.v1 import projection_pb2 as pj
from agenthost.projection.v1 import projection_pb2_grpc
from agenthost.runtime.v1 import runtime_pb2_grpc
from agenthost.sessionlog.v1 import events_pb2 as ev
from google.protobuf import json_format

from agenthost_core.folds import Question
from clients.sdk import AgentHostClient, Backoff, Session
from services.agentruntime.models.base import ModelRequest, ToolResultMessage
from services.agentruntime.models.builtin import ScriptedReply, ScriptedToolCall
from services.sessionlog.client import SessionLogClient
from tests.support.gateway import ALICE, GatewayHarness, running_gateway

WAIT_S = 10.0
Step = ScriptedToolCall | Sequence[ScriptedToolCall]


def tool(name: str, call_id: str, **args: Any) -> ScriptedToolCall:
    """A tool call the scripted model makes, with a fixed call id."""
    return ScriptedToolCall(name, dict(args), call_id=call_id)


@dataclass
class Coding:
    harness: GatewayHarness
    # The folder sessions are created in (their cwd).
    folder: Path
    # A folder next to it: outside every session.
    outside: Path
    opened: list[AgentHostClient] = field(default_factory=list)
    _channels: dict[str, grpc.aio.Channel] = field(default_factory=dict)

    def client(self) -> AgentHostClient:
        client = AgentHostClient(
            self.harness.address, ALICE, backoff=Backoff(initial_s=0.02, max_s=0.2)
        )
        self.opened.append(client)
        return client

    async def session(
        self,
        *,
        sandbox: str | None = None,
        approvals: str | None = None,
        client: AgentHostClient | None = None,
    ) -> Session:
        """A new session in the project folder, open, with these settings
        (once the `settings` projection shows them)."""
        client = client or self.client()
        summary = await client.create_session(cwd=str(self.folder))
        session = await client.open_session(summary.id)
        if sandbox is not None or approvals is not None:
            wanted = await session.set_settings(sandbox=sandbox, approvals=approvals)
            await session.wait_until(lambda s: s.settings == wanted, WAIT_S)
        return session

    def script(self, *steps: Step, final: str = "Done.") -> list[ScriptedReply]:
        """One scripted reply per step (each calls its tools), then `final`."""
        replies = [
            ScriptedReply(tool_calls=[step] if isinstance(step, ScriptedToolCall) else list(step))
            for step in steps
        ]
        replies.append(ScriptedReply(text=final))
        return [self.harness.model.enqueue(reply) for reply in replies]

    @property
    def requests(self) -> list[ModelRequest]:
        return list(self.harness.model.requests)

    # -- the internal services, for what no client of the gateway can do --------

    def _channel(self, name: str) -> grpc.aio.Channel:
        if name not in self._channels:
            self._channels[name] = self.harness.stack.channel(name)
        return self._channels[name]

    @property
    def log(self) -> SessionLogClient:
        return SessionLogClient(self._channel("sessionlog"))

    @property
    def runtime(self) -> runtime_pb2_grpc.AgentRuntimeServiceStub:
        return runtime_pb2_grpc.AgentRuntimeServiceStub(self._channel("agentruntime"))

    async def projection(self, session_id: str, key: str) -> object:
        """One projection value of a session, as the projection service serves it."""
        stub = projection_pb2_grpc.ProjectionServiceStub(self._channel("projection"))
        reply: pj.GetProjectionResponse = await stub.GetProjection(
            pj.GetProjectionRequest(session_id=session_id, keys=[key]), wait_for_ready=True
        )
        return json_format.MessageToDict(reply.values[key]) if key in reply.values else None

    async def log_until(
        self, session_id: str, done: Callable[[list[ev.Event]], bool]
    ) -> list[ev.Event]:
        """The session's log, followed until `done` holds for it."""
        events: list[ev.Event] = []
        items = self.log.subscribe(session_id)
        try:
            async with asyncio.timeout(WAIT_S):
                async for item in items:
                    if isinstance(item, ev.Event):
                        events.append(item)
                        if done(events):
                            return events
        finally:
            if isinstance(items, AsyncGenerator):  # end the stream now, not when collected
                await items.aclose()
        raise AssertionError("the log subscription ended")

    async def close(self) -> None:
        for client in self.opened:
            await client.close()
        for channel in self._channels.values():
            await channel.close()


@asynccontextmanager
async def coding_stack(tmp_path: Path) -> AsyncIterator[Coding]:
    folder, outside = tmp_path / "project", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    async with running_gateway(tmp_path / "data") as harness:
        coding = Coding(harness, folder, outside)
        try:
            yield coding
        finally:
            await coding.close()


# -- what the log shows ----------------------------------------------------------------


def tool_trace(events: Iterable[ev.Event]) -> list[tuple[str, str, object]]:
    """("call", call_id, name) and ("result", call_id, ok), in log order."""
    trace: list[tuple[str, str, object]] = []
    for event in events:
        if event.HasField("tool_call"):
            trace.append(("call", event.tool_call.call_id, event.tool_call.name))
        elif event.HasField("tool_result"):
            trace.append(("result", event.tool_result.call_id, event.tool_result.ok))
    return trace


def results(events: Iterable[ev.Event]) -> dict[str, ev.ToolResult]:
    return {e.tool_result.call_id: e.tool_result for e in events if e.HasField("tool_result")}


def asked(events: Iterable[ev.Event]) -> list[ev.QuestionAsked]:
    return [e.question_asked for e in events if e.HasField("question_asked")]


def answered(events: Iterable[ev.Event]) -> list[ev.QuestionAnswered]:
    return [e.question_answered for e in events if e.HasField("question_answered")]


def headers(events: Iterable[ev.Event]) -> list[ev.RequestHeader]:
    return [e.request_header for e in events if e.HasField("request_header")]


def turn_ends(events: Iterable[ev.Event]) -> list[ev.TurnEnd]:
    return [e.turn_end for e in events if e.HasField("turn_end")]


def turns_ended(count: int) -> Callable[[Session], bool]:
    return lambda s: len(turn_ends(s.events)) >= count


async def finished(session: Session, turns: int = 1) -> None:
    """Wait until `turns` turns ended (and the session shows it idle)."""
    await session.wait_until(lambda s: turns_ended(turns)(s) and not s.running, WAIT_S)


async def question_for(session: Session, call_id: str) -> Question:
    """The open question of a call, once the session shows it."""

    def found(s: Session) -> bool:
        return any(q.call_id == call_id for q in s.questions.values())

    await session.wait_until(found, WAIT_S)
    return next(q for q in session.questions.values() if q.call_id == call_id)


def result_sent(request: ModelRequest, call_id: str) -> ToolResultMessage | None:
    """The result of a call as a model request carried it (None: absent)."""
    return next(
        (m for m in request.messages if isinstance(m, ToolResultMessage) and m.call_id == call_id),
        None,
    )


def first_request_with(requests: Sequence[ModelRequest], call_id: str) -> ModelRequest:
    """The first model request that carried the call's result."""
    return next(r for r in requests if result_sent(r, call_id) is not None)
