// The page's state: one AgentHostClient (one Connect stream over gRPC-Web
// to the page's own origin), the account's workspaces and session list, and
// the open Session object of the TypeScript SDK. It shows only what the host
// returned: list rows come from ListSessions and the stream's frames, the
// open session's plan state from the session object's fenced replies (it
// queries the full state after history loads and on every reconnect), never
// from a guess of what a click will do.

import { AgentHostClient, AgentHostError, PromptMode, createWebTransport, jsonOf, type CommandInfo, type JsonValue, type ModelInfo, type PromptImage, type Restored, type Session } from "@agenthost/sdk/web";

export type Workspace = Awaited<ReturnType<AgentHostClient["createWorkspace"]>>;
export type Summary = NonNullable<Session["summary"]>;
export type SearchHit = Awaited<ReturnType<AgentHostClient["searchSessions"]>>["hits"][number];

/** What the sidebar's search box found: the query and its hits, best first. */
export interface SearchResults {
  query: string;
  hits: SearchHit[];
}
type Frame = Parameters<Parameters<AgentHostClient["addListener"]>[0]>[0];

/** A session row's markers, as the host last reported them. */
export interface Markers {
  running: boolean;
  /** The plan target waiting for the next model request, when one does. */
  planPending: boolean | undefined;
  /** What an open question waits for ("review", "approval", "answer"; "" none). */
  waiting: string;
}

// How long the page waits on the client between checks of its connection.
const WATCH_MS = 30_000;

/** The page's own commands; a session's command of the same name is not offered here. */
export const PAGE_COMMANDS: CommandInfo[] = [
  { name: "network", description: "Let the agent's commands reach the network, or not.", usage: "/network on|off" },
  { name: "help", description: "List the commands.", usage: "/help" },
];
// Commands whose result shows in the transcript by itself (their logged command/done).
const SHOWN_IN_TRANSCRIPT = new Set(["plan", "compact"]);

export class AppModel {
  readonly client: AgentHostClient;
  workspaces: Workspace[] = [];
  readonly summaries = new Map<string, Summary>();
  readonly #planPending = new Map<string, boolean | undefined>();
  session: Session | undefined = undefined;
  /** The models the open session can switch to (ListModels), the default marked. */
  models: ModelInfo[] = [];
  /** The open session's slash commands (ListCommands): the host's and the workspace's own. */
  commands: CommandInfo[] = [];
  /** A session being opened (shown as loading until it is). */
  opening: string | undefined = undefined;
  error: string | undefined = undefined;
  /** What the last command answered (e.g. the `/permissions` list). */
  notice: string | undefined = undefined;
  /** The sidebar's search (undefined: the box is empty, the lists show). */
  search: SearchResults | undefined = undefined;
  #searches = 0;
  /** Bumped on every change; React reads it through useSyncExternalStore. */
  version = 0;
  #listeners = new Set<() => void>();
  #stopSession: (() => void) | undefined = undefined;
  #closed = false;

