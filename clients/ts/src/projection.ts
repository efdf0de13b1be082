// Projection views of one session, where the higher seq wins.
//
// Seeded from the projection block of an opened page (all keys as of the
// page's seq) and moved forward by `session_projection` frames {key, value,
// seq}. A value older than the one held is dropped; on an equal seq a frame
// wins over the block (frames are in stream order, and a selection waiting
// for a boundary changes a view without a new log seq).

import { toJson } from "@bufbuild/protobuf";
import { ValueSchema, type Value } from "@bufbuild/protobuf/wkt";

/** A google.protobuf.Value as plain JSON. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export function jsonOf(value: Value): JsonValue {
  return toJson(ValueSchema, value) as JsonValue;
}

export interface ProjectionEntry {
  readonly value: JsonValue;
  readonly seq: bigint;
}

/** One session's projection values; the higher seq wins. */
export class ProjectionStore {
  #entries = new Map<string, ProjectionEntry>();

  /** The value of `key` (undefined when unknown). */
  get(key: string): JsonValue | undefined {
    return this.#entries.get(key)?.value;
  }

  entry(key: string): ProjectionEntry | undefined {
    return this.#entries.get(key);
  }

  values(): Record<string, JsonValue> {
    return Object.fromEntries([...this.#entries].map(([key, entry]) => [key, entry.value]));
  }

  /** A block as of `seq`; keys held at a newer or equal seq stay. Returns the keys that changed. */
  seed(block: Record<string, JsonValue>, seq: bigint): string[] {
    return Object.entries(block).filter(([key, value]) => {
      const held = this.#entries.get(key);
      return (held === undefined || seq > held.seq) && this.#put(key, value, seq);
    }).map(([key]) => key);
  }

  /** A pushed change; dropped when older than the value held. Whether the value changed. */
  update(key: string, value: JsonValue, seq: bigint): boolean {
    const held = this.#entries.get(key);
    if (held !== undefined && seq < held.seq) return false;
    return this.#put(key, value, seq);
  }

  clear(): void {
    this.#entries.clear();
  }

  #put(key: string, value: JsonValue, seq: bigint): boolean {
    const held = this.#entries.get(key);
    this.#entries.set(key, { value, seq });
    return held === undefined || !sameJson(held.value, value);
  }
}

/** Deep equality of JSON values (object key order does not matter). */
export function sameJson(a: JsonValue, b: JsonValue): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, i) => sameJson(item, b[i] as JsonValue));
  }
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => key in b && sameJson(a[key] as JsonValue, b[key] as JsonValue));
}
