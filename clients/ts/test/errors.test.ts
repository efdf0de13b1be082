// Typed errors as a caller reads them (offline: no gateway needed).

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { AgentHostError, Reason } from "../src/index.js";

describe("AgentHostError.from", () => {
  test("a call the gateway cut off reads as it going away, not as cancelled", () => {
    const error = AgentHostError.from(new ConnectError("CANCELLED", Code.Canceled));
    assert.equal(error.code, Code.Unavailable);
    assert.equal(error.reason, Reason.CUT_OFF);
    assert.ok(error.transport);
    assert.match(error.message, /may have taken effect/);
  });

  test("a call the caller aborted stays cancelled and is not a transport failure", () => {
    const abort = new AbortController();
    abort.abort();
    const error = AgentHostError.from(new ConnectError("aborted", Code.Canceled), abort.signal);
    assert.equal(error.code, Code.Canceled);
    assert.equal(error.reason, "");
    assert.ok(!error.transport);
  });
});
