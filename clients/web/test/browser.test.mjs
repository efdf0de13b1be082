// The built web client in a real browser (Debian's /usr/bin/chromium through
// playwright-core; nothing is downloaded), against `agenthost up` whose
// built-in model plays builtin-script.json in order. Started by
// tests/integration/test_web_client.py with:
//   AGENTHOST_PAGE_URL  the page's address as `agenthost up` printed it (#token=…)
//   AGENTHOST_WORKSPACE a folder to open as a workspace
//   SCREENSHOT_DIR      where each state's screenshot is written
// The steps share one stack and one script, so they run in order; every wait
// is on a condition of the page, with a timeout.

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { WAIT_MS, byTestId, collectErrors, hasText, idle, keepFailureShots, launchBrowser, openNewSession, required, send, until } from "./page.mjs";

const BY = "tests/integration/test_web_client.py";
const PAGE_URL = required("AGENTHOST_PAGE_URL", BY);
const WORKSPACE = required("AGENTHOST_WORKSPACE", BY);
const SHOTS = required("SCREENSHOT_DIR", BY);

let browser;
let context;
let tabA;
let tabB;
let sessionId;
const pageErrors = [];

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  keepFailureShots(SHOTS);
  browser = await launchBrowser();
  context = browser.context;
});

after(async () => {
  await browser?.close();
});

// -- helpers --------------------------------------------------------------------------