  constructor(token: string, baseUrl: string) {
    this.client = new AgentHostClient({ transport: createWebTransport(baseUrl), token });
    this.client.addListener((frame) => this.#onFrame(frame));
  }

  subscribe = (listener: () => void): (() => void) => {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  };

  snapshot = (): number => this.version;

  changed(): void {
    this.version += 1;
    for (const listener of this.#listeners) listener();
  }

  /** Connects, loads the lists, and reloads them after every reconnect. */
  async start(): Promise<void> {
    await this.#attempt(() => this.client.connect());
    void this.#watchConnection();
  }

  async #watchConnection(): Promise<void> {
    let seen = { state: "", generation: -1 };
    while (!this.#closed && this.client.failure === undefined) {
      const now = { state: this.client.state, generation: this.client.generation };
      if (now.state === "connected" && (seen.state !== "connected" || now.generation !== seen.generation)) {
        await this.#attempt(() => this.reloadLists());
      }
      seen = now;
      this.changed();
      await this.client
        .waitFor(() => this.client.state !== seen.state || this.client.generation !== seen.generation, WATCH_MS)
        .catch(() => undefined);
    }
    this.changed();
  }

  async reloadLists(): Promise<void> {
    const [workspaces, sessions] = await Promise.all([
      this.client.gateway.listWorkspaces({}, this.client.callOptions()),
      this.client.gateway.listSessions({ pageSize: 500 }, this.client.callOptions()),
    ]);
    this.workspaces = workspaces.workspaces;
    this.summaries.clear();
    for (const summary of sessions.sessions) this.summaries.set(summary.id, summary);
    this.changed();
  }

  // -- what the page shows ---------------------------------------------------------

  /** A workspace's rows: every member that is not blank, and the open blank one. */
  sessionsOf(workspace: Workspace): Summary[] {
    const archived = new Set(workspace.archivedSessionIds);
    return workspace.sessionIds
      .map((id) => this.summaries.get(id))
      .filter((s): s is Summary => s !== undefined && !archived.has(s.id))
      .filter((s) => !s.blank || s.id === this.session?.id)
      .sort((a, b) => Number((b.updatedAt?.seconds ?? 0n) - (a.updatedAt?.seconds ?? 0n)));
  }

  markers(id: string): Markers {
    const open = this.session?.id === id ? this.session : undefined;
    const summary = this.summaries.get(id);
    if (open !== undefined) {
      return { running: open.running, planPending: open.plan.state?.pending, waiting: waitingOf(open.projections.get("questions")) };
    }
    return { running: summary?.running ?? false, planPending: this.#planPending.get(id), waiting: summary?.waiting ?? "" };
  }

  // -- actions ----------------------------------------------------------------------

  /**
   * Searches the account's sessions (titles, prompts, answers, the paths tools touched);
   * an empty query clears the results. Only the latest query's answer is shown.
   */
  async searchSessions(query: string): Promise<void> {
    const asked = ++this.#searches;
    if (!query.trim()) {
      this.search = undefined;
      this.changed();
      return;
    }
    await this.#attempt(async () => {
      const found = await this.client.searchSessions(query, { pageSize: 20 });
      if (asked !== this.#searches) return; // a newer query was typed meanwhile
      this.search = { query, hits: found.hits };
    });
    this.changed();
  }

  async addWorkspace(path: string): Promise<void> {
    await this.#attempt(async () => {
      await this.client.createWorkspace(path);
      await this.reloadLists();
    });
  }

  /** New Session: the workspace's reusable blank session, or a new one. */
  async newSession(workspaceId: string): Promise<void> {
    await this.#attempt(async () => {
      const { session } = await this.client.connectWorkspace(workspaceId);
      this.summaries.set(session.id, session);
      await this.reloadLists();
      await this.openSession(session.id);
    });
  }

  async openSession(id: string): Promise<void> {
    if (this.session?.id === id) return;
    await this.closeSession();
    this.opening = id;
    this.changed();
    try {
      await this.#attempt(async () => {
        const session = await this.client.openSession(id);
        this.session = session;
        this.#stopSession = session.onUpdate((update) => {
          if (update.kind === "commandsChanged") void this.#attempt(() => this.#listCommands(session));
          this.changed();
        });
        this.models = await session.listModels();
        await this.#listCommands(session);
      });
    } finally {
      this.opening = undefined;
      this.changed();
    }
  }

  async closeSession(): Promise<void> {
    const session = this.session;
    this.#stopSession?.();
    this.session = undefined;
    this.#stopSession = undefined;
    if (session !== undefined) await session.close();
  }

  /**
   * A message, or a command: the page's own (`/help`, `/network on|off`) or
   * one the session lists (`/plan`, `/compact`, `/permissions`, a custom
   * command of the workspace, ...); while a turn runs a message is queued.
   * A `/word` that names no command is sent as a message.
   */
  async submit(text: string, images: readonly PromptImage[] = []): Promise<boolean> {
    const session = this.session;
    if (session === undefined) return false;
    this.notice = undefined; // the last command's answer gives way to what comes next
    return this.#attempt(async () => {
      const typed = /^\/([a-z][a-z0-9_-]*)(?:\s+([\s\S]*))?$/.exec(text.trim());
      const name = typed?.[1] ?? "";
      const args = typed?.[2]?.trim() || undefined;
      if (name === "help") {
        this.notice = helpText(await this.#listCommands(session));
        return;
      }
      if (name === "network" && (args === "on" || args === "off")) {
        await session.setSettings({ network: args === "on" });
        return;
      }
      if (name !== "" && (await this.#offers(session, name))) {
        if (images.length > 0) throw new Error("images go with a message, not with a command");
        const reply = await session.executeCommand(name, args);
        if (!reply.ok) throw new Error(reply.message || `/${name} failed`);
        this.notice = SHOWN_IN_TRANSCRIPT.has(name) ? undefined : reply.message || undefined;
        return;
      }
      await session.prompt(text, session.running ? PromptMode.QUEUE : PromptMode.SEND, undefined, [], images);
    });
  }

  /** The session's commands, asked again (a prompt file may have been added since). */
  async #listCommands(session: Session): Promise<CommandInfo[]> {
    const commands = await session.listCommands();
    if (this.session === session) this.commands = commands;
    return commands;
  }

  /** Whether the session offers `/name`; the list is asked again before a no. */
  async #offers(session: Session, name: string): Promise<boolean> {
    const page = PAGE_COMMANDS.some((c) => c.name === name);
    if (page) return false;
    if (this.commands.some((c) => c.name === name)) return true;
    return (await this.#listCommands(session)).some((c) => c.name === name);
  }

  /** Plan mode on or off: committed now when idle, pending while a turn runs. */
  async choosePlan(active: boolean): Promise<void> {
    const session = this.session;
    if (session !== undefined) await this.#attempt(() => session.setPlan(active));
  }

  /** The session's model from its next model request (the host records it; the selector shows what it holds). */
  async chooseModel(name: string): Promise<void> {
    const session = this.session;
    if (session !== undefined) await this.#attempt(() => session.setModel(name));
  }

  async cancel(): Promise<void> {
    const session = this.session;
    if (session !== undefined) await this.#attempt(() => session.cancel());
  }

  /** Revokes a permission rule (`/permissions revoke RULE_ID`). */
  async revokeRule(ruleId: string): Promise<void> {
    const session = this.session;
    if (session === undefined) return;
    await this.#attempt(async () => {
      const reply = await session.executeCommand("permissions", `revoke ${ruleId}`);
      if (!reply.ok) throw new Error(reply.message || "revoke failed");
    });
  }

  /** Undo or redo (the `restore` given), its reply shown; a failure shown as an error. */
  async restore(restore: (options: { force?: boolean; check?: boolean }) => Promise<Restored>, options: { force?: boolean; check?: boolean }): Promise<Restored | undefined> {
    let done: Restored | undefined;
    await this.#attempt(async () => {
      done = await restore(options);
      if (!done.ok) throw new Error(done.message);
      if (options.check !== true) this.notice = done.message;
    });
    return done;
  }

  /** A turn's diff (undefined when it failed: the error shows). */
  async turnDiff(session: Session, turn: number): Promise<string | undefined> {
    let text: string | undefined;
    await this.#attempt(async () => {
      const diff = await session.turnDiff(turn);
      if (!diff.ok) throw new Error(diff.message);
      text = diff.text;
    });
    return text;
  }

  /** The sessions a subagent's transcript was opened from: child id -> parent id. */
  readonly parents = new Map<string, string>();

  /** Opens a subagent's transcript, remembering the session it was opened from. */
  async openChild(parentId: string, childId: string): Promise<void> {
    this.parents.set(childId, parentId);
    await this.openSession(childId);
  }

  async answer(questionId: string, answer: Parameters<Session["answerQuestion"]>[1]): Promise<void> {
    const session = this.session;
    if (session !== undefined) await this.#attempt(() => session.answerQuestion(questionId, answer));
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.client.close();
  }

  /** Runs an action; a failure is shown (and returned as false), never thrown. */
  async #attempt(action: () => Promise<unknown>): Promise<boolean> {
    try {
      await action();
      this.error = undefined;
      return true;
    } catch (error) {
      this.error = describeError(error);
      return false;
    } finally {
      this.changed();
    }
  }

  // -- the stream: rows of sessions that are not open ------------------------------------

  #onFrame(frame: Frame): void {
    const { case: kind, value } = frame.frame;
    if (kind === "sessionAdded" && value.summary !== undefined) {
      this.summaries.set(value.summary.id, value.summary);
      // Membership lives in the workspace: read it again.
      void this.#attempt(() => this.reloadLists());
    } else if (kind === "sessionStatus") {
      this.#patch(value.sessionId, { running: value.running, ...(value.running ? { blank: false } : {}) });
    } else if (kind === "sessionProjection" && value.value !== undefined) {
      this.#onProjection(value.sessionId, value.key, jsonOf(value.value));
    } else if (kind === "sessionEvent" && value.event?.body.case === "sessionTitle") {
      this.#patch(value.sessionId, { title: value.event.body.value.title });
    } else {
      return;
    }
    this.changed();
  }

  #onProjection(sessionId: string, key: string, view: JsonValue): void {
    if (key === "plan" && isRecord(view)) {
      this.#planPending.set(sessionId, typeof view["pending"] === "boolean" ? view["pending"] : undefined);
    } else if (key === "questions") {
      this.#patch(sessionId, { waiting: waitingOf(view) });
    }
  }

  #patch(sessionId: string, fields: Partial<Pick<Summary, "running" | "blank" | "title" | "waiting">>): void {
    const summary = this.summaries.get(sessionId);
    if (summary !== undefined) this.summaries.set(sessionId, { ...summary, ...fields });
  }
}

