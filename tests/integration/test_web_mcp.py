"""The web client's MCP panel in a real browser against `agenthost up`:
clients/web/test/mcp.test.mjs drives Debian's Chromium while the built-in
model plays clients/web/test/mcp-script.json and the workspace configures
the reference test server (tests/mcp, `make mcp-test-servers`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.support.browser import SCREENSHOTS, WEB_DIR, built_web_client, page_test
from tests.support.hosts import REPO
from tests.support.node import INSTALL_TIMEOUT_S, agenthost_up, run, tool

SCRIPT = WEB_DIR / "test" / "mcp-script.json"
EVERYTHING = REPO / "tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
BROWSER_TIMEOUT_S = 180


def _workspace_with_the_server(tmp_path: Path) -> Path:
    workspace = tmp_path / "project"
    (workspace / ".agenthost").mkdir(parents=True)
    server = {"command": shutil.which("node"), "args": [str(EVERYTHING)]}
    (workspace / ".agenthost/mcp.json").write_text(
        json.dumps({"mcpServers": {"everything": server}})
    )
    return workspace.resolve()


async def test_the_mcp_panel_in_chromium(tmp_path: Path) -> None:
    workspace = _workspace_with_the_server(tmp_path)
    await built_web_client()
    code, output = await run([tool("make"), "mcp-test-servers"], REPO, None, INSTALL_TIMEOUT_S)
    assert code == 0, output
    async with agenthost_up(tmp_path / "data", {"AGENTHOST_BUILTIN_SCRIPT": str(SCRIPT)}) as up:
        env = {"AGENTHOST_PAGE_URL": str(up["page"]), "AGENTHOST_WORKSPACE": str(workspace)}
        await page_test(
            "mcp.test.mjs",
            env,
            ("an MCP tool is approved in the page and the panel shows its server",),
            BROWSER_TIMEOUT_S,
        )
    assert (SCREENSHOTS / "mcp-panel.png").stat().st_size > 0
