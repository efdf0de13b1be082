// The MCP panel of the web client in Debian's Chromium (playwright-core),
// against `agenthost up` whose built-in model plays mcp-script.json: the
// workspace's .agenthost/mcp.json configures the reference test server, the
// model calls its echo tool, the approval card allows it, and the panel
// shows the server ready with its tools. Started by
// tests/integration/test_web_mcp.py with AGENTHOST_PAGE_URL,
// AGENTHOST_WORKSPACE and SCREENSHOT_DIR (as browser.test.mjs).

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";

const CHROMIUM = "/usr/bin/chromium";
const CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"];
const WAIT_MS = 30_000;
const PAGE_URL = process.env.AGENTHOST_PAGE_URL;
const WORKSPACE = process.env.AGENTHOST_WORKSPACE;
const SHOTS = process.env.SCREENSHOT_DIR;
const byTestId = (id) => `[data-testid="${id}"]`;

let context;
let profile;
const pageErrors = [];

before(async () => {
  assert.ok(PAGE_URL && WORKSPACE && SHOTS, "tests/integration/test_web_mcp.py sets the environment");
  mkdirSync(SHOTS, { recursive: true });
  profile = mkdtempSync(join(tmpdir(), "agenthost-chromium-"));
  context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS });
});

after(async () => {
  await context?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

test("an MCP tool is approved in the page and the panel shows its server", async () => {
  const page = await context.newPage();
  page.on("pageerror", (error) => pageErrors.push(String(error.stack ?? error)));
  await page.goto(PAGE_URL);
  await page.fill(byTestId("workspace-path"), WORKSPACE);
  await page.click(byTestId("add-workspace"));
  const workspace = `[data-testid="workspace"][data-path="${WORKSPACE}"]`;
  await page.waitForSelector(workspace, { timeout: WAIT_MS });
  await page.click(`${workspace} ${byTestId("new-session")}`);
  await page.waitForSelector(byTestId("session"), { timeout: WAIT_MS });
  // No server has been seen by a model request yet: no panel.
  assert.equal(await page.$(byTestId("mcp-panel")), null);

  await page.fill(byTestId("composer-input"), "echo through the server");
  await page.press(byTestId("composer-input"), "Enter");
  await page.waitForSelector(`${byTestId("tool-approval")}[data-tool="mcp__everything__echo"]`, { timeout: WAIT_MS });
  await page.click(byTestId("approval-allow-once"));
  await page.waitForSelector(`${byTestId("mcp-server")}[data-name="everything"][data-state="ready"]`, { timeout: WAIT_MS, state: "attached" });
  await page.click(`${byTestId("mcp-panel")} summary`);
  const line = await page.textContent(`${byTestId("mcp-server")}[data-name="everything"]`);
  assert.match(line ?? "", /ready, 1\d tools/);
  assert.match(line ?? "", /stdio · workspace/);
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid="assistant-message"]')].some((e) => e.textContent.includes("The server echoed it.")), undefined, { timeout: WAIT_MS });
  await page.screenshot({ path: join(SHOTS, "mcp-panel.png"), fullPage: true });
  assert.deepEqual(pageErrors, []);
});
