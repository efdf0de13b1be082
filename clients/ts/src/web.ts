// Browser entry point: the same SDK on @connectrpc/connect-web. Browsers
// cannot speak gRPC over HTTP/2 trailers, so the gateway is reached through
// a gRPC-web proxy (e.g. Envoy's grpc_web filter) at `baseUrl`.

import { createGrpcWebTransport } from "@connectrpc/connect-web";
import type { Transport } from "@connectrpc/connect";

export * from "./index.js";

/** gRPC-web to a proxy in front of the gateway. */
export function createWebTransport(baseUrl: string): Transport {
  return createGrpcWebTransport({ baseUrl });
}
