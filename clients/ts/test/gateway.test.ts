// The SDK against a running gateway: `python -m clients.cli up` prints its
// address and writes the token to DATA_DIR/token; pass both as
// AGENTHOST_GATEWAY and AGENTHOST_TOKEN (tests/integration/test_ts_client.py
// does). The built-in model must be scripted with test/builtin-script.json
// (AGENTHOST_BUILTIN_SCRIPT): the tests that prompt consume its replies in
// order, so they run in this one file, in declaration order, on a fresh stack.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { Code, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { PlanModeRequest } from "../gen/agenthost/gateway/v1/gateway_pb.js";
import { PromptMode, TextKind } from "../gen/agenthost/runtime/v1/runtime_pb.js";
import { SetOutcome } from "../gen/agenthost/planmode/v1/plan_mode_pb.js";
import { SearchMatch } from "../gen/agenthost/sessionlog/v1/session_log_pb.js";
import { AgentHostClient, AgentHostError, LiveText, Reason, codePointLength, jsonOf, sameJson, type Update } from "../src/index.js";
import { createNodeTransport } from "../src/node.js";
import { FrameReader, GatedTransport, TIMEOUT_MS, eventOf, gatewayAddress, rawClient, type RawClient } from "./support.js";

interface ScriptedReply {
  text: string;
  reasoning?: string;
}
const SCRIPT = JSON.parse(readFileSync(new URL("../../test/builtin-script.json", import.meta.url), "utf8")) as { replies: ScriptedReply[] };
const [STREAMED, HELD, HELD_FOR_PLAN] = SCRIPT.replies as [ScriptedReply, ScriptedReply, ScriptedReply];
const SCRIPT_HINT = "is the stack scripted with test/builtin-script.json (AGENTHOST_BUILTIN_SCRIPT)?";

test("the scripted replies hold astral code points, so offsets are put to the test", () => {
  for (const reply of SCRIPT.replies) assert.ok(codePointLength(reply.text) < reply.text.length, reply.text);
});

