// The TypeScript SDK's side of tests/integration/test_gateway_killed.py: a
// client prompts through AGENTHOST_GATEWAY and says so (one JSON line), waits
// for "restarted" on stdin while the test kills and restarts the gateway,
// then prompts again once it has reconnected and says with which generation.
import { createInterface } from "node:readline";
import { AgentHostClient } from "../../clients/ts/build/src/index.js";
import { createNodeTransport } from "../../clients/ts/build/src/node.js";

const WAIT_MS = 30_000;
const [cwd] = process.argv.slice(2);
const client = new AgentHostClient({ transport: createNodeTransport({ address: process.env.AGENTHOST_GATEWAY }), token: process.env.AGENTHOST_TOKEN });
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

function answered(text) {
  const echo = `Echo: ${text}`;
  return (session) => !session.running && session.events.some((e) => e.body.case === "assistantMessage" && e.body.value.text === echo);
}

async function promptAndWait(session, text) {
  await session.prompt(text);
  await session.waitUntil(answered(text), WAIT_MS, `the answer to ${text}`);
}

await client.connect();
const summary = await client.createSession({ cwd });
const session = await client.openSession(summary.id);
await promptAndWait(session, "before the kill");
const before = client.generation;
console.log(JSON.stringify({ step: "answered", generation: before, clientId: client.clientId, sessionId: session.id }));

const { value } = await lines.next();
if (value !== "restarted") throw new Error(`expected "restarted", got ${value}`);
await client.waitFor(() => client.connected && client.generation > before, WAIT_MS, "the reconnect");
await promptAndWait(session, "after the restart");
console.log(JSON.stringify({ step: "answered again", generation: client.generation }));
await client.close();
process.exit(0);
