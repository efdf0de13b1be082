// The client's connection to the gateway: one `Connect` stream with
// reconnects (bounded exponential backoff), unary calls, the open sessions.
//
// A confirmed stream that is lost makes a new, larger generation at once
// (attempts that never connect keep it); every request carries a
// RequestFence (client id, generation, a monotonic request id). On reconnect
// the client presents, per open session, the last seq it holds (its cursor),
// so the gateway sends what was missed and then live frames; a `resync`
// frame makes that session reopen. Frames are routed to the open sessions;
// frames of a session not open yet are held for an open that follows.

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, type Transport } from "@connectrpc/connect";
import {
  RequestFenceSchema,
  type CreateSessionRequestSchema,
  type ConnectResponse,
  type PlanModeRequestSchema,
  type PlanModeResponse,
  type RequestFence,
  type SearchSessionsRequestSchema,
  type SearchSessionsResponse,
  type SetPlanModeResponse,
} from "../gen/agenthost/gateway/v1/gateway_pb.js";
import type { SessionSummary } from "../gen/agenthost/sessionlog/v1/session_log_pb.js";
import type { Workspace } from "../gen/agenthost/workspace/v1/workspace_pb.js";
import { AgentHostError, Reason } from "./errors.js";
import { createGatewayClient, type GatewayClient } from "./gateway.js";
import type { PlanValue } from "./plan.js";
import type { SessionFeed, SessionHost } from "./feed.js";
import { Session } from "./session.js";
import { planValueOf } from "./validation.js";
import { Changes, delay } from "./wait.js";

/** What a session search is narrowed to (every field optional). */
export interface SearchOptions {
  /** Only the sessions of this workspace. */
  workspaceId?: string;
  includeArchived?: boolean;
  createdAfter?: Date;
  createdBefore?: Date;
  updatedAfter?: Date;
  updatedBefore?: Date;
  /** 20 when absent, at most 100. */
  pageSize?: number;
  /** A previous page's nextPageToken (for the same query). */
  pageToken?: string;
}

/** Delay before reconnect attempt n: initial * factor^n, capped, spread by ±jitter. */
export interface Backoff {
  initialMs: number;
  factor: number;
  maxMs: number;
  jitter: number;
  /** Give up (the client fails) after this many failed attempts in a row; undefined: never. */
  maxAttempts?: number;
}

export const DEFAULT_BACKOFF: Backoff = { initialMs: 50, factor: 2, maxMs: 2000, jitter: 0.1 };

export function backoffDelay(backoff: Backoff, attempt: number): number {
  const base = Math.min(backoff.maxMs, backoff.initialMs * backoff.factor ** Math.min(attempt, 64));
  return Math.max(0, base + base * backoff.jitter * (2 * Math.random() - 1));
}

export type ConnectionState = "idle" | "connecting" | "connected" | "reconnecting" | "superseded" | "closed";

export interface ClientOptions {
  /** How to reach the gateway: createNodeTransport(…) or createWebTransport(…). */
  transport: Transport;
  token?: string;
  /** Random per client unless given. */
  clientId?: string;
  generation?: number;
  backoff?: Backoff;
  callTimeoutMs?: number;
  /** No frame (heartbeats included) for this long means a dead stream; 0: never. */
  idleTimeoutMs?: number;
  messageLimit?: number;
}

// The gateway sends a heartbeat every 15 s by default.
const DEFAULT_IDLE_TIMEOUT_MS = 60_000;
const DEFAULT_CALL_TIMEOUT_MS = 10_000;
const DEFAULT_MESSAGE_LIMIT = 200;
// Frames held for sessions not opened yet: per session, and sessions held.
const EARLY_FRAMES_KEPT = 1000;
const EARLY_SESSIONS_KEPT = 64;

export type FrameListener = (frame: ConnectResponse) => void;

/** A stateless plan read or selection. */
export interface PlanAnswer {
  readonly value: PlanValue;
  readonly seq: bigint;
  readonly outcome?: number;
}

/** An async client of the gateway; see the module comment. */
export class AgentHostClient implements SessionHost {
  /** Every RPC, typed, with the token, typed errors and reply validation. */
  readonly gateway: GatewayClient;
  readonly clientId: string;
  generation: number;
  state: ConnectionState = "idle";
  /** Why the client stopped for good (superseded, unauthenticated, closed, gave up). */
  failure: AgentHostError | undefined = undefined;
  /** Confirmed connections and frames received (heartbeats included). */
  connects = 0;
  frames = 0;
  /** Wakes on every frame and state change (see `waitFor`). */
  readonly changes = new Changes();
  readonly callTimeoutMs: number;
  readonly messageLimit: number;
  readonly #backoff: Backoff;
  readonly #idleTimeoutMs: number;
  #requestId = 0;
  // The seq of this client's last plan write per session: its plan reads ask
  // for that seq or later, whichever gateway replica answers them.
  readonly #planWrittenAt = new Map<string, bigint>();
  #sessions = new Map<string, Session>();
  #early = new Map<string, ConnectResponse[]>();
  #listeners = new Set<FrameListener>();
  #running: Promise<void> | undefined = undefined;
  #stream: AbortController | undefined = undefined;
  #closing = new AbortController();
  #cut = false;

