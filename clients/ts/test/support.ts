// Helpers for the tests against a running gateway.

import type { DescMessage, DescMethodStreaming, MessageInitShape } from "@bufbuild/protobuf";
import type { Transport } from "@connectrpc/connect";
import type { ConnectRequest, ConnectResponse } from "../gen/agenthost/gateway/v1/gateway_pb.js";
import { Changes, createGatewayClient, type GatewayClient } from "../src/index.js";
import { createNodeTransport } from "../src/node.js";

export const TIMEOUT_MS = 20_000;

export function gatewayAddress(): { address: string; token: string } {
  const address = process.env["AGENTHOST_GATEWAY"] ?? "";
  const token = process.env["AGENTHOST_TOKEN"] ?? "";
  if (!address || !token) throw new Error("set AGENTHOST_GATEWAY and AGENTHOST_TOKEN (start the stack with `python -m clients.cli up`)");
  return { address, token };
}

/** A raw typed client with its own client id, fencing its requests itself. */
export class RawClient {
  readonly gateway: GatewayClient;
  #requestId = 0;
  constructor(
    readonly clientId: string,
    transport: Transport,
    token?: string,
  ) {
    this.gateway = createGatewayClient(transport, token === undefined ? {} : { token });
  }
  fence(requestId = ++this.#requestId) {
    return { clientId: this.clientId, generation: 0n, requestId: BigInt(requestId) };
  }
}

export function rawClient(name: string, token?: string): RawClient {
  return new RawClient(`ts-${name}-${process.pid}`, createNodeTransport({ address: gatewayAddress().address }), token ?? gatewayAddress().token);
}

/** Keeps every frame of a raw Connect stream; waits for the first that matches. */
export class FrameReader {
  readonly frames: ConnectResponse[] = [];
  readonly #changes = new Changes();
  readonly #abort = new AbortController();
  #ended: unknown = undefined;

  constructor(client: RawClient, cursors: Record<string, bigint> = {}) {
    const stream = client.gateway.connect({ clientId: client.clientId, generation: 0n, cursors }, { signal: this.#abort.signal });
    void this.#read(stream);
  }

  async #read(stream: AsyncIterable<ConnectResponse>): Promise<void> {
    try {
      for await (const frame of stream) {
        this.frames.push(frame);
        this.#changes.notify();
      }
      this.#ended = "the stream ended";
    } catch (error) {
      this.#ended = error;
    }
    this.#changes.notify();
  }

  async waitFor(match: (frame: ConnectResponse) => boolean, what: string): Promise<ConnectResponse> {
    await this.#changes.until(() => this.frames.some(match) || this.#ended !== undefined, TIMEOUT_MS, what);
    const found = this.frames.find(match);
    if (found === undefined) throw new Error(`no ${what}: ${String(this.#ended)}`);
    return found;
  }

  cancel(): void {
    this.#abort.abort();
  }
}

/** Frames of one session's events of one kind. */
export function eventOf(sessionId: string, body: string) {
  return (frame: ConnectResponse): boolean =>
    frame.frame.case === "sessionEvent" && frame.frame.value.sessionId === sessionId && frame.frame.value.event?.body.case === body;
}

/**
 * A transport whose Connect streams wait while the gate is closed, and that
 * records every ConnectRequest: a test holds a reconnect back while the log
 * moves on, then lets it through and sees which cursors it presented.
 */
export class GatedTransport implements Transport {
  readonly requests: ConnectRequest[] = [];
  readonly changes = new Changes();
  waiting = 0;
  #open: Promise<void> = Promise.resolve();
  #release: () => void = () => undefined;

  constructor(readonly inner: Transport) {}

  close(): void {
    this.#open = new Promise((resolve) => (this.#release = resolve));
  }

  open(): void {
    this.#release();
  }

  unary: Transport["unary"] = (...args) => this.inner.unary(...args);

  stream: Transport["stream"] = async <I extends DescMessage, O extends DescMessage>(
    method: DescMethodStreaming<I, O>,
    signal: AbortSignal | undefined,
    timeoutMs: number | undefined,
    header: HeadersInit | undefined,
    input: AsyncIterable<MessageInitShape<I>>,
    contextValues?: Parameters<Transport["stream"]>[5],
  ) => {
    const messages: MessageInitShape<I>[] = [];
    for await (const message of input) messages.push(message);
    this.requests.push(...(messages as unknown as ConnectRequest[]));
    this.waiting += 1;
    this.changes.notify();
    await this.#open;
    this.waiting -= 1;
    return this.inner.stream(method, signal, timeoutMs, header, replay(messages), contextValues);
  };
}

async function* replay<I extends DescMessage>(messages: MessageInitShape<I>[]): AsyncIterable<MessageInitShape<I>> {
  yield* messages;
}
