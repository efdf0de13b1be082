// Hooks in the web client, in Debian's Chromium (playwright-core), against
// `agenthost up` whose built-in model plays hooks-script.json in a project
// whose .claude/settings.json (Claude Code's format) has a UserPromptSubmit
// hook that fails and a PreToolUse guard on Bash that exits 2 for `rm -rf`:
// each run is a small row of the transcript where it ran, the failed one
// marked, and the rows are the session's (a reload shows them again).
// Started by tests/integration/test_web_hooks.py with AGENTHOST_PAGE_URL,
// AGENTHOST_WORKSPACE and SCREENSHOT_DIR.

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { byTestId, collectErrors, hasText, idle, keepFailureShots, launchBrowser, openNewSession, required, send, until } from "./page.mjs";

const BY = "tests/integration/test_web_hooks.py";
const PAGE_URL = required("AGENTHOST_PAGE_URL", BY);
const WORKSPACE = required("AGENTHOST_WORKSPACE", BY);
const SHOTS = required("SCREENSHOT_DIR", BY);
const BLOCKED = "hook PreToolUse: blocked the call (exit 2): rm -rf is not for this project";
const FAILED = "hook UserPromptSubmit: exit 1 (a non-blocking error): no ticket service here";

let browser;
let page;
const pageErrors = [];

/** The transcript's hook rows as "event decision failed? text", in order. */
function hookRows(page) {
  return page.$$eval('[data-testid="hook-run"]', (rows) =>
    rows.map((row) => `${row.dataset.event}|${row.dataset.decision}|${row.classList.contains("failed")}|${row.textContent}`),
  );
}

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  keepFailureShots(SHOTS, "hooks-failed");
  browser = await launchBrowser();
  page = await browser.context.newPage();
  collectErrors(page, pageErrors);
  await page.goto(PAGE_URL);
  await openNewSession(page, WORKSPACE);
});

after(async () => {
  await browser?.close();
});

test("each hook's run is a row of the transcript where it ran, and stays there", async () => {
  await send(page, "clean the build");
  await hasText(page, "assistant-message", "The hook refused it.");
  await idle(page);
  const expected = [`UserPromptSubmit||true|${FAILED}`, `PreToolUse|deny|false|${BLOCKED}`];
  assert.deepEqual(await hookRows(page), expected);
  // Where they ran: the prompt's before the message, the guard's after the call it refused.
  const order = await page.$$eval('[data-testid="transcript"] > *', (nodes) => nodes.map((n) => n.dataset.testid ?? ""));
  const at = (id, from = 0) => order.indexOf(id, from);
  assert.ok(at("hook-run") < at("user-message"), "the prompt's hook row comes before the prompt");
  assert.ok(at("user-message") < at("hook-run", at("user-message")), "the guard's row comes after the prompt");
  const guard = page.locator(byTestId("hook-run")).nth(1);
  assert.match(await guard.getAttribute("title"), /guard\.py/);
  await page.screenshot({ path: join(SHOTS, "hook-rows.png"), fullPage: true });

  await page.reload();
  await until(page, "the hook rows after a reload", () => document.querySelectorAll('[data-testid="hook-run"]').length === 2);
  assert.deepEqual(await hookRows(page), expected);
  assert.deepEqual(pageErrors, []);
});