describe("against a running gateway", { timeout: 4 * TIMEOUT_MS }, () => {
  let raw: RawClient;
  before(() => {
    gatewayAddress();
    raw = rawClient("raw");
  });

  async function newSession(): Promise<string> {
    const reply = await raw.gateway.createSession({ fence: raw.fence(), target: { case: "cwd", value: process.cwd() } });
    return reply.session!.id;
  }

  function sdkClient(options: { transport?: GatedTransport; name: string }): AgentHostClient {
    const { address, token } = gatewayAddress();
    return new AgentHostClient({ transport: options.transport ?? createNodeTransport({ address }), token, clientId: `ts-${options.name}-${process.pid}` });
  }

  /** Creates a session, connects a raw client and prompts the built-in model. */
  async function prompted(name: string): Promise<{ sessionId: string; frames: FrameReader; client: RawClient }> {
    const client = rawClient(name);
    const sessionId = await newSession();
    const frames = new FrameReader(client);
    await frames.waitFor((f) => f.frame.case === "connected", "connected frame");
    const reply = await client.gateway.prompt({ fence: client.fence(), sessionId, text: "Stream me an answer 🙂", mode: PromptMode.SEND });
    assert.equal(reply.mode, PromptMode.SEND);
    return { sessionId, frames, client };
  }

  test("setting plan mode shows on the stream and in PlanMode", async () => {
    const sessionId = await newSession();
    const frames = new FrameReader(raw);
    try {
      const first = await frames.waitFor(() => true, "first frame");
      assert.equal(first.frame.case, "connected");
      const set = await raw.gateway.setPlanMode({ fence: raw.fence(), sessionId, active: true });
      assert.equal(set.outcome, SetOutcome.COMMITTED);
      assert.equal(set.plan?.state?.active, true);
      assert.equal(set.plan?.state?.pending, undefined);
      const change = await frames.waitFor(eventOf(sessionId, "planMode"), "plan/mode event");
      assert.equal(change.frame.case === "sessionEvent" && change.frame.value.seq, set.seq);
      const projection = await frames.waitFor(
        (f) => f.frame.case === "sessionProjection" && f.frame.value.sessionId === sessionId && f.frame.value.key === "plan",
        "plan projection change",
      );
      assert.ok(projection.frame.case === "sessionProjection");
      assert.deepEqual(jsonOf(projection.frame.value.value!), { active: true });
      const opened = await raw.gateway.openSession({ sessionId });
      assert.deepEqual(jsonOf(opened.projections["plan"]!), { active: true });
    } finally {
      frames.cancel();
    }
  });

  test("a streamed reply arrives as deltas before its logged message", async () => {
    const { sessionId, frames } = await prompted("stream");
    try {
      const messageFrame = await frames.waitFor(eventOf(sessionId, "assistantMessage"), "assistant/message event");
      const stepFrame = await frames.waitFor(eventOf(sessionId, "stepStart"), "step/start event");
      assert.ok(messageFrame.frame.case === "sessionEvent" && messageFrame.frame.value.event?.body.case === "assistantMessage");
      assert.ok(stepFrame.frame.case === "sessionEvent" && stepFrame.frame.value.event?.body.case === "stepStart");
      const message = messageFrame.frame.value.event.body.value;
      const step = stepFrame.frame.value.event.body.value;
      assert.equal(message.text, STREAMED.text, SCRIPT_HINT);
      assert.equal(message.reasoning, STREAMED.reasoning, SCRIPT_HINT);

      const all = [...frames.frames];
      const at = all.indexOf(messageFrame);
      const deltas = all.flatMap((f, i) => (f.frame.case === "assistantDelta" && f.frame.value.sessionId === sessionId ? [{ delta: f.frame.value, i }] : []));
      assert.ok(deltas.every(({ i }) => i < at), "every delta of the step comes before its assistant/message");
      for (const [kind, whole] of [
        [TextKind.ANSWER, message.text],
        [TextKind.REASONING, message.reasoning],
      ] as const) {
        const pieces = deltas.map(({ delta }) => delta).filter((d) => d.kind === kind);
        assert.ok(pieces.length >= 2, `${TextKind[kind]} streamed in ${pieces.length} deltas`);
        let held = 0;
        for (const piece of pieces) {
          assert.equal(piece.turnId, step.turnId);
          assert.equal(piece.step, step.step);
          // Offsets count code points: "🙂" is one, though its length is 2.
          assert.equal(piece.offset, BigInt(held), `offset of ${JSON.stringify(piece.text)}`);
          held += codePointLength(piece.text);
        }
        assert.equal(pieces.map((d) => d.text).join(""), whole);
      }

      // LiveText folds the same frames into the same text, then ends it.
      const live = new LiveText(sessionId);
      let streamed = "";
      for (const frame of all.slice(0, at)) {
        const fresh = live.follow(frame);
        if (frame.frame.case === "assistantDelta" && frame.frame.value.kind === TextKind.ANSWER) streamed += fresh;
      }
      assert.equal(streamed, message.text);
      assert.equal(live.textOf(step.turnId, step.step), message.text);
      assert.equal(live.textOf(step.turnId, step.step, TextKind.REASONING), message.reasoning);
      assert.equal(live.gaps, 0);
      live.follow(messageFrame);
      assert.equal(live.textOf(step.turnId, step.step), "");
      await frames.waitFor(eventOf(sessionId, "turnEnd"), "turn/end event");
    } finally {
      frames.cancel();
    }
  });

  test("a reconnecting client and OpenSession get the text so far at offset 0", async () => {
    const { sessionId, frames } = await prompted("snapshot");
    let again: FrameReader | undefined;
    try {
      // The held reply streams its whole text, then waits before finishing.
      const live = new LiveText(sessionId);
      await frames.waitFor((f) => (live.follow(f), live.steps().some((s) => s.text === HELD.text)), `the held reply streamed whole; ${SCRIPT_HINT}`);
      const { turnId, step } = live.steps()[0]!;

      const opened = await raw.gateway.openSession({ sessionId });
      assert.equal(opened.running, true);
      assert.deepEqual(
        opened.live.map((d) => [d.turnId, d.step, d.kind, d.offset, d.text]),
        [[turnId, step, TextKind.ANSWER, 0n, HELD.text]],
      );
      const fromOpen = new LiveText(sessionId);
      fromOpen.open(opened);
      assert.equal(fromOpen.textOf(turnId, step), HELD.text);

      again = new FrameReader(rawClient("resume"), { [sessionId]: opened.seq });
      const first = await again.waitFor((f) => f.frame.case === "assistantDelta" && f.frame.value.sessionId === sessionId, "text so far on reconnect");
      assert.ok(first.frame.case === "assistantDelta");
      const piece = first.frame.value;
      assert.deepEqual([piece.turnId, piece.step, piece.kind, piece.offset, piece.text], [turnId, step, TextKind.ANSWER, 0n, HELD.text]);
      // A piece overlapping all of it adds nothing.
      assert.equal(fromOpen.add(piece), "");

      for (const reader of [frames, again]) {
        const logged = await reader.waitFor(eventOf(sessionId, "assistantMessage"), "assistant/message event");
        assert.ok(logged.frame.case === "sessionEvent" && logged.frame.value.event?.body.case === "assistantMessage");
        assert.equal(logged.frame.value.event.body.value.text, HELD.text);
      }
      await again.waitFor(eventOf(sessionId, "turnEnd"), "turn/end event");
      const resumed = [...again.frames];
      const loggedAt = resumed.findIndex(eventOf(sessionId, "assistantMessage"));
      assert.deepEqual(resumed.slice(loggedAt).filter((f) => f.frame.case === "assistantDelta"), [], "no delta of the step after its logged message");
    } finally {
      again?.cancel();
      frames.cancel();
    }
  });

  test("a pending plan choice made by another client is read from the stream", async () => {
    const client = sdkClient({ name: "pending" });
    try {
      const sessionId = await newSession();
      const session = await client.openSession(sessionId);
      assert.deepEqual(session.plan.state, { active: false });
      const updates: Update[] = [];
      session.onUpdate((update) => updates.push(update));
      await session.prompt("Hold on while I choose plan mode", PromptMode.SEND);
      await session.waitUntil((s) => s.live.steps().some((step) => step.text === HELD_FOR_PLAN.text), TIMEOUT_MS, `the held reply; ${SCRIPT_HINT}`);
      assert.equal(session.running, true);

      // Another client chooses plan mode while the turn runs: it waits for the next model request.
      const chosen = await raw.gateway.setPlanMode({ fence: raw.fence(), sessionId, active: true });
      assert.equal(chosen.outcome, SetOutcome.QUEUED);
      await session.waitUntil((s) => s.plan.state?.pending === true, TIMEOUT_MS, "the pending choice");
      assert.deepEqual(session.plan.state, { active: false, pending: true });
      assert.ok(
        // Struct keys come in no fixed order: compare as JSON values.
        updates.some((u) => u.kind === "projectionChanged" && u.key === "plan" && sameJson(u.value, { active: false, pending: true })),
        `the pending choice came as a plan projection frame: ${JSON.stringify(updates.filter((u) => u.kind === "projectionChanged"))}`,
      );
      // The turn ends without another model request: the choice stays pending.
      await session.waitUntil((s) => !s.running, TIMEOUT_MS, "the turn's end");
      assert.deepEqual(session.plan.state, { active: false, pending: true });

      // Choosing the committed value again cancels it, through this session's own selection.
      const cancelled = await session.setPlan(false);
      assert.equal(cancelled.outcome, SetOutcome.CANCELLED);
      assert.deepEqual(session.plan.state, { active: false });
    } finally {
      await client.close();
    }
  });

  test("a resumed stream presents its cursor and delivers every event exactly once", async () => {
    const transport = new GatedTransport(createNodeTransport({ address: gatewayAddress().address }));
    const client = sdkClient({ name: "resume", transport });
    try {
      const sessionId = await newSession();
      const session = await client.openSession(sessionId);
      const appended = new Map<bigint, number>();
      session.onUpdate((u) => u.kind === "eventAppended" && appended.set(u.event.seq, (appended.get(u.event.seq) ?? 0) + 1));
      const renamed = await raw.gateway.renameSession({ fence: raw.fence(), sessionId, title: "before the cut" });
      await session.waitUntil((s) => s.lastSeq >= 0n && s.summary !== undefined && appended.size > 0, TIMEOUT_MS, "the first event");
      assert.equal(renamed.session?.title, "before the cut");

      // Cut the stream and hold the reconnect back while the log moves on.
      transport.close();
      const generation = client.generation;
      const cursor = session.cursor;
      client.cut();
      await transport.changes.until(() => transport.waiting > 0, TIMEOUT_MS, "the held reconnect");
      await raw.gateway.renameSession({ fence: raw.fence(), sessionId, title: "while away" });
      await raw.gateway.setPlanMode({ fence: raw.fence(), sessionId, active: true });
      const last = await raw.gateway.setPlanMode({ fence: raw.fence(), sessionId, active: false });
      transport.open();

      await client.waitFor(() => client.connected && client.generation > generation, TIMEOUT_MS, "the reconnect");
      await session.waitUntil((s) => s.lastSeq >= last.seq, TIMEOUT_MS, "the missed events");
      const resumedWith = transport.requests.at(-1)!;
      assert.equal(resumedWith.generation, BigInt(client.generation));
      assert.equal(resumedWith.cursors[sessionId], cursor, "the reconnect presented the last seq held");
      const seqs = session.events.map((e) => e.seq);
      assert.deepEqual(seqs, [...seqs].sort((a, b) => Number(a - b)));
      assert.equal(new Set(seqs).size, seqs.length);
      assert.equal(seqs.at(-1), last.seq);
      for (const seq of seqs) assert.equal(appended.get(seq), 1, `event ${seq} delivered once`);
      // The commit that came in the catch-up wins over any older reply.
      await session.waitUntil((s) => s.plan.seq >= last.seq, TIMEOUT_MS, "the plan state as of the last commit");
      assert.deepEqual(session.plan.state, { active: false });
    } finally {
      transport.open();
      await client.close();
    }
  });

  test("a request fenced while the client reconnects is applied after the reconnect, not STALE", async () => {
    const transport = new GatedTransport(createNodeTransport({ address: gatewayAddress().address }));
    const client = sdkClient({ name: "reconnecting", transport });
    try {
      await client.connect();
      const sessionId = await newSession();
      const before = client.generation;
      // Lose the stream and hold the reconnect back: a request made now is
      // fenced before the new stream reaches the gateway.
      transport.close();
      client.cut();
      await transport.changes.until(() => transport.waiting > 0, TIMEOUT_MS, "the held reconnect");
      const fence = client.fence();
      transport.open();
      await client.waitFor(() => client.connected && client.generation > before, TIMEOUT_MS, "the reconnect");
      assert.equal(fence.generation, BigInt(client.generation), "fenced with the generation the reconnect presented");
      const renamed = await client.gateway.renameSession({ fence, sessionId, title: "typed while reconnecting" });
      assert.equal(renamed.session?.title, "typed while reconnecting");
    } finally {
      transport.open();
      await client.close();
    }
  });

  test("a request older than one applied is refused with a typed STALE error", async () => {
    const sessionId = await newSession();
    const client = rawClient("stale");
    await client.gateway.setPlanMode({ fence: client.fence(10), sessionId, active: true });
    const refused = await client.gateway.setPlanMode({ fence: client.fence(9), sessionId, active: false }).then(
      () => assert.fail("an older request was applied"),
      (error: unknown) => error,
    );
    assert.ok(refused instanceof AgentHostError, String(refused));
    assert.equal(refused.code, Code.FailedPrecondition);
    assert.equal(refused.reason, Reason.STALE);
    assert.equal(refused.domain, "agenthost");
    assert.ok(refused.stale);
    const { value } = await sdkPlan(sessionId);
    assert.deepEqual(value.state, { active: true }, "nothing was applied");
  });

  test("a plan read after this client's own plan write asks for that write or later", async () => {
    // Whichever gateway replica answers, the read reflects the write (minSeq).
    const asked: (bigint | undefined)[] = [];
    const recorder: Interceptor = (next) => async (request) => {
      if (request.method.name === "PlanMode") asked.push((request.message as PlanModeRequest).minSeq);
      return await next(request);
    };
    const { address, token } = gatewayAddress();
    const transport = createGrpcTransport({ baseUrl: `http://${address}`, interceptors: [recorder] });
    const client = new AgentHostClient({ transport, token, clientId: `ts-min-seq-${process.pid}` });
    try {
      const sessionId = await newSession();
      await client.planMode(sessionId);
      const written = await client.setPlanMode(sessionId, true);
      const read = await client.planMode(sessionId);
      assert.deepEqual(asked, [undefined, written.seq]);
      assert.ok(read.seq >= written.seq);
      assert.deepEqual(read.value.state, { active: true });
    } finally {
      await client.close();
    }
  });

  async function sdkPlan(sessionId: string) {
    const client = sdkClient({ name: "plan-read" });
    try {
      return await client.planMode(sessionId);
    } finally {
      await client.close();
    }
  }

  test("an invalid request is refused with its field violations", async () => {
    const sessionId = await newSession();
    const refused = await raw.gateway.renameSession({ fence: raw.fence(), sessionId, title: "" }).then(
      () => assert.fail("an empty title was accepted"),
      (error: unknown) => error,
    );
    assert.ok(refused instanceof AgentHostError, String(refused));
    assert.equal(refused.code, Code.InvalidArgument);
    assert.equal(refused.reason, Reason.INVALID_REQUEST);
    assert.ok(refused.violations.some((v) => v.field === "title" && v.description !== ""), JSON.stringify(refused.violations));
  });

  test("a session lists the configured models and switches its model; an unknown one is UNKNOWN_MODEL", async () => {
    const sessionId = await newSession();
    const client = sdkClient({ name: "models" });
    try {
      const session = await client.openSession(sessionId);
      const models = await session.listModels();
      assert.deepEqual(
        // `eyes` (a model that takes images) is the images test's.
        models.filter((m) => m.name !== "eyes").map((m) => [m.name, m.providerModel, m.contextWindow, m.isDefault]),
        [
          ["builtin", "builtin-echo", 32000, true],
          ["alt", "builtin-alt", 64000, false],
        ],
        "is the stack started with test/models.toml (AGENTHOST_MODELS_FILE)?",
      );
      assert.deepEqual(models[1]!.prices, { input: 1, output: 2, cachedInput: undefined });
      await session.waitUntil((s) => s.settings !== undefined, TIMEOUT_MS, "the settings projection");
      assert.equal(session.settings!.model, "");
      assert.equal(session.usage, undefined, "no model request yet");
      assert.equal((await session.setModel("alt")).model, "alt");
      await session.waitUntil((s) => s.settings?.model === "alt", TIMEOUT_MS, "the model in the settings projection");
      const refused = await session.setModel("gpt-9").then(
        () => assert.fail("an unknown model was accepted"),
        (error: unknown) => error,
      );
      assert.ok(refused instanceof AgentHostError, String(refused));
      assert.equal(refused.code, Code.InvalidArgument);
      assert.equal(refused.reason, Reason.UNKNOWN_MODEL);
      assert.match(refused.metadata["known"] ?? "", /^builtin,alt\b/);
      assert.equal(session.settings!.model, "alt", "nothing changed");
    } finally {
      await client.close();
    }
  });

  test("a session is found by a word of its title, the word highlighted in the snippet", async () => {
    const sessionId = await newSession();
    await raw.gateway.renameSession({ fence: raw.fence(), sessionId, title: "Kumquat ledger cleanup" });
    const client = sdkClient({ name: "search" });
    try {
      const found = await client.searchSessions("kumquat", { pageSize: 5 });
      assert.deepEqual(
        found.hits.map((hit) => hit.sessionId),
        [sessionId],
      );
      const [hit] = found.hits;
      assert.equal(hit!.title, "Kumquat ledger cleanup");
      assert.equal(hit!.snippetMatch, SearchMatch.TITLE);
      assert.deepEqual(
        hit!.snippet.filter((part) => part.highlighted).map((part) => part.text),
        ["Kumquat"],
      );
      const refused = await client.searchSessions("?!").then(
        () => assert.fail("a query without words was accepted"),
        (error: unknown) => error,
      );
      assert.ok(refused instanceof AgentHostError && refused.code === Code.InvalidArgument, String(refused));
    } finally {
      await client.close();
    }
  });

  test("a call without a token, or with an unknown one, is UNAUTHENTICATED", async () => {
    const { address } = gatewayAddress();
    for (const token of [undefined, "not-a-token"]) {
      const stranger = new AgentHostClient({ transport: createNodeTransport({ address }), ...(token === undefined ? {} : { token }) });
      await assert.rejects(stranger.gateway.listSessions({}), (error: unknown) => error instanceof AgentHostError && error.code === Code.Unauthenticated);
      await assert.rejects(stranger.connect(), (error: unknown) => error instanceof AgentHostError && error.code === Code.Unauthenticated);
      await stranger.close();
    }
  });
});
