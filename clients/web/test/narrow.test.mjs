// The web client in a window 800 px wide (Debian's /usr/bin/chromium through
// playwright-core), against `agenthost up` whose built-in model plays
// narrow-script.json: a first token that is slow to come, a long reply.
// Started by tests/integration/test_web_narrow.py with:
//   AGENTHOST_PAGE_URL  the page's address as `agenthost up` printed it (#token=…)
//   AGENTHOST_WORKSPACE a folder to open as a workspace
//   SCREENSHOT_DIR      where each state's screenshot is written
// The steps share one stack and one script, so they run in order; every wait
// is on a condition of the page, with a timeout.

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { byTestId, collectErrors, hasText, idle, keepFailureShots, launchBrowser, openNewSession, required, send, until } from "./page.mjs";

const BY = "tests/integration/test_web_narrow.py";
const PAGE_URL = required("AGENTHOST_PAGE_URL", BY);
const WORKSPACE = required("AGENTHOST_WORKSPACE", BY);
const SHOTS = required("SCREENSHOT_DIR", BY);
// Both sessions start with it, so both get it as their title.
const TITLE = "fix the parser and the lexer and then the pretty printer as well";
const LAST_LINE = "The last line of the reply.";

let browser;
let page;
const pageErrors = [];

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  keepFailureShots(SHOTS, "narrow-failed");
  browser = await launchBrowser({ viewport: { width: 800, height: 600 } });
  page = await browser.context.newPage();
  collectErrors(page, pageErrors, { consoleErrors: true });
  await page.goto(PAGE_URL);
});

after(async () => {
  await browser?.close();
});

/** Where the element holding `text` is, against the transcript's visible box. */
function placeOf(text) {
  return page.evaluate((wanted) => {
    const box = document.querySelector('[data-testid="transcript"]').getBoundingClientRect();
    const message = [...document.querySelectorAll('[data-testid="assistant-message"]')].find((m) => m.textContent.includes(wanted));
    const line = [...message.querySelectorAll("p, li")].find((e) => e.textContent.includes(wanted)) ?? message;
    const rect = line.getBoundingClientRect();
    return { top: rect.top, bottom: rect.bottom, viewTop: box.top, viewBottom: box.bottom };
  }, text);
}

test("while the first token is awaited the transcript says so, and not once text comes", async () => {
  await openNewSession(page, WORKSPACE);
  await send(page, TITLE);
  await until(page, "the waiting indicator", () => document.querySelector('[data-testid="waiting"]') !== null);
  assert.match(await page.textContent(byTestId("waiting")), /Thinking/);
  await page.screenshot({ path: join(SHOTS, "narrow-01-waiting.png") });
  await page.click(byTestId("cancel"));
  await idle(page);
  assert.equal(await page.$(byTestId("waiting")), null);

  await send(page, "go on");
  await until(page, "the first words, and no waiting indicator", () => {
    const live = document.querySelector('[data-testid="live-text"]');
    return live?.textContent.includes("First words") && document.querySelector('[data-testid="waiting"]') === null;
  });
  await page.click(byTestId("cancel"));
  await idle(page);
});

test("two sessions of the same title are told apart in the sidebar by time and id", async () => {
  const first = await page.getAttribute(byTestId("session"), "data-session-id");
  await page.click(`[data-testid="workspace"][data-path="${WORKSPACE}"] ${byTestId("new-session")}`);
  await until(page, "a second session", (id) => document.querySelector('[data-testid="session"]')?.getAttribute("data-session-id") !== id, first);
  await send(page, TITLE);
  await hasText(page, "assistant-message", LAST_LINE);
  await idle(page);
  await until(page, "two rows of that title", (title) => [...document.querySelectorAll('[data-testid="session-title"]')].filter((t) => t.textContent === title).length === 2, TITLE);
  const rows = await page.$$eval(byTestId("session-row"), (all) =>
    all.map((row) => ({ id: row.getAttribute("data-session-id"), meta: row.querySelector('[data-testid="session-meta"]')?.textContent ?? "" })),
  );
  assert.equal(rows.length, 2);
  assert.notEqual(rows[0].meta, rows[1].meta);
  for (const row of rows) {
    assert.ok(row.meta.includes(row.id.slice(0, 8)), `${row.meta} names ${row.id}`);
    assert.match(row.meta, /\d{1,2}:\d{2}/, "and the time");
  }
});

test("at 800 px the sidebar and the heading keep each title on one row, the sidebar narrow", async () => {
  const sidebar = await page.$eval(byTestId("sidebar"), (e) => e.getBoundingClientRect().width);
  assert.ok(sidebar <= 240, `the sidebar is ${sidebar} px wide`);
  const rowsPerTitle = await page.$$eval(`${byTestId("session-title")}, ${byTestId("session-heading")}`, (titles) =>
    titles.map((title) => {
      const range = document.createRange();
      range.selectNodeContents(title);
      return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
    }),
  );
  assert.deepEqual(rowsPerTitle, [1, 1, 1]);
  assert.equal(await page.getAttribute(byTestId("session-heading"), "title"), TITLE);
  // The full title is a hover away.
  assert.equal(await page.getAttribute(`${byTestId("session-title")} >> nth=0`, "title"), TITLE);
  await page.screenshot({ path: join(SHOTS, "narrow-02-sidebar.png") });
});

test("a command's answer below the transcript leaves the last reply in view", async () => {
  const before = await placeOf(LAST_LINE);
  assert.ok(before.bottom <= before.viewBottom + 1 && before.top >= before.viewTop, JSON.stringify(before));
  await send(page, "/permissions");
  await hasText(page, "notice", "no permission rules");
  await until(page, "the last reply in view", (wanted) => {
    const box = document.querySelector('[data-testid="transcript"]').getBoundingClientRect();
    const message = [...document.querySelectorAll('[data-testid="assistant-message"]')].find((m) => m.textContent.includes(wanted));
    const line = [...message.querySelectorAll("p, li")].find((e) => e.textContent.includes(wanted));
    const rect = line.getBoundingClientRect();
    return rect.bottom <= box.bottom + 1 && rect.top >= box.top;
  }, LAST_LINE);
  const after = await placeOf(LAST_LINE);
  const strip = await page.$eval(byTestId("notice"), (e) => e.getBoundingClientRect());
  assert.ok(after.bottom <= strip.top, "the reply ends above the strip");
  await page.screenshot({ path: join(SHOTS, "narrow-03-command-reply.png") });
});

test("the page raised no errors", () => {
  assert.deepEqual(pageErrors, []);
});
