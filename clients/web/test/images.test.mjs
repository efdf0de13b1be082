// Images in the web client's composer, in Debian's Chromium (playwright-core):
// an image pasted and one dropped show as thumbnails, × takes one out, the
// message sends the other (the host's model takes images: the fake provider
// behind it answers "I see it.", and tests/integration/test_web_images.py
// checks it received the image's bytes), and the transcript's user message
// shows the image as the host keeps it. Started with:
//   AGENTHOST_PAGE_URL  the page's address (#token=…)
//   AGENTHOST_WORKSPACE the folder of the session the test opens
//   IMAGES_DIR          pasted.png and dropped.png
//   SCREENSHOT_DIR      where the screenshots go

import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { byTestId, collectErrors, hasText, idle, keepFailureShots, launchBrowser, openNewSession, required, until } from "./page.mjs";

const BY = "tests/integration/test_web_images.py";
const PAGE_URL = required("AGENTHOST_PAGE_URL", BY);
const WORKSPACE = required("AGENTHOST_WORKSPACE", BY);
const IMAGES_DIR = required("IMAGES_DIR", BY);
const SHOTS = required("SCREENSHOT_DIR", BY);

let browser;
let page;
const pageErrors = [];

/** Fires a paste (or a drop) of one image file at an element, as the browser would. */
async function give(kind, selector, name) {
  const bytes = [...readFileSync(join(IMAGES_DIR, name))];
  await page.evaluate(
    ({ kind, selector, name, bytes }) => {
      const data = new DataTransfer();
      data.items.add(new File([new Uint8Array(bytes)], name, { type: "image/png" }));
      const target = document.querySelector(selector);
      const event = kind === "paste" ? new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }) : new DragEvent("drop", { dataTransfer: data, bubbles: true, cancelable: true });
      target.dispatchEvent(event);
    },
    { kind, selector, name, bytes },
  );
}

const thumbnails = () => page.$$eval(byTestId("draft-image"), (all) => all.map((t) => t.dataset.name));

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  keepFailureShots(SHOTS, "images-failed");
  browser = await launchBrowser();
  page = await browser.context.newPage();
  collectErrors(page, pageErrors, { consoleErrors: true });
  await page.goto(PAGE_URL);
  await openNewSession(page, WORKSPACE);
});

after(async () => {
  await browser?.close();
});

test("a pasted and a dropped image show as thumbnails, and one can be taken out", async () => {
  await give("paste", byTestId("composer-input"), "pasted.png");
  await until(page, "the pasted image's thumbnail", () => document.querySelectorAll('[data-testid="draft-image"]').length === 1);
  await give("drop", byTestId("composer"), "dropped.png");
  await until(page, "both thumbnails", () => document.querySelectorAll('[data-testid="draft-image"]').length === 2);
  assert.deepEqual(await thumbnails(), ["pasted.png", "dropped.png"]);
  // Each thumbnail shows its image (decoded by the browser: 4 x 3 pixels).
  const sizes = await page.$$eval(`${byTestId("draft-image")} img`, (all) => all.map((i) => [i.naturalWidth, i.naturalHeight]));
  assert.deepEqual(sizes, [
    [4, 3],
    [4, 3],
  ]);
  await page.screenshot({ path: join(SHOTS, "images-01-thumbnails.png"), fullPage: true });
  await page.click(`${byTestId("draft-image")}[data-name="dropped.png"] ${byTestId("remove-image")}`);
  await until(page, "one thumbnail left", () => document.querySelectorAll('[data-testid="draft-image"]').length === 1);
  assert.deepEqual(await thumbnails(), ["pasted.png"]);
});

test("the message sends the image, and the transcript shows it", async () => {
  await page.fill(byTestId("composer-input"), "what is wrong here?");
  await page.press(byTestId("composer-input"), "Enter");
  await until(page, "the composer emptied", () => document.querySelector('[data-testid="composer-input"]').value === "" && !document.querySelector('[data-testid="draft-image"]'));
  await hasText(page, "assistant-message", "I see it.");
  await idle(page);
  await until(page, "the message's image, read from the host", () => {
    const shown = document.querySelector('[data-testid="user-message"] [data-testid="message-image"] img');
    return shown !== null && shown.complete && shown.naturalWidth === 4;
  });
  assert.match(await page.textContent(byTestId("user-message")), /what is wrong here\?/);
  await page.screenshot({ path: join(SHOTS, "images-02-sent.png"), fullPage: true });
  // A reload reads it from the host again.
  await page.reload();
  await until(page, "the image after a reload", () => document.querySelector('[data-testid="message-image"] img')?.naturalWidth === 4);
});

test("the page raised no errors", () => {
  assert.deepEqual(pageErrors, []);
});
