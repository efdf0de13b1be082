// Drives a running gateway: `python -m clients.cli up` prints its address and
// writes the token to DATA_DIR/token; pass both as AGENTHOST_GATEWAY and
// AGENTHOST_TOKEN (tests/integration/test_node_client.py does). The streaming
// tests need the built-in model scripted with test/builtin-script.json
// (AGENTHOST_BUILTIN_SCRIPT=clients/node/test/builtin-script.json for `up`),
// its replies consumed in order: they are the only tests that prompt.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import {
  FrameReader,
  GatewayClient,
  LiveText,
  TEXT_KIND_ANSWER,
  TEXT_KIND_REASONING,
  codePointLength,
  fromValue,
  loadGatewayService,
  status,
} from '../src/index.js';

const TIMEOUT_MS = 20_000;

/** @type {{ replies: { text: string, reasoning?: string, parts?: number, hold_s?: number }[] }} */
const SCRIPT = JSON.parse(readFileSync(new URL('./builtin-script.json', import.meta.url), 'utf8'));
const [STREAMED, HELD] = SCRIPT.replies;
const SCRIPT_HINT = 'is the stack scripted with test/builtin-script.json (AGENTHOST_BUILTIN_SCRIPT)?';

test('the scripted replies hold astral code points, so offsets are put to the test', () => {
  for (const reply of SCRIPT.replies) assert.ok(codePointLength(reply.text) < reply.text.length, reply.text);
});

test('the descriptor set yields GatewayService stubs', () => {
  const { service } = loadGatewayService();
  assert.equal(service.Connect.responseStream, true);
  for (const method of ['CreateSession', 'Connect', 'SetPlanMode', 'PlanMode']) {
    assert.equal(service[method].path, `/agenthost.gateway.v1.GatewayService/${method}`);
  }
});

test('map fields keep their map shape on the wire and in objects', () => {
  const { service } = loadGatewayService();
  const request = { client_id: 'c1', generation: 2, cursors: { s1: 4, s2: 0 } };
  const decoded = service.Connect.requestDeserialize(service.Connect.requestSerialize(request));
  assert.deepEqual(decoded, request);
});

test('fromValue turns a google.protobuf.Value into plain data', () => {
  const value = {
    kind: 'struct_value',
    struct_value: {
      fields: {
        active: { kind: 'bool_value', bool_value: true },
        tags: { kind: 'list_value', list_value: { values: [{ kind: 'string_value', string_value: 'a' }] } },
        none: { kind: 'null_value', null_value: 'NULL_VALUE' },
      },
    },
  };
  assert.deepEqual(fromValue(value), { active: true, tags: ['a'], none: null });
});

