"""Images over ACP: tests/acp/images.test.mjs drives `agenthost acp` with
the official client library against a stack run in this process, whose
default model takes images at a fake OpenAI-compatible provider. The editor
sees image prompts advertised; its `image` content block reaches the
provider as an image part with the exact bytes (checked here); bytes that
are no image, and a text-only model, are refused with their reasons."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.agentruntime.models.tests.fake_provider import FakeProvider
from tests.support.hosts import REPO
from tests.support.images import NOT_AN_IMAGE, image_parts, images_provider, images_stack, png
from tests.support.node import assert_passed, install_dependencies, run, tool

ACP_DIR = REPO / "tests" / "acp"
NODE_TESTS = (
    "the agent advertises image prompts",
    "an image content block reaches the model",
    "bytes that are no image are refused with their reason",
    "a session whose model takes no images refuses an image clearly",
    "every message the agent sent validates against the protocol's schema",
)
TIMEOUT_S = 120


@pytest.fixture
async def provider() -> AsyncIterator[FakeProvider]:
    async with images_provider() as provider:
        yield provider


@pytest.mark.timeout(3 * TIMEOUT_S)
async def test_an_editors_image_block_reaches_the_model(
    tmp_path: Path, provider: FakeProvider
) -> None:
    node = tool("node")
    await install_dependencies(ACP_DIR)
    folder = (tmp_path / "project").resolve()
    folder.mkdir()
    pictures = tmp_path / "images"
    pictures.mkdir()
    shot = png(rgb=(33, 66, 99))
    (pictures / "shot.png").write_bytes(shot)
    (pictures / "not-an-image.png").write_bytes(NOT_AN_IMAGE)
    async with images_stack(tmp_path, provider) as stack:
        env = {
            **os.environ,
            "AGENTHOST_GATEWAY": stack.addresses["gateway"],
            "AGENTHOST_DATA_DIR": str(tmp_path / "data"),
            "ACP_PYTHON": sys.executable,
            "ACP_REPO": str(REPO),
            "ACP_WORKDIR": str(folder),
            "ACP_IMAGES": str(pictures),
        }
        argv = [node, "--test", "--test-concurrency=1", "--test-reporter=tap", "images.test.mjs"]
        assert_passed(*await run(argv, ACP_DIR, env, TIMEOUT_S), NODE_TESTS)
    (request,) = provider.requests
    assert image_parts(request.body) == [shot]
    last = request.body["messages"][-1]["content"]
    assert last[0]["text"] == "what is wrong here? [image: shot.png]"
