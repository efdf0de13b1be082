// The way back and subagents over ACP, with the official client library
// (run by tests/integration/test_acp_undo_agents.py against a stack
// scripted with undo-script.json): /undo, /redo, /rewind and /diff are
// offered as commands, /undo asks the person before it overwrites a file
// changed since the turn; a task call is a `think` tool call whose
// progress shows its subagent's steps, and the subagent's approval reaches
// the editor as a permission request naming it.
import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Editor, text } from "./harness.mjs";

const cwd = process.env.ACP_WORKDIR;
let editor;
let sessionId;

const said = () => editor.updates(sessionId).filter((u) => u.sessionUpdate === "agent_message_chunk").map(text).join("");
const titleOf = (request) => request.toolCall.title ?? "";

before(async () => {
  editor = new Editor((request) => (titleOf(request).includes("overwrite") ? "overwrite" : "allow-once"));
  await editor.initialize();
  sessionId = (await editor.connection.newSession({ cwd, mcpServers: [] })).sessionId;
});

after(async () => {
  assert.equal(await editor.close(), 0, editor.stderr);
});

test("undo, redo, rewind and diff are offered, and undo asks before overwriting a changed file", async () => {
  await editor.waitFor(() => editor.updates(sessionId).some((u) => u.sessionUpdate === "available_commands_update"), "the commands");
  const offered = editor.updates(sessionId).filter((u) => u.sessionUpdate === "available_commands_update").at(-1);
  const names = offered.availableCommands.map((c) => c.name);
  for (const name of ["undo", "redo", "rewind", "diff"]) assert.ok(names.includes(name), `${name} in ${names}`);

  const wrote = await editor.connection.prompt({ sessionId, prompt: [{ type: "text", text: "write the notes" }] });
  assert.equal(wrote.stopReason, "end_turn");
  const diffed = said().length;
  await editor.connection.prompt({ sessionId, prompt: [{ type: "text", text: "/diff 1" }] });
  assert.match(said().slice(diffed), /\+hello acp/);

  writeFileSync(join(cwd, "notes.md"), "the person's notes\n");
  const asked = editor.permissionRequests.length;
  const undone = await editor.connection.prompt({ sessionId, prompt: [{ type: "text", text: "/undo" }] });
  assert.equal(undone.stopReason, "end_turn");
  const request = editor.permissionRequests[asked];
  assert.equal(titleOf(request), "/undo: overwrite 1 file(s) changed since the turn?");
  assert.deepEqual(request.options.map((o) => o.optionId), ["overwrite", "leave"]);
  assert.equal(existsSync(join(cwd, "notes.md")), false);
  assert.match(said(), /Undid turn 1 \(write the notes\): 1 file\(s\) restored/);
});

test("a task call is a think tool call with its subagent's steps, and the subagent's approval names it", async () => {
  const reply = await editor.connection.prompt({ sessionId, prompt: [{ type: "text", text: "count the files with a subagent" }] });
  assert.equal(reply.stopReason, "end_turn");
  const updates = editor.updates(sessionId);
  const task = updates.find((u) => u.sessionUpdate === "tool_call" && u.kind === "think");
  assert.equal(task.title, "Subagent general: count files");
  const progress = updates.filter((u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === task.toolCallId);
  const steps = progress.filter((u) => u.status === "in_progress").map((u) => u.content?.[0]?.content?.text ?? "");
  assert.ok(steps.some((s) => /subagent general started/.test(s)), JSON.stringify(steps));
  assert.ok(steps.some((s) => s.includes("$ ls | wc -l")), JSON.stringify(steps));
  const done = progress.at(-1);
  assert.equal(done.status, "completed");
  assert.match(JSON.stringify(done.content), /Two files\./);
  const childAsked = editor.permissionRequests.find((r) => titleOf(r).startsWith("Subagent general · count files asks:"));
  assert.ok(childAsked, JSON.stringify(editor.permissionRequests.map(titleOf)));
  assert.match(titleOf(childAsked), /ls \| wc -l/);
  assert.match(said(), /The subagent is done\./);
  assert.deepEqual(editor.invalid, [], `messages the schema refuses:\n${JSON.stringify(editor.invalid, null, 1)}`);
});
