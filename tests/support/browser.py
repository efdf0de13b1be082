"""The web client's page tests from pytest: the built page (`make web`),
Debian's Chromium that playwright-core drives (no browser is downloaded),
and one clients/web/test/*.test.mjs run with node's test runner, its
screenshots going to build/screenshots/."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from tests.support.hosts import REPO
from tests.support.node import INSTALL_TIMEOUT_S, assert_passed, run, tool

WEB_DIR = REPO / "clients" / "web"
SCREENSHOTS = REPO / "build" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")


def _need_chromium() -> None:
    """Fails (never skips) without the browser the machine should have."""
    assert CHROMIUM.is_file(), (
        f"{CHROMIUM} is missing: the web client's test needs Debian's chromium "
        "(run .ci/prepare-chromium, or apt-get install chromium)"
    )


async def built_web_client() -> None:
    """Chromium is there, node and npm are found, and `make web` built the
    page (the SDK first). Fails, never skips, without them."""
    _need_chromium()
    tool("node")
    tool("npm")
    code, output = await run([tool("make"), "web"], REPO, None, INSTALL_TIMEOUT_S * 2)
    assert code == 0, f"make web (the SDK, npm ci, tsc --noEmit, vite build) failed:\n{output}"


async def page_test(
    script: str, env: Mapping[str, str], names: tuple[str, ...], timeout_s: float
) -> None:
    """clients/web/test/`script` under node's test runner, with `env` and
    SCREENSHOT_DIR added to this process's environment: every test of it
    passed, and at least those `names`."""
    argv = [
        tool("node"),
        "--test",
        "--test-concurrency=1",
        "--test-reporter=tap",
        f"test/{script}",
    ]
    full_env = {**os.environ, "SCREENSHOT_DIR": str(SCREENSHOTS), **env}
    assert_passed(*await run(argv, WEB_DIR, full_env, timeout_s), names)
