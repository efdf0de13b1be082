// The text a session's running steps and commands streamed so far, as a
// client holds it (pure: no I/O, no grpc).
//
// A Connect stream carries ephemeral pieces of text: `assistant_delta`
// (agenthost.runtime.v1.AssistantDelta: a step's answer or reasoning) and
// `tool_output` (ToolOutputDelta: a running command's output). Each piece
// carries its `offset` in its stream, counted in Unicode code points. Pieces
// may overlap what the client holds (a (re)connecting client first gets the
// text so far at offset 0, and OpenSession's `live` / `live_output` are the
// same snapshots), so only the part of a piece past what is held is appended;
// a piece whose offset lies beyond what is held leaves a gap and is dropped
// (the logged record completes the text). A stream ends when the log records
// its whole value: the step's assistant/message (whose text and reasoning
// equal the concatenation of the step's deltas), the command's tool/result,
// or the turn's turn/end.
//
// JavaScript strings count UTF-16 code units, not code points: an emoji such
// as "🙂" has `length` 2 but is one code point, so offsets are never compared
// with `String#length` here.

/** TextKind names, as LOADER_OPTIONS decodes them (enums as strings). */
export const TEXT_KIND_ANSWER = 'TEXT_KIND_ANSWER';
export const TEXT_KIND_REASONING = 'TEXT_KIND_REASONING';

/** @typedef {typeof TEXT_KIND_ANSWER | typeof TEXT_KIND_REASONING} TextKind */

/**
 * @typedef {object} AssistantDelta
 * @property {string} [session_id]
 * @property {string} turn_id
 * @property {number} step
 * @property {string | number} [kind] a TextKind name (or number); unset or
 *   TEXT_KIND_UNSPECIFIED counts as the answer
 * @property {number | string | { toNumber(): number }} offset code points
 * @property {string} text
 */

/**
 * @typedef {object} ToolOutputDelta
 * @property {string} [session_id]
 * @property {string} [turn_id]
 * @property {string} call_id
 * @property {number | string | { toNumber(): number }} offset code points
 * @property {string} text
 */

/**
 * @typedef {object} StepText one running stream of a step's text
 * @property {string} turn_id
 * @property {number} step
 * @property {TextKind} kind
 * @property {string} text
 */

/**
 * The number of Unicode code points of a string ("🙂" is 1, its `length` 2).
 *
 * @param {string} text
 * @returns {number}
 */
export function codePointLength(text) {
  let count = 0;
  for (let i = 0; i < text.length; count++) i += codePointUnits(text, i);
  return count;
}

/**
 * What a piece at code-point `offset` adds to a stream that holds `held`
 * code points: its tail past them, '' when it adds nothing, or null when it
 * leaves a gap (offset > held).
 *
 * @param {number} held
 * @param {number} offset
 * @param {string} text
 * @returns {string | null}
 */
export function freshPart(held, offset, text) {
  if (offset > held) return null;
  let skip = held - offset;
  let i = 0;
  while (skip > 0 && i < text.length) {
    i += codePointUnits(text, i);
    skip--;
  }
  return text.slice(i);
}

/**
 * UTF-16 code units of the code point at index i (2 for a surrogate pair).
 *
 * @param {string} text
 * @param {number} i
 */
function codePointUnits(text, i) {
  return /** @type {number} */ (text.codePointAt(i)) > 0xffff ? 2 : 1;
}

/**
 * @param {string | number | undefined} kind
 * @returns {TextKind}
 */
function kindOf(kind) {
  return kind === TEXT_KIND_REASONING || kind === 2 ? TEXT_KIND_REASONING : TEXT_KIND_ANSWER;
}

/** @param {AssistantDelta['offset']} offset */
function numberOf(offset) {
  return typeof offset === 'object' && offset !== null ? offset.toNumber() : Number(offset);
}

/**
 * @param {string} turnId
 * @param {number} step
 * @param {TextKind} kind
 */
function stepKey(turnId, step, kind) {
  return JSON.stringify([turnId, step, kind]);
}

/**
 * One session's live text: the running steps' answer and reasoning and the
 * running commands' output, folded from the pieces of a Connect stream.
 *
 * ```js
 * const live = new LiveText(session.id);
 * live.open(await gateway.call('OpenSession', { session_id: session.id }));
 * stream.on('data', (frame) => {
 *   const fresh = live.follow(frame); // what an assistant_delta / tool_output adds
 *   if (fresh) process.stdout.write(fresh);
 * });
 * ```
 */
export class LiveText {
  /** @type {Map<string, { turn_id: string, step: number, kind: TextKind, text: string, length: number }>} */
  #texts = new Map();
  /** @type {Map<string, { turn_id: string, text: string, length: number }>} */
  #outputs = new Map();
  /** @type {{ turn_id: string, step: number } | null} */
  #step = null;
  #seq = -1;

  /**
   * @param {string} [sessionId] when set, pieces and frames of other sessions
   *   are ignored (a Connect stream carries every session of the account).
   */
  constructor(sessionId) {
    this.sessionId = sessionId;
    /** Pieces dropped because they left a gap. */
    this.gaps = 0;
  }

