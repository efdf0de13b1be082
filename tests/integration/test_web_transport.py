"""The gateway's web port through connect-web's own transports, gRPC-Web
and Connect (tests/web_transport, a Node package of its own with pinned
versions): buf generates its protobuf-es stubs from the image `make gen`
writes (and google/rpc/error_details from the installed googleapis protos)
with the package's local protoc-gen-es, then its `node --test` suite runs
against `agenthost up`. Needs node and npm; never skipped. The stubs can come
from clients/ts once the TypeScript SDK generates them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2, duration_pb2
from google.rpc import error_details_pb2

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


def error_details_image(path: Path) -> Path:
    """google/rpc/error_details.proto (and what it imports) as an image for buf."""
    files = descriptor_pb2.FileDescriptorSet()
    for module in (duration_pb2, error_details_pb2):
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        files.file.append(proto)
    path.write_bytes(files.SerializeToString())
    return path


async def generate_stubs(work: Path) -> None:
    for image, only in (
        (IMAGE, []),
        (
            error_details_image(work / "error_details.binpb"),
            ["--path", "google/rpc/error_details.proto"],
        ),
    ):
        code, output = await run(
            [str(BUF), "generate", str(image), *only], PACKAGE, None, TIMEOUT_S
        )
        assert code == 0, f"buf generate {image.name} failed:\n{output}"


@pytest.mark.timeout(INSTALL_TIMEOUT_S + 3 * TIMEOUT_S)
async def test_connect_web_transports_against_the_gateway(tmp_path: Path) -> None:
    node = tool("node")
    assert IMAGE.exists(), "run `make gen` first"
    await install_dependencies(PACKAGE)
    await generate_stubs(tmp_path)
    data_dir = tmp_path / "data"
    async with agenthost_up(data_dir) as up:
        env = {
            **os.environ,
            "AGENTHOST_WEB_URL": str(up["web"]),
            "AGENTHOST_TOKEN": (data_dir / "token").read_text().strip(),
        }
        code, output = await run([node, "--test", "--test-reporter=tap"], PACKAGE, env, TIMEOUT_S)
        assert_passed(code, output, TRANSPORT_TESTS)
