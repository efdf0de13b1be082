"""The gateway over TLS when a certificate and key are configured: the SDK
(and so the CLI, through AGENTHOST_GATEWAY_CA) works with the certificate
trusted, and a plaintext client or one that does not trust it gets nothing."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clients.cli.config import tls_roots
from clients.sdk import AgentHostClient, TransportError
from services.common.config import TlsFiles
from services.embedded import EmbeddedStack
from tests.support.folders import Folders


def self_signed(folder: Path) -> TlsFiles:
    """A certificate for 127.0.0.1 and localhost, made by openssl."""
    cert, key = folder / "gateway.pem", folder / "gateway.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return TlsFiles(cert, key)


@pytest.fixture
async def tls_stack(tmp_path: Path) -> AsyncIterator[tuple[EmbeddedStack, TlsFiles]]:
    files = self_signed(tmp_path)
    stack = EmbeddedStack(tmp_path / "data", port_override=0, gateway_tls=files)
    await stack.start()
    try:
        yield stack, files
    finally:
        await stack.stop()


async def test_the_sdk_trusting_the_certificate_talks_to_the_gateway_over_tls(
    tls_stack: tuple[EmbeddedStack, TlsFiles], folders: Folders
) -> None:
    stack, files = tls_stack
    roots = tls_roots({"AGENTHOST_GATEWAY_CA": str(files.cert)})
    async with AgentHostClient(
        stack.addresses["gateway"], stack.token(), tls_roots=roots
    ) as client:
        summary = await client.create_session(cwd=folders("/src/app"))
        assert [s.id for s in await client.list_sessions()] == [summary.id]


@pytest.mark.parametrize("trusted", [None, "other"])
async def test_a_client_that_does_not_speak_or_trust_its_tls_gets_nothing(
    tls_stack: tuple[EmbeddedStack, TlsFiles], tmp_path: Path, trusted: str | None
) -> None:
    stack, _ = tls_stack
    other = tmp_path / "other"
    other.mkdir()
    roots = None if trusted is None else self_signed(other).cert.read_bytes()
    with pytest.raises(TransportError):
        async with AgentHostClient(
            stack.addresses["gateway"], stack.token(), tls_roots=roots, call_timeout=3
        ) as client:
            await client.list_sessions()