describe('against a running gateway', { timeout: TIMEOUT_MS }, () => {
  const address = process.env.AGENTHOST_GATEWAY ?? '';
  const token = process.env.AGENTHOST_TOKEN ?? '';
  /** @type {GatewayClient} */
  let gateway;

  before(() => {
    assert.ok(
      address && token,
      'set AGENTHOST_GATEWAY and AGENTHOST_TOKEN (start the stack with `python -m clients.cli up`)',
    );
    gateway = new GatewayClient({ address, token });
  });

  after(() => gateway?.close());

  test('setting plan mode shows on the stream and in PlanMode', async () => {
    const clientId = `node-test-${process.pid}`;
    const { session } = await gateway.call('CreateSession', { cwd: process.cwd() });
    assert.match(session.id, /^[A-Za-z0-9]/);

    const frames = new FrameReader(
      gateway.connect({ client_id: clientId, generation: 0, cursors: {} }),
    );
    try {
      const first = await frames.waitFor(() => true, { what: 'first frame' });
      assert.equal(first.frame, 'connected');
      assert.equal(first.connected.client_id, clientId);

      const set = await gateway.call('SetPlanMode', {
        fence: { client_id: clientId, generation: 0, request_id: 1 },
        session_id: session.id,
        active: true,
      });
      assert.equal(set.outcome, 'SET_OUTCOME_COMMITTED');
      assert.deepEqual(set.plan.state, { active: true });

      const { session_event: change } = await frames.waitFor(
        (f) =>
          f.frame === 'session_event' &&
          f.session_event.session_id === session.id &&
          f.session_event.event.body === 'plan_mode',
        { what: 'plan/mode event' },
      );
      assert.deepEqual(change.event.plan_mode, { active: true });
      assert.equal(change.seq, change.event.seq);

      const { session_projection: projection } = await frames.waitFor(
        (f) =>
          f.frame === 'session_projection' &&
          f.session_projection.session_id === session.id &&
          f.session_projection.key === 'plan' &&
          /** @type {any} */ (fromValue(f.session_projection.value))?.active === true,
        { what: 'plan projection change' },
      );
      assert.deepEqual(fromValue(projection.value), { active: true });
      assert.equal(projection.seq, change.seq);

      const read = await gateway.call('PlanMode', { session_id: session.id });
      assert.deepEqual(read.plan.state, { active: true });
      assert.ok(read.seq >= change.seq, `PlanMode reflects seq ${read.seq}`);

      const opened = await gateway.call('OpenSession', { session_id: session.id });
      assert.deepEqual(fromValue(opened.projections.plan), { active: true });
    } finally {
      frames.cancel();
    }
  });

  /**
   * @param {string} sessionId
   * @param {string} body
   */
  const eventOf = (sessionId, body) => (/** @type {any} */ f) =>
    f.frame === 'session_event' && f.session_event.session_id === sessionId && f.session_event.event.body === body;

  /**
   * Creates a session, connects as a fresh client and prompts it.
   *
   * @param {string} name
   */
  async function prompted(name) {
    const clientId = `node-${name}-${process.pid}`;
    const { session } = await gateway.call('CreateSession', { cwd: process.cwd() });
    const frames = new FrameReader(gateway.connect({ client_id: clientId, generation: 0, cursors: {} }));
    await frames.waitFor((f) => f.frame === 'connected', { what: 'connected frame' });
    const reply = await gateway.call('Prompt', {
      fence: { client_id: clientId, generation: 0, request_id: 1 },
      session_id: session.id,
      text: 'Stream me an answer 🙂',
      mode: 'PROMPT_MODE_SEND',
    });
    assert.equal(reply.mode, 'PROMPT_MODE_SEND');
    return { session, frames };
  }

  test('a streamed reply arrives as deltas before its logged message', async () => {
    const { session, frames } = await prompted('stream');
    try {
      const messageFrame = await frames.waitFor(eventOf(session.id, 'assistant_message'), {
        what: 'assistant/message event',
      });
      const { step_start: step } = (await frames.waitFor(eventOf(session.id, 'step_start'))).session_event.event;
      const message = messageFrame.session_event.event.assistant_message;
      assert.equal(message.text, STREAMED.text, SCRIPT_HINT);
      assert.equal(message.reasoning, STREAMED.reasoning, SCRIPT_HINT);

      const all = frames.frames;
      const at = all.indexOf(messageFrame);
      const deltas = all.filter((f) => f.frame === 'assistant_delta' && f.assistant_delta.session_id === session.id);
      assert.ok(
        deltas.every((f) => all.indexOf(f) < at),
        'every delta of the step comes before its assistant/message',
      );
      for (const [kind, whole] of [
        [TEXT_KIND_ANSWER, message.text],
        [TEXT_KIND_REASONING, message.reasoning],
      ]) {
        const pieces = deltas.map((f) => f.assistant_delta).filter((d) => d.kind === kind);
        assert.ok(pieces.length >= 2, `${kind} streamed in ${pieces.length} deltas`);
        let held = 0;
        for (const piece of pieces) {
          assert.equal(piece.turn_id, step.turn_id);
          assert.equal(piece.step, step.step);
          // Offsets count code points: "🙂" is one, though its length is 2.
          assert.equal(piece.offset, held, `offset of ${JSON.stringify(piece.text)}`);
          held += codePointLength(piece.text);
        }
        assert.equal(pieces.map((d) => d.text).join(''), whole);
      }

      // LiveText folds the same frames into the same text, then ends it.
      const live = new LiveText(session.id);
      let streamed = '';
      for (const frame of all.slice(0, at)) {
        const fresh = live.follow(frame);
        if (frame.frame === 'assistant_delta' && frame.assistant_delta.kind === TEXT_KIND_ANSWER) streamed += fresh;
      }
      assert.equal(streamed, message.text);
      assert.equal(live.textOf(step.turn_id, step.step), message.text);
      assert.equal(live.textOf(step.turn_id, step.step, TEXT_KIND_REASONING), message.reasoning);
      assert.equal(live.gaps, 0);
      live.follow(messageFrame);
      assert.equal(live.textOf(step.turn_id, step.step), '');

      await frames.waitFor(eventOf(session.id, 'turn_end'), { what: 'turn/end event' });
    } finally {
      frames.cancel();
    }
  });

  test('a reconnecting client and OpenSession get the text so far at offset 0', async () => {
    const { session, frames } = await prompted('snapshot');
    /** @type {FrameReader | undefined} */
    let again;
    try {
      // The held reply streams its whole text, then waits HELD.hold_s before finishing.
      const live = new LiveText(session.id);
      await frames.waitFor(
        (f) => (live.follow(f), live.steps().some((s) => s.text === HELD.text)),
        { what: 'the held reply streamed whole; ' + SCRIPT_HINT },
      );
      const [{ turn_id: turnId, step }] = live.steps();

      const opened = await gateway.call('OpenSession', { session_id: session.id });
      assert.equal(opened.running, true);
      assert.deepEqual(
        opened.live.map((/** @type {any} */ d) => [d.turn_id, d.step, d.kind, d.offset, d.text]),
        [[turnId, step, TEXT_KIND_ANSWER, 0, HELD.text]],
      );
      const fromOpen = new LiveText(session.id);
      fromOpen.open(opened);
      assert.equal(fromOpen.textOf(turnId, step), HELD.text);

      const clientId = `node-resume-${process.pid}`;
      again = new FrameReader(
        gateway.connect({ client_id: clientId, generation: 0, cursors: { [session.id]: opened.seq } }),
      );
      const { assistant_delta: first } = await again.waitFor(
        (f) => f.frame === 'assistant_delta' && f.assistant_delta.session_id === session.id,
        { what: 'text so far on reconnect' },
      );
      assert.deepEqual(
        [first.turn_id, first.step, first.kind, first.offset, first.text],
        [turnId, step, TEXT_KIND_ANSWER, 0, HELD.text],
      );
      // A piece overlapping all of it adds nothing.
      assert.equal(fromOpen.add(first), '');

      for (const reader of [frames, again]) {
        const { session_event: logged } = await reader.waitFor(eventOf(session.id, 'assistant_message'), {
          what: 'assistant/message event',
        });
        assert.equal(logged.event.assistant_message.text, HELD.text);
      }
      await again.waitFor(eventOf(session.id, 'turn_end'), { what: 'turn/end event' });
      const resumed = again.frames;
      const logged = resumed.findIndex(eventOf(session.id, 'assistant_message'));
      assert.deepEqual(
        resumed.slice(logged).filter((f) => f.frame === 'assistant_delta'),
        [],
        'no delta of the step after its logged message',
      );
    } finally {
      again?.cancel();
      frames.cancel();
    }
  });

  test('a call without a token is UNAUTHENTICATED', async () => {
    const anonymous = new GatewayClient({ address });
    try {
      await assert.rejects(anonymous.call('ListSessions'), { code: status.UNAUTHENTICATED });
    } finally {
      anonymous.close();
    }
  });

  test('a call with an unknown token is UNAUTHENTICATED', async () => {
    const stranger = new GatewayClient({ address, token: 'not-a-token' });
    try {
      await assert.rejects(stranger.call('ListSessions'), { code: status.UNAUTHENTICATED });
    } finally {
      stranger.close();
    }
  });
});
