// Typed message builders for the offline tests.

import { create } from "@bufbuild/protobuf";
import { ConnectResponseSchema, type ConnectResponse } from "../gen/agenthost/gateway/v1/gateway_pb.js";
import { AssistantDeltaSchema, TextKind, ToolOutputDeltaSchema, type AssistantDelta, type ToolOutputDelta } from "../gen/agenthost/runtime/v1/runtime_pb.js";
import { EventSchema, type Event } from "../gen/agenthost/sessionlog/v1/events_pb.js";

type Body = NonNullable<Parameters<typeof create<typeof EventSchema>>[1]>["body"];

export function delta(
  offset: number,
  text: string,
  { step = 0, kind = TextKind.ANSWER, turn = "t1", session = "s1" }: { step?: number; kind?: TextKind; turn?: string; session?: string } = {},
): AssistantDelta {
  return create(AssistantDeltaSchema, { sessionId: session, turnId: turn, step, kind, offset: BigInt(offset), text });
}

export function output(offset: number, text: string, callId = "c1"): ToolOutputDelta {
  return create(ToolOutputDeltaSchema, { sessionId: "s1", turnId: "t1", callId, offset: BigInt(offset), text });
}

export function event(seq: number, body: Body, sessionId = "s1"): Event {
  return create(EventSchema, { id: `e${seq}`, seq: BigInt(seq), sessionId, body });
}

export function eventFrame(seq: number, body: Body): ConnectResponse {
  return create(ConnectResponseSchema, {
    frame: { case: "sessionEvent", value: { sessionId: "s1", seq: BigInt(seq), event: event(seq, body) } },
  });
}

export function deltaFrame(piece: AssistantDelta): ConnectResponse {
  return create(ConnectResponseSchema, { frame: { case: "assistantDelta", value: piece } });
}

export function outputFrame(piece: ToolOutputDelta): ConnectResponse {
  return create(ConnectResponseSchema, { frame: { case: "toolOutput", value: piece } });
}
