// What the agent knows of the project, over ACP with the official client
// library (run by tests/integration/test_acp_context.py against a stack
// scripted with context-script.json, then echoing what the model is sent):
// the task list as `plan` updates as the turn changes it, and an editor's
// resource link and embedded resource attached to the prompt.
import assert from "node:assert/strict";
import { pathToFileURL } from "node:url";
import { after, before, test } from "node:test";
import { Editor, agentMessageValidator, text } from "./harness.mjs";

const cwd = process.env.ACP_WORKDIR;
const outside = process.env.ACP_OUTSIDE;
let editor;
let sessionId;

const plans = () => editor.updates(sessionId).filter((u) => u.sessionUpdate === "plan");
const said = () => editor.updates(sessionId).filter((u) => u.sessionUpdate === "agent_message_chunk").map(text).join("");

before(async () => {
  // The command's permission is given once the first plan arrived: the
  // turn waits on it between the two writes of the list.
  editor = new Editor(async () => {
    await editor.waitFor(() => plans().length > 0, "the first plan update");
    return "allow-once";
  });
  await editor.initialize();
  sessionId = (await editor.connection.newSession({ cwd, mcpServers: [] })).sessionId;
});

after(async () => {
  assert.equal(await editor.close(), 0, editor.stderr);
});

test("the task list is sent as plan updates as the turn changes it", async () => {
  const reply = await editor.connection.prompt({ sessionId, prompt: [{ type: "text", text: "fix the parser" }] });
  assert.equal(reply.stopReason, "end_turn");
  const entries = plans().map((p) => p.entries.map((e) => `${e.status} ${e.content}`));
  assert.deepEqual(entries, [
    ["in_progress Read the parser", "pending Fix the off-by-one"],
    ["completed Read the parser", "in_progress Fix the off-by-one"],
  ]);
  // The first plan came while the turn ran, before the command was allowed.
  const updates = editor.updates(sessionId);
  const command = updates.find((u) => u.sessionUpdate === "tool_call" && u.kind === "execute");
  assert.ok(updates.indexOf(plans()[0]) < updates.indexOf(command));
  assert.ok(plans().every((p) => p.entries.every((e) => e.priority === "medium")));
  // The list is the plan, not a tool call of its own.
  assert.ok(!updates.some((u) => u.sessionUpdate === "tool_call" && u.title?.startsWith("todo_write")));
  assert.match(said(), /Fixing it now\./);
});

test("a resource link and an embedded resource reach the model", async () => {
  const before = said().length;
  const reply = await editor.connection.prompt({
    sessionId,
    prompt: [
      { type: "text", text: "compare " },
      { type: "resource_link", name: "app.py", uri: pathToFileURL(`${cwd}/src/app.py`).href },
      { type: "text", text: " with " },
      { type: "resource", resource: { uri: pathToFileURL(`${cwd}/draft.md`).href, text: "an unsaved draft", mimeType: "text/markdown" } },
    ],
  });
  assert.equal(reply.stopReason, "end_turn");
  // The built-in model echoes what it was sent: the text, then each file.
  const echoed = said().slice(before);
  assert.match(echoed, /^Echo: compare \[app\.py\]\(file:\/\/.*\/src\/app\.py\) with \[draft\.md\]/);
  assert.match(echoed, /<file path="src\/app\.py">\ndef answer\(\):\n {4}return 41/);
  assert.match(echoed, /<file path="draft\.md" from="editor">\nan unsaved draft/);
});

test("a link to a file outside the project is refused with its reason", async () => {
  await assert.rejects(
    editor.connection.prompt({
      sessionId,
      prompt: [
        { type: "text", text: "summarise " },
        { type: "resource_link", name: "outside.txt", uri: pathToFileURL(outside).href },
      ],
    }),
    (error) => error.code === -32602 && error.data?.reason === "FILE_REFERENCE_REFUSED" && /outside the session folder/.test(error.message),
  );
});

test("every message the agent sent validates against the protocol's schema", () => {
  assert.ok(editor.messages.length > 10);
  assert.deepEqual(editor.invalid, [], `messages the schema refuses:\n${JSON.stringify(editor.invalid, null, 1)}`);
  assert.deepEqual(agentMessageValidator()({ jsonrpc: "2.0", method: "session/update", params: { sessionId: "s", update: plans()[0] } }), []);
});
