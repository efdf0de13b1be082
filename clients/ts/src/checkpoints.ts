// The way back and the helpers, as plain values: a session's turns with the
// files each changed (the `checkpoints` projection), what /undo, /redo and
// /rewind restored or left alone, a turn's diff (/diff), and the subagents
// a session started (the `subagents` projection).

import type { JsonValue } from "./projection.js";

/** One file a turn changed. */
export interface FileChange {
  readonly path: string;
  readonly change: "added" | "modified" | "deleted";
  readonly linesAdded: number;
  readonly linesRemoved: number;
  readonly binary: boolean;
}

/** A turn of the conversation that changed files. */
export interface TurnCheckpoint {
  readonly turnId: string;
  /** 1 for the session's first turn. */
  readonly number: number;
  readonly prompt: string;
  readonly files: FileChange[];
  /** The user undid it (and did not redo it since). */
  readonly undone: boolean;
}

/** What /undo, /redo or /rewind did (or, checked, would do). */
export interface Restored {
  readonly ok: boolean;
  readonly message: string;
  readonly seq: bigint;
  readonly restored: string[];
  /** Changed since by someone else: left alone (`force` overwrites them). */
  readonly skipped: string[];
  /** Only checked: nothing changed, nothing recorded. */
  readonly checked: boolean;
}

/** A turn's changes as a unified diff. */
export interface TurnDiff {
  readonly ok: boolean;
  /** The turn's number, 0 when there is none. */
  readonly turn: number;
  /** The diff, cut at the service's bound with a note saying so. */
  readonly text: string;
  readonly cut: boolean;
  /** The heading line, or why there is no diff. */
  readonly message: string;
}

/** A subagent a session's `task` call started: a child session. */
export interface Subagent {
  readonly sessionId: string;
  readonly agentType: string;
  readonly description: string;
  readonly callId: string;
  readonly running: boolean;
  readonly requests: number;
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly cost: number | undefined;
}

export type RewindWhat = "files" | "conversation" | "both";

type JsonObject = { readonly [key: string]: JsonValue };

function objectOf(value: JsonValue | undefined): JsonObject | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as JsonObject) : undefined;
}

function listOf(value: JsonValue | undefined, key: string): JsonValue[] {
  const found = objectOf(value)?.[key];
  return Array.isArray(found) ? found : [];
}

const CHANGES: readonly string[] = ["added", "modified", "deleted"];

/** The turns of a `checkpoints` projection value (malformed ones left out). */
export function checkpointsOf(value: JsonValue | undefined): TurnCheckpoint[] {
  return listOf(value, "turns").flatMap((item) => {
    const turn = objectOf(item);
    if (turn === undefined || typeof turn["turn_id"] !== "string" || typeof turn["number"] !== "number") return [];
    const files = listOf(turn, "files").flatMap((entry) => {
      const file = objectOf(entry);
      if (file === undefined || typeof file["path"] !== "string" || !CHANGES.includes(String(file["change"]))) return [];
      return [
        {
          path: file["path"],
          change: file["change"] as FileChange["change"],
          linesAdded: Number(file["lines_added"] ?? 0),
          linesRemoved: Number(file["lines_removed"] ?? 0),
          binary: file["binary"] === true,
        },
      ];
    });
    return [{ turnId: turn["turn_id"], number: turn["number"], prompt: String(turn["prompt"] ?? ""), files, undone: turn["undone"] === true }];
  });
}

/** The children of a `subagents` projection value, oldest first. */
export function subagentsOf(value: JsonValue | undefined): Subagent[] {
  return listOf(value, "children").flatMap((item) => {
    const child = objectOf(item);
    if (child === undefined || typeof child["session_id"] !== "string") return [];
    const cost = child["cost"];
    return [
      {
        sessionId: child["session_id"],
        agentType: String(child["agent_type"] ?? ""),
        description: String(child["description"] ?? ""),
        callId: String(child["call_id"] ?? ""),
        running: child["running"] === true,
        requests: Number(child["requests"] ?? 0),
        promptTokens: Number(child["prompt_tokens"] ?? 0),
        completionTokens: Number(child["completion_tokens"] ?? 0),
        cost: typeof cost === "number" ? cost : undefined,
      },
    ];
  });
}

/** A restoring command's reply read: the indented paths under its first
 * line are the restored ones, those under "Left alone" / "Changed since"
 * the skipped ones (the checkpoints capability's reply form). */
export function restoredOf(reply: { ok: boolean; message: string; seq: bigint }, checked: boolean): Restored {
  const restored: string[] = [];
  const skipped: string[] = [];
  let into = restored;
  for (const line of reply.ok ? reply.message.split("\n").slice(1) : []) {
    if (line.startsWith("  ")) into.push(line.slice(2));
    else into = line.startsWith("Left alone") || line.startsWith("Changed since") ? skipped : restored;
  }
  return { ok: reply.ok, message: reply.message, seq: reply.seq, restored, skipped, checked };
}

/** /diff's reply: "Turn N (prompt): K file(s) changed", then the diff. */
export function diffOf(reply: { ok: boolean; message: string }): TurnDiff {
  if (!reply.ok) return { ok: false, turn: 0, text: "", cut: false, message: reply.message };
  const cut = reply.message.indexOf("\n");
  const head = cut < 0 ? reply.message : reply.message.slice(0, cut);
  const text = cut < 0 ? "" : reply.message.slice(cut + 1);
  const number = /^Turn (\d+) /.exec(head);
  return { ok: true, turn: number === null ? 0 : Number(number[1]), text, cut: text.endsWith("more bytes not shown]"), message: head };
}
