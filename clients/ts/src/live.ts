// The text a session's running steps and commands streamed so far, as a
// client holds it (pure: no I/O).
//
// A Connect stream carries ephemeral pieces of text: `assistant_delta` (a
// step's answer or reasoning) and `tool_output` (a running command's
// output). Each piece carries its `offset` in its stream, counted in Unicode
// code points. Pieces may overlap what the client holds (a (re)connecting
// client first gets the text so far at offset 0, and OpenSession's `live` /
// `live_output` are the same snapshots), so only the part of a piece past
// what is held is appended. A piece may also arrive before the text it
// follows (one relayed just after the gateway took OpenSession's text so far
// reaches the stream before that reply does): it is kept, up to EARLY_KEPT a
// stream, and added once the text before it is held. A stream ends when the
// log records its whole value: the step's assistant/message, the command's
// tool/result, or the turn's turn/end; a stream that ended takes no late
// piece (of the ended streams and turns remembered: as many as the gateway
// keeps, runtime.proto's LiveLimit.ENDED_STREAMS_KEPT).
//
// JavaScript strings count UTF-16 code units, not code points: "🙂" has
// `length` 2 but is one code point, so offsets are never compared with
// `String#length` here.

import type { ConnectResponse, OpenSessionResponse } from "../gen/agenthost/gateway/v1/gateway_pb.js";
import { LiveLimit, TextKind, type AssistantDelta, type ToolOutputDelta } from "../gen/agenthost/runtime/v1/runtime_pb.js";
import type { Event } from "../gen/agenthost/sessionlog/v1/events_pb.js";

export { TextKind };

/** One running stream of a step's text. */
export interface StepText {
  readonly turnId: string;
  readonly step: number;
  readonly kind: TextKind.ANSWER | TextKind.REASONING;
  readonly text: string;
}

/** The number of Unicode code points of a string ("🙂" is 1, its `length` 2). */
export function codePointLength(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; count++) i += codePointUnits(text, i);
  return count;
}

/**
 * What a piece at code-point `offset` adds to a stream holding `held` code
 * points: its tail past them, "" when it adds nothing, or undefined when it
 * leaves a gap (offset > held).
 */
export function freshPart(held: number, offset: number, text: string): string | undefined {
  if (offset > held) return undefined;
  let i = 0;
  for (let skip = held - offset; skip > 0 && i < text.length; skip--) i += codePointUnits(text, i);
  return text.slice(i);
}

/** UTF-16 code units of the code point at index i (2 for a surrogate pair). */
function codePointUnits(text: string, i: number): number {
  return (text.codePointAt(i) ?? 0) > 0xffff ? 2 : 1;
}

/** Unset or unknown kinds count as the answer. */
function kindOf(kind: TextKind): StepText["kind"] {
  return kind === TextKind.REASONING ? TextKind.REASONING : TextKind.ANSWER;
}

function stepKey(turnId: string, step: number, kind: TextKind): string {
  return JSON.stringify([turnId, step, kindOf(kind)]);
}

interface Held {
  turnId: string;
  text: string;
  length: number;
}

/** Pieces kept per stream while the text before them has not arrived. */
export const EARLY_KEPT = 256;

/** The pieces of one stream that arrived beyond what it held. */
interface Early {
  turnId: string;
  pieces: { offset: number; text: string }[];
}

/** One session's live text: running steps' answer and reasoning, running commands' output. */
export class LiveText {
  readonly sessionId: string | undefined;
  /** Pieces that arrived beyond what was held (kept until the text before them arrives). */
  gaps = 0;
  #texts = new Map<string, Held & { step: number; kind: StepText["kind"] }>();
  #outputs = new Map<string, Held>();
  #earlyTexts = new Map<string, Early>();
  #earlyOutputs = new Map<string, Early>();
  /** Ended streams and turns, oldest first: "text " + step key, "output " + call id, "turn " + turn id. */
  #ended = new Set<string>();
  #step: { turnId: string; step: number } | undefined = undefined;
  #seq = -1n;

  /** With a session id, pieces and frames of other sessions are ignored. */
  constructor(sessionId?: string) {
    this.sessionId = sessionId;
  }

