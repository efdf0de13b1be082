// The plan state of one session as a client sees it, behind its fences.
//
// Pure logic (no I/O): PlanTracker is fed the `plan` projection values the
// client receives (the page's block, live frames), committed plan/mode
// events from the stream, the replies of plan queries and selections, and
// reconnects, in whatever order they arrive, and decides what the view shows:
//
// - values, events and replies are stamped with the log seq they reflect;
//   the higher seq wins (a reply older than a value already known does not
//   replace it: the event-version fence);
// - generation fence: a reply to a request begun before a reconnect is dropped;
// - request fence: queries and selections share one monotonic request number;
//   a reply older than one already applied is dropped;
// - a committed plan/mode event counts only once a reply or a value has
//   confirmed that this deployment has plan mode;
// - a projection block without a `plan` key, or an "unavailable" reply, means
//   the deployment has no plan mode; any `plan` value says it has;
// - a failed query or selection leaves the state as it was; the latest
//   selection's failure is kept until a newer selection begins.

/**
 * `active` is the committed value; `pending`, when set, is the selected
 * target waiting for the next model request (it always differs from `active`).
 */
export interface PlanState {
  readonly active: boolean;
  readonly pending?: boolean;
}

/** A plan state, refusing `pending == active` (not a state). */
export function planState(active: boolean, pending?: boolean): PlanState {
  if (pending === undefined) return { active };
  if (pending === active) throw new RangeError("pending must differ from active");
  return { active, pending };
}

/** `off`, `on`, or `off → on (pending)`. */
export function describeState(state: PlanState): string {
  const onOff = (active: boolean): string => (active ? "on" : "off");
  return state.pending === undefined ? onOff(state.active) : `${onOff(state.active)} → ${onOff(state.pending)} (pending)`;
}

/** What one reply said: unavailable in this deployment (`state` undefined), or the state. */
export interface PlanValue {
  readonly state: PlanState | undefined;
}

export const UNAVAILABLE: PlanValue = { state: undefined };

/** The snapshot a session shows. */
export interface PlanView {
  /** undefined until a reply or value said whether the deployment has plan mode. */
  readonly available: boolean | undefined;
  readonly state: PlanState | undefined;
  /** The log seq the state reflects (-1n when none). */
  readonly seq: bigint;
}

export type RequestKind = "open" | "query" | "select";

/** One plan request: its number in the session's one sequence, and its generation. */
export interface PlanTicket {
  readonly number: number;
  readonly generation: number;
  readonly kind: RequestKind;
}

export type Verdict =
  | "applied"
  // A reply older than a value already known: the value wins (the reply
  // still confirms that plan mode exists).
  | "newer-known"
  | "older-request"
  | "superseded"
  | "failed"
  | "value-applied"
  | "value-old"
  // A plan/mode event before any reply confirmed the feature.
  | "unconfirmed";

export interface Decision {
  readonly verdict: Verdict;
  readonly ticket?: PlanTicket;
  readonly seq?: bigint;
  /** Whether the view changed. */
  readonly changed: boolean;
}

// Decisions kept for inspection (tests, debugging).
const DECISIONS_KEPT = 512;

/** The plan fences of one session; see the module comment. */
export class PlanTracker {
  #generation: number;
  #issued = 0;
  #appliedNumber = 0;
  #available: boolean | undefined = undefined;
  #state: PlanState | undefined = undefined;
  #stateSeq = -1n;
  #newestSelection = 0;
  #failedSelection: PlanTicket | undefined = undefined;
  readonly decisions: Decision[] = [];

  constructor(generation = 0) {
    this.#generation = generation;
  }

  get view(): PlanView {
    return { available: this.#available, state: this.#state, seq: this.#stateSeq };
  }

  /** The newest selection, when it failed (undefined once a newer one began). */
  get selectionFailed(): PlanTicket | undefined {
    return this.#failedSelection;
  }

  /** A new query, selection or open, numbered after every earlier one. */
  begin(kind: RequestKind, generation = this.#generation): PlanTicket {
    const ticket = { number: ++this.#issued, generation, kind };
    if (kind === "select") {
      this.#newestSelection = ticket.number;
      this.#failedSelection = undefined;
    }
    return ticket;
  }

  /** The connection's generation grew: requests begun before are superseded. */
  reconnected(generation: number): void {
    this.#generation = Math.max(this.#generation, generation);
  }

  /** A query's or selection's answer, behind the fences. */
  onReply(ticket: PlanTicket, value: PlanValue, seq: bigint): Decision {
    if (ticket.generation < this.#generation) return this.#decide("superseded", { ticket, seq });
    if (ticket.number <= this.#appliedNumber) return this.#decide("older-request", { ticket, seq });
    const before = this.view;
    this.#appliedNumber = ticket.number;
    if (value.state === undefined) {
      this.#set(false, undefined, seq);
      return this.#decide("applied", { ticket, seq }, before);
    }
    this.#available = true;
    if (seq < this.#stateSeq) return this.#decide("newer-known", { ticket, seq }, before);
    this.#set(true, value.state, seq);
    return this.#decide("applied", { ticket, seq }, before);
  }

  /** A `plan` projection value as of `seq` (UNAVAILABLE: the block had no `plan` key). */
  onProjection(value: PlanValue, seq: bigint): Decision {
    if (seq < this.#stateSeq) return this.#decide("value-old", { seq });
    const before = this.view;
    this.#set(value.state !== undefined, value.state, seq);
    return this.#decide("value-applied", { seq }, before);
  }

  /**
   * A committed plan/mode event from the stream (live, catch-up or a
   * repaired gap): it commits `active` and clears a pending choice, as the
   * log's fold does. Counts only once the feature is confirmed.
   */
  onCommit(active: boolean, seq: bigint): Decision {
    if (this.#available !== true) return this.#decide("unconfirmed", { seq });
    if (seq <= this.#stateSeq) return this.#decide("value-old", { seq });
    const before = this.view;
    this.#set(true, { active }, seq);
    return this.#decide("value-applied", { seq }, before);
  }

  /** A failed request (business error or transport): the state stays. */
  onFailure(ticket: PlanTicket): Decision {
    if (ticket.generation < this.#generation) return this.#decide("superseded", { ticket });
    if (ticket.kind === "select" && ticket.number === this.#newestSelection) this.#failedSelection = ticket;
    return this.#decide("failed", { ticket });
  }

  /** The history was replaced (a resync): the replacement's values count even at a lower seq. */
  reset(): void {
    this.#stateSeq = -1n;
  }

  #set(available: boolean, state: PlanState | undefined, seq: bigint): void {
    this.#available = available;
    this.#state = state;
    this.#stateSeq = seq;
  }

  #decide(verdict: Verdict, about: { ticket?: PlanTicket; seq?: bigint }, before?: PlanView): Decision {
    const changed = before !== undefined && !sameView(before, this.view);
    const decision: Decision = { verdict, ...about, changed };
    this.decisions.push(decision);
    if (this.decisions.length > DECISIONS_KEPT) this.decisions.shift();
    return decision;
  }
}

/** Views compare by availability and state, not by seq. */
export function sameView(a: PlanView, b: PlanView): boolean {
  return a.available === b.available && a.state?.active === b.state?.active && a.state?.pending === b.state?.pending;
}

/** `unknown`, `unavailable`, or the state. */
export function describeView(view: PlanView): string {
  if (view.available === undefined) return "unknown";
  if (!view.available || view.state === undefined) return "unavailable";
  return describeState(view.state);
}
