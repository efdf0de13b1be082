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

from clients.sdk import (
    AgentHostClient,
    Backoff,
    ModelPrices,
    NotFoundError,
    UnknownModelError,
    Usage,
)
from services.agentruntime.models.builtin import BuiltinAdapter
from services.agentruntime.models.catalog import (
    ModelCatalog,
    Prices,
    load_catalog,
    spec_of_adapter,
)
from services.agentruntime.models.tests.fake_provider import (
    DONE,
    FakeProvider,
    ProviderReply,
    finish_chunk,
    serving,
    text_chunk,
    usage_chunk,
)
from services.embedded import EmbeddedStack
from services.gateway.accounts import TokenStore
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

        settings = await session.set_model("alt")
        assert settings.model == "alt"
        assert session.settings == settings  # at once, from the reply
        await session.prompt("hello")
        await session.wait_until(
            lambda s: not s.running and any(e.HasField("turn_end") for e in s.events), WAIT_S
        )
        assert len(models.alt.requests) == 1 and not models.echo.requests
        # The built-in model's estimated usage, priced at alt's prices.
        await session.wait_until(lambda s: s.usage is not None, WAIT_S)
        usage = session.usage
        assert usage is not None
        assert (usage.model, usage.requests, usage.estimated) == ("alt (builtin-alt)", 1, True)
        assert usage.context_window == models.alt.context_window and usage.prompt_tokens > 0
        expected = (usage.prompt_tokens * 1.0 + usage.completion_tokens * 2.0) / 1_000_000
        assert usage.cost == pytest.approx(expected)

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


MODELS_FILE = """
default = "deep"

[providers.one]
base_url = "{one}"
[providers.two]
base_url = "{two}"

[models.deep]
provider = "one"
id = "deepseek-chat"
context_window = 64000
max_output_tokens = 4000
[models.deep.prices]
input = 0.27
cached_input = 0.07
output = 1.10

[models.big]
provider = "two"
id = "big-1"
context_window = 200000
max_output_tokens = 8000
[models.big.prices]
input = 3.0
output = 15.0
"""


def answer(text: str, prompt: int, completion: int, cached: int, model: str) -> ProviderReply:
    """A streamed answer ending with the usage chunk providers send."""
    return ProviderReply(
        stream=[
            text_chunk(text),
            finish_chunk("stop"),
            usage_chunk(prompt, completion, cached, model=model),
            DONE,
        ]
    )


@pytest.fixture
async def providers() -> AsyncIterator[tuple[FakeProvider, FakeProvider]]:
    async with serving() as one, serving() as two:
        yield one, two


async def test_the_usage_totals_and_cost_are_the_sums_of_what_the_providers_reported(
    tmp_path: Path, providers: tuple[FakeProvider, FakeProvider]
) -> None:
    one, two = providers
    path = tmp_path / "models.toml"
    path.write_text(MODELS_FILE.format(one=one.url, two=two.url))
    catalog = load_catalog(path, {})
    stack = EmbeddedStack(
        tmp_path / "data", port_override=0, model=catalog, tokens=TokenStore({ALICE: "alice"})
    )
    await stack.start()
    # (prompt, completion, cached) as each provider reports them.
    first, second, third = (1200, 300, 1000), (2500, 120, 0), (40_000, 2000, 0)
    one.enqueue(
        answer("one", *first, model="deepseek-chat"),
        answer("two", *second, model="deepseek-chat-v3"),
    )
    two.enqueue(answer("three", *third, model="big-1"))
    try:
        async with AgentHostClient(stack.addresses["gateway"], token=ALICE) as client:
            created = await client.create_session(cwd=tempfile.gettempdir())
            session = await client.open_session(created.id)

            async def turn(text: str, turns: int) -> None:
                await session.prompt(text)
                await session.wait_until(
                    lambda s: (
                        not s.running
                        and sum(e.HasField("turn_end") for e in s.events) == turns
                        and s.usage is not None
                        and s.usage.requests == turns
                    ),
                    WAIT_S,
                )

            await turn("first", 1)
            await turn("second", 2)
            # /model: the next request goes to the other provider.
            await session.set_model("big")
            await turn("third", 3)
            assert (len(one.requests), len(two.requests)) == (2, 1)
            assert two.requests[0].body["model"] == "big-1"

            # Each request at its model's prices, cached input at its own.
            cost = (
                (200 * 0.27 + 1000 * 0.07 + 300 * 1.10)
                + (2500 * 0.27 + 120 * 1.10)
                + (40_000 * 3.0 + 2000 * 15.0)
            ) / 1_000_000
            usage = session.usage
            assert usage is not None and usage.cost == pytest.approx(cost)
            assert replace(usage, cost=None) == Usage(
                model="big (big-1)",
                context_tokens=42_000,
                context_window=200_000,
                context_share=42_000 / 200_000,
                prompt_tokens=1200 + 2500 + 40_000,
                completion_tokens=300 + 120 + 2000,
                cached_prompt_tokens=1000,
                requests=3,
                cost=None,
                estimated=False,
            )
            recorded = [e.model_usage.model for e in session.events if e.HasField("model_usage")]
            # The provider's id is shown when it differs from the file's name.
            assert recorded == ["deep (deepseek-chat)", "deep (deepseek-chat-v3)", "big (big-1)"]
    finally:
        await stack.stop()
