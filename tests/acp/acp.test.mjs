// `agenthost acp` driven as an editor drives it (run by tests/integration/test_acp.py
// against a stack scripted with builtin-script.json; the tests run in order).
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Editor, agentMessageValidator, text } from "./harness.mjs";

const cwd = process.env.ACP_WORKDIR;
const editors = [];
let first; // the first editor process
let sessionId;

// While set, the person answers a tool's permission request only once it resolves.
let thinking = null;

/** Approve a plan review; allow a tool once (after thinking, when they are). */
async function allow(request) {
  const ids = request.options.map((o) => o.optionId);
  if (ids.includes("approve")) return "approve";
  await thinking;
  return "allow-once";
}

function editor() {
  const e = new Editor(allow);
  editors.push(e);
  return e;
}

before(async () => {
  first = editor();
  const init = await first.initialize();
  assert.equal(init.protocolVersion, 1);
  assert.equal(init.agentCapabilities.loadSession, true);
  assert.deepEqual(init.agentCapabilities.sessionCapabilities.list, {});
});

after(async () => {
  for (const e of editors) {
    assert.equal(await e.close(), 0, e.stderr);
  }
});

test("a new session offers the default and plan modes and lists its commands", async () => {
  const created = await first.connection.newSession({ cwd, mcpServers: [] });
  sessionId = created.sessionId;
  assert.equal(created.modes.currentModeId, "default");
  assert.deepEqual(created.modes.availableModes.map((m) => m.id), ["default", "plan"]);
  assert.equal(created.configOptions[0].currentValue, "default");
  const commands = await first.waitFor(
    () => first.updates(sessionId).find((u) => u.sessionUpdate === "available_commands_update"),
    "available_commands_update",
  );
  assert.ok(commands.availableCommands.some((c) => c.name === "plan"));
});