function shot(page, name) {
  return page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

/** The plan chip's state as the page shows it: {active, pending} ("none" when nothing waits). */
function planChipIs(page, what, active, pending) {
  return until(
    page,
    what,
    ([a, p]) => {
      const chip = document.querySelector('[data-testid="plan-chip"]');
      return chip?.getAttribute("data-active") === a && chip?.getAttribute("data-pending") === p;
    },
    [String(active), String(pending)],
  );
}

async function openPage() {
  const page = await context.newPage();
  // Requests failing while a test keeps a tab offline are expected.
  collectErrors(page, pageErrors, { consoleErrors: true, expected: (text) => text.includes("ERR_INTERNET_DISCONNECTED") });
  await page.goto(PAGE_URL);
  await until(page, "the stream to connect", () => document.querySelector('[data-testid="connection"]')?.getAttribute("data-state") === "connected");
  return page;
}

function gone(page, testId) {
  return until(page, `${testId} to go`, (id) => !document.querySelector(`[data-testid="${id}"]`), testId);
}

// -- the steps ------------------------------------------------------------------------

test("the page takes its token from the fragment and locks the composer until a workspace is chosen", async () => {
  tabA = await openPage();
  assert.ok(!tabA.url().includes("token"), `the token stays in the address: ${tabA.url()}`);
  assert.equal(await tabA.getAttribute(byTestId("composer"), "data-locked"), "true");
  assert.ok(await tabA.isDisabled(byTestId("composer-input")));
  await shot(tabA, "01-no-session");
});

test("New Session opens one reusable blank session per workspace", async () => {
  await openNewSession(tabA, WORKSPACE);
  const workspace = `[data-testid="workspace"][data-path="${WORKSPACE}"]`;
  sessionId = await tabA.getAttribute(byTestId("session"), "data-session-id");
  assert.equal(await tabA.getAttribute(byTestId("composer"), "data-locked"), "false");
  await tabA.click(`${workspace} ${byTestId("new-session")}`);
  await until(tabA, "the same blank session again", () => document.querySelectorAll('[data-testid="session-row"]').length === 1);
  assert.equal(await tabA.getAttribute(byTestId("session"), "data-session-id"), sessionId);
  assert.match(await tabA.textContent(byTestId("session-title")), /New Session/);
  await shot(tabA, "02-blank-session");
});

test("a prompt's answer streams in as live text, then is logged whole", async () => {
  await send(tabA, "Tell me a story");
  await until(tabA, "streamed text", () => (document.querySelector('[data-testid="live-text"]')?.textContent ?? "").length > 0);
  const first = (await tabA.textContent(byTestId("live-text"))) ?? "";
  await until(tabA, "more streamed text", (n) => (document.querySelector('[data-testid="live-text"]')?.textContent ?? "").length > n, first.length);
  await shot(tabA, "03-streaming");
  await hasText(tabA, "assistant-message", "so that the next person would not have to read them all again.");
  await idle(tabA);
  await gone(tabA, "live-text");
  assert.doesNotMatch(await tabA.textContent(byTestId("session-title")), /New Session/);
});

test("/plan and /plan off in the composer commit at once while idle", async () => {
  await send(tabA, "/plan");
  await planChipIs(tabA, "plan mode on, committed", true, "none");
  await send(tabA, "/plan off");
  await planChipIs(tabA, "plan mode off, committed", false, "none");
});

test("plan mode chosen during a turn is pending until the next model request", async () => {
  await send(tabA, "Write notes.txt");
  await tabA.waitForSelector(byTestId("tool-approval"), { timeout: WAIT_MS });
  await tabA.waitForSelector(byTestId("turn-running"), { timeout: WAIT_MS });
  await tabA.click(byTestId("plan-toggle"));
  await planChipIs(tabA, "a pending plan choice", false, true);
  await tabA.waitForSelector(`[data-session-id="${sessionId}"] ${byTestId("marker-plan-pending")}`, { timeout: WAIT_MS });
  await shot(tabA, "04-plan-pending");
});

test("a reload mid-turn shows the same state", async () => {
  await tabA.reload();
  await until(tabA, "the session to reopen", (id) => document.querySelector('[data-testid="session"]')?.getAttribute("data-session-id") === id, sessionId);
  await planChipIs(tabA, "the pending choice after the reload", false, true);
  await tabA.waitForSelector(byTestId("tool-approval"), { timeout: WAIT_MS });
  await tabA.waitForSelector(byTestId("turn-running"), { timeout: WAIT_MS });
  await hasText(tabA, "user-message", "Write notes.txt");
  await shot(tabA, "05-after-reload");
});

test("a second tab on the session sees the pending choice, and its approval reaches the first", async () => {
  tabB = await openPage();
  await tabB.click(`[data-testid="session-row"][data-session-id="${sessionId}"] button`);
  await planChipIs(tabB, "the pending choice in tab B", false, true);
  await tabB.click(byTestId("approval-allow-once"));
  await gone(tabA, "tool-approval");
  // The next model request's boundary commits the choice: both tabs show it.
  await planChipIs(tabA, "plan mode committed at the boundary (tab A)", true, "none");
  await planChipIs(tabB, "plan mode committed at the boundary (tab B)", true, "none");
  await shot(tabA, "06-committed-at-boundary-tab-a");
  await shot(tabB, "06-committed-at-boundary-tab-b");
});

test("the plan review card: approving in one tab leaves plan mode in both", async () => {
  await tabA.waitForSelector(byTestId("plan-review"), { timeout: WAIT_MS });
  await tabB.waitForSelector(byTestId("plan-review"), { timeout: WAIT_MS });
  assert.match(await tabA.textContent(byTestId("plan-body")), /Summarise it/);
  await shot(tabA, "07-plan-review");
  await tabA.click(byTestId("plan-approve"));
  await gone(tabB, "plan-review");
  await planChipIs(tabB, "plan mode left after approval (tab B)", false, "none");
  await hasText(tabB, "assistant-message", "The plan is approved");
  await idle(tabA);
  await idle(tabB);
  await shot(tabB, "08-plan-approved-tab-b");
});

test("a plan choice made in one tab shows in the other", async () => {
  await tabB.click(byTestId("plan-toggle"));
  await planChipIs(tabA, "tab B's choice in tab A", true, "none");
  await send(tabA, "/plan off");
  await planChipIs(tabB, "tab A's /plan off in tab B", false, "none");
});

test("after a reconnect a tab reads the state it missed", async () => {
  // Tab A loses the network (its stream breaks); tab B chooses meanwhile.
  const network = await context.newCDPSession(tabA);
  const conditions = { latency: 0, downloadThroughput: -1, uploadThroughput: -1 };
  await network.send("Network.emulateNetworkConditions", { ...conditions, offline: true });
  // Emulation fails new requests only: cut the stream so it has to come back.
  await tabA.click(byTestId("reconnect"));
  await until(tabA, "tab A to lose its stream", () => document.querySelector('[data-testid="connection"]')?.getAttribute("data-state") !== "connected");
  await tabB.click(byTestId("plan-toggle"));
  await planChipIs(tabB, "tab B's choice while tab A is offline", true, "none");
  await network.send("Network.emulateNetworkConditions", { ...conditions, offline: false });
  await until(tabA, "tab A to reconnect", () => document.querySelector('[data-testid="connection"]')?.getAttribute("data-state") === "connected");
  await planChipIs(tabA, "the choice tab A missed", true, "none");
  await send(tabA, "/plan off");
  await planChipIs(tabB, "tab A's /plan off after its reconnect", false, "none");
});

test("always allow in the workspace: a permission rule both tabs list", async () => {
  await send(tabA, "Run the checks");
  await tabA.waitForSelector(byTestId("tool-approval"), { timeout: WAIT_MS });
  await tabA.click(byTestId("approval-always-workspace"));
  const rule = `${byTestId("permission-rule")}[data-scope="workspace"]`;
  await tabA.waitForSelector(rule, { timeout: WAIT_MS });
  await tabB.waitForSelector(rule, { timeout: WAIT_MS });
  await hasText(tabA, "assistant-message", "The checks ran.");
  await idle(tabA);
  await send(tabA, "/permissions");
  await hasText(tabA, "notice", "echo ok >> checks.txt");
  // Shown whole in the session, not cut to a line of the status bar.
  await until(tabA, "/permissions' answer in the session", () => /^rule-\S+ +workspace +\$ echo ok >> checks\.txt …$/.test(document.querySelector('[data-testid="session"] pre[data-testid="notice"]')?.textContent ?? ""));
  await shot(tabA, "10-permission-rule");
});

test("cancel stops a running turn", async () => {
  await send(tabA, "Think it over");
  await hasText(tabA, "live-text", "Thinking about it");
  await tabA.click(byTestId("cancel"));
  await until(tabA, "the cancelled turn", () => document.querySelector('[data-testid="turn-ended"]')?.getAttribute("data-reason") === "CANCELLED");
  await idle(tabA);
  await idle(tabB);
  await shot(tabA, "09-cancelled");
});

test("/compact shows a compaction marker in both tabs", async () => {
  await send(tabA, "/compact the story");
  for (const tab of [tabA, tabB]) {
    await until(tab, "the compaction marker", () => document.querySelector('[data-testid="compaction"]')?.getAttribute("data-trigger") === "manual");
  }
  await hasText(tabA, "compaction", "conversation compacted");
  await shot(tabA, "11-compacted");
});

test("/help lists the workspace's custom command, which runs with its arguments", async () => {
  await send(tabA, "/help");
  await hasText(tabA, "notice", "/review FILE CONCERN");
  await hasText(tabA, "notice", "Review a file for one concern (project)");
  await send(tabA, "/review notes.txt typos");
  // The prompt the file makes is the user's message, in both tabs.
  for (const tab of [tabA, tabB]) {
    await hasText(tab, "user-message", "Review notes.txt, looking for typos only.");
    await hasText(tab, "assistant-message", "notes.txt has no typos.");
  }
  await idle(tabA);
  await shot(tabA, "12-custom-command");
});

test("the pages raised no errors", () => {
  assert.deepEqual(pageErrors, []);
});
