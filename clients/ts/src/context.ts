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

/**
 * An image sent with a prompt: its bytes, or the digest ("sha256:<hex>") of
 * one the session holds already; `name` is what clients show (a file's
 * name). The gateway checks it by its bytes (PNG, JPEG, GIF, WebP; at most
 * 5 MiB each, 20 a prompt): reason IMAGE_REFUSED otherwise, and
 * MODEL_TAKES_NO_IMAGES when the session's model takes none. In Node,
 * `imageFile(path)` (the node entry) reads a file as one.
 */
export interface PromptImage {
  readonly data?: Uint8Array;
  readonly digest?: string;
  readonly name?: string;
  readonly mediaType?: string;
}

/** What `prompt` takes as an image: its bytes, or a PromptImage. */
export type ImageLike = Uint8Array | PromptImage;

/** An image as the Prompt call carries it (ImageInput). */
export function imageInput(image: ImageLike): { source: { case: "data"; value: Uint8Array } | { case: "digest"; value: string }; name: string; mediaType: string } {
  const given: PromptImage = image instanceof Uint8Array ? { data: image } : image;
  const source = given.digest ? { case: "digest" as const, value: given.digest } : { case: "data" as const, value: given.data ?? new Uint8Array() };
  return { source, name: given.name ?? "", mediaType: given.mediaType ?? "" };
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
