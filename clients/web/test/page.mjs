// What every browser test of the web client shares: Debian's Chromium
// launched through playwright-core (nothing is downloaded), waits on a
// condition of the page with a timeout that says what it waited for, and
// the page actions every test repeats.

import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const CHROMIUM = "/usr/bin/chromium";
const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-quic",
  "--no-first-run",
  "--disable-component-update",
  "--disable-sync",
];
export const WAIT_MS = 20_000;

export const byTestId = (id) => `[data-testid="${id}"]`;

// Where a wait that timed out leaves a screenshot of its page (none: unset).
let failureShots;

/** Keep a screenshot of the page in `dir` (named `${prefix}-<what>.png`) whenever a wait times out. */
export function keepFailureShots(dir, prefix = "failed") {
  failureShots = { dir, prefix };
}

/** An environment variable the test's pytest side sets (`by` names it). */
export function required(name, by) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (${by} sets it)`);
  return value;
}

/** A fresh Chromium profile; `close()` ends the browser and removes the profile. */
export async function launchBrowser(options = {}) {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: install Debian's chromium (.ci/prepare-chromium runs apt-get install chromium)`);
  const profile = mkdtempSync(join(tmpdir(), "agenthost-chromium-"));
  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS, ...options });
  const close = async () => {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  };
  return { context, close };
}

/**
 * Collects what went wrong in `page` into `errors`: uncaught exceptions and
 * dialogs always, console errors when `consoleErrors` is set (those that
 * `expected(text)` accepts are left out).
 */
export function collectErrors(page, errors, { consoleErrors = false, expected = () => false } = {}) {
  page.on("pageerror", (error) => errors.push(String(error.stack ?? error)));
  page.on("dialog", (dialog) => {
    errors.push(`a dialog opened: ${dialog.message()}`);
    void dialog.dismiss();
  });
  if (consoleErrors) {
    page.on("console", (message) => {
      if (message.type() === "error" && !expected(message.text())) errors.push(message.text());
    });
  }
}

/** Waits until `condition(arg)` holds in the page; a timeout says what was awaited. */
export async function until(page, what, condition, arg, { timeout = WAIT_MS } = {}) {
  try {
    await page.waitForFunction(condition, arg, { timeout, polling: "raf" });
  } catch (error) {
    if (failureShots) {
      const path = join(failureShots.dir, `${failureShots.prefix}-${what.replace(/\W+/g, "-")}.png`);
      await page.screenshot({ path, fullPage: true }).catch(() => undefined);
    }
    throw new Error(`timed out waiting for ${what}: ${error.message}`);
  }
}

/** Types `text` into the composer and sends it; done once the composer took it. */
export async function send(page, text, options) {
  await page.fill(byTestId("composer-input"), text);
  await page.press(byTestId("composer-input"), "Enter");
  await until(page, `the composer to take "${text}"`, () => document.querySelector('[data-testid="composer-input"]')?.value === "", undefined, options);
}

/** Until no turn runs in the open session. */
export function idle(page, options) {
  return until(page, "the turn to end", () => document.querySelector('[data-testid="session"]') && !document.querySelector('[data-testid="turn-running"]'), undefined, options);
}

/** Until an element with this test id holds `text`. */
export function hasText(page, testId, text, options) {
  return until(page, `${testId} with "${text}"`, ([id, t]) => [...document.querySelectorAll(`[data-testid="${id}"]`)].some((e) => e.textContent.includes(t)), [testId, text], options);
}

/** Adds the workspace at `path` in the sidebar and opens a new session in it. */
export async function openNewSession(page, path, timeout = WAIT_MS) {
  await page.fill(byTestId("workspace-path"), path);
  await page.click(byTestId("add-workspace"));
  const workspace = `[data-testid="workspace"][data-path="${path}"]`;
  await page.waitForSelector(workspace, { timeout });
  await page.click(`${workspace} ${byTestId("new-session")}`);
  await page.waitForSelector(byTestId("session"), { timeout });
}
