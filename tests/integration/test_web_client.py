"""The web client (clients/web) in a real browser against `agenthost up`.

`make web` builds the page (the SDK first), `agenthost up` serves it on the
gateway's web port and prints its address with the token in the fragment,
and clients/web/test/browser.test.mjs drives it in Debian's Chromium
(/usr/bin/chromium, through playwright-core; no browser is downloaded) while
the built-in model plays clients/web/test/builtin-script.json: a workspace
and its reusable blank session, streamed text, /plan in the composer, a plan
choice pending during a turn and committed at the boundary, a reload
mid-turn, two tabs seeing each other's choices, the plan review, a
reconnect after missed choices, cancel, /compact's marker, /help and a
custom command of the workspace run with its arguments. A second stack
plays rendering-script.json for rendering.test.mjs: markdown, a hostile
reply, an edit's approval with context, tool rows (the README's screenshots,
docs/web-*.png).
Screenshots of each state go to build/screenshots/. Needs node, npm and
chromium (.ci/prepare-chromium installs it); never skipped."""

from __future__ import annotations

import asyncio
import gzip
import os
import re
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.support.browser import SCREENSHOTS, WEB_DIR, built_web_client, page_test
from tests.support.hosts import REPO
from tests.support.node import INSTALL_TIMEOUT_S, agenthost_up

BUILTIN_SCRIPT = WEB_DIR / "test" / "builtin-script.json"
BROWSER_TESTS = (
    "the page takes its token from the fragment and locks the composer until a workspace is chosen",
    "New Session opens one reusable blank session per workspace",
    "a prompt's answer streams in as live text, then is logged whole",
    "/plan and /plan off in the composer commit at once while idle",
    "plan mode chosen during a turn is pending until the next model request",
    "a reload mid-turn shows the same state",
    "a second tab on the session sees the pending choice, and its approval reaches the first",
    "the plan review card: approving in one tab leaves plan mode in both",
    "a plan choice made in one tab shows in the other",
    "after a reconnect a tab reads the state it missed",
    "always allow in the workspace: a permission rule both tabs list",
    "cancel stops a running turn",
    "/compact shows a compaction marker in both tabs",
    "/help lists the workspace's custom command, which runs with its arguments",
    "the pages raised no errors",
)
RENDERING_SCRIPT = WEB_DIR / "test" / "rendering-script.json"
RENDERING_TESTS = (
    "markdown shows as formatted text: a highlighted code block and a table",
    "a reply holding <script> and <img onerror> executes nothing and shows them as text",
    "an edit approval shows the change with its context lines; y from the keyboard allows it",
    "a command's row streams its output, then keeps its first lines with the rest a click away",
    "a denied call shows as denied, not failed; a plan sent back shows as kept planning",
    "the page raised no errors",
)
# The README's screenshots of the web client, made by rendering.test.mjs:
# into docs/ with AGENTHOST_UPDATE_DOCS=1, else beside the others (a test
# run leaves the checkout as it was).
DOCS = REPO / "docs" if os.environ.get("AGENTHOST_UPDATE_DOCS") == "1" else SCREENSHOTS
DOCS_SCREENSHOTS = ("web-markdown.png", "web-approval.png", "web-tools.png")
APP = "import os\nimport sys\n\n\ndef answer():\n    return 1\n\n\nprint(answer())\n"
# The page's scripts, each chunk gzipped: the first load stays light.
MAX_CHUNK_GZIP_BYTES = 300_000
SCREENSHOT_NAMES = (
    "03-streaming",
    "04-plan-pending",
    "05-after-reload",
    "07-plan-review",
    "10-permission-rule",
)
# A custom command of the workspace, in Claude Code's format.
REVIEW_COMMAND = (
    "---\ndescription: Review a file for one concern\nargument-hint: FILE CONCERN\n---\n"
    "Review $1, looking for $2 only.\n"
)
TIMEOUT_S = 60
BROWSER_TIMEOUT_S = 240


def _page_html(url: str) -> str:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as reply:  # loopback only
        return str(reply.read().decode())


