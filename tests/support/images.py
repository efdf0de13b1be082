"""Real images for tests: small PNG files made byte by byte (zlib, CRCs),
so a viewer opens them and every check by magic number knows them; and a
stack whose default model takes images, over the fake provider."""

from __future__ import annotations

import asyncio
import base64
import struct
import threading
import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from services.agentruntime.models.catalog import load_catalog
from services.agentruntime.models.tests.fake_provider import (
    DONE,
    FakeProvider,
    ProviderReply,
    finish_chunk,
    serving,
    text_chunk,
)
from services.embedded import EmbeddedStack
from services.gateway.accounts import TokenStore

# Not an image by its bytes, although a file of it may be named shot.png.
NOT_AN_IMAGE = b"%PDF-1.4\n% a document, not an image\n"
# The smallest JPEG-looking start (the checks look at magic numbers only).
JPEG_HEAD = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\xff\xd9"


def png(width: int = 4, height: int = 3, rgb: tuple[int, int, int] = (200, 30, 40)) -> bytes:
    """A `width` x `height` PNG of one colour (different colours: different digests)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    row = b"\x00" + bytes(rgb) * width
    pixels = zlib.compress(row * height)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def big_png(size: int) -> bytes:
    """PNG-looking bytes of `size` bytes (over a limit, say)."""
    head = png()
    return head + b"\x00" * max(size - len(head), 0)


# A models file of two models on one provider: "eyes" takes images (the
# default), "plain" does not.
MODELS_FILE = """
default = "eyes"

[providers.fake]
base_url = "{url}"

[models.eyes]
provider = "fake"
id = "eyes-1"
context_window = 64000
max_output_tokens = 4000
images = true

[models.plain]
provider = "fake"
id = "plain-1"
context_window = 64000
max_output_tokens = 4000
"""


def write_models_file(folder: Path, url: str) -> Path:
    path = folder / "models.toml"
    path.write_text(MODELS_FILE.format(url=url))
    return path


def seen(provider: FakeProvider) -> ProviderReply:
    """The provider's answer to every request: a short text."""
    return ProviderReply(stream=[text_chunk("I see it."), finish_chunk("stop"), DONE])


def image_parts(body: dict[str, Any]) -> list[bytes]:
    """The bytes of every image_url data part of a request's user messages."""
    found = []
    for message in body["messages"]:
        content = message.get("content")
        if message["role"] != "user" or not isinstance(content, list):
            continue
        for part in content:
            if part.get("type") == "image_url":
                url = part["image_url"]["url"]
                head, _, data = url.partition(",")
                assert head.startswith("data:image/") and head.endswith(";base64"), head
                found.append(base64.b64decode(data))
    return found


@asynccontextmanager
async def images_provider() -> AsyncIterator[FakeProvider]:
    """A fake OpenAI-compatible provider answering every request."""
    async with serving() as provider:
        provider.responder = lambda body: seen(provider)
        yield provider


@asynccontextmanager
async def images_stack(
    folder: Path, provider: FakeProvider, tokens: dict[str, str] | None = None
) -> AsyncIterator[EmbeddedStack]:
    """The embedded stack over the models file above (`tokens`: token ->
    account; none: the local account's token in its data folder)."""
    catalog = load_catalog(write_models_file(folder, provider.url), {})
    stack = EmbeddedStack(
        folder / "data",
        port_override=0,
        model=catalog,
        tokens=None if tokens is None else TokenStore(tokens),
    )
    await stack.start()
    try:
        yield stack
    finally:
        await stack.stop()


@contextmanager
def provider_thread() -> Iterator[FakeProvider]:
    """`images_provider` on a loop of its own thread, for a test that is no
    coroutine (one driving a terminal)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    provider = FakeProvider()
    provider.responder = lambda body: seen(provider)
    asyncio.run_coroutine_threadsafe(provider.start(), loop).result(timeout=30)
    try:
        yield provider
    finally:
        asyncio.run_coroutine_threadsafe(provider.stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()
