// Browser entry point: the same SDK on @connectrpc/connect-web. Browsers
// cannot speak gRPC over HTTP/2 trailers, so they call the gateway's web
// port (gRPC-Web; `agenthost up` prints it as `web`) at `baseUrl`.

import { createGrpcWebTransport } from "@connectrpc/connect-web";
import type { Transport } from "@connectrpc/connect";

export * from "./index.js";

/** gRPC-Web to the gateway's web port (the web client: its own origin). */
export function createWebTransport(baseUrl: string): Transport {
  return createGrpcWebTransport({ baseUrl });
}
