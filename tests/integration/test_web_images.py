"""Images in the web client (clients/web/test/images.test.mjs) in Chromium,
against a stack run in this process whose default model takes images at
the fake provider: a pasted and a dropped image show as thumbnails, one is
taken out, the message sends the other, which reaches the provider as an
image part with its exact bytes (checked here), and the transcript shows
it. Needs node, npm and chromium; never skipped."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.agentruntime.models.tests.fake_provider import FakeProvider
from tests.support.browser import built_web_client, page_test
from tests.support.images import image_parts, images_provider, images_stack, png
from tests.support.node import INSTALL_TIMEOUT_S

BROWSER_TESTS = (
    "a pasted and a dropped image show as thumbnails, and one can be taken out",
    "the message sends the image, and the transcript shows it",
    "the page raised no errors",
)
BROWSER_TIMEOUT_S = 120


@pytest.fixture
async def provider() -> AsyncIterator[FakeProvider]:
    async with images_provider() as provider:
        yield provider


@pytest.mark.timeout(INSTALL_TIMEOUT_S * 2 + BROWSER_TIMEOUT_S)
async def test_an_image_pasted_in_the_browser_reaches_the_model(
    tmp_path: Path, provider: FakeProvider
) -> None:
    await built_web_client()
    workspace = (tmp_path / "project").resolve()
    workspace.mkdir()
    pictures = tmp_path / "images"
    pictures.mkdir()
    pasted, dropped = png(rgb=(200, 100, 0)), png(rgb=(0, 100, 200))
    (pictures / "pasted.png").write_bytes(pasted)
    (pictures / "dropped.png").write_bytes(dropped)
    async with images_stack(tmp_path, provider) as stack:
        env = {
            "AGENTHOST_PAGE_URL": f"{stack.web_url}/#token={stack.token()}",
            "AGENTHOST_WORKSPACE": str(workspace),
            "IMAGES_DIR": str(pictures),
        }
        await page_test("images.test.mjs", env, BROWSER_TESTS, BROWSER_TIMEOUT_S)
    (request,) = provider.requests
    assert image_parts(request.body) == [pasted]
