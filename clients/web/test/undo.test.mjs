// Undo and subagents in the web client, in Debian's Chromium
// (playwright-core), against `agenthost up` whose built-in model plays
// undo-script.json: a turn that wrote a file shows the file with its diff
// and an Undo button that takes the file away (Redo asks before it
// overwrites a file the user made since); a task call shows its subagent,
// whose approval is answered in the page saying which subagent asks, and
// whose transcript opens from the call. Started by
// tests/integration/test_web_undo_agents.py with AGENTHOST_PAGE_URL,
// AGENTHOST_WORKSPACE and SCREENSHOT_DIR.

import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { byTestId, collectErrors, hasText, idle, keepFailureShots, launchBrowser, openNewSession, required, send, until } from "./page.mjs";

const BY = "tests/integration/test_web_undo_agents.py";
const PAGE_URL = required("AGENTHOST_PAGE_URL", BY);
const WORKSPACE = required("AGENTHOST_WORKSPACE", BY);
const SHOTS = required("SCREENSHOT_DIR", BY);
const NOTES = join(WORKSPACE, "notes.md");

let browser;
let page;
const pageErrors = [];

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  keepFailureShots(SHOTS, "undo-failed");
  browser = await launchBrowser();
  page = await browser.context.newPage();
  collectErrors(page, pageErrors);
  await page.goto(PAGE_URL);
  await openNewSession(page, WORKSPACE);
});

after(async () => {
  await browser?.close();
});

test("a turn's files show with their diff and undo; redo asks before overwriting", async () => {
  await send(page, "write the notes");
  await page.click(byTestId("approval-allow-once"));
  await hasText(page, "assistant-message", "Wrote the notes.");
  await idle(page);
  await hasText(page, "turn-file", "notes.md");
  const changes = page.locator(byTestId("turn-changes"));
  assert.equal(await changes.getAttribute("data-turn"), "1");
  await page.click(byTestId("turn-diff-toggle"));
  await hasText(page, "turn-diff", "+hello web");
  await page.screenshot({ path: join(SHOTS, "turn-changes.png"), fullPage: true });

  await page.click(byTestId("turn-undo"));
  await until(page, "the turn shown undone", () => document.querySelector('[data-testid="turn-changes"]')?.dataset.undone === "true");
  assert.equal(existsSync(NOTES), false);

  // The user writes the file again: redo asks, and leaving it keeps theirs.
  writeFileSync(NOTES, "mine\n");
  await page.click(byTestId("turn-redo"));
  await hasText(page, "turn-conflict", "notes.md");
  await page.click(byTestId("turn-keep"));
  await hasText(page, "notice", "Left alone");
  assert.equal(readFileSync(NOTES, "utf8"), "mine\n");
  // Nothing was redone: the turn stays undone, Redo still offered.
  assert.equal(await changes.getAttribute("data-undone"), "true");
  assert.equal(await page.locator(byTestId("turn-redo")).count(), 1);
  assert.deepEqual(pageErrors, []);
});

test("a subagent's approval is answered in the page and its transcript opens from its task call", async () => {
  await send(page, "count the files with a subagent");
  await hasText(page, "approval-asker", "Subagent general · count files asks");
  const parentId = await page.locator(byTestId("session")).getAttribute("data-session-id");
  await page.click(byTestId("approval-allow-once"));
  await hasText(page, "assistant-message", "The subagent is done.");
  await idle(page);
  const row = page.locator(byTestId("subagent"));
  await until(page, "the subagent shown done", () => document.querySelector('[data-testid="subagent"]')?.dataset.running === "false");
  const childId = await row.getAttribute("data-child-id");
  assert.ok(childId && childId !== parentId);
  await page.screenshot({ path: join(SHOTS, "subagent-row.png"), fullPage: true });

  await page.click(byTestId("subagent-open"));
  await until(page, "the subagent's transcript", (id) => document.querySelector('[data-testid="session"]')?.dataset.sessionId === id, childId);
  await hasText(page, "assistant-message", "The child counted the files.");
  await page.click(byTestId("back-to-parent"));
  await until(page, "the parent again", (id) => document.querySelector('[data-testid="session"]')?.dataset.sessionId === id, parentId);
  assert.deepEqual(pageErrors, []);
});
