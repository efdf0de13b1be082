// Undo, redo, rewind, a turn's diff and subagents against a running gateway
// (see gateway.test.ts): the built-in model's script ends with the replies
// these tests prompt for (a write_file, then a task call and its child's
// answer), after those gateway.test.ts consumes; so this file runs after it.

import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { PromptMode } from "../gen/agenthost/runtime/v1/runtime_pb.js";
import { ApprovalPolicy, type Event } from "../gen/agenthost/sessionlog/v1/events_pb.js";
import { AgentHostClient, type Session } from "../src/index.js";
import { createNodeTransport } from "../src/node.js";
import { TIMEOUT_MS, gatewayAddress } from "./support.js";

const turnsEnded = (session: Session): number => session.events.filter((e: Event) => e.body.case === "turnEnd").length;

describe("the way back and subagents, against a running gateway", { timeout: 4 * TIMEOUT_MS }, () => {
  let client: AgentHostClient;
  let folder: string;
  before(() => {
    const { address, token } = gatewayAddress();
    client = new AgentHostClient({ transport: createNodeTransport({ address }), token, clientId: `ts-undo-${process.pid}` });
    folder = mkdtempSync(join(tmpdir(), "agenthost-ts-undo-"));
  });
  after(async () => {
    await client.close();
  });

  async function session(): Promise<Session> {
    const summary = await client.createSession({ cwd: folder });
    const opened = await client.openSession(summary.id);
    await opened.setSettings({ approvals: ApprovalPolicy.NEVER });
    return opened;
  }

  test("a turn's files show with its diff, and undo, redo and rewind put them back", async () => {
    const opened = await session();
    await opened.prompt("Write the notes", PromptMode.SEND);
    await opened.waitUntil((s) => s.checkpoints.length === 1 && turnsEnded(s) === 1 && !s.running, TIMEOUT_MS, "the turn's checkpoint");
    const [turn] = opened.checkpoints;
    assert.deepEqual(turn!.files, [{ path: "notes.md", change: "added", linesAdded: 1, linesRemoved: 0, binary: false }]);
    assert.equal(turn!.prompt, "Write the notes");
    const diff = await opened.turnDiff(1);
    assert.ok(diff.ok && diff.turn === 1 && !diff.cut && diff.text.includes("+first 🙂"), JSON.stringify(diff));

    const undone = await opened.undo();
    assert.deepEqual([undone.ok, undone.restored, undone.skipped], [true, ["notes.md"], []]);
    assert.equal(existsSync(join(folder, "notes.md")), false);
    await opened.waitUntil((s) => s.checkpoints[0]?.undone === true, TIMEOUT_MS, "the turn shown undone");
    const redone = await opened.redo();
    assert.deepEqual(redone.restored, ["notes.md"]);
    assert.equal(readFileSync(join(folder, "notes.md"), "utf8"), "first 🙂\n");

    const checked = await opened.rewind(0, "both", { check: true });
    assert.deepEqual([checked.checked, checked.restored], [true, ["notes.md"]]);
    const rewound = await opened.rewind(0, "both");
    assert.ok(rewound.ok, rewound.message);
    assert.equal(existsSync(join(folder, "notes.md")), false);
    await opened.waitUntil((s) => s.checkpoints.length === 0, TIMEOUT_MS, "no turn left in the conversation");
    await assert.rejects(opened.rewind(0, "everything" as "both"), RangeError);
  });

  test("a task call's subagent is listed with its usage and its transcript opens", async () => {
    const opened = await session();
    await opened.prompt("Delegate a look around", PromptMode.SEND);
    await opened.waitUntil((s) => s.subagents.length === 1 && !s.subagents[0]!.running && turnsEnded(s) === 1, TIMEOUT_MS, "the finished subagent");
    const [child] = opened.subagents;
    assert.deepEqual([child!.agentType, child!.description, child!.requests], ["general", "look around", 1]);
    assert.ok(child!.promptTokens > 0);
    const listed = await client.listSubagents(opened.id);
    assert.deepEqual(listed.map((s) => s.id), [child!.sessionId]);
    const transcript = await client.openSession(child!.sessionId);
    const said = transcript.events.flatMap((e) => (e.body.case === "assistantMessage" ? [e.body.value.text] : []));
    assert.deepEqual(said, ["The child looked 🔎."]);
  });
});
