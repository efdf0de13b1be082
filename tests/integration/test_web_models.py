"""The web client's model selector and usage figures in Chromium
(clients/web/test/models.test.mjs), against a stack run in this process with
two configured models: the built-in echo (the default) and "alt", which
answers ALT_REPLY and has prices. The session first records two model
requests' usage in its log, as the runtime does, so the header has figures
to show; the browser then switches the model and the next answer comes
from "alt" (its request header records it). Needs node, npm and chromium;
never skipped."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from clients.sdk import AgentHostClient
from services.agentruntime.models.builtin import BuiltinAdapter, ScriptedReply
from services.agentruntime.models.catalog import ModelCatalog, Prices, spec_of_adapter
from services.embedded import EmbeddedStack
from services.sessionlog.client import SessionLogClient
from tests.integration.test_web_client import CHROMIUM, SCREENSHOTS, WEB_DIR
from tests.support.node import INSTALL_TIMEOUT_S, assert_passed, run, tool

ALT_REPLY = "Alt model here."
BROWSER_TESTS = (
    "the header shows the session's usage: the context in use and the cost",
    "the model selector lists the configured models, the session's selected",
    "choosing a model switches the session: the next answer comes from it",
    "the page raised no errors",
)
BROWSER_TIMEOUT_S = 120


def two_models() -> tuple[ModelCatalog, BuiltinAdapter, BuiltinAdapter]:
    echo = BuiltinAdapter()
    alt = BuiltinAdapter([ScriptedReply(text=ALT_REPLY)], model="builtin-alt")
    priced = replace(spec_of_adapter(alt, "alt"), context_window=128_000, prices=Prices(1.0, 2.0))
    catalog = ModelCatalog(
        [spec_of_adapter(echo, "builtin"), priced], adapters={"builtin": echo, "alt": alt}
    )
    return catalog, echo, alt


def usage(prompt: int, completion: int, cost: float) -> ev.ModelUsage:
    return ev.ModelUsage(
        turn_id="t",
        model="builtin-echo",
        prompt_tokens=prompt,
        completion_tokens=completion,
        context_window=128_000,
        cost=cost,
    )


@pytest.mark.timeout(INSTALL_TIMEOUT_S * 2 + BROWSER_TIMEOUT_S)
async def test_the_web_client_shows_usage_and_switches_models(tmp_path: Path) -> None:
    assert CHROMIUM.is_file(), f"{CHROMIUM} is missing (apt-get install chromium)"
    node = tool("node")
    code, output = await run([tool("make"), "web"], WEB_DIR.parents[1], None, INSTALL_TIMEOUT_S * 2)
    assert code == 0, f"make web failed:\n{output}"
    catalog, echo, alt = two_models()
    workspace = tmp_path / "project"
    workspace.mkdir()
    stack = EmbeddedStack(tmp_path / "data", port_override=0, model=catalog)
    await stack.start()
    try:
        token = stack.token()
        async with AgentHostClient(stack.addresses["gateway"], token) as client:
            folder = await client.create_workspace(str(workspace))
            session = (await client.connect_workspace(folder.id)).session
        log = SessionLogClient(stack.channel("sessionlog"))
        recorded = [usage(10_000, 500, 0.05), usage(50_000, 2_500, 0.03)]
        await log.append(
            session.id,
            [ev.Event(id=f"usage-{n}", model_usage=u) for n, u in enumerate(recorded)],
        )
        env = {
            **os.environ,
            "AGENTHOST_PAGE_URL": f"{stack.web_url}/?session={session.id}#token={token}",
            "ALT_REPLY": ALT_REPLY,
            "SCREENSHOT_DIR": str(SCREENSHOTS),
        }
        argv = [node, "--test", "--test-reporter=tap", "test/models.test.mjs"]
        assert_passed(*await run(argv, WEB_DIR, env, BROWSER_TIMEOUT_S), BROWSER_TESTS)
        assert (len(alt.requests), len(echo.requests)) == (1, 0)
        events = (await log.read(session.id, limit=1000)).events
        headers = [e.request_header.model for e in events if e.HasField("request_header")]
        assert headers == ["builtin-alt"]
    finally:
        await stack.stop()
