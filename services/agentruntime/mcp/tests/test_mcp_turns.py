"""Turns that use MCP servers' tools, over the real SQLite session log: the
protocol's reference test server (@modelcontextprotocol/server-everything,
installed by `make mcp-test-servers`) over stdio and over streamable HTTP,
and a small SDK server whose tools misbehave (tests/mcp/fault_server.py)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import Question
from services.agentruntime.mcp import McpServers
from services.agentruntime.mcp.state import State
from services.agentruntime.models.builtin import BuiltinAdapter, ScriptedReply, ScriptedToolCall
from services.agentruntime.models.openai_compat import OpenAICompatAdapter, OpenAICompatConfig
from services.agentruntime.models.tests.fake_provider import (
    DONE,
    FakeProvider,
    ProviderReply,
    finish_chunk,
    text_chunk,
    tool_fragment,
)
from services.agentruntime.runtime import AgentRuntime
from services.projection.session_units import MCP_UNIT
from services.sessionlog.domain import SessionLog
from tests.support.hosts import REPO

WAIT_S = 30.0
EVERYTHING = REPO / "tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
FAULT_TIMEOUT_S = 2
# How many tools tests/mcp/fault_server.py lists at start.
FAULT_TOOLS = 11


def node() -> str:
    path = shutil.which("node")
    assert path, "node is not on PATH"
    assert EVERYTHING.is_file(), "run `make mcp-test-servers` first"
    return path


def write_config(folder: Path, servers: dict[str, Any]) -> None:
    (folder / ".agenthost").mkdir(parents=True, exist_ok=True)
    (folder / ".agenthost/mcp.json").write_text(json.dumps({"mcpServers": servers}))


def fault_server() -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": ["-m", "tests.mcp.fault_server"],
        "env": {"PYTHONPATH": str(REPO)},
        "timeout": FAULT_TIMEOUT_S,
    }


def call(tool: str, call_id: str, /, **args: Any) -> ScriptedToolCall:
    return ScriptedToolCall(tool, args, call_id=call_id)


@pytest.fixture
async def servers() -> AsyncIterator[McpServers]:
    mcp = McpServers(None)
    yield mcp
    await mcp.close()


@pytest.fixture
async def session(session_log: SessionLog, tmp_path: Path) -> str:
    await session_log.create_session("s", str(tmp_path))
    return "s"


async def idle(runtime: AgentRuntime, session_id: str) -> None:
    async with asyncio.timeout(WAIT_S):
        async for status in runtime.watch_status(session_id):
            if not status.running:
                return


async def events(log: SessionLog, session_id: str) -> list[ev.Event]:
    return list((await log.read(session_id, limit=1000)).events)


async def next_question(log: SessionLog, session_id: str) -> Question:
    async with asyncio.timeout(WAIT_S):
        async for item in log.subscribe(session_id):
            if isinstance(item, ev.Event) and item.HasField("question_asked"):
                return Question.from_event(item.question_asked)
    raise AssertionError("no question")


def results(log_events: list[ev.Event]) -> dict[str, ev.ToolResult]:
    return {e.tool_result.call_id: e.tool_result for e in log_events if e.HasField("tool_result")}


def headers(log_events: list[ev.Event]) -> list[ev.RequestHeader]:
    return [e.request_header for e in log_events if e.HasField("request_header")]


def mcp_projection(log_events: list[ev.Event]) -> Any:
    state = MCP_UNIT.init()
    for event in log_events:
        state = MCP_UNIT.apply(state, event)
    return MCP_UNIT.view(state)


async def test_a_turn_calls_the_reference_server_over_stdio_through_an_approval(
    session_log: SessionLog, session: str, tmp_path: Path, servers: McpServers
) -> None:
    write_config(tmp_path, {"everything": {"command": node(), "args": [str(EVERYTHING)]}})
    echo = call("mcp__everything__echo", "c1", message="hello from the model")
    model = BuiltinAdapter([ScriptedReply(tool_calls=[echo]), ScriptedReply(text="done")])
    runtime = AgentRuntime(session_log, model, mcp=servers)

    await runtime.prompt(session, "echo something")
    question = await next_question(session_log, session)
    assert question.approval is not None
    assert question.approval.tool == "mcp__everything__echo"
    assert "hello from the model" in question.approval.detail
    await runtime.answer(session, question.question_id, ev.QuestionAnswer(allow_once=True))
    await idle(runtime, session)

    logged = await events(session_log, session)
    assert results(logged)["c1"].ok
    assert results(logged)["c1"].output == "Echo: hello from the model"
    # The model saw the server's tool with the server's schema, and the log says so.
    schema = next(t for t in headers(logged)[0].tools if t.name == "mcp__everything__echo")
    assert "message" in json.loads(schema.parameters_json)["properties"]
    assert any(t.name == "read_file" for t in headers(logged)[0].tools)
    # The state was recorded once, before the first step, and folds into the projection.
    kinds = [e.WhichOneof("body") for e in logged]
    assert kinds.count("mcp_status") == 1
    assert kinds.index("mcp_status") < kinds.index("step_start")
    (server,) = mcp_projection(logged)["servers"]
    assert server["name"] == "everything" and server["state"] == "ready"
    assert server["transport"] == "stdio" and server["tools"] >= 10
    await runtime.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def start_everything_over_http(port: int) -> asyncio.subprocess.Process:
    """The reference server's streamable HTTP mode on `port`, once it listens."""
    process = await asyncio.create_subprocess_exec(
        node(),
        str(EVERYTHING),
        "streamableHttp",
        env={**os.environ, "PORT": str(port)},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    try:
        async with asyncio.timeout(WAIT_S):
            while b"listening" not in (await process.stderr.readline()):
                pass
    except BaseException:
        process.kill()
        await process.wait()
        raise
    return process


async def stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.kill()
    await process.wait()


@pytest.fixture
async def everything_over_http() -> AsyncIterator[str]:
    port = free_port()
    process = await start_everything_over_http(port)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        await stop(process)


async def test_the_reference_server_over_streamable_http_from_the_deployment_config(
    session_log: SessionLog, session: str, tmp_path: Path, everything_over_http: str
) -> None:
    deployment = tmp_path / "deployment-mcp.json"
    deployment.write_text(json.dumps({"mcpServers": {"web": {"url": everything_over_http}}}))
    servers = McpServers(deployment)
    calls = [
        call("mcp__web__get-sum", "sum", a=2, b=3),
        call("mcp__web__get-tiny-image", "image"),
    ]
    model = BuiltinAdapter([ScriptedReply(tool_calls=calls), ScriptedReply(text="done")])
    runtime = AgentRuntime(session_log, model, mcp=servers)
    await runtime.update_settings(session, None, "never")
    try:
        await runtime.prompt(session, "add and draw")
        await idle(runtime, session)
        logged = await events(session_log, session)
        assert results(logged)["sum"].ok and "5" in results(logged)["sum"].output
        # Images reach the model as a line saying what was returned.
        assert "[image image/png" in results(logged)["image"].output
        (server,) = mcp_projection(logged)["servers"]
        assert (server["state"], server["transport"], server["scope"]) == (
            "ready",
            "http",
            "deployment",
        )
    finally:
        await runtime.close()
        await servers.close()


async def test_bad_servers_cost_only_their_call_and_a_crashed_server_comes_back(
    session_log: SessionLog, session: str, tmp_path: Path, servers: McpServers
) -> None:
    write_config(tmp_path, {"faults": fault_server()})
    faults = [
        call("mcp__faults__hang", "hang"),
        call("mcp__faults__invalid_json", "invalid"),
        call("mcp__faults__never_answers", "never"),
        call("mcp__faults__huge", "huge", megabytes=50),
        call("mcp__faults__crash", "crash"),
    ]
    model = BuiltinAdapter(
        [
            ScriptedReply(tool_calls=faults),
            ScriptedReply(text="the turn went on"),
            ScriptedReply(tool_calls=[call("mcp__faults__ok", "back", text="again")]),
            ScriptedReply(text="done"),
        ]
    )
    runtime = AgentRuntime(session_log, model, mcp=servers)
    await runtime.update_settings(session, None, "never")
    started = asyncio.get_running_loop().time()
    await runtime.prompt(session, "break things")
    await idle(runtime, session)
    # Each bad call waited at most its timeout (and the grace) ...
    assert asyncio.get_running_loop().time() - started < 4 * (FAULT_TIMEOUT_S + 2) + 10
    logged = await events(session_log, session)
    found = results(logged)
    assert not any(found[c].ok for c in ("hang", "invalid", "never", "huge", "crash"))
    assert "no answer within 2 s" in found["hang"].error
    assert "not valid JSON-RPC" in found["invalid"].error
    assert "no answer within 2 s" in found["never"].error
    assert "sent a message larger than 16 MB" in found["huge"].error
    assert "closed the connection during the call" in found["crash"].error
    # ... and the turn went on to the model's next answer.
    end = logged[-1].turn_end
    assert end.reason == ev.TURN_END_REASON_COMPLETED
    assert any(e.assistant_message.text == "the turn went on" for e in logged)

    # The crashed server is started again (with backoff) and serves the next turn.
    async with asyncio.timeout(WAIT_S):
        await servers.wait_for(tmp_path, "faults", State.READY)
    await runtime.prompt(session, "try again")
    await idle(runtime, session)
    logged = await events(session_log, session)
    assert results(logged)["back"].ok and results(logged)["back"].output == "ok: again"
    states = [[s.state for s in e.mcp_status.servers] for e in logged if e.HasField("mcp_status")]
    assert states[0] == [ev.MCP_SERVER_STATE_READY] and states[-1] == [ev.MCP_SERVER_STATE_READY]
    await runtime.close()


async def test_a_changed_tool_list_shows_at_the_next_boundary_only(
    session_log: SessionLog, session: str, tmp_path: Path, servers: McpServers
) -> None:
    write_config(tmp_path, {"faults": fault_server()})
    same_step = [
        call("mcp__faults__add_tool", "add", name="fresh"),
        call("mcp__faults__fresh", "too-soon"),
    ]
    model = BuiltinAdapter(
        [
            ScriptedReply(tool_calls=same_step),
            ScriptedReply(tool_calls=[call("mcp__faults__fresh", "next-step")]),
            ScriptedReply(text="done"),
        ]
    )
    runtime = AgentRuntime(session_log, model, mcp=servers)
    await runtime.update_settings(session, None, "never")
    await runtime.prompt(session, "grow a tool")
    await idle(runtime, session)
    logged = await events(session_log, session)
    found = results(logged)
    assert found["add"].ok
    # The step's catalog was fixed at its boundary: the new tool is unknown there ...
    assert not found["too-soon"].ok and "unknown tool" in found["too-soon"].error
    # ... and offered (and callable) from the next request on.
    named = [{t.name for t in header.tools} for header in headers(logged)]
    assert "mcp__faults__fresh" not in named[0] and "mcp__faults__fresh" in named[1]
    assert found["next-step"].ok and found["next-step"].output == "fresh was added"
    counts = [e.mcp_status.servers[0].tools for e in logged if e.HasField("mcp_status")]
    # The fault server's tools, then one more.
    assert counts == [FAULT_TOOLS, FAULT_TOOLS + 1]
    await runtime.close()


async def test_a_broken_config_file_fails_alone_and_no_server_no_event(
    session_log: SessionLog, session: str, tmp_path: Path, servers: McpServers
) -> None:
    runtime = AgentRuntime(session_log, BuiltinAdapter(), mcp=servers)
    await runtime.prompt(session, "hi")
    await idle(runtime, session)
    assert not any(e.HasField("mcp_status") for e in await events(session_log, session))

    (tmp_path / ".agenthost").mkdir()
    (tmp_path / ".agenthost/mcp.json").write_text('{"mcpServers": {"x": {"args": []}}}')
    await runtime.prompt(session, "again")
    await idle(runtime, session)
    (server,) = mcp_projection(await events(session_log, session))["servers"]
    assert server["name"] == "workspace-config" and server["state"] == "failed"
    assert "give either a command (stdio) or a url (http)" in server["error"]
    await runtime.close()


async def test_a_server_that_cannot_start_fails_alone_and_the_turn_goes_on(
    session_log: SessionLog, session: str, tmp_path: Path, servers: McpServers
) -> None:
    missing = {"command": str(tmp_path / "no-such-server")}
    complains = {
        "command": sys.executable,
        "args": ["-c", "import sys; sys.stderr.write('bad token: set API_TOKEN'); sys.exit(2)"],
    }
    write_config(tmp_path, {"missing": missing, "complains": complains, "faults": fault_server()})
    model = BuiltinAdapter(
        [
            ScriptedReply(tool_calls=[call("mcp__faults__ok", "fine", text="still here")]),
            ScriptedReply(text="done"),
        ]
    )
    runtime = AgentRuntime(session_log, model, mcp=servers)
    await runtime.update_settings(session, None, "never")
    await runtime.prompt(session, "use what works")
    await idle(runtime, session)
    logged = await events(session_log, session)
    assert results(logged)["fine"].output == "ok: still here"
    assert logged[-1].turn_end.reason == ev.TURN_END_REASON_COMPLETED
    shown = {s["name"]: s for s in mcp_projection(logged)["servers"]}
    assert shown["missing"]["state"] == "failed" and "no-such-server" in shown["missing"]["error"]
    # A server that exits says why in its stderr, and the reason quotes it.
    assert shown["complains"]["state"] == "failed"
    assert "bad token: set API_TOKEN" in shown["complains"]["error"]
    assert shown["faults"]["state"] == "ready"
    assert not any(t.name.startswith("mcp__missing__") for t in headers(logged)[0].tools)
    await runtime.close()


async def test_an_image_result_is_logged_and_sent_to_a_model_that_takes_images(
    session_log: SessionLog, session: str, tmp_path: Path, servers: McpServers
) -> None:
    """The reference server's tiny image, through the log, to the provider's
    next request as an image_url part (the OpenAI-compatible adapter against
    a local server that speaks the protocol)."""
    write_config(tmp_path, {"everything": {"command": node(), "args": [str(EVERYTHING)]}})
    provider = FakeProvider()
    await provider.start()
    config = OpenAICompatConfig(base_url=provider.url, model="m", images=True)
    model = OpenAICompatAdapter(config)
    provider.enqueue(
        ProviderReply(
            stream=[
                tool_fragment(0, call_id="img", name="mcp__everything__get-tiny-image"),
                tool_fragment(0, arguments="{}"),
                finish_chunk("tool_calls"),
                DONE,
            ]
        ),
        ProviderReply(stream=[text_chunk("A logo."), finish_chunk("stop"), DONE]),
    )
    runtime = AgentRuntime(session_log, model, mcp=servers)
    await runtime.update_settings(session, None, "never")
    try:
        await runtime.prompt(session, "show me the image")
        await idle(runtime, session)
        logged = await events(session_log, session)
        kinds = [e.WhichOneof("body") for e in logged]
        assert kinds[kinds.index("tool_result") + 1] == "tool_attachment"
        attachment = next(e.tool_attachment for e in logged if e.HasField("tool_attachment"))
        assert attachment.call_id == "img" and attachment.mime_type == "image/png"
        assert attachment.data.startswith(b"\x89PNG")
        second = provider.requests[1].body["messages"]
        assert second[-2]["role"] == "tool" and "[image image/png" in second[-2]["content"]
        image = second[-1]["content"][1]["image_url"]["url"]
        assert second[-1]["role"] == "user" and image.startswith("data:image/png;base64,")
    finally:
        await runtime.close()
        await model.aclose()
        await provider.stop()


async def test_an_http_server_killed_mid_session_comes_back_for_the_next_turn(
    session_log: SessionLog, session: str, tmp_path: Path, servers: McpServers
) -> None:
    port = free_port()
    write_config(tmp_path, {"web": {"url": f"http://127.0.0.1:{port}/mcp", "timeout": 5}})
    model = BuiltinAdapter(
        [
            ScriptedReply(tool_calls=[call("mcp__web__echo", "first", message="one")]),
            ScriptedReply(text="ok"),
            ScriptedReply(tool_calls=[call("mcp__web__echo", "while-down", message="two")]),
            ScriptedReply(text="it failed, going on"),
            ScriptedReply(tool_calls=[call("mcp__web__echo", "back", message="three")]),
            ScriptedReply(text="done"),
        ]
    )
    runtime = AgentRuntime(session_log, model, mcp=servers)
    await runtime.update_settings(session, None, "never")
    process = await start_everything_over_http(port)
    try:
        await runtime.prompt(session, "one")
        await idle(runtime, session)
        await stop(process)
        await runtime.prompt(session, "two")
        await idle(runtime, session)
        async with asyncio.timeout(WAIT_S):
            await servers.wait_for(tmp_path, "web", State.FAILED)
        process = await start_everything_over_http(port)
        async with asyncio.timeout(WAIT_S):
            await servers.wait_for(tmp_path, "web", State.READY)
        await runtime.prompt(session, "three")
        await idle(runtime, session)
    finally:
        await stop(process)
        await runtime.close()
    logged = await events(session_log, session)
    found = results(logged)
    assert found["first"].output == "Echo: one"
    assert not found["while-down"].ok  # refused as unreachable, or unknown once seen down
    assert found["back"].output == "Echo: three"
    ends = [e.turn_end.reason for e in logged if e.HasField("turn_end")]
    assert ends == [ev.TURN_END_REASON_COMPLETED] * 3
    states = [e.mcp_status.servers[0].state for e in logged if e.HasField("mcp_status")]
    assert states[0] == ev.MCP_SERVER_STATE_READY and states[-1] == ev.MCP_SERVER_STATE_READY


async def test_an_mcp_call_waiting_for_approval_runs_after_a_runtime_restart(
    session_log: SessionLog, session: str, tmp_path: Path
) -> None:
    write_config(tmp_path, {"everything": {"command": node(), "args": [str(EVERYTHING)]}})
    echo = call("mcp__everything__echo", "c1", message="after the restart")
    first_servers = McpServers(None)
    first = AgentRuntime(
        session_log, BuiltinAdapter([ScriptedReply(tool_calls=[echo])]), mcp=first_servers
    )
    await first.prompt(session, "echo later")
    question = await next_question(session_log, session)
    await first.close()

    servers = McpServers(None)
    second = AgentRuntime(session_log, BuiltinAdapter([ScriptedReply(text="done")]), mcp=servers)
    try:
        await second.answer(session, question.question_id, ev.QuestionAnswer(allow_once=True))
        await idle(second, session)
        logged = await events(session_log, session)
        assert results(logged)["c1"].output == "Echo: after the restart"
        assert logged[-1].turn_end.reason == ev.TURN_END_REASON_COMPLETED
    finally:
        await second.close()
