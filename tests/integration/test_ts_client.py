"""The TypeScript SDK (clients/ts) against a running stack.

`make ts` installs its pinned npm packages (`npm ci`), generates its
protobuf-es stubs from gen/agenthost.binpb with `buf generate`, type-checks
it (`tsc --noEmit`) and compiles it; then its `node --test` suite runs
against a fresh stack whose built-in model is scripted with
clients/ts/test/builtin-script.json: streamed text and snapshots on
reconnect, a pending plan choice read from the stream, a resumed stream
with cursors, typed STALE and validation errors. Needs node and npm; never
skipped."""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

import pytest

from tests.support.hosts import REPO
from tests.support.images import NOT_AN_IMAGE, image_parts, images_provider, png
from tests.support.node import agenthost_up, assert_passed, run, tool

TS_DIR = REPO / "clients" / "ts"
# The built-in model's replies, in the order the TS tests prompt.
BUILTIN_SCRIPT = TS_DIR / "test" / "builtin-script.json"
# Two built-in models, so the suite can list and switch them.
MODELS_FILE = TS_DIR / "test" / "models.toml"
# TS tests that must have run (and passed).
TS_TESTS = (
    "setting plan mode shows on the stream and in PlanMode",
    "a streamed reply arrives as deltas before its logged message",
    "a reconnecting client and OpenSession get the text so far at offset 0",
    "a pending plan choice made by another client is read from the stream",
    "a resumed stream presents its cursor and delivers every event exactly once",
    "a request fenced while the client reconnects is applied after the reconnect, not STALE",
    "a request older than one applied is refused with a typed STALE error",
    "a plan read after this client's own plan write asks for that write or later",
    "an invalid request is refused with its field violations",
    "a session lists the configured models and switches its model; an unknown one is UNKNOWN_MODEL",
    "the usage value reads as figures and as the status line",
    "offsets count code points, not UTF-16 units (offline)",
    "pieces relayed after OpenSession's text so far but read before it are not lost",
    "replies, values and commits in any order end at the state of the highest seq",
    "bytes and a file reach a model that takes images; a text-only model and bytes that "
    "are no image are refused",
    "a turn's files show with its diff, and undo, redo and rewind put them back",
    "a task call's subagent is listed with its usage and its transcript opens",
    "a session is found by a word of its title, the word highlighted in the snippet",
)
# What the suite's models file adds: a model that takes images, served by
# the fake provider this test runs (it checks the image parts it received).
EYES_MODEL = """
[providers.images]
base_url = "{url}"

[models.eyes]
provider = "images"
id = "eyes-1"
context_window = 64000
max_output_tokens = 4000
images = true
"""
TIMEOUT_S = 60
BUILD_TIMEOUT_S = 300


@pytest.mark.timeout(BUILD_TIMEOUT_S + 3 * TIMEOUT_S)
async def test_ts_sdk_passes_its_suite_against_a_running_gateway(tmp_path: Path) -> None:
    node = tool("node")
    tool("npm")
    code, output = await run([tool("make"), "ts"], REPO, None, BUILD_TIMEOUT_S)
    assert code == 0, f"make ts (npm ci, buf generate, tsc) failed:\n{output}"
    data_dir = tmp_path / "data"
    pictures = tmp_path / "images"
    pictures.mkdir()
    pasted, shot = png(rgb=(12, 34, 56)), png(rgb=(65, 43, 21))
    (pictures / "pasted.png").write_bytes(pasted)
    (pictures / "shot.png").write_bytes(shot)
    (pictures / "not-an-image.png").write_bytes(NOT_AN_IMAGE)
    async with images_provider() as provider:
        models = tmp_path / "models.toml"
        models.write_text(MODELS_FILE.read_text() + EYES_MODEL.format(url=provider.url))
        stack_env = {
            "AGENTHOST_BUILTIN_SCRIPT": str(BUILTIN_SCRIPT),
            "AGENTHOST_MODELS_FILE": str(models),
        }
        async with agenthost_up(data_dir, stack_env) as up:
            addresses = cast(dict[str, str], up["addresses"])
            env = {
                **os.environ,
                "AGENTHOST_GATEWAY": addresses["gateway"],
                "AGENTHOST_TOKEN": (data_dir / "token").read_text().strip(),
                "AGENTHOST_IMAGES_DIR": str(pictures),
            }
            # One test file at a time: the prompting tests consume the script in order.
            argv = [node, "--test", "--test-concurrency=1", "--test-reporter=tap", "build/test/"]
            assert_passed(*await run(argv, TS_DIR, env, TIMEOUT_S), TS_TESTS)
        # The images test's prompt reached the provider with both images' bytes.
        assert [image_parts(r.body) for r in provider.requests] == [[pasted, shot]]
