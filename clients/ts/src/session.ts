// A live session as a client application holds it.
//
// Opening loads the page and the projection block as of one log position
// (history, plan, running status, the text so far of a running step), then
// queries the full plan state. From then on the connection's frames keep it
// current: events enter the history exactly once (gaps are repaired from
// history pages), projection values keep the one with the higher seq, the
// plan state moves behind the fences of PlanTracker, streamed text merges by
// offset. After a reconnect the session refreshes (a small page and a plan
// query); after a `resync` it reopens and replaces its history window.

import { create } from "@bufbuild/protobuf";
import type { ConnectResponse, OpenSessionResponse } from "../gen/agenthost/gateway/v1/gateway_pb.js";
import { PromptMode, type AssistantDelta, type ToolOutputDelta } from "../gen/agenthost/runtime/v1/runtime_pb.js";
import { ApprovalPolicy, QuestionAnswerSchema, Sandbox, SettingsOrigin, type Event, type QuestionAnswer } from "../gen/agenthost/sessionlog/v1/events_pb.js";
import type { SessionSummary } from "../gen/agenthost/sessionlog/v1/session_log_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { AgentHostError, Reason } from "./errors.js";
import type { SessionFeed, SessionHost } from "./feed.js";
import { History } from "./history.js";
import { LiveText, TextKind } from "./live.js";
import { PlanTracker, UNAVAILABLE, sameView, type Decision, type PlanTicket, type PlanValue, type PlanView } from "./plan.js";
import { modelInfoOf, settingsOf, usageOf, type ModelInfo, type Settings, type Usage } from "./models.js";
import { imageInput, todosOf, type ImageLike, type PathList, type Resource, type Todo } from "./context.js";
import { checkpointsOf, diffOf, restoredOf, subagentsOf, type Restored, type RewindWhat, type Subagent, type TurnCheckpoint, type TurnDiff } from "./checkpoints.js";
import { jsonOf, ProjectionStore, type JsonValue } from "./projection.js";
import { Changes } from "./wait.js";
import { frameEvent, isObject, planValueOf, planValueOfView, validEvents } from "./validation.js";

export { PromptMode };

/** What changed; `Session.onUpdate` listeners get them in order. */
export type Update =
  | { kind: "historyLoaded"; replaced: boolean }
  | { kind: "eventAppended"; event: Event }
  | { kind: "planChanged"; plan: PlanView }
  | { kind: "statusChanged"; running: boolean }
  | { kind: "projectionChanged"; key: string; value: JsonValue }
  | { kind: "commandsChanged" }
  | { kind: "connectionChanged"; connected: boolean; generation: number }
  | { kind: "textStreamed"; turnId: string; step: number; textKind: TextKind; delta: string; text: string }
  | { kind: "outputStreamed"; callId: string; delta: string; text: string };

/** A slash command a session offers: its name, what it does, how it is typed (`/review FILE`). */
export interface CommandInfo {
  readonly name: string;
  readonly description: string;
  readonly usage: string;
}

/** One plan query or selection: what the gateway said and what the fences made of it. */
export interface PlanReply {
  readonly value: PlanValue;
  readonly seq: bigint;
  readonly decision: Decision;
  /** Selections only: the SetOutcome. */
  readonly outcome?: number;
}

// The settings' wire values by name, as the `settings` projection names them.
const SANDBOXES: Record<number, string> = { [Sandbox.READ_ONLY]: "read-only", [Sandbox.WORKSPACE_WRITE]: "workspace-write", [Sandbox.FULL]: "full" };
const APPROVALS: Record<number, string> = { [ApprovalPolicy.ASK]: "ask", [ApprovalPolicy.ASK_FOR_COMMANDS]: "ask-for-commands", [ApprovalPolicy.NEVER]: "never" };

// A refresh after a reconnect only needs the newest messages: the stream's catch-up brings the events.
const REFRESH_MESSAGE_LIMIT = 1;
const REPAIR_MESSAGE_LIMIT = 500;

type LoadMode = "refresh" | "replace";