test("tool calls that need permission are allowed and show a diff and output", async () => {
  const reply = await first.connection.prompt({
    sessionId,
    prompt: [{ type: "text", text: "leave a note" }],
  });
  assert.equal(reply.stopReason, "end_turn");
  const [asked] = first.permissionRequests;
  assert.deepEqual(asked.options.map((o) => o.kind), [
    "allow_once",
    "allow_always",
    "reject_once",
    "reject_always",
  ]);
  const updates = first.updates(sessionId);
  const call = updates.find((u) => u.sessionUpdate === "tool_call" && u.kind === "edit");
  assert.equal(asked.toolCall.toolCallId, call.toolCallId);
  const done = updates.find(
    (u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === call.toolCallId && u.status,
  );
  assert.equal(done.status, "completed");
  const diff = done.content.find((c) => c.type === "diff");
  assert.equal(diff.path, `${cwd}/NOTES.md`);
  assert.match(diff.newText, /from the editor/);
  const said = updates.filter((u) => u.sessionUpdate === "agent_message_chunk").map(text).join("");
  assert.equal(said, "I'll leave a note in NOTES.md.Now a check.The note is written.");

  // A command: asked too, then its output.
  assert.equal(first.permissionRequests.length, 2);
  const command = updates.find((u) => u.sessionUpdate === "tool_call" && u.kind === "execute");
  assert.equal(command.title, "$ echo hello from the shell");
  const ran = updates.filter(
    (u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === command.toolCallId,
  ).at(-1);
  assert.equal(ran.status, "completed");
  assert.match(ran.content[0].content.text, /hello from the shell/);

  // The turn's model requests as the runtime recorded them: the context in
  // use against the built-in model's window (it has no prices: no cost).
  const usage = await first.waitFor(
    () => first.updates(sessionId).findLast((u) => u.sessionUpdate === "usage_update"),
    "usage_update",
  );
  assert.equal(usage.size, 32000);
  assert.ok(usage.used > 0 && usage.used < usage.size, JSON.stringify(usage));
  assert.equal(usage.cost ?? null, null);
});

test("plan mode chosen during a turn is committed at the next model request", async () => {
  const modeUpdates = () =>
    first.updates(sessionId).filter((u) => u.sessionUpdate === "current_mode_update");
  const before = modeUpdates().length;
  const asked = first.permissionRequests.length;
  let doneThinking;
  thinking = new Promise((resolve) => (doneThinking = resolve));
  const turn = first.connection.prompt({ sessionId, prompt: [{ type: "text", text: "make a plan" }] });
  // The turn waits on the person's answer to its command: the step is under way.
  await first.waitFor(() => first.permissionRequests.length > asked, "the command's permission request");
  await first.connection.setSessionMode({ sessionId, modeId: "plan" });
  assert.equal(modeUpdates().length, before, "no mode change before the next model request");
  const command = first.updates(sessionId).find(
    (u) => u.sessionUpdate === "tool_call" && u.kind === "execute" && u.title === "$ ls",
  );
  thinking = null;
  doneThinking();
  const committed = await first.waitFor(
    () => modeUpdates()[before],
    "current_mode_update",
  );
  assert.equal(committed.currentModeId, "plan");
  const updates = first.updates(sessionId);
  const toolDone = updates.findIndex(
    (u) => u.sessionUpdate === "tool_call_update" && u.toolCallId === command.toolCallId && u.status === "completed",
  );
  assert.ok(toolDone >= 0 && updates.indexOf(committed) > toolDone, "committed after the step's tool ran");

  // The plan review: exit_plan_mode asks through a permission request.
  const reply = await turn;
  assert.equal(reply.stopReason, "end_turn");
  const review = first.permissionRequests.at(-1);
  assert.deepEqual(review.options.map((o) => o.optionId), ["approve", "keep-planning"]);
  assert.match(review.toolCall.content[0].content.text, /Extend the note/);
  assert.deepEqual(modeUpdates().slice(before).map((u) => u.currentModeId), ["plan", "default"]);
});

test("a second editor loads the session with the same history, then cancels a turn", async () => {
  const second = editor();
  await second.initialize();
  const listed = await second.connection.listSessions({ cwd });
  assert.ok(listed.sessions.some((s) => s.sessionId === sessionId));
  const loaded = await second.connection.loadSession({ sessionId, cwd, mcpServers: [] });
  assert.equal(loaded.modes.currentModeId, "default");
  const replayed = second.updates(sessionId);
  const users = replayed.filter((u) => u.sessionUpdate === "user_message_chunk").map(text);
  assert.deepEqual(users, ["leave a note", "make a plan"]);
  const saidBy = (e) =>
    e.updates(sessionId).filter((u) => u.sessionUpdate === "agent_message_chunk").map(text).join("");
  assert.equal(saidBy(second), saidBy(first));
  const calls = (e) => e.updates(sessionId).filter((u) => u.sessionUpdate === "tool_call").map((u) => u.toolCallId);
  assert.deepEqual(calls(second), calls(first));

  const turn = second.connection.prompt({ sessionId, prompt: [{ type: "text", text: "a long answer" }] });
  await second.waitFor(
    () => second.updates(sessionId).some((u) => u.sessionUpdate === "agent_message_chunk" && text(u).startsWith("A long")),
    "the long answer's first chunk",
  );
  await second.connection.cancel({ sessionId });
  assert.equal((await turn).stopReason, "cancelled");
  // The first editor sees the prompt the second one sent.
  await first.waitFor(
    () => first.updates(sessionId).some((u) => u.sessionUpdate === "user_message_chunk" && text(u) === "a long answer"),
    "the other editor's prompt",
  );
});

test("a custom command of the project is offered and runs with its arguments", async () => {
  const offered = first.updates(sessionId).filter((u) => u.sessionUpdate === "available_commands_update")[0];
  const review = offered.availableCommands.find((c) => c.name === "review");
  assert.equal(review.description, "Review a file for one concern (project)");
  assert.equal(review.input.hint, "FILE CONCERN");

  // The built-in model, its script played out, echoes the prompt it was sent.
  const said = async (prompt, expected) => {
    const from = first.updates(sessionId).length;
    const reply = await first.connection.prompt({ sessionId, prompt: [{ type: "text", text: prompt }] });
    assert.equal(reply.stopReason, "end_turn");
    const updates = first.updates(sessionId).slice(from);
    const users = updates.filter((u) => u.sessionUpdate === "user_message_chunk").map(text);
    assert.deepEqual(users, [expected]);
    // (The end of the turn the other editor cancelled may still be arriving.)
    const answer = updates.filter((u) => u.sessionUpdate === "agent_message_chunk").map(text).join("");
    assert.ok(answer.endsWith(`Echo: ${expected}`), answer);
  };
  await said("/review NOTES.md typos", "Review NOTES.md, looking for typos only.");

  // A prompt file added while the session is open runs too, and is offered from then on.
  mkdirSync(join(cwd, ".agenthost", "commands"), { recursive: true });
  writeFileSync(join(cwd, ".agenthost", "commands", "tidy.md"), "Tidy $ARGUMENTS.\n");
  await said("/tidy the notes", "Tidy the notes.");
  const latest = first.updates(sessionId).filter((u) => u.sessionUpdate === "available_commands_update").at(-1);
  assert.ok(latest.availableCommands.some((c) => c.name === "tidy"));
});

test("every message the agent sent validates against the protocol's schema", () => {
  const validate = agentMessageValidator();
  const update = (u) => ({ jsonrpc: "2.0", method: "session/update", params: { sessionId: "s", update: u } });
  assert.deepEqual(validate(update({ sessionUpdate: "current_mode_update", currentModeId: "plan" })), []);
  assert.notDeepEqual(validate(update({ sessionUpdate: "bogus" })), [], "the validator refuses what the schema does not allow");
  assert.notDeepEqual(validate({ jsonrpc: "2.0", id: 1, result: {} }, "session/prompt"), [], "a prompt's result has a stop reason");
  for (const e of editors) {
    assert.ok(e.messages.length > 10);
    assert.deepEqual(e.invalid, [], `messages the schema refuses:\n${JSON.stringify(e.invalid, null, 1)}`);
  }
});
