// The plan fences, fed replies, projection values, commit events and
// reconnects in adversarial orders (no gateway needed).

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { PlanTracker, UNAVAILABLE, describeView, planState, type PlanTicket, type PlanValue } from "../src/index.js";

const value = (active: boolean, pending?: boolean): PlanValue => ({ state: planState(active, pending) });

/** A tracker whose first query confirmed plan mode. */
function confirmed(active = false, seq = 0n): PlanTracker {
  const tracker = new PlanTracker();
  tracker.onReply(tracker.begin("query"), value(active), seq);
  return tracker;
}

describe("plan state", () => {
  test("pending equal to active is not a state", () => {
    assert.throws(() => planState(true, true), RangeError);
    assert.equal(describeView({ available: true, state: planState(false, true), seq: 0n }), "off → on (pending)");
    assert.equal(describeView({ available: undefined, state: undefined, seq: -1n }), "unknown");
    assert.equal(describeView({ available: false, state: undefined, seq: -1n }), "unavailable");
  });
});

describe("request fence: one monotonic number over queries and selections", () => {
  test("an older query reply arriving after a newer selection's is dropped", () => {
    const tracker = confirmed();
    const query = tracker.begin("query");
    const selection = tracker.begin("select");
    tracker.onReply(selection, value(true), 2n);
    assert.equal(tracker.onReply(query, value(false), 1n).verdict, "older-request");
    assert.deepEqual(tracker.view.state, { active: true });
  });

  test("overlapping selections keep the newest whatever the reply order", () => {
    const tracker = confirmed();
    const first = tracker.begin("select");
    const second = tracker.begin("select");
    tracker.onReply(second, value(false, true), 3n);
    tracker.onReply(first, value(true), 3n);
    assert.deepEqual(tracker.view.state, { active: false, pending: true });
  });
});

describe("generation fence", () => {
  test("a reply to a request begun before a reconnect is dropped, even the newest", () => {
    const tracker = confirmed();
    const open = tracker.begin("open", 0);
    tracker.reconnected(1);
    assert.equal(tracker.onReply(open, value(true), 5n).verdict, "superseded");
    assert.deepEqual(tracker.view.state, { active: false });
  });

  test("a failure of a superseded request is not reported as a failure", () => {
    const tracker = confirmed();
    const selection = tracker.begin("select", 0);
    tracker.reconnected(1);
    assert.equal(tracker.onFailure(selection).verdict, "superseded");
    assert.equal(tracker.selectionFailed, undefined);
  });
});

describe("event-version fence", () => {
  test("a commit event newer than a reply wins over it", () => {
    const tracker = confirmed(false, 3n);
    const query = tracker.begin("query");
    assert.equal(tracker.onCommit(true, 7n).verdict, "value-applied");
    // The reply reflects seq 5: older than the commit at 7.
    assert.equal(tracker.onReply(query, value(false), 5n).verdict, "newer-known");
    assert.deepEqual(tracker.view.state, { active: true });
  });

  test("a commit clears a pending choice, as the log's fold does", () => {
    const tracker = confirmed();
    tracker.onProjection(value(false, true), 4n);
    tracker.onCommit(true, 5n);
    assert.deepEqual(tracker.view.state, { active: true });
  });

  test("commit events count only once a reply confirmed the feature", () => {
    const tracker = new PlanTracker();
    assert.equal(tracker.onCommit(true, 1n).verdict, "unconfirmed");
    assert.equal(tracker.view.available, undefined);
    const unavailable = new PlanTracker();
    unavailable.onReply(unavailable.begin("query"), UNAVAILABLE, 0n);
    assert.equal(unavailable.onCommit(true, 1n).verdict, "unconfirmed");
    assert.equal(unavailable.view.available, false);
  });

  test("an older or replayed commit changes nothing", () => {
    const tracker = confirmed(true, 6n);
    assert.equal(tracker.onCommit(false, 6n).verdict, "value-old");
    assert.equal(tracker.onCommit(false, 2n).verdict, "value-old");
    assert.deepEqual(tracker.view.state, { active: true });
  });
});

describe("projection values", () => {
  test("a value overtaking a query reply wins", () => {
    const tracker = confirmed();
    const query = tracker.begin("query");
    tracker.onProjection(value(true), 4n);
    assert.equal(tracker.onReply(query, value(false), 3n).verdict, "newer-known");
    assert.deepEqual(tracker.view.state, { active: true });
  });

  test("a block without plan says unavailable, a plan value says available", () => {
    const tracker = new PlanTracker();
    tracker.onProjection(UNAVAILABLE, 0n);
    assert.equal(tracker.view.available, false);
    tracker.onProjection(value(false), 1n);
    assert.equal(tracker.view.available, true);
  });

  test("a replaced history lets a lower seq count", () => {
    const tracker = confirmed(true, 9n);
    tracker.reset();
    tracker.onProjection(value(false), 2n);
    assert.deepEqual(tracker.view.state, { active: false });
  });
});

describe("failures", () => {
  test("a failed query keeps the last known state", () => {
    const tracker = confirmed(true, 1n);
    assert.equal(tracker.onFailure(tracker.begin("query")).verdict, "failed");
    assert.deepEqual(tracker.view.state, { active: true });
  });

  test("the latest selection failing is kept until a newer one begins", () => {
    const tracker = confirmed();
    const selection = tracker.begin("select");
    tracker.onFailure(selection);
    assert.equal(tracker.selectionFailed, selection);
    tracker.begin("select");
    assert.equal(tracker.selectionFailed, undefined);
  });
});

/** A small seeded PRNG (mulberry32) so the shuffled orders are reproducible. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Delivery = { reply: PlanTicket; value: PlanValue; seq: bigint } | { value: PlanValue; seq: bigint; commit?: boolean };

describe("any delivery order", () => {
  test("replies, values and commits in any order end at the state of the highest seq", () => {
    for (let seed = 1; seed <= 300; seed++) {
      const next = random(seed);
      const tracker = confirmed();
      let active = false;
      let pending: boolean | undefined;
      let seq = 0n;
      const deliveries: Delivery[] = [];
      for (let op = 0; op < Math.floor(next() * 12); op++) {
        const kind = ["commit", "select", "query"][Math.floor(next() * 3)];
        const ticket = tracker.begin(kind === "query" ? "query" : "select");
        if (kind === "commit") [active, pending] = [pending ?? !active, undefined];
        if (kind === "select") {
          const target = next() < 0.5;
          pending = target === active ? undefined : target;
        }
        if (kind !== "query") {
          seq += 1n;
          deliveries.push({ value: value(active, pending), seq });
          if (kind === "commit") deliveries.push({ value: value(active), seq, commit: true });
        }
        deliveries.push({ reply: ticket, value: value(active, pending), seq });
      }
      shuffle(deliveries, next);
      // Commit events carry no pending choice: a projection value of the same seq completes them.
      for (const item of deliveries) deliver(tracker, item);
      assert.deepEqual(tracker.view.state, planState(active, pending), `seed ${seed}`);
    }
  });
});

function deliver(tracker: PlanTracker, item: Delivery): void {
  if ("reply" in item) tracker.onReply(item.reply, item.value, item.seq);
  else if (item.commit) tracker.onCommit(item.value.state!.active, item.seq);
  else tracker.onProjection(item.value, item.seq);
}

function shuffle<T>(items: T[], next: () => number): void {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
}
