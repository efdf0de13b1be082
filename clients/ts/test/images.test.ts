// Images in prompts through the SDK, against a running gateway whose models
// file adds `eyes`, a model that takes images, served by the fake provider
// of tests/integration/test_ts_client.py (which then checks the image parts
// the provider received). The images are the files of AGENTHOST_IMAGES_DIR:
// pasted.png is sent as bytes, shot.png by its path, not-an-image.png is not one.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { Code } from "@connectrpc/connect";
import { AgentHostClient, AgentHostError, Reason } from "../src/index.js";
import { createNodeTransport, imageFile } from "../src/node.js";
import { TIMEOUT_MS, gatewayAddress, rawClient } from "./support.js";

function imagesDir(): string {
  const dir = process.env["AGENTHOST_IMAGES_DIR"] ?? "";
  if (!dir) throw new Error("set AGENTHOST_IMAGES_DIR (tests/integration/test_ts_client.py does)");
  return dir;
}

function digestOf(data: Uint8Array): string {
  return "sha256:" + createHash("sha256").update(data).digest("hex");
}

async function refusal(promise: Promise<unknown>): Promise<AgentHostError> {
  const error = await promise.then(
    () => assert.fail("the prompt was taken"),
    (error: unknown) => error,
  );
  assert.ok(error instanceof AgentHostError, String(error));
  return error;
}

describe("images in prompts", { timeout: 4 * TIMEOUT_MS }, () => {
  test("bytes and a file reach a model that takes images; a text-only model and bytes that are no image are refused", async () => {
    const raw = rawClient("images");
    const sessionId = (await raw.gateway.createSession({ fence: raw.fence(), target: { case: "cwd", value: process.cwd() } })).session!.id;
    const { address, token } = gatewayAddress();
    const client = new AgentHostClient({ transport: createNodeTransport({ address }), token, clientId: `ts-images-${process.pid}` });
    try {
      const session = await client.openSession(sessionId);
      const models = await session.listModels();
      assert.deepEqual(
        models.map((m) => [m.name, m.images]),
        [
          ["builtin", false],
          ["alt", false],
          ["eyes", true],
        ],
      );
      const dir = imagesDir();
      const pasted = new Uint8Array(readFileSync(join(dir, "pasted.png")));
      const shot = await imageFile(join(dir, "shot.png"));

      // The default (built-in) model takes no images: refused, nothing recorded.
      const noImages = await refusal(session.prompt("what is this?", undefined, undefined, [], [pasted]));
      assert.equal(noImages.code, Code.FailedPrecondition);
      assert.equal(noImages.reason, Reason.MODEL_TAKES_NO_IMAGES);
      assert.match(noImages.message, /takes no images/);

      await session.setModel("eyes");
      const notAnImage = new Uint8Array(readFileSync(join(dir, "not-an-image.png")));
      const refused = await refusal(session.prompt("what is this?", undefined, undefined, [], [{ data: notAnImage, name: "not-an-image.png" }]));
      assert.equal(refused.code, Code.InvalidArgument);
      assert.equal(refused.reason, Reason.IMAGE_REFUSED);
      assert.equal(refused.message, "cannot send image not-an-image.png: its bytes are not a PNG, JPEG, GIF or WebP image");
      assert.equal(session.events.filter((e) => e.body.case === "userMessage").length, 0);

      await session.prompt("what differs between these?", undefined, undefined, [], [pasted, shot]);
      await session.waitUntil((s) => !s.running && s.events.some((e) => e.body.case === "turnEnd"), TIMEOUT_MS, "the turn's end");
      const message = session.events.flatMap((e) => (e.body.case === "userMessage" ? [e.body.value] : []))[0]!;
      assert.deepEqual(
        message.images.map((i) => [i.digest, i.mediaType, Number(i.size), i.name]),
        [
          [digestOf(pasted), "image/png", pasted.length, ""],
          [digestOf(shot.data!), "image/png", shot.data!.length, "shot.png"],
        ],
      );
      assert.deepEqual(await session.readImage(digestOf(shot.data!)), { mediaType: "image/png", data: shot.data });
    } finally {
      await client.close();
    }
  });
});
