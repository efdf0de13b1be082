"""An MCP server's tool in `agenthost chat`: the workspace configures the
reference test server (and one that cannot start), the scripted model calls
its echo tool, the user approves it, the failed server gets a line, and /mcp
shows both from the `mcp` projection."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.integration.test_cli import chat, expect_all, running_up

EVERYTHING = (
    Path(__file__).resolve().parents[1]
    / "mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
SCRIPT = {
    "replies": [
        {"tool_calls": [{"name": "mcp__everything__echo", "args": {"message": "via mcp"}}]},
        {"text": "The server echoed it."},
    ]
}


def test_chat_approves_an_mcp_tool_and_shows_the_servers(tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node and EVERYTHING.is_file(), "needs node and `make mcp-test-servers`"
    project = tmp_path / "project"
    (project / ".agenthost").mkdir(parents=True)
    missing = {"command": str(tmp_path / "no-such-server")}
    everything = {"command": node, "args": [str(EVERYTHING)]}
    config = {"mcpServers": {"everything": everything, "missing": missing}}
    (project / ".agenthost/mcp.json").write_text(json.dumps(config))
    with running_up(tmp_path, SCRIPT) as up:
        child = chat(up, "--workspace", str(project))
        try:
            child.expect_exact(">")
            child.sendline("echo via the server")
            # A server that failed says so once the model request saw it.
            child.expect_exact("mcp: ")
            child.expect_exact("missing: ")
            child.expect_exact("no-such-server")
            child.expect_exact("Allow echo on MCP server everything")
            child.expect_exact("allow>")
            child.sendline("y")
            expect_all(
                child,
                "allowed once",
                "everything/echo: 13 characters",
                "assistant: The server echoed it.",
            )
            child.sendline("/mcp")
            child.expect_exact("everything: ")
            child.expect(r"ready, 1\d tools")
            child.expect_exact("(stdio workspace)")
            child.expect_exact("missing: ")
            child.expect_exact("failed: ")
        finally:
            child.sendline("/quit")
            child.close()
