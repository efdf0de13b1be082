// An editor for the tests: spawns `agenthost acp`, speaks to it through the
// official client library (ClientSideConnection), records every message the
// agent sends and validates each against the protocol's published schema.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

const require = createRequire(import.meta.url);
const SCHEMA = JSON.parse(
  readFileSync(require.resolve("@agentclientprotocol/sdk/schema/schema.json"), "utf8"),
);

/** A validator of messages an agent sends: the schema's "Agent" branch. */
export function agentMessageValidator() {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  const integer = (min, max) => ({
    type: "number",
    validate: (n) => Number.isInteger(n) && n >= min && n <= max,
  });
  ajv.addFormat("uint16", integer(0, 65535));
  ajv.addFormat("uint32", integer(0, 2 ** 32 - 1));
  ajv.addFormat("uint64", integer(0, Number.MAX_SAFE_INTEGER));
  ajv.addFormat("int32", integer(-(2 ** 31), 2 ** 31 - 1));
  ajv.addFormat("int64", integer(Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER));
  ajv.addFormat("double", { type: "number", validate: Number.isFinite });
  const agent = SCHEMA.anyOf.find((branch) => branch.title === "Agent");
  return ajv.compile({ ...SCHEMA, anyOf: [agent] });
}

const validate = agentMessageValidator();

/** Resolves when `predicate(messages)` holds, checked on each message. */
function waiter(editor, predicate, what, timeoutMs) {
  return new Promise((resolve, reject) => {
    const check = () => {
      const found = predicate(editor.messages);
      if (found) {
        clearTimeout(timer);
        editor.watchers.delete(check);
        resolve(found);
      }
    };
    const timer = setTimeout(() => {
      editor.watchers.delete(check);
      reject(new Error(`timed out waiting for ${what}`));
    }, timeoutMs);
    editor.watchers.add(check);
    check();
  });
}

export class Editor {
  /** `choose(request)` picks a permission option id (the editor's person). */
  constructor(choose) {
    this.messages = []; // every message from the agent, in order
    this.invalid = []; // those the schema refused, with the errors
    this.permissionRequests = [];
    this.watchers = new Set();
    this.stderr = "";
    this.choose = choose;
    this.process = spawn(process.env.ACP_PYTHON, ["-m", "clients.cli", "acp"], {
      cwd: process.env.ACP_REPO,
      env: process.env,
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.process.stderr.on("data", (chunk) => {
      this.stderr += chunk;
    });
    this.exited = new Promise((resolve) => this.process.on("exit", (code) => resolve(code)));
    const stream = acp.ndJsonStream(
      Writable.toWeb(this.process.stdin),
      Readable.toWeb(this.process.stdout),
    );
    const recorded = stream.readable.pipeThrough(
      new TransformStream({
        transform: (message, controller) => {
          this.record(message);
          controller.enqueue(message);
        },
      }),
    );
    this.connection = new acp.ClientSideConnection(
      () => ({
        sessionUpdate: async () => {},
        requestPermission: async (request) => {
          this.permissionRequests.push(request);
          return { outcome: { outcome: "selected", optionId: this.choose(request) } };
        },
      }),
      { writable: stream.writable, readable: recorded },
    );
  }

  record(message) {
    this.messages.push(message);
    if (!validate(message)) {
      this.invalid.push({ message, errors: validate.errors });
    }
    for (const check of [...this.watchers]) check();
  }

  /** The session/update payloads of a session, in order. */
  updates(sessionId) {
    return this.messages
      .filter((m) => m.method === "session/update" && m.params.sessionId === sessionId)
      .map((m) => m.params.update);
  }

  waitFor(predicate, what, timeoutMs = 30000) {
    return waiter(this, predicate, what, timeoutMs);
  }

  async initialize() {
    return this.connection.initialize({
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
      clientInfo: { name: "agenthost-tests", version: "0" },
    });
  }

  async close() {
    this.process.stdin.end();
    return this.exited;
  }
}

/** The text of an update's content block ("" for other kinds). */
export function text(update) {
  return update.content && update.content.type === "text" ? update.content.text : "";
}
