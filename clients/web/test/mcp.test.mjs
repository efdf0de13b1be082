// The MCP panel of the web client in Debian's Chromium (playwright-core),
// against `agenthost up` whose built-in model plays mcp-script.json: the
// workspace's .agenthost/mcp.json configures the reference test server, the
// model calls its echo tool, the approval card allows it, and the panel
// shows the server ready with its tools. Started by
// tests/integration/test_web_mcp.py with AGENTHOST_PAGE_URL,
// AGENTHOST_WORKSPACE and SCREENSHOT_DIR (as browser.test.mjs).

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { byTestId, collectErrors, hasText, launchBrowser, openNewSession, required, send } from "./page.mjs";

const BY = "tests/integration/test_web_mcp.py";
const PAGE_URL = required("AGENTHOST_PAGE_URL", BY);
const WORKSPACE = required("AGENTHOST_WORKSPACE", BY);
const SHOTS = required("SCREENSHOT_DIR", BY);
// Starting the reference server (npx) takes longer than a page update.
const WAIT_MS = 30_000;

let browser;
const pageErrors = [];

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  browser = await launchBrowser();
});

after(async () => {
  await browser?.close();
});

test("an MCP tool is approved in the page and the panel shows its server", async () => {
  const page = await browser.context.newPage();
  collectErrors(page, pageErrors);
  await page.goto(PAGE_URL);
  await openNewSession(page, WORKSPACE, WAIT_MS);
  // No server has been seen by a model request yet: no panel.
  assert.equal(await page.$(byTestId("mcp-panel")), null);

  await send(page, "echo through the server", { timeout: WAIT_MS });
  await page.waitForSelector(`${byTestId("tool-approval")}[data-tool="mcp__everything__echo"]`, { timeout: WAIT_MS });
  await page.click(byTestId("approval-allow-once"));
  await page.waitForSelector(`${byTestId("mcp-server")}[data-name="everything"][data-state="ready"]`, { timeout: WAIT_MS, state: "attached" });
  await page.click(`${byTestId("mcp-panel")} summary`);
  const line = await page.textContent(`${byTestId("mcp-server")}[data-name="everything"]`);
  assert.match(line ?? "", /ready, 1\d tools/);
  assert.match(line ?? "", /stdio · workspace/);
  await hasText(page, "assistant-message", "The server echoed it.", { timeout: WAIT_MS });
  await page.screenshot({ path: join(SHOTS, "mcp-panel.png"), fullPage: true });
  assert.deepEqual(pageErrors, []);
});