/** An open question's view in the `questions` projection (the host's JSON). */
export interface QuestionView {
  question_id: string;
  presentation: string;
  title: string;
  body: string;
  approve_label: string;
  /** Asked inside a subagent (its session id) and shown here. */
  child_session_id?: string;
  approval?: { tool: string; summary: string; detail: string; grant: string };
}

export interface PermissionRuleView {
  rule_id: string;
  grant: string;
  scope: string;
  workspace_path: string;
}

export function permissionRules(value: JsonValue | undefined): PermissionRuleView[] {
  if (!Array.isArray(value)) return [];
  return value.filter((r): r is JsonValue & PermissionRuleView => isRecord(r) && typeof r["rule_id"] === "string" && typeof r["grant"] === "string");
}

export function openQuestions(value: JsonValue | undefined): QuestionView[] {
  if (!Array.isArray(value)) return [];
  return value.filter((q): q is JsonValue & QuestionView => isRecord(q) && typeof q["question_id"] === "string");
}

const WAITING_FOR: Record<string, string> = { "plan-review": "review", "tool-approval": "approval", generic: "answer" };

function waitingOf(value: JsonValue | undefined): string {
  const first = openQuestions(value)[0];
  return first === undefined ? "" : (WAITING_FOR[first.presentation] ?? "answer");
}

/** `/help`: the session's commands, then the page's own, one a line with its usage in a column. */
export function helpText(commands: CommandInfo[]): string {
  const own = new Set(PAGE_COMMANDS.map((c) => c.name));
  const listed = [...commands.filter((c) => !own.has(c.name)), ...PAGE_COMMANDS];
  const usage = (c: CommandInfo) => c.usage || `/${c.name}`;
  const width = Math.max(...listed.map((c) => usage(c).length));
  return ["Type a message to send it, or a command:", ...listed.map((c) => `  ${usage(c).padEnd(width)}  ${c.description}`)].join("\n");
}

function isRecord(value: unknown): value is Record<string, JsonValue> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function describeError(error: unknown): string {
  if (error instanceof AgentHostError) return error.reason ? `${error.reason}: ${error.message}` : error.message;
  return error instanceof Error ? error.message : String(error);
}
