"""The gateway's web port through connect-web's own transports, gRPC-Web
and Connect (tests/web_transport, a Node package of its own with pinned
versions): buf generates its protobuf-es stubs from the image `make gen`
writes (google/rpc/error_details included) with the package's local
protoc-gen-es, then its `node --test` suite runs
against `agenthost up`. Needs node and npm; never skipped. The stubs can come
from clients/ts once the TypeScript SDK generates them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.support.hosts import REPO
from tests.support.node import (
    INSTALL_TIMEOUT_S,
    agenthost_up,
    assert_passed,
    install_dependencies,
    run,
    tool,
)

PACKAGE = REPO / "tests" / "web_transport"
IMAGE = REPO / "gen" / "agenthost.binpb"
BUF = Path(sys.executable).parent / "buf"
TRANSPORT_TESTS = tuple(
    f"{transport}: {name}"
    for transport in ("gRPC-Web", "Connect")
    for name in (
        "a unary call with the bearer token",
        "a call without a token is unauthenticated",
        "a validation error carries its violations and reason",
        "the Connect stream delivers a session event as it happens",
        "a stale generation gets the STALE reason",
    )
)
TIMEOUT_S = 60


async def generate_stubs() -> None:
    code, output = await run([str(BUF), "generate", str(IMAGE)], PACKAGE, None, TIMEOUT_S)
    assert code == 0, f"buf generate {IMAGE.name} failed:\n{output}"


@pytest.mark.timeout(INSTALL_TIMEOUT_S + 3 * TIMEOUT_S)
async def test_connect_web_transports_against_the_gateway(tmp_path: Path) -> None:
    node = tool("node")
    assert IMAGE.exists(), "run `make gen` first"
    await install_dependencies(PACKAGE)
    await generate_stubs()
    data_dir = tmp_path / "data"
    async with agenthost_up(data_dir) as up:
        env = {
            **os.environ,
            "AGENTHOST_WEB_URL": str(up["web"]),
            "AGENTHOST_TOKEN": (data_dir / "token").read_text().strip(),
        }
        code, output = await run([node, "--test", "--test-reporter=tap"], PACKAGE, env, TIMEOUT_S)
        assert_passed(code, output, TRANSPORT_TESTS)