  /** Adds a piece of a step's text; returns what it adds ("" when nothing). */
  add(delta: AssistantDelta): string {
    if (!this.#mine(delta.sessionId)) return "";
    const kind = kindOf(delta.kind);
    const key = stepKey(delta.turnId, delta.step, kind);
    if (this.#ended.has(`text ${key}`) || this.#ended.has(`turn ${delta.turnId}`)) return "";
    const held = this.#texts.get(key) ?? { turnId: delta.turnId, step: delta.step, kind, text: "", length: 0 };
    const fresh = this.#append(held, delta, this.#earlyTexts, key);
    if (fresh) this.#texts.set(key, held);
    return fresh;
  }

  /** Adds a piece of a command's output; returns what it adds ("" when nothing). */
  addOutput(delta: ToolOutputDelta): string {
    if (!this.#mine(delta.sessionId) || this.#ended.has(`output ${delta.callId}`) || this.#ended.has(`turn ${delta.turnId}`)) return "";
    const held = this.#outputs.get(delta.callId) ?? { turnId: delta.turnId, text: "", length: 0 };
    const fresh = this.#append(held, delta, this.#earlyOutputs, delta.callId);
    if (fresh) this.#outputs.set(delta.callId, held);
    return fresh;
  }

  /** The text so far of one step ("" when none). */
  textOf(turnId: string, step: number, kind: TextKind = TextKind.ANSWER): string {
    return this.#texts.get(stepKey(turnId, step, kind))?.text ?? "";
  }

  /** The output so far of one command ("" when none). */
  outputOf(callId: string): string {
    return this.#outputs.get(callId)?.text ?? "";
  }

  /** Every running stream of a step's text, in the order they started. */
  steps(): StepText[] {
    return [...this.#texts.values()].map(({ turnId, step, kind, text }) => ({ turnId, step, kind, text }));
  }

  /** The step's assistant/message is logged: its answer and reasoning end. */
  end(turnId: string, step: number): void {
    for (const kind of [TextKind.ANSWER, TextKind.REASONING]) {
      this.#texts.delete(stepKey(turnId, step, kind));
      this.#earlyTexts.delete(stepKey(turnId, step, kind));
      this.#remember(`text ${stepKey(turnId, step, kind)}`);
    }
  }

  /** The command's tool/result is logged: its output ends. */
  endOutput(callId: string): void {
    this.#outputs.delete(callId);
    this.#earlyOutputs.delete(callId);
    this.#remember(`output ${callId}`);
  }

  /**
   * The turn ended: every stream of it ends and takes no late piece, also one
   * whose step logged no message (a failed step) or that was never seen here.
   */
  endTurn(turnId: string): void {
    for (const streams of [this.#texts, this.#outputs, this.#earlyTexts, this.#earlyOutputs]) {
      for (const [key, stream] of streams) if (stream.turnId === turnId) streams.delete(key);
    }
    if (this.#step?.turnId === turnId) this.#step = undefined;
    this.#remember(`turn ${turnId}`);
  }

  /** Forgets every stream. */
  clear(): void {
    this.restart();
    this.#earlyTexts.clear();
    this.#earlyOutputs.clear();
  }

  /**
   * The history was replaced: the streams begin again from the text so far
   * the reply carries; pieces that arrived ahead of it wait for it.
   */
  restart(): void {
    this.#texts.clear();
    this.#outputs.clear();
    this.#step = undefined;
  }

  /**
   * Folds one Connect frame: pieces are added, logged events end the streams
   * they complete. Returns what an assistant_delta / tool_output adds ("" otherwise).
   */
  follow(frame: ConnectResponse): string {
    switch (frame.frame.case) {
      case "assistantDelta":
        return this.add(frame.frame.value);
      case "toolOutput":
        return this.addOutput(frame.frame.value);
      case "sessionEvent": {
        const { sessionId, event } = frame.frame.value;
        if (event !== undefined && this.#mine(sessionId)) this.followEvent(event);
        return "";
      }
      default:
        return "";
    }
  }

  /**
   * Folds one logged event: step/start names the running step for the
   * assistant/message that follows; tool/result and turn/end end theirs. An
   * event at or below a seq already followed is ignored (catch-up replays).
   */
  followEvent(event: Event): void {
    if (event.seq <= this.#seq) return;
    this.#seq = event.seq;
    const body = event.body;
    if (body.case === "stepStart") this.#step = { turnId: body.value.turnId, step: body.value.step };
    else if (body.case === "assistantMessage") this.#endRunningStep();
    else if (body.case === "toolResult") this.endOutput(body.value.callId);
    else if (body.case === "turnEnd") this.endTurn(body.value.turnId);
  }

  /** Folds an OpenSession reply: its events (for the running step), then its snapshots. */
  open(reply: OpenSessionResponse): void {
    for (const event of reply.events) this.followEvent(event);
    for (const delta of reply.live) this.add(delta);
    for (const delta of reply.liveOutput) this.addOutput(delta);
  }

  #endRunningStep(): void {
    if (this.#step !== undefined) this.end(this.#step.turnId, this.#step.step);
    // Joined mid-step without its step/start: one step runs at a time.
    else this.#texts.clear();
  }

  #remember(ended: string): void {
    this.#ended.add(ended);
    for (const oldest of this.#ended) {
      if (this.#ended.size <= LiveLimit.ENDED_STREAMS_KEPT) break;
      this.#ended.delete(oldest);
    }
  }

  #mine(sessionId: string): boolean {
    return this.sessionId === undefined || sessionId === "" || sessionId === this.sessionId;
  }

  #append(held: Held, delta: { turnId: string; offset: bigint; text: string }, early: Map<string, Early>, key: string): string {
    const offset = Number(delta.offset);
    const fresh = freshPart(held.length, offset, delta.text);
    if (fresh === undefined) {
      this.gaps++;
      const kept = early.get(key) ?? { turnId: delta.turnId, pieces: [] };
      kept.pieces.push({ offset, text: delta.text });
      kept.pieces.splice(0, Math.max(0, kept.pieces.length - EARLY_KEPT));
      early.set(key, kept);
      return "";
    }
    return grow(held, fresh) + this.#reached(held, early, key);
  }

  /** The early pieces of a stream that `held` now reaches, added in offset order. */
  #reached(held: Held, early: Map<string, Early>, key: string): string {
    const kept = early.get(key);
    if (kept === undefined) return "";
    kept.pieces.sort((a, b) => a.offset - b.offset);
    let added = "";
    while (kept.pieces.length > 0 && kept.pieces[0]!.offset <= held.length) {
      const { offset, text } = kept.pieces.shift()!;
      added += grow(held, freshPart(held.length, offset, text) ?? "");
    }
    if (kept.pieces.length === 0) early.delete(key);
    return added;
  }
}

/** Appends `fresh` to what a stream holds; returns it. */
function grow(held: Held, fresh: string): string {
  held.text += fresh;
  held.length += codePointLength(fresh);
  return fresh;
}
