// The gateway called as most Node services call gRPC: @grpc/grpc-js, with
// the stubs loaded at run time by @grpc/proto-loader from the descriptor set
// `make gen` writes (gen/agenthost.binpb: every contract with its imports,
// protovalidate's included, which a checkout does not carry as .proto files).
// Started by tests/integration/test_node_grpc.py with AGENTHOST_GATEWAY,
// AGENTHOST_TOKEN, AGENTHOST_DESCRIPTORS and AGENTHOST_WORKSPACE.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

const WAIT_MS = 20_000;

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (tests/integration/test_node_grpc.py sets it)`);
  return value;
}

let gateway;
// The bearer token goes with every call (grpc-js puts call credentials only on TLS channels).
const auth = new grpc.Metadata();
auth.set("authorization", `Bearer ${required("AGENTHOST_TOKEN")}`);

before(() => {
  const definition = protoLoader.loadFileDescriptorSetFromBuffer(readFileSync(required("AGENTHOST_DESCRIPTORS")), {
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const { agenthost } = grpc.loadPackageDefinition(definition);
  gateway = new agenthost.gateway.v1.GatewayService(required("AGENTHOST_GATEWAY"), grpc.credentials.createInsecure());
});

after(() => gateway?.close());

function unary(method, request) {
  return new Promise((resolve, reject) => {
    gateway[method](request, auth, { deadline: Date.now() + WAIT_MS }, (error, reply) => (error ? reject(error) : resolve(reply)));
  });
}

/** The first frame of `stream` that `matches`, within the wait. */
function frame(stream, what, matches) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no frame: ${what}`)), WAIT_MS);
    const onData = (reply) => {
      if (!matches(reply)) return;
      clearTimeout(timer);
      stream.off("data", onData);
      resolve(reply);
    };
    stream.on("data", onData);
    stream.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

test("a session is created, followed with its cursor, prompted, and its answer streams", async () => {
  const created = await unary("CreateSession", { cwd: required("AGENTHOST_WORKSPACE") });
  const sessionId = created.session.id;
  assert.match(sessionId, /\S/);
  // Loaded from a descriptor set, a map<string, int64> is its entries: protobuf.js
  // rebuilds map fields as the repeated {key, value} messages they are on the wire.
  const stream = gateway.Connect({ client_id: "node-grpc", generation: "1", cursors: [{ key: sessionId, value: "-1" }] }, auth);
  try {
    const connected = await frame(stream, "connected", (reply) => reply.frame === "connected");
    assert.equal(connected.connected.generation, "1");
    const answered = frame(stream, "the answer", (reply) => reply.frame === "session_event" && reply.session_event.event.assistant_message?.text === "Echo: hello from node");
    const fence = { client_id: "node-grpc", generation: "1", request_id: "1" };
    const prompted = await unary("Prompt", { fence, session_id: sessionId, text: "hello from node" });
    assert.equal(prompted.running, true);
    const answer = await answered;
    assert.equal(answer.session_event.session_id, sessionId);
  } finally {
    stream.cancel();
  }
});

test("a cursor that names no session id is INVALID_ARGUMENT before any frame", async () => {
  const stream = gateway.Connect({ client_id: "node-grpc-2", generation: "1", cursors: [{ key: "not an id!", value: "0" }] }, auth);
  const error = await new Promise((resolve) => {
    stream.on("data", () => resolve(new Error("a frame came")));
    stream.on("error", resolve);
  });
  assert.equal(error.code, grpc.status.INVALID_ARGUMENT, String(error));
});
