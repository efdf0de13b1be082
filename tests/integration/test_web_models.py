"""The web client's model selector and usage figures in Chromium
(clients/web/test/models.test.mjs), against a stack run in this process with
two configured models: "deep" (the default) at an OpenAI-compatible provider
on loopback, and the built-in "alt", which answers ALT_REPLY; both have
prices. Two turns through the SDK first: the runtime records the usage the
provider reports, so the header has exact figures to show; the browser then
switches the model and the next answer comes from "alt" (its request header
records it). Needs node, npm and chromium;
never skipped."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest

from clients.sdk import AgentHostClient, Session
from services.agentruntime.models.builtin import BuiltinAdapter, ScriptedReply
from services.agentruntime.models.catalog import (
    ModelCatalog,
    ModelSpec,
    Prices,
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
from services.sessionlog.client import SessionLogClient
from tests.support.browser import built_web_client, page_test
from tests.support.node import INSTALL_TIMEOUT_S

ALT_REPLY = "Alt model here."
BROWSER_TESTS = (
    "the header shows the session's usage: the context in use and the cost",
    "the model selector lists the configured models, the session's selected",
    "the header's tooltip says the session's settings and where they came from",
    "choosing a model switches the session: the next answer comes from it",
    "the page raised no errors",
)
BROWSER_TIMEOUT_S = 120
WAIT_S = 10.0


def two_models(provider_url: str) -> tuple[ModelCatalog, BuiltinAdapter]:
    """ "deep" (the default) at an OpenAI-compatible provider, "alt" built in."""
    # The window the header shows is the one the runtime judges by.
    alt = BuiltinAdapter(
        [ScriptedReply(text=ALT_REPLY)], model="builtin-alt", context_window=128_000
    )
    priced = replace(spec_of_adapter(alt, "alt"), prices=Prices(1.0, 2.0))
    provider = ProviderSpec("fake", base_url=provider_url)
    deep = ModelSpec("deep", provider, "deepseek-chat", 128_000, 4000, Prices(1.0, 6.0))
    return ModelCatalog([deep, priced], adapters={"alt": alt}), alt


def answer(prompt: int, completion: int) -> ProviderReply:
    """An answer with the usage the provider reports for it."""
    return ProviderReply(
        stream=[text_chunk("Noted."), finish_chunk("stop"), usage_chunk(prompt, completion), DONE]
    )


def turn_ended(session: Session, turns: int) -> bool:
    """The session's `turns`th turn ended and its usage is folded."""
    ended = sum(e.HasField("turn_end") for e in session.events)
    return ended == turns and not session.running and getattr(session.usage, "requests", 0) == turns


@pytest.mark.timeout(INSTALL_TIMEOUT_S * 2 + BROWSER_TIMEOUT_S)
async def test_the_web_client_shows_usage_and_switches_models(
    tmp_path: Path, provider: FakeProvider
) -> None:
    await built_web_client()
    # Two requests as the provider reports them: the context is the last
    # one's (52.5k of 128k), the cost (60000 x $1 + 3000 x $6) / 1M = $0.078.
    provider.enqueue(answer(10_000, 500), answer(50_000, 2_500))
    catalog, alt = two_models(provider.url)
    workspace = tmp_path / "project"
    (workspace / ".agenthost").mkdir(parents=True)
    # The session's defaults: its sandbox from the workspace's settings file.
    settings_file = workspace / ".agenthost" / "settings.json"
    settings_file.write_text('{"sandbox": "read-only"}')
    stack = EmbeddedStack(tmp_path / "data", port_override=0, model=catalog)
    await stack.start()
    try:
        token = stack.token()
        async with AgentHostClient(stack.addresses["gateway"], token) as client:
            folder = await client.create_workspace(str(workspace))
            session = (await client.connect_workspace(folder.id)).session
            opened = await client.open_session(session.id)
            for turns, text in enumerate(("first", "second"), start=1):
                await opened.prompt(text)
                await opened.wait_until(partial(turn_ended, turns=turns), WAIT_S)
        env = {
            "AGENTHOST_PAGE_URL": f"{stack.web_url}/?session={session.id}#token={token}",
            "ALT_REPLY": ALT_REPLY,
            "SETTINGS_FILE": str(settings_file),
        }
        await page_test("models.test.mjs", env, BROWSER_TESTS, BROWSER_TIMEOUT_S)
        assert (len(alt.requests), len(provider.requests)) == (1, 2)
        log = SessionLogClient(stack.channel("sessionlog"))
        events = (await log.read(session.id, limit=1000)).events
        headers = [e.request_header.model for e in events if e.HasField("request_header")]
        assert headers == ["deepseek-chat", "deepseek-chat", "builtin-alt"]
    finally:
        await stack.stop()
