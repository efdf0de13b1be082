// Images in prompts over ACP, with the official client library (run by
// tests/integration/test_acp_images.py against a stack whose default model,
// "eyes", takes images and is served by a fake provider; "plain" takes
// none): the agent advertises image prompts, an `image` content block
// reaches the model (the Python side checks the provider's image parts),
// bytes that are no image and a text-only model are refused with their reason.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { Editor } from "./harness.mjs";

const cwd = process.env.ACP_WORKDIR;
const images = process.env.ACP_IMAGES;
const base64 = (name) => readFileSync(`${images}/${name}`).toString("base64");
let editor;
let sessionId;
let initialized;

before(async () => {
  editor = new Editor(() => "allow-once");
  initialized = await editor.initialize();
  sessionId = (await editor.connection.newSession({ cwd, mcpServers: [] })).sessionId;
});

after(async () => {
  assert.equal(await editor.close(), 0, editor.stderr);
});

test("the agent advertises image prompts", () => {
  assert.equal(initialized.agentCapabilities.promptCapabilities.image, true);
});

test("an image content block reaches the model", async () => {
  const reply = await editor.connection.prompt({
    sessionId,
    prompt: [
      { type: "text", text: "what is wrong here? " },
      { type: "image", mimeType: "image/png", data: base64("shot.png"), uri: "file:///home/me/shot.png" },
    ],
  });
  assert.equal(reply.stopReason, "end_turn");
});

test("bytes that are no image are refused with their reason", async () => {
  await assert.rejects(
    editor.connection.prompt({ sessionId, prompt: [{ type: "text", text: "and this?" }, { type: "image", mimeType: "image/png", data: base64("not-an-image.png") }] }),
    (error) => error.code === -32602 && error.data?.reason === "IMAGE_REFUSED" && /cannot send image image 1: its bytes are not a PNG, JPEG, GIF or WebP image/.test(error.message),
  );
});

test("a session whose model takes no images refuses an image clearly", async () => {
  await editor.connection.setSessionConfigOption({ sessionId, configId: "model", value: "plain" });
  await assert.rejects(
    editor.connection.prompt({ sessionId, prompt: [{ type: "image", mimeType: "image/png", data: base64("shot.png") }] }),
    (error) => error.code === -32602 && error.data?.reason === "MODEL_TAKES_NO_IMAGES" && /takes no images/.test(error.message),
  );
});

test("every message the agent sent validates against the protocol's schema", () => {
  assert.ok(editor.messages.length > 3);
  assert.deepEqual(editor.invalid, [], `messages the schema refuses:\n${JSON.stringify(editor.invalid, null, 1)}`);
});
