// Node entry point: the SDK on @connectrpc/connect-node's gRPC transport
// (HTTP/2 straight to the gateway's gRPC port).

import type { SecureContextOptions } from "node:tls";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { Transport } from "@connectrpc/connect";

export * from "./index.js";

export interface NodeTransportOptions {
  /** `host:port` of the gateway (e.g. 127.0.0.1:7100), or a full URL. */
  address: string;
  /** PEM roots to trust: the gateway then is reached over TLS. */
  tlsRoots?: SecureContextOptions["ca"];
}

/** gRPC over HTTP/2 to the gateway, plaintext unless `tlsRoots` is given. */
export function createNodeTransport({ address, tlsRoots }: NodeTransportOptions): Transport {
  const scheme = tlsRoots === undefined ? "http" : "https";
  const baseUrl = address.includes("://") ? address : `${scheme}://${address}`;
  return createGrpcTransport({
    baseUrl,
    ...(tlsRoots === undefined ? {} : { nodeOptions: { ca: tlsRoots } }),
  });
}
