// One session's event history as a client holds it (pure, no I/O).
//
// A contiguous window of the log, each event exactly once. Events arrive
// from the page of an open, the live stream, the catch-up after a reconnect
// and gap repair, in any order and possibly twice: duplicates are dropped,
// events beyond a gap wait until it is filled (`missing()` says which seqs
// to fetch), and malformed events never enter.

import type { Event } from "../gen/agenthost/sessionlog/v1/events_pb.js";
import { wellFormed } from "./validation.js";

/** Seqs `after < seq < before` are missing. */
export interface Gap {
  readonly after: bigint;
  readonly before: bigint;
}

export class History {
  readonly sessionId: string;
  events: Event[] = [];
  /** Whether older events exist before the window, and the `before_seq` of the next older page. */
  hasMore = false;
  beforeSeq = 0n;
  /** The last seq of the contiguous window (-1n: none yet). */
  lastSeq = -1n;
  /** Whether a base (a page) was applied; until then every event waits. */
  based = false;
  #ahead = new Map<bigint, Event>();

  constructor(sessionId: string) {
    this.sessionId = sessionId;
  }

  /**
   * A new window (an open, or a reopen after a resync): the page up to the
   * log's `lastSeq`. Events that came live meanwhile stay usable. Returns
   * the events newly in the window.
   */
  replace(events: Event[], page: { hasMore: boolean; beforeSeq: bigint; lastSeq: bigint }): Event[] {
    const sorted = events.filter((e) => wellFormed(e, this.sessionId)).sort(bySeq);
    const waiting = [...this.#ahead.values()];
    this.events = [];
    this.#ahead.clear();
    this.hasMore = page.hasMore;
    this.beforeSeq = page.beforeSeq;
    this.based = true;
    const first = sorted[0];
    this.lastSeq = first === undefined ? page.lastSeq : first.seq - 1n;
    return this.ingest([...sorted, ...waiting]);
  }

  /** Events in any order; returns those appended to the window, in seq order (each once ever). */
  ingest(events: Iterable<Event>): Event[] {
    for (const event of events) {
      if (!wellFormed(event, this.sessionId) || (this.based && event.seq <= this.lastSeq)) continue;
      if (!this.#ahead.has(event.seq)) this.#ahead.set(event.seq, event);
    }
    if (!this.based) return [];
    for (const seq of this.#ahead.keys()) if (seq <= this.lastSeq) this.#ahead.delete(seq);
    const appended: Event[] = [];
    for (let next = this.#ahead.get(this.lastSeq + 1n); next !== undefined; next = this.#ahead.get(this.lastSeq + 1n)) {
      this.#ahead.delete(next.seq);
      this.events.push(next);
      this.lastSeq = next.seq;
      appended.push(next);
    }
    return appended;
  }

  /** The first seq of the window (lastSeq + 1 when it is empty). */
  get base(): bigint {
    return this.events[0]?.seq ?? this.lastSeq + 1n;
  }

  /**
   * An older page: accepted only when contiguous and ending right before the
   * window. Returns what was added; throws (and changes nothing) otherwise.
   */
  prepend(events: Event[], page: { hasMore: boolean; beforeSeq: bigint }): Event[] {
    const base = this.base;
    const older = [...new Map(events.filter((e) => wellFormed(e, this.sessionId) && e.seq < base).map((e) => [e.seq, e])).values()].sort(bySeq);
    const contiguous = older.every((e, i) => i === 0 || e.seq === (older[i - 1] as Event).seq + 1n);
    const last = older[older.length - 1];
    if (last !== undefined && (last.seq + 1n !== base || !contiguous)) {
      throw new RangeError(`a page of seqs ${older[0]?.seq}..${last.seq} does not end right before seq ${base}`);
    }
    this.events.unshift(...older);
    this.hasMore = page.hasMore;
    this.beforeSeq = page.beforeSeq;
    return older;
  }

  /** The first gap between the window and events waiting beyond it. */
  missing(): Gap | undefined {
    if (!this.based || this.#ahead.size === 0) return undefined;
    const first = [...this.#ahead.keys()].reduce((a, b) => (a < b ? a : b));
    return { after: this.lastSeq, before: first };
  }
}

function bySeq(a: Event, b: Event): number {
  return a.seq < b.seq ? -1 : a.seq > b.seq ? 1 : 0;
}
