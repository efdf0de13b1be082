"""A server that failed stays shown as failed, with its reason, while it is
retried: a model request between two attempts tells the user what went
wrong, not a moment of "connecting". Over a real stdio server process."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from services.agentruntime.mcp.config import UNCONFINED, ServerConfig
from services.agentruntime.mcp.connection import McpConnection
from services.agentruntime.mcp.state import State

WAIT_S = 30.0

# First launch: complain and exit. Every later launch: say so through the
# FIFO (the test reads it), then hang as a server that never answers.
SERVER = """
import os, sys, time
marker, fifo = sys.argv[1], sys.argv[2]
if not os.path.exists(marker):
    open(marker, "w").close()
    sys.stderr.write("bad token: set API_TOKEN")
    sys.exit(2)
with open(fifo, "w") as relaunched:
    relaunched.write("again")
time.sleep(3600)
"""


async def test_a_failed_server_stays_failed_while_it_is_retried(tmp_path: Path) -> None:
    script, fifo = tmp_path / "server.py", tmp_path / "relaunched"
    script.write_text(SERVER)
    os.mkfifo(fifo)
    config = ServerConfig(
        name="flaky",
        scope="workspace",
        command=sys.executable,
        args=(str(script), str(tmp_path / "launched"), str(fifo)),
        sandbox=UNCONFINED,
    )
    connection = McpConnection(config, tmp_path)
    connection.start()
    try:
        async with asyncio.timeout(WAIT_S):
            failed = await connection.wait_for(State.FAILED)
            assert "bad token: set API_TOKEN" in failed.error
            # The retry has started the server again (it opened the FIFO).
            await asyncio.to_thread(fifo.read_text)
        assert connection.state == failed
    finally:
        await connection.close()