  constructor(options: ClientOptions) {
    this.gateway = createGatewayClient(options.transport, options.token === undefined ? {} : { token: options.token });
    this.clientId = options.clientId ?? `ts-${randomHex(16)}`;
    this.generation = options.generation ?? 0;
    this.#backoff = options.backoff ?? DEFAULT_BACKOFF;
    this.callTimeoutMs = options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
    this.#idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    this.messageLimit = options.messageLimit ?? DEFAULT_MESSAGE_LIMIT;
  }

  /** The next request's fence: this connection's generation and a new id. */
  fence(): RequestFence {
    return create(RequestFenceSchema, {
      clientId: this.clientId,
      generation: BigInt(this.generation),
      requestId: BigInt(++this.#requestId),
    });
  }

  /** A plan write of this client landed at `seq`. */
  planWritten(sessionId: string, seq: bigint): void {
    const before = this.#planWrittenAt.get(sessionId);
    if (before === undefined || seq > before) this.#planWrittenAt.set(sessionId, seq);
  }

  /** A plan read that reflects this client's own plan writes. */
  planRead(sessionId: string): MessageInitShape<typeof PlanModeRequestSchema> {
    return { fence: this.fence(), sessionId, minSeq: this.#planWrittenAt.get(sessionId) };
  }

  /** Call options with the client's deadline. */
  callOptions(timeoutMs = this.callTimeoutMs): { timeoutMs: number } {
    return { timeoutMs };
  }

  get connected(): boolean {
    return this.state === "connected";
  }

  /** The open session objects, by id. */
  get sessions(): ReadonlyMap<string, Session> {
    return this.#sessions;
  }

  // -- the stream -----------------------------------------------------------------

  /** Starts the stream (once) and waits until the gateway confirmed it. */
  async connect(timeoutMs = this.callTimeoutMs): Promise<void> {
    if (this.failure !== undefined) throw this.failure;
    if (this.#running === undefined) {
      this.#setState("connecting");
      this.#running = this.#run();
    }
    await this.#waitState(() => this.connected, timeoutMs);
  }

  /** Cuts the stream and reconnects at once (a new generation); returns it. */
  async reconnect(timeoutMs = this.callTimeoutMs): Promise<number> {
    if (this.#running === undefined) {
      await this.connect(timeoutMs);
      return this.generation;
    }
    const before = this.generation;
    this.cut();
    await this.#waitState(() => this.connected && this.generation > before, timeoutMs);
    return this.generation;
  }

  /** Cuts the current stream; the client reconnects at once with a new generation. */
  cut(): void {
    this.#cut = true;
    this.#stream?.abort();
  }

  /** Waits (at most `timeoutMs`) until `holds()`; checked on every frame and state change. */
  waitFor(holds: () => boolean, timeoutMs: number, what?: string): Promise<void> {
    return this.changes.until(holds, timeoutMs, what);
  }

  async #waitState(done: () => boolean, timeoutMs: number): Promise<void> {
    await this.waitFor(() => done() || this.failure !== undefined, timeoutMs, "the gateway stream");
    if (this.failure !== undefined) throw this.failure;
  }

  #setState(state: ConnectionState): void {
    this.state = state;
    this.changes.notify();
  }

