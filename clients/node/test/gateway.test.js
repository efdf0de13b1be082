// Drives a running gateway: `python -m clients.cli up` prints its address and
// writes the token to DATA_DIR/token; pass both as AGENTHOST_GATEWAY and
// AGENTHOST_TOKEN (tests/integration/test_node_client.py does).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { FrameReader, GatewayClient, fromValue, loadGatewayService, status } from '../src/index.js';

const TIMEOUT_MS = 20_000;

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
