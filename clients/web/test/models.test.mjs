// The web client's model selector and usage figures in a real browser
// (Debian's /usr/bin/chromium through playwright-core), against a stack with
// two configured models whose session already made two model requests (their
// usage as the provider reported it). Started by tests/integration/test_web_models.py with:
//   AGENTHOST_PAGE_URL  the page's address, the session in it (?session=…#token=…)
//   ALT_REPLY           what the second model ("alt") answers
//   SCREENSHOT_DIR      where each state's screenshot is written
//   SETTINGS_FILE       the workspace's .agenthost/settings.json the session's defaults came from
// Every wait is on a condition of the page, with a timeout.

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { byTestId, collectErrors, keepFailureShots, launchBrowser, required, send, until } from "./page.mjs";

const BY = "tests/integration/test_web_models.py";
const PAGE_URL = required("AGENTHOST_PAGE_URL", BY);
const ALT_REPLY = required("ALT_REPLY", BY);
const SHOTS = required("SCREENSHOT_DIR", BY);
const SETTINGS_FILE = required("SETTINGS_FILE", BY);

let browser;
let page;
const pageErrors = [];

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  keepFailureShots(SHOTS, "models-failed");
  browser = await launchBrowser();
  page = await browser.context.newPage();
  collectErrors(page, pageErrors, { consoleErrors: true });
  await page.goto(PAGE_URL);
});

after(async () => {
  await browser?.close();
});

test("the header shows the session's usage: the context in use and the cost", async () => {
  await until(page, "the usage figures", () => document.querySelector('[data-testid="usage"]')?.textContent === "ctx 41% · 52k/128k · $0.08");
  assert.equal(await page.getAttribute(byTestId("usage"), "data-context-tokens"), "52500");
  assert.match(await page.getAttribute(byTestId("usage"), "title"), /2 model requests: 60000 prompt tokens/);
  await page.screenshot({ path: join(SHOTS, "models-01-usage.png"), fullPage: true });
});

test("the model selector lists the configured models, the session's selected", async () => {
  await until(page, "the model selector", () => document.querySelector('[data-testid="model-select"]')?.getAttribute("data-current") === "deep");
  const options = await page.$$eval(`${byTestId("model-select")} option`, (all) => all.map((o) => [o.value, o.textContent]));
  assert.deepEqual(options, [
    ["deep", "deep (128k, $1.00/$6.00 per M)"],
    ["alt", "alt (128k, $1.00/$2.00 per M)"],
  ]);
});

test("the header's tooltip says the session's settings and where they came from", async () => {
  const title = await page.getAttribute(byTestId("model-picker"), "title");
  assert.ok(title.includes(`Sandbox read-only, approvals ask, network off: defaults from ${SETTINGS_FILE}.`), title);
});

test("choosing a model switches the session: the next answer comes from it", async () => {
  await page.selectOption(byTestId("model-select"), "alt");
  // The selector shows what the host holds (the settings projection).
  await until(page, "the session's model to be alt", () => document.querySelector('[data-testid="model-select"]')?.getAttribute("data-current") === "alt");
  await send(page, "which model are you?");
  await until(page, 
    "the alt model's answer",
    (text) => [...document.querySelectorAll('[data-testid="assistant-message"]')].some((e) => e.textContent.includes(text)),
    ALT_REPLY,
  );
  await page.screenshot({ path: join(SHOTS, "models-02-switched.png"), fullPage: true });
});

test("the page raised no errors", () => {
  assert.deepEqual(pageErrors, []);
});
