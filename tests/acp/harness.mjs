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

// What the agent's messages carry, by method: the params of its requests and
// notifications, the results of its responses to the editor's requests.
const PARAMS = {
  "session/update": "SessionNotification",
  "session/request_permission": "RequestPermissionRequest",
};
const RESULTS = {
  initialize: "InitializeResponse",
  authenticate: "AuthenticateResponse",
  "session/new": "NewSessionResponse",
  "session/load": "LoadSessionResponse",
  "session/list": "ListSessionsResponse",
  "session/set_mode": "SetSessionModeResponse",
  "session/set_config_option": "SetSessionConfigOptionResponse",
  "session/prompt": "PromptResponse",
};

function schemaAjv() {
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
  return ajv;
}

/**
 * A validator of the messages an agent sends: `validate(message, method)`
 * (`method`: the editor's request a response answers) checks the JSON-RPC
 * envelope against the schema's "Agent" branch, then the params or result
 * against the definition of that method (the envelope alone would let any
 * payload pass as an extension message). Returns the errors ([] when valid).
 */
export function agentMessageValidator() {
  const ajv = schemaAjv();
  const agent = SCHEMA.anyOf.find((branch) => branch.title === "Agent");
  const envelope = ajv.compile({ ...SCHEMA, anyOf: [agent] });
  const definition = (name) =>
    ajv.compile({ $schema: SCHEMA.$schema, $defs: SCHEMA.$defs, $ref: `#/$defs/${name}` });
  const params = Object.fromEntries(Object.entries(PARAMS).map(([m, n]) => [m, definition(n)]));
  const results = Object.fromEntries(Object.entries(RESULTS).map(([m, n]) => [m, definition(n)]));
  const error = definition("Error");
  const check = (validate, value, where) => (validate(value) ? [] : [{ where, errors: validate.errors }]);
  return (message, method) => {
    const problems = check(envelope, message, "envelope");
    if (typeof message.method === "string") {
      const validate = params[message.method];
      if (!validate) return [...problems, { where: `unexpected method ${message.method}` }];
      return [...problems, ...check(validate, message.params, message.method)];
    }
    if ("error" in message) return [...problems, ...check(error, message.error, "error")];
    const validate = results[method];
    if (!validate) return [...problems, { where: `a response to an unknown request (${method})` }];
    return [...problems, ...check(validate, message.result, `${method} result`)];
  };
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
  /** `choose(request)` picks a permission option id, or a promise of one (the editor's person, who may take their time). */
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
    this.requested = new Map(); // the editor's request ids -> their methods
    const writable = new WritableStream({
      write: async (message) => {
        if (message.method && message.id !== undefined) this.requested.set(message.id, message.method);
        const writer = stream.writable.getWriter();
        try {
          await writer.write(message);
        } finally {
          writer.releaseLock();
        }
      },
    });
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
          this.notify();
          return { outcome: { outcome: "selected", optionId: await this.choose(request) } };
        },
      }),
      { writable, readable: recorded },
    );
  }

  record(message) {
    this.messages.push(message);
    const problems = validate(message, this.requested.get(message.id));
    if (problems.length > 0) {
      this.invalid.push({ message, problems });
    }
    this.notify();
  }

  /** Re-check what the test waits for (a message arrived, or the person was asked). */
  notify() {
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
