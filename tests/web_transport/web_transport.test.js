// The gateway's web port through connect-web's own transports, as a page
// uses them: gRPC-Web and the Connect protocol, with protobuf-es stubs that
// buf generated from the image `make gen` writes. Run by
// tests/integration/test_web_transport.py, which starts the stack and sets
// AGENTHOST_WEB_URL and AGENTHOST_TOKEN. (CORS is a browser's rule, not
// fetch's in Node: test_gateway_web.py checks it on the wire.)
import assert from "node:assert/strict";
import { tmpdir } from "node:os";
import { test } from "node:test";

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";

import { GatewayService } from "./gen/agenthost/gateway/v1/gateway_pb.js";
import { BadRequestSchema, ErrorInfoSchema } from "./gen/google/rpc/error_details_pb.js";

const baseUrl = process.env.AGENTHOST_WEB_URL;
const token = process.env.AGENTHOST_TOKEN;
const WAIT_MS = 10_000;
// A session joins the workspace of a folder that exists where the stack runs.
const inProject = { case: "cwd", value: tmpdir() };

function client(makeTransport, withToken = true) {
  const bearer = (next) => async (request) => {
    request.header.set("authorization", `Bearer ${token}`);
    return next(request);
  };
  return createClient(
    GatewayService,
    makeTransport({ baseUrl, interceptors: withToken ? [bearer] : [] }),
  );
}

const transports = [
  ["gRPC-Web", createGrpcWebTransport],
  ["Connect", createConnectTransport],
];

let requestId = 0n;
function fence(clientId, generation = 0n) {
  requestId += 1n;
  return { clientId, generation, requestId };
}

async function refusal(call) {
  try {
    await call();
  } catch (error) {
    return ConnectError.from(error);
  }
  assert.fail("the call was not refused");
}

function reason(error) {
  return error.findDetails(ErrorInfoSchema)[0]?.reason;
}

for (const [name, makeTransport] of transports) {
  test(`${name}: a unary call with the bearer token`, async () => {
    const gateway = client(makeTransport);
    const created = await gateway.createSession({ target: inProject, fence: fence(`${name}-a`) });
    assert.ok(created.session.id);
    const listed = await gateway.listSessions({});
    assert.ok(listed.sessions.some((s) => s.id === created.session.id));
  });

  test(`${name}: a call without a token is unauthenticated`, async () => {
    const error = await refusal(() => client(makeTransport, false).listSessions({}));
    assert.equal(error.code, Code.Unauthenticated);
    assert.equal(reason(error), "UNAUTHENTICATED");
  });

  test(`${name}: a validation error carries its violations and reason`, async () => {
    const gateway = client(makeTransport);
    const error = await refusal(() =>
      gateway.createSession({
        target: { case: "cwd", value: "relative/path" },
        fence: fence(`${name}-b`),
      }),
    );
    assert.equal(error.code, Code.InvalidArgument);
    assert.equal(reason(error), "INVALID_REQUEST");
    const [badRequest] = error.findDetails(BadRequestSchema);
    assert.deepEqual(
      badRequest.fieldViolations.map((v) => v.field),
      ["cwd"],
    );
  });

  test(`${name}: the Connect stream delivers a session event as it happens`, async () => {
    const gateway = client(makeTransport);
    const clientId = `${name}-stream`;
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), WAIT_MS);
    try {
      const frames = gateway.connect({ clientId, generation: 0n }, { signal: abort.signal });
      const iterator = frames[Symbol.asyncIterator]();
      const first = await iterator.next();
      assert.equal(first.value.frame.case, "connected");
      const created = await gateway.createSession({ target: inProject, fence: fence(clientId) });
      const sessionId = created.session.id;
      await gateway.prompt({ sessionId, text: "hello", fence: fence(clientId) });
      for (;;) {
        const { value, done } = await iterator.next();
        assert.ok(!done, "the stream ended before the answer arrived");
        const frame = value.frame;
        if (
          frame.case === "sessionEvent" &&
          frame.value.sessionId === sessionId &&
          frame.value.event.body.case === "assistantMessage"
        ) {
          break; // arrived while the stream is still open
        }
      }
    } finally {
      clearTimeout(timer);
      abort.abort();
    }
  });

  test(`${name}: a stale generation gets the STALE reason`, async () => {
    const gateway = client(makeTransport);
    const clientId = `${name}-stale`;
    const created = await gateway.createSession({ target: inProject, fence: fence(clientId) });
    const abort = new AbortController();
    try {
      const frames = gateway.connect({ clientId, generation: 1n }, { signal: abort.signal });
      const first = await frames[Symbol.asyncIterator]().next();
      assert.equal(first.value.frame.case, "connected");
      const error = await refusal(() =>
        gateway.setPlanMode({
          sessionId: created.session.id,
          active: true,
          fence: fence(clientId, 0n),
        }),
      );
      assert.equal(error.code, Code.FailedPrecondition);
      assert.equal(reason(error), "STALE");
    } finally {
      abort.abort();
    }
  });
}
