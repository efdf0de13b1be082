// Node entry point: the SDK on @connectrpc/connect-node's gRPC transport
// (HTTP/2 straight to the gateway's gRPC port).

import { readFile, stat } from "node:fs/promises";
import { basename } from "node:path";
import type { SecureContextOptions } from "node:tls";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { Transport } from "@connectrpc/connect";
import { Code } from "@connectrpc/connect";
import type { PromptImage } from "./context.js";
import { AgentHostError, Reason } from "./errors.js";

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

/** What one image may weigh (the gateway's bound, agenthost_core/images.py). */
export const MAX_IMAGE_BYTES = 5 * 1024 * 1024;

/**
 * A file as an image to send with a prompt (the gateway checks its bytes);
 * one over MAX_IMAGE_BYTES is refused (IMAGE_REFUSED) without being read.
 */
export async function imageFile(path: string): Promise<PromptImage> {
  const name = basename(path);
  const { size } = await stat(path);
  if (size > MAX_IMAGE_BYTES) {
    const why = `it has ${size.toLocaleString("en-US")} bytes, over the ${MAX_IMAGE_BYTES.toLocaleString("en-US")} (5.0 MB) an image may have`;
    throw new AgentHostError(`cannot send image ${name}: ${why}`, { code: Code.InvalidArgument, reason: Reason.IMAGE_REFUSED, metadata: { image: name, why } });
  }
  return { data: new Uint8Array(await readFile(path)), name };
}
