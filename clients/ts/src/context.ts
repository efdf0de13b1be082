// What the agent knows of the project beyond the conversation: the files a
// prompt attaches (its `@path`s, an editor's resources), the paths `@`
// completes to (ListPaths), and the task list the agent keeps (the `todos`
// projection), as plain values.

import type { JsonValue } from "./projection.js";

/** A file sent with a prompt: a link (a file:// URI or a path of the session's folder), or the text an editor holds of it. */
export interface Resource {
  readonly uri: string;
  readonly text?: string;
}

/** A path `@` may complete to, relative to the session's folder (a folder's ends with "/"). */
export interface PathEntry {
  readonly path: string;
  readonly folder: boolean;
}

export interface PathList {
  readonly entries: PathEntry[];
  /** More matched than were listed. */
  readonly truncated: boolean;
}

export type TodoStatus = "pending" | "in_progress" | "completed";

/** One item of the agent's task list. */
export interface Todo {
  readonly content: string;
  readonly status: TodoStatus;
}

const STATUSES: readonly string[] = ["pending", "in_progress", "completed"];

/** The items of a `todos` projection value (malformed ones left out; [] when absent). */
export function todosOf(value: JsonValue | undefined): Todo[] {
  const items = typeof value === "object" && value !== null && !Array.isArray(value) ? value["items"] : undefined;
  if (!Array.isArray(items)) return [];
  return items.flatMap((item) =>
    typeof item === "object" && item !== null && !Array.isArray(item) && typeof item["content"] === "string" && STATUSES.includes(String(item["status"]))
      ? [{ content: item["content"], status: item["status"] as TodoStatus }]
      : [],
  );
}
