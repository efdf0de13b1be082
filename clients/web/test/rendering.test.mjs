// How the web client shows a session's work, in a real browser (Debian's
// /usr/bin/chromium through playwright-core) against `agenthost up` whose
// built-in model plays rendering-script.json in order: markdown with code and
// a table, a hostile reply that runs nothing, an edit approval with its
// context lines answered from the keyboard, a denied call, a plan sent back.
// Started by tests/integration/test_web_client.py with AGENTHOST_PAGE_URL,
// AGENTHOST_WORKSPACE (a folder holding app.py) and DOCS_DIR, where the
// screenshots the README shows are written (web-*.png).

import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { WAIT_MS, byTestId, collectErrors, hasText, idle, launchBrowser, openNewSession, required, send, until } from "./page.mjs";

const BY = "tests/integration/test_web_client.py";
const PAGE_URL = required("AGENTHOST_PAGE_URL", BY);
const WORKSPACE = required("AGENTHOST_WORKSPACE", BY);
const DOCS = required("DOCS_DIR", BY);

let browser;
let page;
const pageErrors = [];

before(async () => {
  browser = await launchBrowser({ viewport: { width: 1100, height: 720 } });
  page = await browser.context.newPage();
  collectErrors(page, pageErrors);
  await page.goto(PAGE_URL);
  await until(page, "the stream to connect", () => document.querySelector('[data-testid="connection"]')?.getAttribute("data-state") === "connected");
});

after(async () => {
  await browser?.close();
});

/** The last element with this test id, once one holds `text`. */
async function lastWith(testId, text) {
  await hasText(page, testId, text);
  return page.locator(byTestId(testId)).filter({ hasText: text }).last();
}

/** A screenshot for the README: the viewport only, kept small. */
function docsShot(name) {
  return page.screenshot({ path: join(DOCS, `web-${name}.png`) });
}

test("markdown shows as formatted text: a highlighted code block and a table", async () => {
  await openNewSession(page, WORKSPACE);
  await send(page, "Show me the fix");
  const message = await lastWith("assistant-message", "Here is");
  assert.equal(await message.locator("strong").textContent(), "the fix");
  assert.equal(await message.locator("p code").textContent(), "app.py");
  assert.equal(await message.locator("pre code").getAttribute("class"), "language-python");
  // The highlighter's chunk loads on demand, then colours the block.
  await until(page, "the code block highlighted", () => document.querySelector('[data-testid="assistant-message"] pre code .hljs-keyword')?.textContent === "def");
  assert.deepEqual(await message.locator("th").allTextContents(), ["file", "change"]);
  assert.deepEqual(await message.locator("td").allTextContents(), ["app.py", "return 2"]);
  assert.ok(!(await message.textContent()).includes("```"), "no fences shown");
  await idle(page);
  await docsShot("markdown");
});

test("a reply holding <script> and <img onerror> executes nothing and shows them as text", async () => {
  await send(page, "Say something risky");
  const message = await lastWith("assistant-message", "Careful");
  assert.match(await message.textContent(), /<script>window.__pwned = 'script'<\/script>/);
  assert.match(await message.textContent(), /<img src=x onerror=/);
  assert.equal(await message.locator("script, img, [onerror]").count(), 0);
  assert.equal(await message.locator('a[href^="javascript:"]').count(), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  await idle(page);
});

test("an edit approval shows the change with its context lines; y from the keyboard allows it", async () => {
  await send(page, "Fix the answer");
  const approval = page.locator(byTestId("tool-approval"));
  await approval.waitFor({ timeout: WAIT_MS });
  const lines = await approval.locator('[data-testid="approval-diff"] .diff-line').allTextContents();
  // app.py's lines 3-9: three lines of context either side of line 6.
  assert.deepEqual(lines, [
    "--- a/app.py",
    "+++ b/app.py",
    "@@ -3,7 +3,7 @@",
    " ",
    " ",
    " def answer():",
    "-    return 1",
    "+    return 2",
    " ",
    " ",
    " print(answer())",
  ]);
  await docsShot("approval");
  await page.keyboard.press("y");
  const row = page.locator(`${byTestId("tool-call")}[data-tool="edit_file"]`).last();
  await until(page, "the edit done", () => [...document.querySelectorAll('[data-testid="tool-call"][data-tool="edit_file"]')].some((e) => e.getAttribute("data-state") === "ok"));
  assert.match(await row.locator(byTestId("tool-summary")).textContent(), /edit app\.py \(\+1 -1\)/);
  assert.ok((await row.locator(byTestId("tool-diff")).textContent()).includes(" def answer():"));
  await lastWith("assistant-message", "Changed");
  await idle(page);
});

test("a command's row streams its output, then keeps its first lines with the rest a click away", async () => {
  await send(page, "Run it");
  await page.locator(byTestId("tool-approval")).waitFor({ timeout: WAIT_MS });
  await page.keyboard.press("y");
  await until(page, "the output streaming", () => (document.querySelector('[data-testid="tool-live-output"]')?.textContent ?? "").includes("line-12"));
  const row = page.locator(`${byTestId("tool-call")}[data-tool="shell"]`).last();
  await until(page, "the command done", () => document.querySelector('[data-testid="tool-call"][data-tool="shell"]')?.getAttribute("data-state") === "ok");
  const preview = await row.locator(byTestId("tool-result")).textContent();
  assert.ok(preview.includes("line-1\n") && !preview.includes("line-12"), preview);
  await row.locator(byTestId("tool-more")).click();
  assert.ok((await row.locator(byTestId("tool-result")).textContent()).includes("line-12"));
  await idle(page);
});

test("a denied call shows as denied, not failed; a plan sent back shows as kept planning", async () => {
  await send(page, "Clean up");
  await page.locator(byTestId("tool-approval")).waitFor({ timeout: WAIT_MS });
  await page.click(byTestId("approval-deny"));
  await until(page, "the call denied", () => [...document.querySelectorAll('[data-testid="tool-call"][data-tool="shell"]')].at(-1)?.getAttribute("data-state") === "denied");
  const row = page.locator(`${byTestId("tool-call")}[data-tool="shell"]`).last();
  assert.equal(await row.locator(byTestId("tool-state")).textContent(), "denied");
  assert.match(await row.locator(byTestId("tool-summary")).textContent(), /\$ rm -rf tests/);
  await idle(page);
  await send(page, "/plan Plan the tests");
  await page.locator(byTestId("plan-review")).waitFor({ timeout: WAIT_MS });
  const plan = page.locator(byTestId("plan-body"));
  assert.equal(await plan.locator("h1").textContent(), "Plan");
  assert.equal(await plan.locator("ol li code").first().textContent(), "answer()");
  await page.fill(byTestId("plan-feedback"), "Test the empty case too");
  await page.click(byTestId("plan-keep-planning"));
  await until(page, "the plan kept", () => document.querySelector('[data-testid="tool-call"][data-tool="exit_plan_mode"]')?.getAttribute("data-state") === "kept-planning");
  await lastWith("assistant-message", "I keep planning");
  await idle(page);
  await docsShot("tools");
});

test("the page raised no errors", () => {
  assert.deepEqual(pageErrors, []);
});
