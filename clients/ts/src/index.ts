// The agenthost TypeScript SDK, transport-neutral: give AgentHostClient a
// Connect transport (./node.ts: gRPC over HTTP/2; ./web.ts: gRPC-web).

export * from "./errors.js";
export * from "./gateway.js";
export * from "./connection.js";
export * from "./session.js";
export * from "./plan.js";
export * from "./projection.js";
export * from "./models.js";
export * from "./context.js";
export * from "./checkpoints.js";
export * from "./history.js";
export * from "./live.js";
export * from "./validation.js";
export * from "./wait.js";
export * as gatewayV1 from "../gen/agenthost/gateway/v1/gateway_pb.js";
export * as eventsV1 from "../gen/agenthost/sessionlog/v1/events_pb.js";
export * as runtimeV1 from "../gen/agenthost/runtime/v1/runtime_pb.js";
export * as planModeV1 from "../gen/agenthost/planmode/v1/plan_mode_pb.js";