  async #run(): Promise<void> {
    let attempt = 0;
    while (!this.#closing.signal.aborted) {
      const confirmed = await this.#streamOnceOrFail();
      if (confirmed === undefined || this.#closing.signal.aborted) return;
      const cut = this.#cut;
      this.#cut = false;
      if (confirmed || cut) this.#nextGeneration();
      this.#setState("reconnecting");
      for (const session of this.#sessions.values()) session.onDisconnected();
      if (confirmed) attempt = 0;
      if (cut) continue;
      if (this.#backoff.maxAttempts !== undefined && attempt >= this.#backoff.maxAttempts) {
        return this.#fail(new AgentHostError(`gave up after ${attempt} reconnect attempts`, { code: Code.Unavailable }));
      }
      await delay(backoffDelay(this.#backoff, attempt++), this.#closing.signal);
    }
  }

  // A new generation as soon as a stream the gateway confirmed is lost (or
  // cut), not after the backoff: a request made while reconnecting carries the
  // generation the next stream presents, so that stream never fences it out as
  // STALE. Attempts never confirmed are retried in the same generation.
  #nextGeneration(): void {
    this.generation += 1;
    for (const session of this.#sessions.values()) session.onGeneration(this.generation);
  }

  /**
   * One stream; whether it was confirmed, or undefined when the client failed
   * for good. A confirmed stream that fails (a gateway killed) is as lost as
   * one that ends: its generation is over either way.
   */
  async #streamOnceOrFail(): Promise<boolean | undefined> {
    const stream = { confirmed: false };
    try {
      return await this.#streamOnce(stream);
    } catch (thrown) {
      const error = AgentHostError.from(thrown);
      if (error.stale) {
        const superseded = new AgentHostError(error.message, { code: error.code, reason: Reason.SUPERSEDED, cause: error });
        this.#fail(superseded, "superseded");
        return undefined;
      }
      if (error.code === Code.Unauthenticated) {
        this.#fail(error);
        return undefined;
      }
      return stream.confirmed;
    }
  }

  /** One stream until it ends; `stream.confirmed` says whether the gateway confirmed it (also when it fails). */
  async #streamOnce(stream: { confirmed: boolean }): Promise<boolean> {
    const abort = new AbortController();
    this.#stream = abort;
    const idle = new IdleTimer(this.#idleTimeoutMs, () => abort.abort());
    try {
      const frames = this.gateway.connect({ clientId: this.clientId, generation: BigInt(this.generation), cursors: this.#cursors() }, { signal: abort.signal });
      for await (const frame of frames) {
        idle.reset();
        if (frame.frame.case === "connected") {
          stream.confirmed = true;
          this.#onConnected();
        } else {
          this.#dispatch(frame);
        }
      }
      return stream.confirmed;
    } catch (error) {
      // A stream we cut (reconnect, idle, close) ends quietly.
      if (abort.signal.aborted) return stream.confirmed;
      throw error;
    } finally {
      idle.stop();
      abort.abort();
      this.#stream = undefined;
    }
  }

  #cursors(): Record<string, bigint> {
    const cursors: Record<string, bigint> = {};
    for (const [id, session] of this.#sessions) {
      const cursor = session.cursor;
      if (cursor !== undefined) cursors[id] = cursor;
    }
    return cursors;
  }

  #onConnected(): void {
    this.connects += 1;
    this.#setState("connected");
    for (const session of this.#sessions.values()) session.onConnected(this.generation);
  }

  #dispatch(frame: ConnectResponse): void {
    this.frames += 1;
    for (const listener of this.#listeners) listener(frame);
    const sessionId = frameSessionId(frame);
    const session = this.#sessions.get(sessionId);
    if (session !== undefined) session.onFrame(frame);
    else if (sessionId) this.#keepEarly(sessionId, frame);
    this.changes.notify();
  }

  /** Holds a frame of a session not opened yet (bounded), so an open that follows misses nothing. */
  #keepEarly(sessionId: string, frame: ConnectResponse): void {
    let held = this.#early.get(sessionId);
    if (held === undefined) {
      held = [];
      this.#early.set(sessionId, held);
      if (this.#early.size > EARLY_SESSIONS_KEPT) this.#early.delete(this.#early.keys().next().value as string);
    }
    held.push(frame);
    if (held.length > EARLY_FRAMES_KEPT) held.shift();
  }

  /** Calls `listener` with every frame (other than `connected`); returns its remover. */
  addListener(listener: FrameListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #fail(error: AgentHostError, state: ConnectionState = "closed"): void {
    this.failure = error;
    this.#setState(state);
    for (const session of this.#sessions.values()) session.onDisconnected();
  }

  /** Stops the stream and closes every open session. */
  async close(): Promise<void> {
    this.failure ??= new AgentHostError("the client was closed", { reason: Reason.CLIENT_CLOSED });
    this.#closing.abort();
    for (const session of [...this.#sessions.values()]) await session.close();
    this.#stream?.abort();
    await this.#running;
    this.#setState("closed");
  }

  // -- sessions -------------------------------------------------------------------

  /** A live session object: history, then the full plan state, kept current from the stream. */
  async openSession(sessionId: string, messageLimit = this.messageLimit): Promise<Session> {
    const existing = this.#sessions.get(sessionId);
    if (existing !== undefined) return existing;
    await this.connect();
    const session = new Session(this, sessionId, messageLimit);
    this.#sessions.set(sessionId, session);
    for (const frame of this.#early.get(sessionId) ?? []) session.onFrame(frame);
    this.#early.delete(sessionId);
    try {
      await session.open();
    } catch (error) {
      await session.close();
      throw error;
    }
    return session;
  }

  /** @internal the session stopped following its frames (SessionHost). */
  closed(session: SessionFeed): void {
    if (this.#sessions.get(session.id) === session) this.#sessions.delete(session.id);
  }

  /** A new session in a workspace, or in the workspace of `cwd`; `sessionId` is the account's key for it. */
  async createSession(target: { cwd: string } | { workspaceId: string }, sessionId = ""): Promise<SessionSummary> {
    const where: MessageInitShape<typeof CreateSessionRequestSchema>["target"] =
      "cwd" in target ? { case: "cwd", value: target.cwd } : { case: "workspaceId", value: target.workspaceId };
    const reply = await this.gateway.createSession({ fence: this.fence(), sessionId, target: where }, this.callOptions());
    return required(reply.session, "CreateSession's session");
  }

  /** The sessions of the subagents a session started (its `task` calls), which the other lists leave out. */
  async listSubagents(sessionId: string): Promise<SessionSummary[]> {
    const reply = await this.gateway.listSessions({ parentSessionId: sessionId, pageSize: 500 }, this.callOptions());
    return reply.sessions;
  }

  /**
   * One page of the account's sessions found by `query` (words, "phrases", -excluded, `or`) in
   * their titles, prompts, answers and the paths their tools touched, best first, each with a
   * snippet whose matched words are `highlighted`; `nextPageToken` ("" at the end) asks for the
   * next page of the same query.
   */
  async searchSessions(query: string, options: SearchOptions = {}): Promise<SearchSessionsResponse> {
    const { createdAfter, createdBefore, updatedAfter, updatedBefore, ...plain } = options;
    const request: MessageInitShape<typeof SearchSessionsRequestSchema> = { ...plain, query };
    if (createdAfter !== undefined) request.createdAfter = timestampFromDate(createdAfter);
    if (createdBefore !== undefined) request.createdBefore = timestampFromDate(createdBefore);
    if (updatedAfter !== undefined) request.updatedAfter = timestampFromDate(updatedAfter);
    if (updatedBefore !== undefined) request.updatedBefore = timestampFromDate(updatedBefore);
    return await this.gateway.searchSessions(request, this.callOptions());
  }

  /** The workspace of an absolute path (the existing one when known). */
  async createWorkspace(path: string): Promise<Workspace> {
    const reply = await this.gateway.createWorkspace({ path }, this.callOptions());
    return required(reply.workspace, "CreateWorkspace's workspace");
  }

  /** The session New Session lands in: a reusable blank member, or a new one. */
  async connectWorkspace(workspaceId: string): Promise<{ session: SessionSummary; reused: boolean }> {
    const reply = await this.gateway.connectWorkspace({ fence: this.fence(), workspaceId }, this.callOptions());
    return { session: required(reply.session, "ConnectWorkspace's session"), reused: reply.reused };
  }

  /** A session's plan state, read without a session object. */
  async planMode(sessionId: string): Promise<PlanAnswer> {
    const reply: PlanModeResponse = await this.gateway.planMode(this.planRead(sessionId), this.callOptions());
    return { value: planValueOf(reply.plan), seq: reply.seq };
  }

  /** Selects plan mode for a session without a session object. */
  async setPlanMode(sessionId: string, active: boolean): Promise<PlanAnswer> {
    const reply: SetPlanModeResponse = await this.gateway.setPlanMode({ fence: this.fence(), sessionId, active }, this.callOptions());
    this.planWritten(sessionId, reply.seq);
    return { value: planValueOf(reply.plan), seq: reply.seq, outcome: reply.outcome };
  }
}

/** The session a frame is about ("" for connection-wide frames). */
export function frameSessionId(frame: ConnectResponse): string {
  const { case: kind, value } = frame.frame;
  switch (kind) {
    case "sessionEvent":
    case "sessionStatus":
    case "commandsChanged":
    case "sessionProjection":
    case "assistantDelta":
    case "toolOutput":
    case "resync":
      return value.sessionId;
    case "sessionAdded":
      return "";
    default:
      return "";
  }
}

export function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new AgentHostError(`${what} is missing`, { reason: Reason.INVALID_REPLY });
  return value;
}

/** Calls `onIdle` when `reset()` is not called for `ms` (0: never). */
class IdleTimer {
  #timer: ReturnType<typeof setTimeout> | undefined;
  constructor(
    readonly ms: number,
    readonly onIdle: () => void,
  ) {
    this.reset();
  }
  reset(): void {
    this.stop();
    if (this.ms > 0) this.#timer = setTimeout(this.onIdle, this.ms);
  }
  stop(): void {
    clearTimeout(this.#timer);
  }
}

function randomHex(length: number): string {
  const bytes = new Uint8Array(Math.ceil(length / 2));
  globalThis.crypto.getRandomValues(bytes);
  return [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("").slice(0, length);
}