export class Session implements SessionFeed {
  readonly id: string;
  readonly messageLimit: number;
  summary: SessionSummary | undefined = undefined;
  readonly history: History;
  running = false;
  readonly live: LiveText;
  readonly projections = new ProjectionStore();
  readonly planTracker: PlanTracker;
  /** The last failed plan query or selection (undefined after a successful reply). */
  planError: AgentHostError | undefined = undefined;
  /** The last failed (re)load. */
  loadError: AgentHostError | undefined = undefined;
  closed = false;
  /** Frames dropped as malformed, loads superseded by a reconnect, loads, gap repairs. */
  ignoredFrames = 0;
  droppedLoads = 0;
  loads = 0;
  repairs = 0;
  readonly #client: SessionHost;
  readonly #changes = new Changes();
  readonly #listeners = new Set<(update: Update) => void>();
  #runningSeq = -1n;
  #lastEventSeq = -1n;
  #loadWanted: LoadMode | undefined = undefined;
  #loader: Promise<void> | undefined = undefined;
  #planTask: Promise<void> | undefined = undefined;
  #planAgain = false;
  #selecting = 0;
  #planDeferred = false;
  #repairing = false;

  /** @internal created by AgentHostClient.openSession. */
  constructor(client: SessionHost, id: string, messageLimit: number) {
    this.#client = client;
    this.id = id;
    this.messageLimit = messageLimit;
    this.history = new History(id);
    this.live = new LiveText(id);
    this.planTracker = new PlanTracker(client.generation);
  }

  /** The history window, contiguous, each event once, oldest first. */
  get events(): readonly Event[] {
    return this.history.events;
  }

  get lastSeq(): bigint {
    return this.history.lastSeq;
  }

  /** The plan view behind the fences. */
  get plan(): PlanView {
    return this.planTracker.view;
  }

  /** The sandbox, approval policy, model and network (the `settings` projection); undefined until the gateway said. */
  get settings(): Settings | undefined {
    return settingsOf(this.projections.get("settings"));
  }

  /** What the model requests used (the `usage` projection); undefined before the first request. */
  get usage(): Usage | undefined {
    return usageOf(this.projections.get("usage"));
  }

  /** The agent's task list (the `todos` projection); [] when it keeps none. */
  get todos(): Todo[] {
    return todosOf(this.projections.get("todos"));
  }

  /** What the connection presents on reconnect: the last seq held. */
  get cursor(): bigint | undefined {
    return this.history.based ? this.history.lastSeq : undefined;
  }

  // -- observing ------------------------------------------------------------------

  /** Calls `listener` with every update from now on; returns its remover. */
  onUpdate(listener: (update: Update) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Waits (at most `timeoutMs`) until `holds(this)`; checked after every change. */
  waitUntil(holds: (session: Session) => boolean, timeoutMs: number, what?: string): Promise<void> {
    return this.#changes.until(() => holds(this), timeoutMs, what);
  }

  #notify(updates: Update[]): void {
    for (const update of updates) for (const listener of this.#listeners) listener(update);
    this.#changes.notify();
  }

  // -- opening and reloading ------------------------------------------------------

  /** @internal the first load (REPLACE), then the plan query. */
  async open(): Promise<void> {
    this.#requestLoad("replace");
    await this.#loader;
    if (this.loads === 0) throw this.loadError ?? this.#client.failure ?? new AgentHostError("the session did not load");
    while (this.#planTask !== undefined) await this.#planTask;
  }

  #requestLoad(mode: LoadMode): void {
    if (this.closed) return;
    this.#loadWanted = this.#loadWanted === "replace" ? "replace" : mode;
    this.#loader ??= this.#runLoads().finally(() => {
      this.#loader = undefined;
      // Asked for while the loop was finishing.
      if (this.#loadWanted !== undefined && this.loads > 0) this.#requestLoad(this.#loadWanted);
    });
  }

