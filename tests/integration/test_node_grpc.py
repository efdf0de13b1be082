"""The gateway from Node the most common way: @grpc/grpc-js with stubs that
@grpc/proto-loader loads at run time from `gen/agenthost.binpb` (the way the
README's polyglot section shows). tests/node_grpc's `node --test` suite
creates a session, follows it with its cursor (a `map<string, int64>`,
which stubs loaded from a descriptor set take as {key, value} entries),
prompts it and reads the streamed answer, and gets a bad cursor refused as
INVALID_ARGUMENT. Needs node and npm; never skipped."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from tests.support.hosts import REPO
from tests.support.node import agenthost_up, assert_passed, install_dependencies, run, tool

SUITE_DIR = REPO / "tests" / "node_grpc"
DESCRIPTORS = REPO / "gen" / "agenthost.binpb"
NODE_TESTS = (
    "a session is created, followed with its cursor, prompted, and its answer streams",
    "a cursor that names no session id is INVALID_ARGUMENT before any frame",
)
TIMEOUT_S = 90


@pytest.mark.timeout(300)
async def test_node_grpc_js_with_proto_loader_calls_the_gateway(tmp_path: Path) -> None:
    node = tool("node")
    await install_dependencies(SUITE_DIR)
    workspace = tmp_path / "project"
    workspace.mkdir()
    data_dir = tmp_path / "data"
    async with agenthost_up(data_dir) as up:
        addresses = cast(dict[str, str], up["addresses"])
        env = {
            "PATH": str(Path(node).parent),
            "AGENTHOST_GATEWAY": addresses["gateway"],
            # The embedded default's bearer token, where `agenthost up` keeps it.
            "AGENTHOST_TOKEN": (data_dir / "token").read_text().strip(),
            "AGENTHOST_DESCRIPTORS": str(DESCRIPTORS),
            "AGENTHOST_WORKSPACE": str(workspace),
        }
        argv = [node, "--test", "--test-reporter=tap", "grpc.test.mjs"]
        assert_passed(*await run(argv, SUITE_DIR, env, TIMEOUT_S), NODE_TESTS)
