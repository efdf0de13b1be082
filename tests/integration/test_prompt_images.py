"""Images in prompts, through the gateway: stored apart and referenced by
the log, sent to a model that takes images as image parts (checked at the
fake provider), refused clearly otherwise, another account's never read or
referenced, carried by export and kept by a fork."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev
from google.protobuf import json_format

from agenthost_core import images
from services.agentruntime.models.builtin import BuiltinAdapter
from services.agentruntime.models.tests.fake_provider import (
    DONE,
    FakeProvider,
    ProviderReply,
    finish_chunk,
    text_chunk,
)
from tests.support.gateway import ALICE, BOB, Client, GatewayHarness
from tests.support.images import NOT_AN_IMAGE, image_parts, images_provider, images_stack, png
from tests.support.rpc import expect_rpc_error, reason_of


@pytest.fixture
async def provider() -> AsyncIterator[FakeProvider]:
    async with images_provider() as provider:
        yield provider


@pytest.fixture
async def gateway(tmp_path: Path, provider: FakeProvider) -> AsyncIterator[GatewayHarness]:
    async with images_stack(tmp_path, provider, {ALICE: "alice", BOB: "bob"}) as stack:
        harness = GatewayHarness(stack, BuiltinAdapter())
        try:
            yield harness
        finally:
            await harness.close()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


async def new_session(client: Client, folder: Path) -> str:
    reply = await client.stub.CreateSession(
        gw.CreateSessionRequest(cwd=str(folder), fence=client.fence())
    )
    return str(reply.session.id)


async def prompt(
    client: Client, session_id: str, text: str, *inputs: ev.ImageInput
) -> gw.PromptResponse:
    request = gw.PromptRequest(
        session_id=session_id, text=text, images=inputs, fence=client.fence()
    )
    reply: gw.PromptResponse = await client.stub.Prompt(request)
    return reply


async def turn_ended(client: Client, session_id: str) -> None:
    await client.next_frame(
        lambda f: (
            f.HasField("session_event")
            and f.session_event.session_id == session_id
            and f.session_event.event.HasField("turn_end")
        )
    )


async def logged(client: Client, session_id: str) -> list[ev.Event]:
    opened = await client.stub.OpenSession(gw.OpenSessionRequest(session_id=session_id))
    return list(opened.events)


def user_messages(events: list[ev.Event]) -> list[ev.UserMessage]:
    return [e.user_message for e in events if e.HasField("user_message")]


async def test_an_image_reaches_the_model_as_an_image_part_and_the_log_holds_its_reference(
    gateway: GatewayHarness, provider: FakeProvider, folder: Path
) -> None:
    alice = gateway.client(ALICE)
    await alice.connect()
    session = await new_session(alice, folder)
    shot = png(rgb=(10, 200, 30))
    await prompt(alice, session, "what is wrong here?", ev.ImageInput(data=shot, name="shot.png"))
    await turn_ended(alice, session)

    (request,) = provider.requests
    assert image_parts(request.body) == [shot]
    last_user = [m for m in request.body["messages"] if m["role"] == "user"][-1]
    assert last_user["content"][0] == {"type": "text", "text": "what is wrong here?"}

    events = await logged(alice, session)
    (message,) = user_messages(events)
    (ref,) = message.images
    assert (ref.digest, ref.media_type, ref.size, ref.name) == (
        images.digest_of(shot),
        "image/png",
        len(shot),
        "shot.png",
    )
    # The log holds the reference only; the bytes are read apart.
    assert not any(shot in e.SerializeToString() for e in events)
    read = await alice.stub.ReadImage(gw.ReadImageRequest(session_id=session, digest=ref.digest))
    assert (read.data, read.image.media_type) == (shot, "image/png")


async def test_an_at_path_naming_an_image_file_sends_it_as_an_image(
    gateway: GatewayHarness, provider: FakeProvider, folder: Path
) -> None:
    alice = gateway.client(ALICE)
    await alice.connect()
    session = await new_session(alice, folder)
    shot = png(rgb=(1, 1, 1))
    (folder / "shot.png").write_bytes(shot)
    await prompt(alice, session, "look at @shot.png please")
    await turn_ended(alice, session)
    assert image_parts(provider.requests[0].body) == [shot]
    (message,) = user_messages(await logged(alice, session))
    assert [i.name for i in message.images] == ["shot.png"] and not message.files


async def test_a_text_only_model_refuses_the_prompt_and_nothing_is_recorded(
    gateway: GatewayHarness, provider: FakeProvider, folder: Path
) -> None:
    alice = gateway.client(ALICE)
    session = await new_session(alice, folder)
    await alice.stub.UpdateSessionSettings(
        gw.UpdateSessionSettingsRequest(session_id=session, model="plain", fence=alice.fence())
    )
    before = await logged(alice, session)
    error = await expect_rpc_error(
        prompt(alice, session, "see", ev.ImageInput(data=png())),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert reason_of(error) == "MODEL_TAKES_NO_IMAGES"
    assert "'plain' takes no images" in (error.details() or "")
    assert await logged(alice, session) == before
    assert provider.requests == []
    # Without the image the same model is asked.
    await prompt(alice, session, "then just text")
    await alice.connect()


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (NOT_AN_IMAGE, "its bytes are not a PNG, JPEG, GIF or WebP image"),
        (
            png() + b"\x00" * images.MAX_IMAGE_BYTES,
            f"it has {len(png()) + images.MAX_IMAGE_BYTES:,} bytes, "
            "over the 5,242,880 (5.0 MB) an image may have",
        ),
    ],
)
async def test_bytes_that_are_no_image_or_too_large_are_refused_by_name(
    gateway: GatewayHarness, provider: FakeProvider, folder: Path, data: bytes, why: str
) -> None:
    alice = gateway.client(ALICE)
    session = await new_session(alice, folder)
    error = await expect_rpc_error(
        prompt(alice, session, "see", ev.ImageInput(data=data, name="shot.png")),
        grpc.StatusCode.INVALID_ARGUMENT,
    )
    assert reason_of(error) == "IMAGE_REFUSED"
    assert error.details() == f"cannot send image shot.png: {why}"
    assert await logged(alice, session) == []
    assert provider.requests == []


async def test_another_account_can_neither_read_nor_reference_an_image(
    gateway: GatewayHarness, folder: Path
) -> None:
    alice, bob = gateway.client(ALICE), gateway.client(BOB, client_id="bob")
    await alice.connect()
    hers = await new_session(alice, folder)
    shot = png(rgb=(9, 9, 9))
    await prompt(alice, hers, "mine", ev.ImageInput(data=shot))
    await turn_ended(alice, hers)
    digest = images.digest_of(shot)

    error = await expect_rpc_error(
        bob.stub.ReadImage(gw.ReadImageRequest(session_id=hers, digest=digest)),
        grpc.StatusCode.NOT_FOUND,
    )
    assert reason_of(error) == "SESSION_NOT_FOUND"
    his = await new_session(bob, folder)
    error = await expect_rpc_error(
        prompt(bob, his, "hers", ev.ImageInput(digest=digest)), grpc.StatusCode.NOT_FOUND
    )
    assert reason_of(error) == "IMAGE_NOT_FOUND"
    error = await expect_rpc_error(
        bob.stub.ReadImage(gw.ReadImageRequest(session_id=his, digest=digest)),
        grpc.StatusCode.NOT_FOUND,
    )
    assert reason_of(error) == "IMAGE_NOT_FOUND"


async def test_export_carries_the_image_and_a_fork_sends_it_again(
    gateway: GatewayHarness, provider: FakeProvider, folder: Path
) -> None:
    alice = gateway.client(ALICE)
    await alice.connect()
    session = await new_session(alice, folder)
    shot = png(rgb=(50, 60, 70))
    await prompt(alice, session, "keep this", ev.ImageInput(data=shot, name="shot.png"))
    await turn_ended(alice, session)

    lines = [
        json.loads(r.line)
        async for r in alice.stub.ExportSession(gw.ExportSessionRequest(session_id=session))
    ]
    (image,) = [line for line in lines if "image" in line]
    assert image["image"]["mediaType"] == "image/png"
    # The line is a ReadImageResponse: the bytes in base64.
    exported = json_format.ParseDict(image, gw.ReadImageResponse())
    assert exported.data == shot and exported.image.digest == images.digest_of(shot)
    at = next(i for i, line in enumerate(lines) if "userMessage" in line)
    assert lines.index(image) == at + 1  # right after the message that sent it

    fork = (
        await alice.stub.ForkSession(gw.ForkSessionRequest(session_id=session, fence=alice.fence()))
    ).session.id
    await prompt(alice, fork, "and now?")
    await turn_ended(alice, fork)
    # The fork's model reads its log afresh: the first message's image is in it.
    assert image_parts(provider.requests[-1].body) == [shot]
    read = await alice.stub.ReadImage(
        gw.ReadImageRequest(session_id=fork, digest=images.digest_of(shot))
    )
    assert read.data == shot
    # The fork sends it again by its digest alone.
    await prompt(alice, fork, "again", ev.ImageInput(digest=images.digest_of(shot)))
    await turn_ended(alice, fork)
    assert image_parts(provider.requests[-1].body) == [shot, shot]


async def test_an_image_queued_while_a_turn_runs_reaches_the_model_with_its_turn(
    gateway: GatewayHarness, provider: FakeProvider, folder: Path
) -> None:
    release = asyncio.Event()
    answered = provider.responder
    assert answered is not None
    held = ProviderReply(stream=[text_chunk("Thinking."), release, finish_chunk("stop"), DONE])
    provider.responder = lambda body: held if len(provider.requests) == 1 else answered(body)
    alice = gateway.client(ALICE)
    await alice.connect()
    session = await new_session(alice, folder)
    await prompt(alice, session, "first")
    shot = png(rgb=(7, 7, 7))
    request = gw.PromptRequest(
        session_id=session,
        text="then this",
        images=[ev.ImageInput(data=shot, name="later.png")],
        mode=rt.PROMPT_MODE_QUEUE,
        fence=alice.fence(),
    )
    assert (await alice.stub.Prompt(request)).mode == rt.PROMPT_MODE_QUEUE
    release.set()
    await turn_ended(alice, session)
    await turn_ended(alice, session)
    assert image_parts(provider.requests[0].body) == []
    assert image_parts(provider.requests[-1].body) == [shot]
    events = await logged(alice, session)
    (queued,) = [e.input_queued for e in events if e.HasField("input_queued")]
    assert [i.name for i in queued.message.images] == ["later.png"]
    assert [[i.name for i in m.images] for m in user_messages(events)] == [[], ["later.png"]]


async def test_a_session_resumed_after_a_restart_sends_its_images_again(
    tmp_path: Path, provider: FakeProvider, folder: Path
) -> None:
    shot = png(rgb=(3, 1, 4))
    accounts = {ALICE: "alice"}
    async with images_stack(tmp_path, provider, accounts) as stack:
        harness = GatewayHarness(stack, BuiltinAdapter())
        alice = harness.client(ALICE)
        await alice.connect()
        session = await new_session(alice, folder)
        await prompt(alice, session, "remember this", ev.ImageInput(data=shot))
        await turn_ended(alice, session)
        await harness.close()
    async with images_stack(tmp_path, provider, accounts) as stack:
        harness = GatewayHarness(stack, BuiltinAdapter())
        alice = harness.client(ALICE)
        await alice.connect()
        await prompt(alice, session, "what was it?")
        await turn_ended(alice, session)
        await harness.close()
    assert image_parts(provider.requests[-1].body) == [shot]
