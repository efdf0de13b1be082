"""An editor switches the session's model over ACP: tests/acp/models.test.mjs
drives `agenthost acp` with the official client library against a stack run
in this process with two configured models, "deep" (the default) at an
OpenAI-compatible provider on loopback and the built-in "alt". The editor
lists them (a config option of category model, the session's selected),
switches to "alt" and its next prompt is answered by "alt"; then the Python
SDK switches the session back to "deep" and the editor is told
(config_option_update), and its next prompt goes to "deep". What each model
was asked is checked at the models and in the requests' logged headers. Once
the session's commands change, the editor is sent them again."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw

from clients.sdk import AgentHostClient, Session
from services.agentruntime.models.builtin import BuiltinAdapter, ScriptedReply
from services.agentruntime.models.catalog import (
    ModelCatalog,
    ModelSpec,
    ProviderSpec,
    spec_of_adapter,
)
from services.agentruntime.models.tests.fake_provider import (
    DONE,
    FakeProvider,
    ProviderReply,
    finish_chunk,
    text_chunk,
    usage_chunk,
)
from services.embedded import EmbeddedStack
from services.gateway.accounts import LOCAL_ACCOUNT
from services.gateway.service import GatewayDefinition
from services.gateway.servicer import GatewayServicer
from services.sessionlog.client import SessionLogClient
from tests.support.hosts import REPO
from tests.support.node import assert_passed, install_dependencies, run, tool

ACP_DIR = REPO / "tests" / "acp"
DEEP_REPLY = "Deep here."
ALT_REPLY = "Alt model here."
NODE_TESTS = (
    "the editor lists the configured models, the session's selected",
    "switching the model makes the next model request go to it",
    "a switch made elsewhere (the SDK) reaches the editor",
    "when the session's commands change, the editor gets them again",
    "every message the agent sent validates against the protocol's schema",
)
TIMEOUT_S = 120
WAIT_S = 30.0


def two_models(provider_url: str) -> tuple[ModelCatalog, BuiltinAdapter]:
    """ "deep" (the default) at an OpenAI-compatible provider, "alt" built in."""
    alt = BuiltinAdapter([ScriptedReply(text=ALT_REPLY)], model="builtin-alt")
    deep = ModelSpec(
        "deep", ProviderSpec("fake", base_url=provider_url), "deepseek-chat", 128_000, 4000
    )
    return ModelCatalog([deep, spec_of_adapter(alt, "alt")], adapters={"alt": alt}), alt


def deep_answer() -> ProviderReply:
    return ProviderReply(
        stream=[text_chunk(DEEP_REPLY), finish_chunk("stop"), usage_chunk(100, 5), DONE]
    )


async def the_editors_session(client: AgentHostClient, folder: Path) -> Session:
    """The session the editor made in `folder` (its session_added frame)."""

    def made() -> list[str]:
        return [row.id for row in client.session_list.rows() if row.cwd == str(folder)]

    await client.wait_for(lambda: bool(made()), WAIT_S)
    return await client.open_session(made()[0])


def gateway_servicer(stack: EmbeddedStack) -> GatewayServicer:
    definition = stack.definitions["gateway"]
    assert isinstance(definition, GatewayDefinition) and definition.servicer is not None
    return definition.servicer


def turns_ended(session: Session, turns: int) -> bool:
    return not session.running and sum(e.HasField("turn_end") for e in session.events) >= turns


async def meanwhile(client: AgentHostClient, folder: Path, gateway: GatewayServicer) -> None:
    """What happens beside the editor: after its second turn a person at the
    SDK (or the CLI, the web) switches back to "deep"; after the third the
    session's commands change. Nothing in the stack changes a session's
    commands yet (they are fixed), so the frame the gateway relays when they
    do is sent through its hub."""
    session = await the_editors_session(client, folder)
    await session.wait_until(lambda s: turns_ended(s, 2), WAIT_S)
    assert session.settings is not None and session.settings.model == "alt"
    await session.set_model("deep")
    await session.wait_until(lambda s: turns_ended(s, 3), WAIT_S)
    changed = gw.ConnectResponse(commands_changed=gw.CommandsChanged(session_id=session.id))
    gateway.hub.broadcast(LOCAL_ACCOUNT, changed)


@pytest.mark.timeout(3 * TIMEOUT_S)
async def test_an_editor_switches_models_and_sees_a_switch_made_elsewhere(
    tmp_path: Path, provider: FakeProvider
) -> None:
    node = tool("node")
    await install_dependencies(ACP_DIR)
    provider.enqueue(deep_answer(), deep_answer())
    catalog, alt = two_models(provider.url)
    folder = (tmp_path / "project").resolve()
    folder.mkdir()
    data_dir = tmp_path / "data"
    stack = EmbeddedStack(data_dir, port_override=0, model=catalog)
    await stack.start()
    try:
        gateway = stack.addresses["gateway"]
        env = {
            **os.environ,
            "AGENTHOST_GATEWAY": gateway,
            "AGENTHOST_DATA_DIR": str(data_dir),
            "ACP_PYTHON": sys.executable,
            "ACP_REPO": str(REPO),
            "ACP_WORKDIR": str(folder),
            "DEEP_REPLY": DEEP_REPLY,
            "ALT_REPLY": ALT_REPLY,
        }
        argv = [node, "--test", "--test-concurrency=1", "--test-reporter=tap", "models.test.mjs"]
        async with AgentHostClient(gateway, stack.token()) as client:
            editor = asyncio.create_task(run(argv, ACP_DIR, env, TIMEOUT_S))
            beside = asyncio.create_task(meanwhile(client, folder, gateway_servicer(stack)))
            assert_passed(*await editor, NODE_TESTS)
            await beside
            session = await the_editors_session(client, folder)

        # At the models: "deep" answered the first and third prompts, "alt" the second.
        assert (len(provider.requests), len(alt.requests)) == (2, 1)
        asked = [r.body["messages"][-1]["content"] for r in provider.requests]
        assert asked == ["first", "third"]
        log = SessionLogClient(stack.channel("sessionlog"))
        events = (await log.read(session.id, limit=1000)).events
        headers = [e.request_header.model for e in events if e.HasField("request_header")]
        assert headers == ["deepseek-chat", "builtin-alt", "deepseek-chat"]
    finally:
        await stack.stop()