  async #runLoads(): Promise<void> {
    while (this.#loadWanted !== undefined && !this.closed) {
      const mode = this.#loadWanted;
      this.#loadWanted = undefined;
      try {
        if (!(await this.#loadOnce(mode))) {
          // Superseded by a reconnect: load again in the new generation.
          this.droppedLoads += 1;
          if (this.#client.failure !== undefined) return;
          this.#loadWanted = this.#loadWanted === "replace" ? "replace" : mode;
          await this.#client.waitFor(() => this.#client.connected || this.#client.failure !== undefined, this.#client.callTimeoutMs).catch(() => undefined);
          continue;
        }
      } catch (error) {
        this.loadError = AgentHostError.from(error);
        if (this.loads === 0) return;
        continue;
      }
      this.loadError = undefined;
      this.#queryPlanSoon();
    }
  }

  /** One OpenSession; false when a reconnect superseded it (the generation fence). */
  async #loadOnce(mode: LoadMode): Promise<boolean> {
    const client = this.#client;
    const generation = client.generation;
    const limit = mode === "replace" ? this.messageLimit : REFRESH_MESSAGE_LIMIT;
    let reply: OpenSessionResponse;
    try {
      reply = await client.gateway.openSession({ fence: client.fence(), sessionId: this.id, messageLimit: limit }, client.callOptions());
    } catch (error) {
      if (AgentHostError.from(error).stale && client.generation !== generation) return false;
      throw error;
    }
    if (client.generation !== generation) return false;
    this.#applyOpen(reply, mode);
    return true;
  }

  #applyOpen(reply: OpenSessionResponse, mode: LoadMode): void {
    this.loads += 1;
    this.summary = reply.session;
    const before = this.plan;
    const events = validEvents(reply.events, this.id);
    const updates: Update[] = [];
    if (mode === "replace") {
      const replaced = this.history.based;
      if (replaced) this.#forgetForReplace();
      updates.push(...this.#appended(this.history.replace(events, { hasMore: reply.hasMore, beforeSeq: reply.beforeSeq, lastSeq: reply.seq })));
      updates.push({ kind: "historyLoaded", replaced });
    } else {
      updates.push(...this.#appended(this.history.ingest(events)));
    }
    updates.push(...this.#setRunning(reply.running, reply.seq));
    updates.push(...this.#applyBlock(reply));
    for (const delta of reply.live) updates.push(...this.#onText(delta));
    for (const delta of reply.liveOutput) updates.push(...this.#onOutput(delta));
    this.#notify([...updates, ...this.#planChange(before)]);
    this.#repairSoon();
  }

  #forgetForReplace(): void {
    this.planTracker.reset();
    this.projections.clear();
    this.live.restart();
  }

  #applyBlock(reply: OpenSessionResponse): Update[] {
    if (reply.projectionError) {
      this.planError = new AgentHostError(reply.projectionError, { reason: "PROJECTION_UNAVAILABLE" });
      return [];
    }
    // A block without `plan`: this deployment has no plan mode.
    if (!("plan" in reply.projections)) this.planTracker.onProjection(UNAVAILABLE, reply.seq);
    return Object.keys(reply.projections).sort().flatMap((key) => this.#onProjection(key, jsonOf(reply.projections[key]!), reply.seq));
  }

  // -- connection events (called by the client) ------------------------------------

  /** @internal a reconnect attempt begins: requests begun before are superseded. */
  onGeneration(generation: number): void {
    this.planTracker.reconnected(generation);
  }

  /** @internal */
  onConnected(generation: number): void {
    this.planTracker.reconnected(generation);
    this.#notify([{ kind: "connectionChanged", connected: true, generation }]);
    if (this.history.based) this.#requestLoad("refresh");
  }

  /** @internal */
  onDisconnected(): void {
    this.#notify([{ kind: "connectionChanged", connected: false, generation: this.#client.generation }]);
  }

  /** @internal one frame of this session. */
  onFrame(frame: ConnectResponse): void {
    if (this.closed) return;
    const before = this.plan;
    this.#notify([...this.#frameUpdates(frame), ...this.#planChange(before)]);
  }

  #frameUpdates(frame: ConnectResponse): Update[] {
    const { case: kind, value } = frame.frame;
    switch (kind) {
      case "sessionEvent":
        return this.#onEventFrame(frameEvent(value, this.id));
      case "sessionStatus":
        // It follows the turn event it reflects: the newest event seen.
        return this.#setRunning(value.running, this.#lastEventSeq);
      case "sessionProjection":
        if (value.value === undefined) return this.#ignored();
        return this.#onProjection(value.key, jsonOf(value.value), value.seq);
      case "assistantDelta":
        return this.#onText(value);
      case "toolOutput":
        return this.#onOutput(value);
      case "resync":
        this.#requestLoad("replace");
        return [];
      case "commandsChanged":
        return [{ kind: "commandsChanged" }];
      default:
        return [];
    }
  }

  #onEventFrame(event: Event | undefined): Update[] {
    if (event === undefined) return this.#ignored();
    if (event.seq > this.#lastEventSeq) this.#lastEventSeq = event.seq;
    const updates = this.#appended(this.history.ingest([event]));
    this.#repairSoon();
    return updates;
  }

  #ignored(): Update[] {
    this.ignoredFrames += 1;
    return [];
  }

  #setRunning(running: boolean, seq: bigint): Update[] {
    if (seq < this.#runningSeq) return [];
    this.#runningSeq = seq;
    if (running === this.running) return [];
    this.running = running;
    return [{ kind: "statusChanged", running }];
  }

  #planChange(before: PlanView): Update[] {
    return sameView(before, this.plan) ? [] : [{ kind: "planChanged", plan: this.plan }];
  }

  /** One projection value: the higher seq wins, then what it means. */
  #onProjection(key: string, value: JsonValue, seq: bigint): Update[] {
    if (!this.projections.update(key, value, seq)) return [];
    const updates: Update[] = [{ kind: "projectionChanged", key, value }];
    try {
      if (key === "plan") this.planTracker.onProjection(planValueOfView(value), seq);
      else if (key === "status" && isObject(value)) updates.push(...this.#setRunning(value["running"] === true, seq));
    } catch {
      // A malformed value is ignored: the state stays as it was.
      this.ignoredFrames += 1;
    }
    // Another client's pending choice shows no log event: ask for the full state.
    if (key === "plan") this.#queryPlanSoon();
    return updates;
  }

  #onText(delta: AssistantDelta): Update[] {
    const fresh = this.live.add(delta);
    if (!fresh) return [];
    const text = this.live.textOf(delta.turnId, delta.step, delta.kind);
    return [{ kind: "textStreamed", turnId: delta.turnId, step: delta.step, textKind: delta.kind, delta: fresh, text }];
  }