@pytest.mark.timeout(INSTALL_TIMEOUT_S * 2 + BROWSER_TIMEOUT_S + TIMEOUT_S)
async def test_web_client_in_chromium(tmp_path: Path) -> None:
    await built_web_client()
    workspace = tmp_path / "project"
    (workspace / ".agenthost" / "commands").mkdir(parents=True)
    (workspace / ".agenthost" / "commands" / "review.md").write_text(REVIEW_COMMAND)
    data_dir = tmp_path / "data"
    async with agenthost_up(data_dir, {"AGENTHOST_BUILTIN_SCRIPT": str(BUILTIN_SCRIPT)}) as up:
        page = str(up["page"])
        token = (data_dir / "token").read_text().strip()
        assert page == f"{up['web']}/#token={token}"
        assert '<div id="root">' in await asyncio.to_thread(_page_html, str(up["web"]))
        env = {"AGENTHOST_PAGE_URL": page, "AGENTHOST_WORKSPACE": str(workspace.resolve())}
        await page_test("browser.test.mjs", env, BROWSER_TESTS, BROWSER_TIMEOUT_S)
        for name in SCREENSHOT_NAMES:
            assert (SCREENSHOTS / f"{name}.png").stat().st_size > 0
        assert (workspace / "notes.txt").read_text() == "notes\n"
        await _cli_turn_runs_under_the_web_rule(up, workspace, data_dir)


async def _cli_turn_runs_under_the_web_rule(
    up: dict[str, object], workspace: Path, data_dir: Path
) -> None:
    """The workspace rule granted in the browser is honoured by a turn the
    CLI starts in a new session of that workspace: no question is asked
    (piped, the chat would meet an `allow>` prompt, read EOF and leave), the
    command runs (confined), and the chat leaves once the turn ended. Then
    the CLI's /permissions lists the rule and revokes it."""
    assert (workspace / "checks.txt").read_text() == "ok\n"
    addresses = up["addresses"]
    assert isinstance(addresses, dict)
    gateway = str(addresses["gateway"])
    output = await _chat(workspace, data_dir, gateway, "run the checks again")
    assert "The checks ran again." in output and "allow>" not in output, output
    assert (workspace / "checks.txt").read_text() == "ok\nok --again\n"

    listed = await _chat(workspace, data_dir, gateway, "/permissions")
    rule = re.search(r"(rule-[0-9a-f]+)\s+workspace\s+\$ echo ok >> checks.txt", listed)
    assert rule is not None, listed
    revoked = await _chat(workspace, data_dir, gateway, f"/permissions revoke {rule[1]}")
    assert f"revoked {rule[1]}" in revoked, revoked
    assert "no permission rules" in await _chat(workspace, data_dir, gateway, "/permissions")


async def _chat(workspace: Path, data_dir: Path, gateway: str, line: str) -> str:
    """`agenthost chat --workspace` with one line piped in; what it printed."""
    chat = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "clients.cli",
        "chat",
        "--workspace",
        str(workspace),
        "--data-dir",
        str(data_dir),
        "--gateway",
        gateway,
        cwd=REPO,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    said, _ = await asyncio.wait_for(chat.communicate(f"{line}\n".encode()), TIMEOUT_S)
    output = said.decode(errors="replace")
    assert chat.returncode == 0, output
    return output


@pytest.mark.timeout(INSTALL_TIMEOUT_S * 2 + BROWSER_TIMEOUT_S + TIMEOUT_S)
async def test_web_client_renders_markdown_diffs_and_tool_rows_in_chromium(tmp_path: Path) -> None:
    """Markdown, code and tables formatted; a hostile reply inert; an edit's
    approval with its context; denied and kept-planning calls told apart."""
    await built_web_client()
    for chunk in (WEB_DIR / "dist" / "assets").glob("*.js"):
        size = len(gzip.compress(chunk.read_bytes()))
        assert size < MAX_CHUNK_GZIP_BYTES, f"{chunk.name} is {size} bytes gzipped"
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "app.py").write_text(APP)
    async with agenthost_up(
        tmp_path / "data", {"AGENTHOST_BUILTIN_SCRIPT": str(RENDERING_SCRIPT)}
    ) as up:
        env = {
            "AGENTHOST_PAGE_URL": str(up["page"]),
            "AGENTHOST_WORKSPACE": str(workspace.resolve()),
            "DOCS_DIR": str(DOCS),
        }
        await page_test("rendering.test.mjs", env, RENDERING_TESTS, BROWSER_TIMEOUT_S)
    for name in DOCS_SCREENSHOTS:
        assert (DOCS / name).stat().st_size > 0
    assert "return 2" in (workspace / "app.py").read_text()
