"""Images in prompts as a user of the Python SDK sends them: bytes and a
file's path, reaching the fake provider as image parts; refused clearly by
a text-only model and for a file that is no image."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clients.sdk import (
    AgentHostClient,
    FailedPreconditionError,
    Image,
    InvalidArgumentError,
    Session,
)
from services.agentruntime.models.tests.fake_provider import FakeProvider
from services.embedded import EmbeddedStack
from tests.support.gateway import ALICE, BOB
from tests.support.images import (
    NOT_AN_IMAGE,
    big_png,
    image_parts,
    images_provider,
    images_stack,
    png,
)

WAIT_S = 10.0


@pytest.fixture
async def provider() -> AsyncIterator[FakeProvider]:
    async with images_provider() as provider:
        yield provider


@pytest.fixture
async def stack(tmp_path: Path, provider: FakeProvider) -> AsyncIterator[EmbeddedStack]:
    async with images_stack(tmp_path, provider, {ALICE: "alice", BOB: "bob"}) as stack:
        yield stack


@pytest.fixture
async def client(stack: EmbeddedStack) -> AsyncIterator[AgentHostClient]:
    async with AgentHostClient(stack.addresses["gateway"], token=ALICE) as client:
        yield client


async def new_session(client: AgentHostClient) -> Session:
    created = await client.create_session(cwd=tempfile.gettempdir())
    return await client.open_session(created.id)


async def turns_ended(session: Session, turns: int) -> None:
    await session.wait_until(
        lambda s: not s.running and sum(e.HasField("turn_end") for e in s.events) == turns,
        WAIT_S,
    )


async def test_bytes_and_a_path_reach_the_model_as_image_parts(
    client: AgentHostClient, provider: FakeProvider, tmp_path: Path
) -> None:
    session = await new_session(client)
    pasted, shot = png(rgb=(1, 2, 3)), png(rgb=(4, 5, 6))
    (tmp_path / "shot.png").write_bytes(shot)
    await session.prompt("compare these", images=[pasted, tmp_path / "shot.png"])
    await turns_ended(session, 1)
    assert image_parts(provider.requests[-1].body) == [pasted, shot]

    [message] = [e.user_message for e in session.events if e.HasField("user_message")]
    assert [(i.name, i.media_type, i.size) for i in message.images] == [
        ("", "image/png", len(pasted)),
        ("shot.png", "image/png", len(shot)),
    ]
    assert await session.read_image(message.images[1].digest) == ("image/png", shot)
    models = {m.name: m.images for m in await session.list_models()}
    assert models == {"eyes": True, "plain": False}

    # Sent again by digest (an Image), without its bytes.
    await session.prompt("the second again", images=[Image(digest=message.images[1].digest)])
    await turns_ended(session, 2)
    assert image_parts(provider.requests[-1].body) == [pasted, shot, shot]


async def test_a_text_only_model_and_a_file_that_is_no_image_are_refused(
    client: AgentHostClient, provider: FakeProvider, tmp_path: Path
) -> None:
    session = await new_session(client)
    document = tmp_path / "shot.png"
    document.write_bytes(NOT_AN_IMAGE)
    with pytest.raises(InvalidArgumentError) as refused:
        await session.prompt("see", images=[document])
    assert refused.value.reason == "IMAGE_REFUSED"
    assert refused.value.message == (
        "cannot send image shot.png: its bytes are not a PNG, JPEG, GIF or WebP image"
    )
    with pytest.raises(InvalidArgumentError) as refused:
        await session.prompt("see", images=[NOT_AN_IMAGE])  # the gateway's check
    assert refused.value.reason == "IMAGE_REFUSED"
    # Too heavy together for one call: refused before it is sent.
    with pytest.raises(InvalidArgumentError) as refused:
        await session.prompt("see", images=[big_png(5 * 1024 * 1024)] * 4)
    assert refused.value.reason == "IMAGE_REFUSED"
    assert "may have 15.0 MB together (20.0 MB here)" in refused.value.message

    await session.set_model("plain")
    with pytest.raises(FailedPreconditionError) as refused_model:
        await session.prompt("see", images=[png()])
    assert refused_model.value.reason == "MODEL_TAKES_NO_IMAGES"
    assert "takes no images" in refused_model.value.message
    assert not any(e.HasField("user_message") for e in session.events)
    assert provider.requests == []
