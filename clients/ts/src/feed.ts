// How a client connection and its open sessions talk: two small interfaces,
// so neither module names the other's class. The connection (connection.ts)
// drives every open session through `SessionFeed` (the stream's frames and
// its ups and downs); a session (session.ts) reaches the gateway only through
// the `SessionHost` its connection is.

import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ConnectResponse, PlanModeRequestSchema, RequestFence } from "../gen/agenthost/gateway/v1/gateway_pb.js";
import type { AgentHostError } from "./errors.js";
import type { GatewayClient } from "./gateway.js";

/** What the connection tells an open session. */
export interface SessionFeed {
  readonly id: string;
  /** A frame of the stream about this session. */
  onFrame(frame: ConnectResponse): void;
  /** A reconnect attempt begins: requests begun before are superseded. */
  onGeneration(generation: number): void;
  /** The gateway confirmed the stream (again). */
  onConnected(generation: number): void;
  /** The stream broke; the connection is reconnecting. */
  onDisconnected(): void;
}

/** What an open session needs of its connection. */
export interface SessionHost {
  readonly gateway: GatewayClient;
  readonly generation: number;
  readonly failure: AgentHostError | undefined;
  readonly connected: boolean;
  readonly callTimeoutMs: number;
  fence(): RequestFence;
  /** A plan read that reflects this client's own plan writes, and a write to remember. */
  planRead(sessionId: string): MessageInitShape<typeof PlanModeRequestSchema>;
  planWritten(sessionId: string, seq: bigint): void;
  callOptions(timeoutMs?: number): { timeoutMs: number };
  waitFor(holds: () => boolean, timeoutMs: number, what?: string): Promise<void>;
  /** The session stopped following its frames. */
  closed(session: SessionFeed): void;
}
