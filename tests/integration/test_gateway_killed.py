"""A gateway killed (SIGKILL) and started again on its address, with clients
of both SDKs connected through it.

What a person at such a client notices, asserted here: the client
reconnects by itself, and the first prompt after the restart is accepted
(no STALE) and answered. What the fences must still do: the stream the kill
ended was a generation of its own, so the client reconnects with a newer
one and a request of the old generation is refused as STALE by the
restarted gateway (before, a killed stream failed instead of ending, and the
SDKs kept its generation).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc
import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw

from clients.sdk import AgentHostClient, ConnectionState, Session
from tests.support.hosts import REPO
from tests.support.node import run, tool
from tests.support.process_stack import ProcessStack, process_stack
from tests.support.rpc import expect_rpc_error, reason_of

WAIT_S = 30.0
TS_DRIVER = REPO / "tests" / "support" / "ts_gateway_killed.mjs"
BUILD_TIMEOUT_S = 300


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[ProcessStack]:
    async with process_stack(tmp_path / "data") as running:
        yield running


def answered(text: str) -> Callable[[Session], bool]:
    """The turn of `text` ended with the built-in model's echo of it."""

    def holds(session: Session) -> bool:
        answers = [
            e.assistant_message.text for e in session.events if e.HasField("assistant_message")
        ]
        return not session.running and f"Echo: {text}" in answers

    return holds


async def kill_and_restart(stack: ProcessStack) -> None:
    stack.kill("gateway")
    await stack.restart("gateway")


async def stale_reason(
    stack: ProcessStack, client_id: str, generation: int, session_id: str
) -> str:
    """Why the gateway refuses a prompt fenced with `generation`."""
    fence = gw.RequestFence(client_id=client_id, generation=generation, request_id=10**9)
    prompt = gw.PromptRequest(fence=fence, session_id=session_id, text="from the past")
    async with AgentHostClient(stack.gateway, stack.token) as raw:
        refused = await expect_rpc_error(
            raw.stub.Prompt(prompt), grpc.StatusCode.FAILED_PRECONDITION
        )
    return reason_of(refused)


async def test_the_python_sdk_prompts_at_once_after_a_gateway_is_killed_and_restarted(
    stack: ProcessStack, tmp_path: Path
) -> None:
    async with AgentHostClient(stack.gateway, stack.token) as client:
        session = await client.open_session((await client.create_session(cwd=str(tmp_path))).id)
        await session.prompt("before the kill")
        await session.wait_until(answered("before the kill"), WAIT_S)
        before = client.generation

        stack.kill("gateway")
        await client.wait_for(lambda: client.state is ConnectionState.RECONNECTING, WAIT_S)
        assert client.generation == before + 1, "the killed stream's generation is over at once"
        await stack.restart("gateway")
        await client.wait_for(lambda: client.connected, WAIT_S)

        await session.prompt("after the restart")
        await session.wait_until(answered("after the restart"), WAIT_S)
        assert client.generation == before + 1
        assert await stale_reason(stack, client.client_id, before, session.id) == "STALE"


async def test_the_ts_sdk_prompts_at_once_after_a_gateway_is_killed_and_restarted(
    stack: ProcessStack, tmp_path: Path
) -> None:
    code, output = await run([tool("make"), "ts"], REPO, None, BUILD_TIMEOUT_S)
    assert code == 0, f"make ts failed:\n{output}"
    env = {**os.environ, "AGENTHOST_GATEWAY": stack.gateway, "AGENTHOST_TOKEN": stack.token}
    driver = await asyncio.create_subprocess_exec(
        tool("node"),
        str(TS_DRIVER),
        str(tmp_path),
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert driver.stdin is not None and driver.stdout is not None

    async def said() -> dict[str, object]:
        # Longer than the driver waits: its own failure comes first.
        line = await asyncio.wait_for(driver.stdout.readline(), 2 * WAIT_S)  # type: ignore[union-attr]
        assert line, f"the TS driver ended ({await driver.wait()})"
        return dict(json.loads(line))

    try:
        ready = await said()
        assert ready["step"] == "answered", ready
        await kill_and_restart(stack)
        driver.stdin.write(b"restarted\n")
        await driver.stdin.drain()
        done = await said()
        assert done == {"step": "answered again", "generation": int(str(ready["generation"])) + 1}
        assert (
            await stale_reason(
                stack,
                str(ready["clientId"]),
                int(str(ready["generation"])),
                str(ready["sessionId"]),
            )
            == "STALE"
        )
        assert await asyncio.wait_for(driver.wait(), WAIT_S) == 0
    finally:
        if driver.returncode is None:
            driver.kill()
            await driver.wait()