  /**
   * Adds a piece of a step's text (an `assistant_delta` frame's value or an
   * entry of OpenSession's `live`).
   *
   * @param {AssistantDelta} delta
   * @returns {string} what the piece adds to its stream ('' when nothing)
   */
  add(delta) {
    if (!this.#mine(delta)) return '';
    const kind = kindOf(delta.kind);
    const key = stepKey(delta.turn_id, delta.step, kind);
    const held = this.#texts.get(key) ?? { turn_id: delta.turn_id, step: delta.step, kind, text: '', length: 0 };
    const fresh = this.#append(held, delta);
    if (fresh) this.#texts.set(key, held);
    return fresh;
  }

  /**
   * Adds a piece of a command's output (a `tool_output` frame's value or an
   * entry of OpenSession's `live_output`).
   *
   * @param {ToolOutputDelta} delta
   * @returns {string} what the piece adds to its stream ('' when nothing)
   */
  addOutput(delta) {
    if (!this.#mine(delta)) return '';
    const held = this.#outputs.get(delta.call_id) ?? { turn_id: delta.turn_id ?? '', text: '', length: 0 };
    const fresh = this.#append(held, delta);
    if (fresh) this.#outputs.set(delta.call_id, held);
    return fresh;
  }

  /**
   * The text so far of one step ('' when none).
   *
   * @param {string} turnId
   * @param {number} step
   * @param {TextKind} [kind]
   */
  textOf(turnId, step, kind = TEXT_KIND_ANSWER) {
    return this.#texts.get(stepKey(turnId, step, kindOf(kind)))?.text ?? '';
  }

  /**
   * The output so far of one command ('' when none).
   *
   * @param {string} callId
   */
  outputOf(callId) {
    return this.#outputs.get(callId)?.text ?? '';
  }

  /**
   * Every running stream of a step's text, in the order they started.
   *
   * @returns {StepText[]}
   */
  steps() {
    return [...this.#texts.values()].map(({ turn_id, step, kind, text }) => ({ turn_id, step, kind, text }));
  }

  /**
   * The step's assistant/message is logged: its answer and reasoning streams
   * end (the logged record is the text from now on).
   *
   * @param {string} turnId
   * @param {number} step
   */
  end(turnId, step) {
    this.#texts.delete(stepKey(turnId, step, TEXT_KIND_ANSWER));
    this.#texts.delete(stepKey(turnId, step, TEXT_KIND_REASONING));
  }

  /**
   * The command's tool/result is logged: its output stream ends.
   *
   * @param {string} callId
   */
  endOutput(callId) {
    this.#outputs.delete(callId);
  }

  /**
   * The turn ended: every stream of it ends.
   *
   * @param {string} turnId
   */
  endTurn(turnId) {
    for (const [key, held] of this.#texts) if (held.turn_id === turnId) this.#texts.delete(key);
    for (const [key, held] of this.#outputs) if (held.turn_id === turnId) this.#outputs.delete(key);
    if (this.#step?.turn_id === turnId) this.#step = null;
  }

  /** Forgets every stream. */
  clear() {
    this.#texts.clear();
    this.#outputs.clear();
    this.#step = null;
  }

  /**
   * Folds one Connect frame: pieces are added, and the session's logged
   * events end the streams they complete (step/start names the running step
   * for the assistant/message that follows; tool/result, turn/end). An event
   * at or below a seq already followed is ignored, so catch-up replays are
   * harmless.
   *
   * @param {any} frame a ConnectResponse as GatewayClient decodes it
   * @returns {string} what an assistant_delta or tool_output frame adds
   *   ('' for every other frame)
   */
  follow(frame) {
    switch (frame?.frame) {
      case 'assistant_delta':
        return this.add(frame.assistant_delta);
      case 'tool_output':
        return this.addOutput(frame.tool_output);
      case 'session_event':
        if (this.#mine(frame.session_event)) this.followEvent(frame.session_event.event);
        return '';
      default:
        return '';
    }
  }

  /**
   * Folds one logged event of the session (see follow).
   *
   * @param {any} event an agenthost.sessionlog.v1.Event
   */
  followEvent(event) {
    if (!event || numberOf(event.seq ?? 0) <= this.#seq) return;
    this.#seq = numberOf(event.seq ?? 0);
    switch (event.body) {
      case 'step_start':
        this.#step = { turn_id: event.step_start.turn_id, step: event.step_start.step };
        break;
      case 'assistant_message':
        if (this.#step) this.end(this.#step.turn_id, this.#step.step);
        // Joined mid-step without its step/start: one step runs at a time.
        else this.#texts.clear();
        break;
      case 'tool_result':
        this.endOutput(event.tool_result.call_id);
        break;
      case 'turn_end':
        this.endTurn(event.turn_end.turn_id);
        break;
      default:
    }
  }

  /**
   * Folds an OpenSession reply: its page of events (for the running step),
   * then its `live` and `live_output` snapshots.
   *
   * @param {any} reply an OpenSessionResponse
   */
  open(reply) {
    for (const event of reply?.events ?? []) this.followEvent(event);
    for (const delta of reply?.live ?? []) this.add(delta);
    for (const delta of reply?.live_output ?? []) this.addOutput(delta);
  }

  /** @param {{ session_id?: string }} piece */
  #mine(piece) {
    return !this.sessionId || !piece.session_id || piece.session_id === this.sessionId;
  }

  /**
   * @param {{ text: string, length: number }} held
   * @param {{ offset: AssistantDelta['offset'], text: string }} delta
   */
  #append(held, delta) {
    const fresh = freshPart(held.length, numberOf(delta.offset), delta.text ?? '');
    if (fresh === null) {
      this.gaps++;
      return '';
    }
    if (fresh) {
      held.text += fresh;
      held.length += codePointLength(fresh);
    }
    return fresh;
  }
}
