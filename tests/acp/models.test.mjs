// An editor switches the session's model over ACP (run by
// tests/integration/test_acp_models.py against a stack with two models: "deep",
// the default, answers DEEP_REPLY; "alt" answers ALT_REPLY). The tests run in
// order; between the second and the third the Python SDK switches the model
// back, and the editor is told; after the third the session's commands change.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Editor, text } from "./harness.mjs";

const cwd = process.env.ACP_WORKDIR;
const { DEEP_REPLY, ALT_REPLY } = process.env;
let editor;
let sessionId;

const modelOption = (options) => options.find((o) => o.category === "model");
const said = () =>
  editor.updates(sessionId).filter((u) => u.sessionUpdate === "agent_message_chunk").map(text).join("");

/** Prompts, and returns what the agent said in that turn. */
async function answer(prompt) {
  const before = said().length;
  const reply = await editor.connection.prompt({ sessionId, prompt: [{ type: "text", text: prompt }] });
  assert.equal(reply.stopReason, "end_turn");
  return said().slice(before);
}

before(async () => {
  editor = new Editor(() => "allow-once");
  await editor.initialize();
});

after(async () => {
  assert.equal(await editor.close(), 0, editor.stderr);
});

test("the editor lists the configured models, the session's selected", async () => {
  const created = await editor.connection.newSession({ cwd, mcpServers: [] });
  sessionId = created.sessionId;
  assert.deepEqual(created.configOptions.map((o) => o.id), ["mode", "model"]);
  const model = modelOption(created.configOptions);
  assert.equal(model.type, "select");
  assert.equal(model.currentValue, "deep");
  assert.deepEqual(model.options.map((o) => o.value), ["deep", "alt"]);
  assert.match(model.options[0].description, /deepseek-chat/);
  assert.equal(await answer("first"), DEEP_REPLY);
});

test("switching the model makes the next model request go to it", async () => {
  const reply = await editor.connection.setSessionConfigOption({ sessionId, configId: "model", value: "alt" });
  assert.equal(modelOption(reply.configOptions).currentValue, "alt");
  assert.equal(reply.configOptions.find((o) => o.id === "mode").currentValue, "default");
  assert.equal(await answer("second"), ALT_REPLY);
  // The editor's own choice is answered by the reply, not told again.
  assert.ok(!editor.updates(sessionId).some((u) => u.sessionUpdate === "config_option_update"));

  await assert.rejects(
    editor.connection.setSessionConfigOption({ sessionId, configId: "model", value: "gpt-9" }),
    (error) => error.code === -32602 && JSON.stringify(error.data).includes("alt"),
  );
});

test("a switch made elsewhere (the SDK) reaches the editor", async () => {
  // test_acp_models.py switches back to "deep" once the second turn ended.
  const update = await editor.waitFor(
    () => editor.updates(sessionId).find((u) => u.sessionUpdate === "config_option_update"),
    "config_option_update",
  );
  assert.equal(modelOption(update.configOptions).currentValue, "deep");
  assert.equal(update.configOptions.find((o) => o.id === "mode").currentValue, "default");
  assert.equal(await answer("third"), DEEP_REPLY);
});

test("when the session's commands change, the editor gets them again", async () => {
  const listed = () => editor.updates(sessionId).filter((u) => u.sessionUpdate === "available_commands_update");
  // test_acp_models.py relays a commands_changed frame once the third turn ended.
  const again = await editor.waitFor(() => listed()[1], "a second available_commands_update");
  assert.deepEqual(again.availableCommands.map((c) => c.name), listed()[0].availableCommands.map((c) => c.name));
});

test("every message the agent sent validates against the protocol's schema", () => {
  assert.ok(editor.messages.length > 10);
  assert.deepEqual(editor.invalid, [], `messages the schema refuses:\n${JSON.stringify(editor.invalid, null, 1)}`);
});
