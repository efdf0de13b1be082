// The sidebar's search box (Debian's /usr/bin/chromium through
// playwright-core), against `agenthost up` whose built-in model echoes.
// Started by tests/integration/test_web_search.py with:
//   AGENTHOST_PAGE_URL  the page's address as `agenthost up` printed it (#token=…)
//   AGENTHOST_WORKSPACE a folder to open as a workspace
//   SCREENSHOT_DIR      where a failed wait's screenshot is written
// The steps share one stack, so they run in order; every wait is on a
// condition of the page, with a timeout.

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { after, before, test } from "node:test";
import { byTestId, collectErrors, hasText, idle, keepFailureShots, launchBrowser, openNewSession, required, send, until } from "./page.mjs";

const BY = "tests/integration/test_web_search.py";
const PAGE_URL = required("AGENTHOST_PAGE_URL", BY);
const WORKSPACE = required("AGENTHOST_WORKSPACE", BY);
const SHOTS = required("SCREENSHOT_DIR", BY);

let browser;
let page;
const pageErrors = [];
let searched;

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  keepFailureShots(SHOTS, "search-failed");
  browser = await launchBrowser();
  page = await browser.context.newPage();
  collectErrors(page, pageErrors, { consoleErrors: true });
  await page.goto(PAGE_URL);
});

after(async () => {
  await browser?.close();
});

async function sessionId() {
  return page.getAttribute(byTestId("session"), "data-session-id");
}

test("two sessions are worked in, the second prompt of the first naming a quokka", async () => {
  await openNewSession(page, WORKSPACE);
  await send(page, "fix the parser");
  await hasText(page, "assistant-message", "Echo: fix the parser");
  await idle(page);
  await send(page, "now port the quokka importer");
  await hasText(page, "assistant-message", "Echo: now port the quokka importer");
  await idle(page);
  searched = await sessionId();
  await page.click(`[data-testid="workspace"][data-path="${WORKSPACE}"] ${byTestId("new-session")}`);
  await until(page, "a second session", (id) => document.querySelector('[data-testid="session"]')?.getAttribute("data-session-id") !== id, searched);
  await send(page, "write the docs");
  await hasText(page, "assistant-message", "Echo: write the docs");
  await idle(page);
});

test("typing a word shows the sessions that said it, the word marked in the snippet", async () => {
  await page.fill(byTestId("session-search"), "quokka");
  await until(page, "one search hit", () => document.querySelectorAll('[data-testid="search-hit"]').length === 1);
  assert.equal(await page.getAttribute(byTestId("search-hit"), "data-session-id"), searched);
  assert.equal(await page.textContent(`${byTestId("search-snippet")} mark`), "quokka");
  assert.match(await page.textContent(byTestId("search-snippet")), /port the quokka importer/);
  assert.equal(await page.$(byTestId("workspace")), null, "the results stand in for the lists");
});

test("clicking a hit opens its session", async () => {
  await page.click(`${byTestId("search-hit")} button`);
  await until(page, "the found session open", (id) => document.querySelector('[data-testid="session"]')?.getAttribute("data-session-id") === id, searched);
  await hasText(page, "user-message", "now port the quokka importer");
});

test("a word no session said says so, and an empty box brings the lists back", async () => {
  await page.fill(byTestId("session-search"), "wombat");
  await until(page, "the empty result", () => document.querySelector('[data-testid="search-empty"]') !== null);
  assert.match(await page.textContent(byTestId("search-empty")), /wombat/);
  await page.fill(byTestId("session-search"), "");
  await until(page, "the workspace lists", () => document.querySelector('[data-testid="workspace"]') !== null);
  assert.equal(await page.$(byTestId("search-results")), null);
});

test("the page raised no errors", () => {
  assert.deepEqual(pageErrors, []);
});
