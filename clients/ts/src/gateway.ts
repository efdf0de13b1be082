// The gateway's typed client over an injected Connect transport: gRPC over
// HTTP/2 in Node (./node.ts), gRPC-web in a browser (./web.ts). The SDK wraps
// whatever transport it is given so that every call carries the bearer
// token, every failure is an AgentHostError, and every unary reply is
// checked against the contract's rules before anyone reads it.

import type { DescMessage, DescMethodStreaming, DescMethodUnary, MessageInitShape } from "@bufbuild/protobuf";
import { createClient, type Client, type Transport } from "@connectrpc/connect";
import type { StreamResponse, UnaryResponse } from "@connectrpc/connect";
import { GatewayService } from "../gen/agenthost/gateway/v1/gateway_pb.js";
import { AgentHostError } from "./errors.js";
import { requireValid } from "./validation.js";

/** Every RPC of agenthost.gateway.v1.GatewayService, typed. */
export type GatewayClient = Client<typeof GatewayService>;

export interface GatewayOptions {
  /** Bearer token; calls without one are UNAUTHENTICATED. */
  token?: string;
}

/** A typed GatewayService client on `transport` (see the module comment). */
export function createGatewayClient(transport: Transport, options: GatewayOptions = {}): GatewayClient {
  return createClient(GatewayService, agentHostTransport(transport, options));
}

/** `transport` with the bearer token, typed errors and reply validation. */
export function agentHostTransport(transport: Transport, { token }: GatewayOptions): Transport {
  const withToken = (header: HeadersInit | undefined): Headers => {
    const headers = new Headers(header);
    if (token) headers.set("authorization", `Bearer ${token}`);
    return headers;
  };
  return {
    async unary<I extends DescMessage, O extends DescMessage>(
      method: DescMethodUnary<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeadersInit | undefined,
      input: MessageInitShape<I>,
      contextValues?: Parameters<Transport["unary"]>[5],
    ): Promise<UnaryResponse<I, O>> {
      let response: UnaryResponse<I, O>;
      try {
        response = await transport.unary(method, signal, timeoutMs, withToken(header), input, contextValues);
      } catch (error) {
        throw AgentHostError.from(error, signal);
      }
      requireValid(method.output, response.message);
      return response;
    },
    async stream<I extends DescMessage, O extends DescMessage>(
      method: DescMethodStreaming<I, O>,
      signal: AbortSignal | undefined,
      timeoutMs: number | undefined,
      header: HeadersInit | undefined,
      input: AsyncIterable<MessageInitShape<I>>,
      contextValues?: Parameters<Transport["stream"]>[5],
    ): Promise<StreamResponse<I, O>> {
      try {
        const response = await transport.stream(method, signal, timeoutMs, withToken(header), input, contextValues);
        // Stream messages are checked by their consumer: a malformed frame
        // is dropped there, it does not end the stream.
        return { ...response, message: typedErrors(response.message, signal) };
      } catch (error) {
        throw AgentHostError.from(error, signal);
      }
    },
  };
}

async function* typedErrors<T>(messages: AsyncIterable<T>, signal: AbortSignal | undefined): AsyncIterable<T> {
  try {
    yield* messages;
  } catch (error) {
    throw AgentHostError.from(error, signal);
  }
}
