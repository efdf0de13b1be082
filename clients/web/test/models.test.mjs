// The web client's model selector and usage figures in a real browser
// (Debian's /usr/bin/chromium through playwright-core), against a stack with
// two configured models whose session already made two model requests (their
// usage as the provider reported it). Started by tests/integration/test_web_models.py with:
//   AGENTHOST_PAGE_URL  the page's address, the session in it (?session=…#token=…)
//   ALT_REPLY           what the second model ("alt") answers
//   SCREENSHOT_DIR      where each state's screenshot is written
// Every wait is on a condition of the page, with a timeout.

import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";

const CHROMIUM = "/usr/bin/chromium";
const CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync"];
const WAIT_MS = 20_000;
const PAGE_URL = required("AGENTHOST_PAGE_URL");
const ALT_REPLY = required("ALT_REPLY");
const SHOTS = required("SCREENSHOT_DIR");

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (tests/integration/test_web_models.py sets it)`);
  return value;
}

let context;
let profile;
let page;
const pageErrors = [];

before(async () => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: install Debian's chromium`);
  mkdirSync(SHOTS, { recursive: true });
  profile = mkdtempSync(join(tmpdir(), "agenthost-chromium-"));
  context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS });
  page = await context.newPage();
  page.on("pageerror", (error) => pageErrors.push(String(error.stack ?? error)));
  page.on("console", (message) => message.type() === "error" && pageErrors.push(message.text()));
  await page.goto(PAGE_URL);
});

after(async () => {
  await context?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

async function until(what, condition, arg) {
  try {
    await page.waitForFunction(condition, arg, { timeout: WAIT_MS, polling: "raf" });
  } catch (error) {
    await page.screenshot({ path: join(SHOTS, `models-failed-${what.replace(/\W+/g, "-")}.png`), fullPage: true }).catch(() => undefined);
    throw new Error(`timed out waiting for ${what}: ${error.message}`);
  }
}

const byTestId = (id) => `[data-testid="${id}"]`;

test("the header shows the session's usage: the context in use and the cost", async () => {
  await until("the usage figures", () => document.querySelector('[data-testid="usage"]')?.textContent === "ctx 41% · 52k/128k · $0.08");
  assert.equal(await page.getAttribute(byTestId("usage"), "data-context-tokens"), "52500");
  assert.match(await page.getAttribute(byTestId("usage"), "title"), /2 model requests: 60000 prompt tokens/);
  await page.screenshot({ path: join(SHOTS, "models-01-usage.png"), fullPage: true });
});

test("the model selector lists the configured models, the session's selected", async () => {
  await until("the model selector", () => document.querySelector('[data-testid="model-select"]')?.getAttribute("data-current") === "deep");
  const options = await page.$$eval(`${byTestId("model-select")} option`, (all) => all.map((o) => [o.value, o.textContent]));
  assert.deepEqual(options, [
    ["deep", "deep (128k, $1.00/$6.00 per M)"],
    ["alt", "alt (128k, $1.00/$2.00 per M)"],
  ]);
});

test("choosing a model switches the session: the next answer comes from it", async () => {
  await page.selectOption(byTestId("model-select"), "alt");
  // The selector shows what the host holds (the settings projection).
  await until("the session's model to be alt", () => document.querySelector('[data-testid="model-select"]')?.getAttribute("data-current") === "alt");
  await page.fill(byTestId("composer-input"), "which model are you?");
  await page.press(byTestId("composer-input"), "Enter");
  await until(
    "the alt model's answer",
    (text) => [...document.querySelectorAll('[data-testid="assistant-message"]')].some((e) => e.textContent.includes(text)),
    ALT_REPLY,
  );
  await page.screenshot({ path: join(SHOTS, "models-02-switched.png"), fullPage: true });
});

test("the page raised no errors", () => {
  assert.deepEqual(pageErrors, []);
});
