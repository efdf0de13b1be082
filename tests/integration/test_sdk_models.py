"""Models and usage through the gateway with the Python SDK: the configured
models listed, a session's model switched (and refused when unknown), the
`usage` projection as the session's `usage`."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.sessionlog.v1 import events_pb2 as ev

from clients.sdk import (
    AgentHostClient,
    Backoff,
    ModelPrices,
    NotFoundError,
    UnknownModelError,
    Usage,
)
from services.agentruntime.models.builtin import BuiltinAdapter
from services.agentruntime.models.catalog import ModelCatalog, Prices, spec_of_adapter
from services.embedded import EmbeddedStack
from services.gateway.accounts import TokenStore
from services.sessionlog.client import SessionLogClient
from tests.support.gateway import ALICE, BOB

WAIT_S = 10.0


class Models:
    def __init__(self) -> None:
        self.echo = BuiltinAdapter()
        self.alt = BuiltinAdapter(model="builtin-alt")
        priced = replace(spec_of_adapter(self.alt, "alt"), prices=Prices(1.0, 2.0, 0.5))
        self.catalog = ModelCatalog(
            [spec_of_adapter(self.echo, "builtin"), priced],
            adapters={"builtin": self.echo, "alt": self.alt},
        )


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[tuple[EmbeddedStack, Models]]:
    models = Models()
    stack = EmbeddedStack(
        tmp_path,
        port_override=0,
        model=models.catalog,
        tokens=TokenStore({ALICE: "alice", BOB: "bob"}),
    )
    await stack.start()
    try:
        yield stack, models
    finally:
        await stack.stop()


async def test_a_session_lists_and_switches_models_and_sees_its_usage(
    stack: tuple[EmbeddedStack, Models],
) -> None:
    embedded, models = stack
    client = AgentHostClient(
        embedded.addresses["gateway"], token=ALICE, backoff=Backoff(initial_s=0.02, max_s=0.2)
    )
    try:
        created = await client.create_session(cwd=tempfile.gettempdir())
        session = await client.open_session(created.id)
        listed = await session.list_models()
        assert [(m.name, m.provider_model, m.is_default) for m in listed] == [
            ("builtin", "builtin-echo", True),
            ("alt", "builtin-alt", False),
        ]
        assert listed[0].prices is None and listed[1].prices == ModelPrices(1.0, 2.0, 0.5)
        await session.wait_until(lambda s: s.settings is not None, WAIT_S)
        assert session.settings is not None and session.settings.model == ""
        assert session.usage is None  # no request yet

        # What the runtime records per model request, folded by the projection.
        log = SessionLogClient(embedded.channel("sessionlog"))
        used = ev.ModelUsage(
            turn_id="t",
            model="builtin-alt",
            prompt_tokens=52_000,
            completion_tokens=500,
            cached_prompt_tokens=2000,
            context_window=128_000,
            cost=0.0531,
        )
        await log.append(created.id, [ev.Event(id="usage-1", model_usage=used)])
        await session.wait_until(lambda s: s.usage is not None, WAIT_S)
        assert session.usage == Usage(
            model="builtin-alt",
            context_tokens=52_500,
            context_window=128_000,
            context_share=52_500 / 128_000,
            prompt_tokens=52_000,
            completion_tokens=500,
            cached_prompt_tokens=2000,
            requests=1,
            cost=0.0531,
            estimated=False,
        )
        settings = await session.set_model("alt")
        assert settings.model == "alt"
        await session.wait_until(
            lambda s: s.settings is not None and s.settings.model == "alt", WAIT_S
        )
        await session.prompt("hello")
        await session.wait_until(
            lambda s: not s.running and any(e.HasField("turn_end") for e in s.events), WAIT_S
        )
        assert len(models.alt.requests) == 1 and models.echo.requests == []

        last = session.last_seq
        with pytest.raises(UnknownModelError) as refused:
            await session.set_model("gpt-9")
        assert refused.value.reason == "UNKNOWN_MODEL"
        assert refused.value.metadata["known"] == "builtin,alt"
        assert (await client.open_session(created.id)).settings == settings
        assert session.last_seq == last

    finally:
        await client.close()


async def test_another_account_neither_lists_nor_switches_a_sessions_model(
    stack: tuple[EmbeddedStack, Models],
) -> None:
    embedded, _ = stack
    address = embedded.addresses["gateway"]
    async with (
        AgentHostClient(address, token=ALICE) as alice,
        AgentHostClient(address, token=BOB) as bob,
    ):
        created = await alice.create_session(cwd=tempfile.gettempdir())
        with pytest.raises(NotFoundError):
            await bob.list_models(created.id)
        request = gw.UpdateSessionSettingsRequest(
            fence=bob.fence(), session_id=created.id, model="alt"
        )
        with pytest.raises(NotFoundError):
            await bob.call(bob.stub.UpdateSessionSettings, request)
        session = await alice.open_session(created.id)
        await session.wait_until(lambda s: s.settings is not None, WAIT_S)
        assert session.settings is not None and session.settings.model == ""
