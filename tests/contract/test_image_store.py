"""The images a session's prompts send, kept by every backend of the
session log: content-addressed, checked by their bytes, readable only
through a session that holds them, kept by a fork, dropped with the last
session that holds them."""

from __future__ import annotations

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core import images
from services.common.errors import ImageNotFound, ImageRefused, SessionNotFound
from services.sessionlog.domain import SessionLog
from tests.support.events import user
from tests.support.images import JPEG_HEAD, NOT_AN_IMAGE, big_png, png
from tests.support.stores import OpenLog


def given(data: bytes, name: str = "") -> ev.ImageInput:
    return ev.ImageInput(data=data, name=name)


async def test_images_are_kept_by_digest_and_read_back_through_their_session(
    log: SessionLog,
) -> None:
    await log.create_session("s", "/w")
    shot, photo = png(), JPEG_HEAD
    refs = await log.put_images("s", [given(shot, "shot.png"), given(photo), given(shot)])
    assert [(r.media_type, r.size, r.name) for r in refs] == [
        ("image/png", len(shot), "shot.png"),
        ("image/jpeg", len(photo), ""),
        ("image/png", len(shot), ""),
    ]
    assert refs[0].digest == refs[2].digest == images.digest_of(shot)
    read = await log.read_image("s", refs[1].digest)
    assert (read.media_type, read.data) == ("image/jpeg", photo)
    # Sent again by its digest alone: the same reference, nothing re-sent.
    again = await log.put_images("s", [ev.ImageInput(digest=refs[0].digest, name="again.png")])
    assert (again[0].digest, again[0].size, again[0].name) == (
        refs[0].digest,
        len(shot),
        "again.png",
    )


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (NOT_AN_IMAGE, "not a PNG, JPEG, GIF or WebP"),
        (b"", "empty"),
        (big_png(images.MAX_IMAGE_BYTES + 1), "over the 5,242,880 (5.0 MB)"),
    ],
)
async def test_what_is_no_image_by_its_bytes_or_too_large_is_refused_and_nothing_kept(
    log: SessionLog, data: bytes, why: str
) -> None:
    await log.create_session("s", "/w")
    good = png()
    with pytest.raises(ImageRefused) as refused:
        await log.put_images("s", [given(good), given(data, "shot.png")])
    assert refused.value.status == "INVALID_ARGUMENT"
    assert why in refused.value.message
    assert refused.value.metadata["image"] == "shot.png"
    with pytest.raises(ImageNotFound):
        await log.read_image("s", images.digest_of(good))


async def test_a_prompt_sends_at_most_fifteen_megabytes_of_images(log: SessionLog) -> None:
    await log.create_session("s", "/w")
    heavy = [given(big_png(images.MAX_IMAGE_BYTES - n)) for n in range(4)]
    with pytest.raises(ImageRefused) as refused:
        await log.put_images("s", heavy)
    assert refused.value.message == (
        "cannot send image #4: the images of one prompt may have 15.0 MB together (20.0 MB here)"
    )
    assert len(await log.put_images("s", heavy[:3])) == 3


async def test_a_prompt_sends_at_most_twenty_images(log: SessionLog) -> None:
    await log.create_session("s", "/w")
    many = [given(png(rgb=(n, 0, 0))) for n in range(images.MAX_IMAGES + 1)]
    with pytest.raises(ImageRefused) as refused:
        await log.put_images("s", many)
    assert "at most 20 images" in refused.value.message
    assert len(await log.put_images("s", many[:-1])) == images.MAX_IMAGES


async def test_another_session_can_neither_read_nor_reference_an_image(log: SessionLog) -> None:
    await log.create_session("mine", "/w")
    await log.create_session("theirs", "/w")
    [ref] = await log.put_images("mine", [given(png())])
    with pytest.raises(ImageNotFound):
        await log.read_image("theirs", ref.digest)
    with pytest.raises(ImageNotFound):
        await log.put_images("theirs", [ev.ImageInput(digest=ref.digest)])
    with pytest.raises(SessionNotFound):
        await log.put_images("nobody", [given(png())])


async def test_a_fork_holds_its_sources_images_and_a_deletion_drops_only_its_own(
    reopen: OpenLog,
) -> None:
    log = await reopen()
    await log.create_session("src", "/w")
    shared, own = png(rgb=(1, 2, 3)), png(rgb=(4, 5, 6))
    [shared_ref, own_ref] = await log.put_images("src", [given(shared), given(own)])
    await log.append("src", [user("look")])
    await log.fork("src", new_session_id="fork")
    assert (await log.read_image("fork", own_ref.digest)).data == own
    await log.create_session("other", "/w")
    await log.put_images("other", [given(shared)])
    await log.append("other", [user("me too")])

    await log.delete_session("src")
    log = await reopen()  # kept across a restart
    assert (await log.read_image("fork", shared_ref.digest)).data == shared
    await log.delete_session("fork")
    with pytest.raises(ImageNotFound):
        await log.read_image("fork", own_ref.digest)
    # Still held by the session that sent the same bytes.
    assert (await log.read_image("other", shared_ref.digest)).data == shared
