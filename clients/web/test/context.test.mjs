// What the agent knows of the project, in the web client in Debian's
// Chromium (playwright-core), against `agenthost up` whose built-in model
// plays context-script.json, then echoes what it is sent: the task list as a
// strip above the transcript while the turn changes it (it waits on a
// command's approval in between), and `@` in the composer offering the
// folder's paths, the file taken attached to the message. Started by
// tests/integration/test_web_context.py with AGENTHOST_PAGE_URL,
// AGENTHOST_WORKSPACE and SCREENSHOT_DIR.

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { byTestId, collectErrors, hasText, idle, keepFailureShots, launchBrowser, openNewSession, required, send, until } from "./page.mjs";

const BY = "tests/integration/test_web_context.py";
const PAGE_URL = required("AGENTHOST_PAGE_URL", BY);
const WORKSPACE = required("AGENTHOST_WORKSPACE", BY);
const SHOTS = required("SCREENSHOT_DIR", BY);

let browser;
let page;
const pageErrors = [];

/** The strip's items as "status content". */
function strip(page) {
  return page.$$eval('[data-testid="todo"]', (items) => items.map((i) => `${i.dataset.status} ${i.textContent.slice(2)}`));
}

function stripShows(page, done) {
  return until(page, `the task list with ${done} done`, (d) => document.querySelector('[data-testid="todos"]')?.dataset.done === String(d), done);
}

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  keepFailureShots(SHOTS, "context-failed");
  browser = await launchBrowser();
  page = await browser.context.newPage();
  collectErrors(page, pageErrors);
  await page.goto(PAGE_URL);
  await openNewSession(page, WORKSPACE);
});

after(async () => {
  await browser?.close();
});

test("the task list shows as a strip above the transcript as the turn changes it", async () => {
  assert.equal(await page.$(byTestId("todos")), null, "no strip before the agent keeps a list");
  await send(page, "fix the parser");
  await stripShows(page, 0);
  assert.deepEqual(await strip(page), ["in_progress Read the parser", "pending Fix the off-by-one"]);
  // The turn waits on the command's approval with the first list shown.
  await page.waitForSelector(byTestId("tool-approval"));
  const [todos, transcript] = await Promise.all([page.$(byTestId("todos")), page.$(byTestId("transcript"))]);
  assert.ok((await todos.boundingBox()).y < (await transcript.boundingBox()).y, "the strip is above the transcript");
  await page.screenshot({ path: join(SHOTS, "todos-strip.png"), fullPage: true });
  await page.click(byTestId("approval-allow-once"));
  await stripShows(page, 1);
  assert.deepEqual(await strip(page), ["completed Read the parser", "in_progress Fix the off-by-one"]);
  await hasText(page, "assistant-message", "Fixing it now.");
  await idle(page);

  // The list is the session's: a reload shows it again.
  await page.reload();
  await stripShows(page, 1);
});

test("typing @ offers the folder's paths and the file taken is attached", async () => {
  const input = byTestId("composer-input");
  await page.fill(input, "");
  await page.type(input, "explain @sr");
  await page.waitForSelector(`${byTestId("path-suggestion")}[data-path="src/"]`);
  await page.press(input, "Tab");
  await until(page, "the folder taken", () => document.querySelector('[data-testid="composer-input"]').value === "explain @src/");
  // The folder's files are offered next; a click takes one.
  await page.waitForSelector(`${byTestId("path-suggestion")}[data-path="src/app.py"]`);
  await page.screenshot({ path: join(SHOTS, "path-suggestions.png") });
  await page.click(`${byTestId("path-suggestion")}[data-path="src/app.py"]`);
  await until(page, "the file taken", () => document.querySelector('[data-testid="composer-input"]').value === "explain @src/app.py");
  await page.press(input, "Enter");
  await page.waitForSelector(`${byTestId("attached-file")}[data-path="src/app.py"]`);
  // The model was sent the file after the text (it echoes what it got).
  await hasText(page, "assistant-message", "return 41");
  await idle(page);

  // A file outside the project is refused, said, and the text is kept.
  await page.fill(input, "summarise @../outside.txt");
  await page.press(input, "Enter");
  await hasText(page, "error", "FILE_REFERENCE_REFUSED: cannot attach @../outside.txt");
  assert.equal(await page.inputValue(input), "summarise @../outside.txt");
  assert.deepEqual(pageErrors, []);
});