  #onOutput(delta: ToolOutputDelta): Update[] {
    const fresh = this.live.addOutput(delta);
    return fresh ? [{ kind: "outputStreamed", callId: delta.callId, delta: fresh, text: this.live.outputOf(delta.callId) }] : [];
  }

  // -- events ---------------------------------------------------------------------

  /** Events newly in the window: they end streamed text, move `running` and commit plan mode. */
  #appended(events: Event[]): Update[] {
    return events.flatMap((event) => {
      this.live.followEvent(event);
      const updates: Update[] = [{ kind: "eventAppended", event }];
      const body = event.body;
      if (body.case === "turnStart") updates.push(...this.#setRunning(true, event.seq));
      if (body.case === "turnEnd") updates.push(...this.#setRunning(false, event.seq));
      // The event-version fence: a commit newer than the state wins over older replies.
      if (body.case === "planMode") this.planTracker.onCommit(body.value.active, event.seq);
      return updates;
    });
  }

  #repairSoon(): void {
    if (this.closed || this.#repairing || this.history.missing() === undefined) return;
    this.#repairing = true;
    void this.#repair().finally(() => (this.#repairing = false));
  }

  /** Fetches the events missing before ones that arrived beyond a gap. */
  async #repair(): Promise<void> {
    const client = this.#client;
    for (let gap = this.history.missing(); gap !== undefined && !this.closed; ) {
      let page;
      try {
        page = await client.gateway.historyPage({ sessionId: this.id, beforeSeq: gap.before, messageLimit: REPAIR_MESSAGE_LIMIT }, client.callOptions());
      } catch {
        return; // the next event that arrives beyond the gap retries
      }
      this.repairs += 1;
      const before = this.plan;
      this.#notify([...this.#appended(this.history.ingest(validEvents(page.events, this.id))), ...this.#planChange(before)]);
      const now = this.history.missing();
      if (now !== undefined && now.after === gap.after) return; // the log does not have them (yet)
      gap = now;
    }
  }

  // -- plan mode ------------------------------------------------------------------

  /**
   * A background query (after a load, a plan projection frame). Coalesced,
   * and deferred while a selection is in flight: begun after it, the query
   * would be the newer request, and its reply read before the selection took
   * effect would shadow the selection's own reply.
   */
  #queryPlanSoon(): void {
    if (this.closed) return;
    if (this.#selecting > 0) {
      this.#planDeferred = true;
      return;
    }
    if (this.#planTask !== undefined) {
      this.#planAgain = true;
      return;
    }
    this.#planTask = this.#planLoop().finally(() => {
      this.#planTask = undefined;
      if (this.#planAgain && this.#selecting === 0) this.#queryPlanSoon();
    });
  }

  async #planLoop(): Promise<void> {
    do {
      if (this.#selecting > 0) {
        this.#planDeferred = true;
        return;
      }
      this.#planAgain = false;
      await this.refreshPlan().catch(() => undefined); // recorded in planError
    } while (this.#planAgain && !this.closed);
  }

  /** Queries the full plan state. A failure throws and leaves the state as it was. */
  async refreshPlan(timeoutMs?: number): Promise<PlanReply> {
    const client = this.#client;
    const ticket = this.planTracker.begin("query", client.generation);
    let value: PlanValue;
    let seq: bigint;
    try {
      const reply = await client.gateway.planMode(client.planRead(this.id), client.callOptions(timeoutMs));
      [value, seq] = [planValueOf(reply.plan), reply.seq];
    } catch (error) {
      throw this.#planFailed(ticket, error);
    }
    return this.#planReply(ticket, value, seq);
  }

  /**
   * Selects plan mode on or off: committed now when idle, pending until the
   * next model request while a turn runs. A failure (STALE, transport,
   * business error) throws and leaves the state as it was.
   */
  async setPlan(active: boolean, timeoutMs?: number): Promise<PlanReply> {
    const client = this.#client;
    const ticket = this.planTracker.begin("select", client.generation);
    this.#selecting += 1;
    try {
      const reply = await client.gateway.setPlanMode({ fence: client.fence(), sessionId: this.id, active }, client.callOptions(timeoutMs));
      client.planWritten(this.id, reply.seq);
      return this.#planReply(ticket, planValueOf(reply.plan), reply.seq, reply.outcome);
    } catch (error) {
      throw this.#planFailed(ticket, error);
    } finally {
      this.#selecting -= 1;
      if (this.#selecting === 0 && this.#planDeferred) {
        this.#planDeferred = false;
        this.#queryPlanSoon();
      }
    }
  }

  #planFailed(ticket: PlanTicket, thrown: unknown): AgentHostError {
    const error = AgentHostError.from(thrown);
    if (this.planTracker.onFailure(ticket).verdict === "failed") this.planError = error;
    this.#notify([]);
    return error;
  }

  #planReply(ticket: PlanTicket, value: PlanValue, seq: bigint, outcome?: number): PlanReply {
    const before = this.plan;
    const decision = this.planTracker.onReply(ticket, value, seq);
    if (decision.verdict !== "superseded" && decision.verdict !== "older-request") this.planError = undefined;
    this.#notify(this.#planChange(before));
    return { value, seq, decision, ...(outcome === undefined ? {} : { outcome }) };
  }

  // -- turns, commands, questions ------------------------------------------------------

  /**
   * Sends (AGENT_BUSY while a turn runs), queues or steers a user message;
   * with `planTarget`, plan mode is set to it first. Refused unsent
   * (PLAN_SELECTION_FAILED) when it targets plan mode while the latest
   * selection failed: select again first. Each `@path` of the text, and each
   * of `resources`, is attached to the message; one the agent may not read
   * refuses it (reason FILE_REFERENCE_REFUSED), nothing sent. `images`
   * (bytes, or a PromptImage) are sent with it: IMAGE_REFUSED for what is
   * no image, MODEL_TAKES_NO_IMAGES when the session's model takes none.
   */
  async prompt(
    text: string,
    mode: PromptMode = PromptMode.SEND,
    planTarget?: boolean,
    resources: readonly Resource[] = [],
    images: readonly ImageLike[] = [],
  ): Promise<{ mode: PromptMode; running: boolean; seq: bigint }> {
    const failed = this.planTracker.selectionFailed;
    if (planTarget !== undefined && failed !== undefined) {
      throw new AgentHostError(`the last plan selection (request ${failed.number}) failed; select again`, { reason: Reason.PLAN_SELECTION_FAILED });
    }
    const client = this.#client;
    const attached = resources.map((r) => ({ uri: r.uri, ...(r.text === undefined ? {} : { text: r.text }) }));
    const reply = await client.gateway.prompt(
      { fence: client.fence(), sessionId: this.id, text, mode, resources: attached, images: images.map(imageInput), ...(planTarget === undefined ? {} : { planTarget }) },
      client.callOptions(),
    );
    this.#notify(this.#setRunning(reply.running, reply.seq));
    if (planTarget !== undefined) this.#queryPlanSoon();
    return { mode: reply.mode, running: reply.running, seq: reply.seq };
  }

  /** An image a message of this session sent, by the digest its user/message's ImageRef holds. */
  async readImage(digest: string): Promise<{ mediaType: string; data: Uint8Array }> {
    const client = this.#client;
    const reply = await client.gateway.readImage({ sessionId: this.id, digest }, client.callOptions());
    return { mediaType: reply.image?.mediaType ?? "", data: reply.data };
  }

  /** Stops the running request; a pending plan selection is kept. */
  async cancel(): Promise<boolean> {
    const client = this.#client;
    return (await client.gateway.cancel({ fence: client.fence(), sessionId: this.id }, client.callOptions())).cancelled;
  }

  /** Runs a slash command (`plan` with "", "<message>" or "off"); after `/plan` the plan state is queried. */
  async executeCommand(name: string, args?: string): Promise<{ ok: boolean; message: string; seq: bigint }> {
    const client = this.#client;
    const reply = await client.gateway.executeCommand({ fence: client.fence(), sessionId: this.id, name, ...(args === undefined ? {} : { args }) }, client.callOptions());
    if (name === "plan") await this.refreshPlan().catch(() => undefined);
    return { ok: reply.ok, message: reply.message, seq: reply.seq };
  }

  // -- the way back: checkpoints, undo, redo, rewind; subagents --------------------------

  /** The conversation's turns that changed files, oldest first, each with its files and whether it was undone (the `checkpoints` projection). */
  get checkpoints(): TurnCheckpoint[] {
    return checkpointsOf(this.projections.get("checkpoints"));
  }

  /** The subagents this session's `task` calls started, oldest first (the `subagents` projection), with their usage; open one's transcript with `openSession(child.sessionId)`. */
  get subagents(): Subagent[] {
    return subagentsOf(this.projections.get("subagents"));
  }

  /** Puts back the files the last turn (or turn `turn`) changed; a file changed since is left alone (`skipped`) unless `force`; `check` only says what would happen. */
  async undo(turn?: number, options: { force?: boolean; check?: boolean } = {}): Promise<Restored> {
    return this.#restore("undo", turn === undefined ? [] : [String(turn)], options);
  }

  /** Applies the last undone turn's (or turn `turn`'s) changes again. */
  async redo(turn?: number, options: { force?: boolean; check?: boolean } = {}): Promise<Restored> {
    return this.#restore("redo", turn === undefined ? [] : [String(turn)], options);
  }

  /** Goes back to the end of turn `turn` (0: before the first): its files, the conversation (the model's view drops every later turn; the log keeps them), or both. */
  async rewind(turn: number, what: RewindWhat = "both", options: { force?: boolean; check?: boolean } = {}): Promise<Restored> {
    if (!["files", "conversation", "both"].includes(what)) throw new RangeError("what is files, conversation or both");
    return this.#restore("rewind", [String(turn), what], options);
  }

  async #restore(name: string, words: string[], options: { force?: boolean; check?: boolean }): Promise<Restored> {
    const args = [...words, ...(options.force === true ? ["--force"] : []), ...(options.check === true ? ["--check"] : [])];
    return restoredOf(await this.executeCommand(name, args.join(" ")), options.check === true);
  }

  /** The unified diff of the last turn's (or turn `turn`'s) changes, cut at the service's bound with a note. */
  async turnDiff(turn?: number): Promise<TurnDiff> {
    return diffOf(await this.executeCommand("diff", turn === undefined ? undefined : String(turn)));
  }

  /** The slash commands this session offers (ListCommands): the host's own, its capabilities' (`/context`, `/skills`, `/commands`) and the workspace's custom ones (prompt files). */
  async listCommands(): Promise<CommandInfo[]> {
    const client = this.#client;
    const reply = await client.gateway.listCommands({ sessionId: this.id }, client.callOptions());
    return reply.commands.map((c) => ({ name: c.name, description: c.description, usage: c.usage }));
  }

  /** The paths of the session's folder that start with `prefix` (what follows an `@`), as the agent's file tools see the folder. */
  async listPaths(prefix: string, limit = 0): Promise<PathList> {
    const client = this.#client;
    const reply = await client.gateway.listPaths({ sessionId: this.id, prefix, limit }, client.callOptions());
    return { entries: reply.entries.map((e) => ({ path: e.path, folder: e.folder })), truncated: reply.truncated };
  }

  /** The models this session can switch to (the deployment's models file), the default marked. */
  async listModels(): Promise<ModelInfo[]> {
    const client = this.#client;
    return (await client.gateway.listModels({ sessionId: this.id }, client.callOptions())).models.map(modelInfoOf);
  }

  /**
   * Switches the session's model ("" for the default), recorded in its log,
   * effective from the next model request. A name the deployment does not
   * configure is refused (reason UNKNOWN_MODEL) and changes nothing.
   */
  async setModel(name: string): Promise<Settings> {
    return this.setSettings({ model: name });
  }

  /**
   * Changes the sandbox, the approval policy, the model (see `setModel`)
   * and/or whether confined commands reach the network; recorded in the log,
   * effective for the next tool call or model request.
   */
  async setSettings(settings: { sandbox?: Sandbox; approvals?: ApprovalPolicy; model?: string; network?: boolean }): Promise<Settings> {
    const client = this.#client;
    const reply = await client.gateway.updateSessionSettings({ fence: client.fence(), sessionId: this.id, ...settings }, client.callOptions());
    const set = reply.settings;
    return {
      sandbox: SANDBOXES[set?.sandbox ?? 0] ?? "",
      approvals: APPROVALS[set?.approvals ?? 0] ?? "",
      model: set?.model ?? settings.model ?? "",
      network: set?.network ?? false,
      origin: set?.origin === SettingsOrigin.DEFAULTS ? "defaults" : "session",
      sources: set?.sources ?? [],
      problems: set?.problems ?? [],
    };
  }

  /** Answers an open question (the first answer wins); returns its seq. */
  async answerQuestion(questionId: string, answer: MessageInitShape<typeof QuestionAnswerSchema>["kind"]): Promise<bigint> {
    const client = this.#client;
    const body: QuestionAnswer = create(QuestionAnswerSchema, { kind: answer });
    return (await client.gateway.answerQuestion({ fence: client.fence(), sessionId: this.id, questionId, answer: body }, client.callOptions())).seq;
  }

  /** The page before the window; returns the events added (HISTORY_GAP when it does not fit). */
  async loadOlder(messageLimit = this.messageLimit): Promise<Event[]> {
    if (!this.history.hasMore) return [];
    const client = this.#client;
    const page = await client.gateway.historyPage({ sessionId: this.id, beforeSeq: this.history.beforeSeq, messageLimit }, client.callOptions());
    try {
      const added = this.history.prepend(validEvents(page.events, this.id), page);
      this.#notify([]);
      return added;
    } catch (error) {
      throw new AgentHostError(String(error), { reason: Reason.HISTORY_GAP, cause: error });
    }
  }

  /** Stops following the session (the client keeps running). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.#client.closed(this);
    await Promise.allSettled([this.#loader, this.#planTask]);
    this.#listeners.clear();
    this.#changes.notify();
  }
}
