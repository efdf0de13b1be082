// Replies and frames are checked with the contract's own rules (the
// protovalidate annotations in proto/) before the SDK uses them.

import { createRegistry, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { createValidator } from "@bufbuild/protovalidate";
import { file_agenthost_common_v1_rules } from "../gen/agenthost/common/v1/rules_pb.js";
import { EventSchema, type Event } from "../gen/agenthost/sessionlog/v1/events_pb.js";
import type { PlanModeValue, SessionEvent } from "../gen/agenthost/gateway/v1/gateway_pb.js";
import { PlanModeValueSchema } from "../gen/agenthost/gateway/v1/gateway_pb.js";
import { AgentHostError, Reason } from "./errors.js";
import { UNAVAILABLE, planState, type PlanValue } from "./plan.js";
import type { JsonValue } from "./projection.js";

// Our protos use predefined rules (agenthost/common/v1/rules.proto): the
// validator must know their extensions.
const validator = createValidator({ registry: createRegistry(file_agenthost_common_v1_rules) });

/** The rules `message` breaks, as text ([] when none). */
export function violationsOf<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): string[] {
  const result = validator.validate(schema, message);
  if (result.kind === "valid") return [];
  if (result.kind === "error") return [`rules could not be evaluated: ${result.error.message}`];
  return result.violations.map((v) => `${v.ruleId}: ${v.message}`);
}

/** Throws INVALID_REPLY when `message` breaks its schema's rules. */
export function requireValid<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): void {
  const broken = violationsOf(schema, message);
  if (broken.length > 0) {
    throw new AgentHostError(`${schema.typeName} breaks the contract: ${broken.join("; ")}`, {
      reason: Reason.INVALID_REPLY,
    });
  }
}

/** A reply's plan value (`pending == active` is refused: INVALID_REPLY). */
export function planValueOf(value: PlanModeValue | undefined): PlanValue {
  if (value === undefined) throw invalidPlan(value);
  requireValid(PlanModeValueSchema, value);
  if (value.state === undefined) return UNAVAILABLE;
  return { state: planState(value.state.active, value.state.pending) };
}

/** A `plan` projection value: `{active, pending?}`, PlanModeState's shape. */
export function planValueOfView(view: JsonValue): PlanValue {
  if (!isObject(view) || typeof view["active"] !== "boolean") throw invalidPlan(view);
  const pending = view["pending"];
  if (pending !== undefined && pending !== null && (typeof pending !== "boolean" || pending === view["active"])) {
    throw invalidPlan(view);
  }
  return { state: planState(view["active"], pending ?? undefined) };
}

function invalidPlan(view: unknown): AgentHostError {
  return new AgentHostError(`plan value breaks the contract: ${JSON.stringify(view)}`, {
    reason: Reason.INVALID_REPLY,
  });
}

export function isObject(value: unknown): value is { [key: string]: JsonValue } {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** An event a session can hold: a body, a seq, and no other session's. */
export function wellFormed(event: Event, sessionId: string): boolean {
  return event.seq >= 0n && event.body.case !== undefined && (event.sessionId === "" || event.sessionId === sessionId);
}

/**
 * The event a `session_event` frame carries, or undefined when the frame is
 * malformed: another session, seqs that disagree, no body, or an event that
 * breaks the schema.
 */
export function frameEvent(frame: SessionEvent, sessionId: string): Event | undefined {
  const event = frame.event;
  if (frame.sessionId !== sessionId || event === undefined || event.seq !== frame.seq) return undefined;
  return wellFormed(event, sessionId) && violationsOf(EventSchema, event).length === 0 ? event : undefined;
}

/** The events a session may hold. */
export function validEvents(events: Event[], sessionId: string): Event[] {
  return events.filter((e) => wellFormed(e, sessionId) && violationsOf(EventSchema, e).length === 0);
}
