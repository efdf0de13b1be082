// History, the projection store and the typed errors on their own (no gateway).

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { BadRequestSchema, ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { AgentHostError, History, ProjectionStore, Reason } from "../src/index.js";
import { event } from "./messages.js";

const title = (seq: number, sessionId = "s1") => event(seq, { case: "sessionTitle", value: { title: `t${seq}` } }, sessionId);
const seqs = (history: History) => history.events.map((e) => Number(e.seq));

describe("History", () => {
  test("nothing is contiguous before a base page", () => {
    const history = new History("s1");
    assert.deepEqual(history.ingest([title(0)]), []);
    history.replace([], { hasMore: false, beforeSeq: 0n, lastSeq: -1n });
    assert.deepEqual(seqs(history), [0]);
  });

  test("duplicates are dropped and a gap is reported until filled", () => {
    const history = new History("s1");
    history.replace([title(0), title(1)], { hasMore: false, beforeSeq: 0n, lastSeq: 1n });
    assert.deepEqual(history.ingest([title(1), title(3)]), []);
    assert.deepEqual(history.missing(), { after: 1n, before: 3n });
    assert.deepEqual(history.ingest([title(2), title(2)]).map((e) => Number(e.seq)), [2, 3]);
    assert.equal(history.missing(), undefined);
    assert.deepEqual(seqs(history), [0, 1, 2, 3]);
  });

  test("malformed events never enter", () => {
    const history = new History("s1");
    history.replace([], { hasMore: false, beforeSeq: 0n, lastSeq: -1n });
    history.ingest([title(0, "s2"), event(0, { case: undefined })]);
    assert.deepEqual(seqs(history), []);
  });

  test("an older page with a gap is refused and the window stays", () => {
    const history = new History("s1");
    history.replace([title(5), title(6)], { hasMore: true, beforeSeq: 5n, lastSeq: 6n });
    assert.throws(() => history.prepend([title(2), title(3)], { hasMore: true, beforeSeq: 2n }), RangeError);
    assert.deepEqual(history.prepend([title(3), title(4), title(5)], { hasMore: false, beforeSeq: 0n }).map((e) => Number(e.seq)), [3, 4]);
    assert.deepEqual(seqs(history), [3, 4, 5, 6]);
  });
});

describe("ProjectionStore", () => {
  test("the higher seq wins; on an equal seq a frame wins over the block", () => {
    const store = new ProjectionStore();
    assert.deepEqual(store.seed({ plan: { active: false } }, 3n), ["plan"]);
    assert.equal(store.update("plan", { active: true }, 2n), false);
    assert.equal(store.update("plan", { active: false, pending: true }, 3n), true);
    assert.deepEqual(store.seed({ plan: { active: false } }, 3n), []);
    assert.deepEqual(store.get("plan"), { active: false, pending: true });
  });
});

describe("AgentHostError", () => {
  test("decodes ErrorInfo and BadRequest from a ConnectError", () => {
    const cause = new ConnectError("title: value length must be at least 1", Code.InvalidArgument, undefined, [
      { desc: ErrorInfoSchema, value: create(ErrorInfoSchema, { reason: "INVALID_REQUEST", domain: "agenthost" }) },
      { desc: BadRequestSchema, value: create(BadRequestSchema, { fieldViolations: [{ field: "title", description: "too short" }] }) },
    ]);
    const error = AgentHostError.from(cause);
    assert.equal(error.code, Code.InvalidArgument);
    assert.equal(error.reason, Reason.INVALID_REQUEST);
    assert.equal(error.domain, "agenthost");
    assert.deepEqual(error.violations, [{ field: "title", description: "too short" }]);
    assert.equal(AgentHostError.from(error), error);
  });

  test("an error without details has an empty reason", () => {
    const error = AgentHostError.from(new ConnectError("gone", Code.Unavailable));
    assert.equal(error.reason, "");
    assert.equal(error.transport, true);
  });
});
