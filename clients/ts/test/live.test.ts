// LiveText on its own: no gateway needed.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { OpenSessionResponseSchema } from "../gen/agenthost/gateway/v1/gateway_pb.js";
import { LiveLimit } from "../gen/agenthost/runtime/v1/runtime_pb.js";
import { LiveText, TextKind, codePointLength, freshPart } from "../src/index.js";
import { delta, deltaFrame, eventFrame, event, output, outputFrame } from "./messages.js";

describe("code points", () => {
  test("codePointLength counts an emoji once", () => {
    assert.equal("a🙂b".length, 4);
    assert.equal(codePointLength("a🙂b"), 3);
    assert.equal(codePointLength(""), 0);
    // A ZWJ sequence is several code points (woman, ZWJ, laptop).
    assert.equal(codePointLength("👩‍💻"), 3);
  });

  test("freshPart skips whole code points", () => {
    assert.equal(freshPart(2, 0, "a🙂b"), "b");
    assert.equal(freshPart(1, 0, "a🙂b"), "🙂b");
    assert.equal(freshPart(3, 0, "a🙂b"), "");
    assert.equal(freshPart(5, 0, "a🙂b"), "");
    assert.equal(freshPart(3, 4, "x"), undefined);
  });
});

describe("LiveText", () => {
  test("pieces in order join up", () => {
    const live = new LiveText("s1");
    assert.equal(live.add(delta(0, "Hel")), "Hel");
    assert.equal(live.add(delta(3, "lo")), "lo");
    assert.equal(live.textOf("t1", 0), "Hello");
    assert.equal(live.gaps, 0);
  });

  test("an overlapping piece adds only its tail", () => {
    const live = new LiveText("s1");
    live.add(delta(0, "Hello"));
    assert.equal(live.add(delta(3, "lo, world")), ", world");
    assert.equal(live.add(delta(2, "llo")), "");
    assert.equal(live.textOf("t1", 0), "Hello, world");
  });

  test("a snapshot at offset 0 after pieces adds nothing twice", () => {
    const live = new LiveText("s1");
    live.add(delta(0, "Hel"));
    live.add(delta(3, "lo"));
    // A reconnect (or OpenSession's `live`) gives the text so far, maybe more.
    assert.equal(live.add(delta(0, "Hello")), "");
    assert.equal(live.add(delta(0, "Hello there")), " there");
    assert.equal(live.textOf("t1", 0), "Hello there");
  });

  test("a piece beyond what is held waits for the text before it", () => {
    const live = new LiveText("s1");
    live.add(delta(0, "Hel"));
    assert.equal(live.add(delta(5, " world")), "");
    assert.equal(live.gaps, 1);
    assert.equal(live.textOf("t1", 0), "Hel");
    // The next snapshot fills it.
    assert.equal(live.add(delta(0, "Hello world")), "lo world");
  });

  test("pieces relayed after OpenSession's text so far but read before it are not lost", () => {
    const live = new LiveText("s1");
    // The gateway took the snapshot ("Alpha "), then relayed two pieces that
    // the stream delivered before OpenSession's reply.
    assert.equal(live.add(delta(6, "bravo ")), "");
    assert.equal(live.add(delta(12, "charlie")), "");
    assert.equal(live.add(delta(0, "Alpha ")), "Alpha bravo charlie");
    assert.equal(live.add(delta(19, " delta")), " delta");
    assert.equal(live.textOf("t1", 0), "Alpha bravo charlie delta");
  });

  test("a step that ends drops the pieces it kept and takes no late ones", () => {
    const live = new LiveText("s1");
    live.add(delta(4, "late"));
    live.end("t1", 0);
    // An OpenSession reply read before the step's message was logged.
    assert.equal(live.add(delta(0, "text so far")), "");
    assert.equal(live.textOf("t1", 0), "");
    assert.equal(live.add(delta(0, "next step", { step: 1 })), "next step");
  });

  test("a turn that ends takes no late piece of any of its streams", () => {
    const live = new LiveText("s1");
    live.followEvent(event(1, { case: "stepStart", value: { turnId: "t1", step: 0 } }));
    live.add(delta(0, "Let me"));
    live.addOutput(output(0, "line 1\n"));
    // The step failed: no message is logged, the turn ends.
    live.followEvent(event(2, { case: "turnEnd", value: { turnId: "t1" } }));
    // An OpenSession reply read before the turn ended: its text so far.
    assert.equal(live.add(delta(0, "Let me look")), "");
    assert.equal(live.add(delta(0, "Thinking", { step: 0, kind: TextKind.REASONING })), "");
    assert.equal(live.addOutput(output(0, "line 1\nline 2\n")), "");
    assert.deepEqual(live.steps(), [], "nothing of the ended turn shows as running");
    assert.equal(live.outputOf("c1"), "");
    assert.equal(live.add(delta(0, "Next turn", { turn: "t2" })), "Next turn");
  });

  test("only the newest ended streams the contract names are remembered", () => {
    const live = new LiveText("s1");
    const kept = LiveLimit.ENDED_STREAMS_KEPT;
    for (let step = 0; step <= kept; step++) live.end("t1", step);
    // Each end() remembers two streams (answer and reasoning): step 0's were forgotten first.
    assert.equal(live.add(delta(0, "old", { step: 0 })), "old");
    assert.equal(live.add(delta(0, "newest", { step: kept })), "");
  });

  test("offsets count code points, not UTF-16 units (offline)", () => {
    const live = new LiveText("s1");
    assert.equal(live.add(delta(0, "a🙂")), "a🙂");
    // Held: 2 code points (3 UTF-16 units).
    assert.equal(live.add(delta(2, "b👩‍💻")), "b👩‍💻");
    assert.equal(live.add(delta(3, "👩‍💻c")), "c");
    assert.equal(live.add(delta(1, "🙂bX")), "");
    assert.equal(live.add(delta(7, "d")), "d");
    assert.equal(live.add(delta(9, "gap")), "");
    assert.equal(live.gaps, 1);
    assert.equal(live.textOf("t1", 0), "a🙂b👩‍💻cd");
    assert.equal(codePointLength(live.textOf("t1", 0)), 8);
  });

  test("streams are per step and kind; end() closes a step", () => {
    const live = new LiveText("s1");
    live.add(delta(0, "thinking", { kind: TextKind.REASONING }));
    live.add(delta(0, "answer"));
    live.add(delta(0, "next", { step: 1 }));
    assert.equal(live.textOf("t1", 0, TextKind.REASONING), "thinking");
    assert.equal(live.textOf("t1", 0), "answer");
    assert.deepEqual(
      live.steps().map(({ step, kind }) => [step, kind]),
      [
        [0, TextKind.REASONING],
        [0, TextKind.ANSWER],
        [1, TextKind.ANSWER],
      ],
    );
    live.end("t1", 0);
    assert.equal(live.textOf("t1", 0), "");
    assert.equal(live.textOf("t1", 0, TextKind.REASONING), "");
    assert.equal(live.textOf("t1", 1), "next");
    // Ended, a stream takes no late piece.
    assert.equal(live.add(delta(0, "answer")), "");
  });

  test("an unspecified kind is the answer", () => {
    const live = new LiveText();
    live.add(delta(0, "x", { kind: TextKind.UNSPECIFIED }));
    assert.equal(live.textOf("t1", 0, TextKind.ANSWER), "x");
  });

  test("command output streams by call id", () => {
    const live = new LiveText("s1");
    assert.equal(live.addOutput(output(0, "line 1\n")), "line 1\n");
    assert.equal(live.addOutput(output(0, "line 1\nline 2\n")), "line 2\n");
    assert.equal(live.outputOf("c1"), "line 1\nline 2\n");
    live.endOutput("c1");
    assert.equal(live.outputOf("c1"), "");
    assert.equal(live.addOutput(output(0, "line 1\nline 2\nline 3\n")), "");
  });

  test("follow() folds frames and the logged records end streams", () => {
    const live = new LiveText("s1");
    assert.equal(live.follow(eventFrame(1, { case: "stepStart", value: { turnId: "t1", step: 0 } })), "");
    assert.equal(live.follow(deltaFrame(delta(0, "Hi "))), "Hi ");
    assert.equal(live.follow(deltaFrame(delta(3, "there"))), "there");
    // Another session's pieces are not this one's.
    assert.equal(live.follow(deltaFrame(delta(0, "x", { session: "s2" }))), "");
    assert.equal(live.follow(outputFrame(output(0, "out"))), "out");
    assert.equal(live.textOf("t1", 0), "Hi there");

    live.follow(eventFrame(2, { case: "assistantMessage", value: { text: "Hi there" } }));
    assert.equal(live.textOf("t1", 0), "");
    assert.equal(live.outputOf("c1"), "out");
    live.follow(eventFrame(3, { case: "toolResult", value: { callId: "c1" } }));
    assert.equal(live.outputOf("c1"), "");

    live.follow(eventFrame(4, { case: "stepStart", value: { turnId: "t1", step: 1 } }));
    live.follow(deltaFrame(delta(0, "more", { step: 1 })));
    // A replayed older event (catch-up) changes nothing.
    live.follow(eventFrame(2, { case: "assistantMessage", value: { text: "Hi there" } }));
    assert.equal(live.textOf("t1", 1), "more");
    live.follow(eventFrame(5, { case: "turnEnd", value: { turnId: "t1" } }));
    assert.deepEqual(live.steps(), []);
  });

  test("open() takes an OpenSession reply: its page, then its snapshots", () => {
    const live = new LiveText("s1");
    live.open(
      create(OpenSessionResponseSchema, {
        events: [event(0, { case: "turnStart", value: { turnId: "t1" } }), event(1, { case: "stepStart", value: { turnId: "t1", step: 0 } })],
        live: [delta(0, "so far 🙂")],
      }),
    );
    assert.equal(live.textOf("t1", 0), "so far 🙂");
    // The stream goes on past the snapshot, in code points.
    assert.equal(live.add(delta(8, " and on")), " and on");
    live.follow(eventFrame(2, { case: "assistantMessage", value: { text: "so far 🙂 and on" } }));
    assert.equal(live.textOf("t1", 0), "");
  });
});
