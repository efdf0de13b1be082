// A small Node client for the agenthost gateway.
//
// The GatewayService stubs are built at run time by @grpc/grpc-js and
// @grpc/proto-loader from the FileDescriptorSet that `make gen` writes
// (gen/agenthost.binpb): it holds every agenthost proto with all its imports,
// buf/validate/validate.proto included, so the Node side reads exactly what the
// Python side compiled and needs no protoc and no copy of third-party protos.
//
// Message objects follow @grpc/proto-loader with LOADER_OPTIONS: field names
// as written in the protos (`session_id`, the same as in Python: a descriptor
// set carries no camelCase names), enums as their names, int64 as Number (log
// seqs and generations stay far below 2^53), and for every oneof a virtual
// field naming the member that is set (`frame.frame === 'session_event'`;
// proto3 `optional` fields show theirs too, e.g. `_state: 'state'`).
//
// LiveText (./live.js, re-exported here) folds the stream's ephemeral
// assistant_delta / tool_output frames into a session's text so far.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import descriptor from 'protobufjs/ext/descriptor/index.js';

export { grpc };
export const { status } = grpc;

export * from './live.js';

/** Where `make gen` writes the descriptor set, relative to this package. */
export const DEFAULT_DESCRIPTOR_SET = fileURLToPath(
  new URL('../../../gen/agenthost.binpb', import.meta.url),
);

/** @type {protoLoader.Options} */
export const LOADER_OPTIONS = {
  longs: Number,
  enums: String,
  // Unset proto3 scalars read as their defaults (`active: false` is present);
  // oneof members, proto3 `optional` fields included, stay absent when unset.
  defaults: true,
  oneofs: true,
};

const DEFAULT_DEADLINE_MS = 10_000;

/** @type {Map<string, grpc.ServiceClientConstructor>} */
const services = new Map();

/**
 * The GatewayService client constructor, loaded from a descriptor set.
 *
 * @param {string} [descriptorSet] path of a serialized FileDescriptorSet;
 *   defaults to $AGENTHOST_DESCRIPTOR_SET, then to DEFAULT_DESCRIPTOR_SET.
 * @returns {grpc.ServiceClientConstructor}
 */
export function loadGatewayService(descriptorSet) {
  const path = descriptorSet || process.env.AGENTHOST_DESCRIPTOR_SET || DEFAULT_DESCRIPTOR_SET;
  let service = services.get(path);
  if (!service) {
    const loaded = grpc.loadPackageDefinition(loadDescriptorSet(readFileSync(path)));
    // loadPackageDefinition nests namespaces: agenthost.gateway.v1.GatewayService.
    service = /** @type {grpc.ServiceClientConstructor} */ (
      /** @type {any} */ (loaded).agenthost.gateway.v1.GatewayService
    );
    services.set(path, service);
  }
  return service;
}

/**
 * The package definition of every service and message in a serialized
 * FileDescriptorSet.
 *
 * This does what protoLoader.loadFileDescriptorSetFromBuffer does, plus one
 * repair: protobufjs 7 (the line @grpc/proto-loader 0.8 depends on) reads a
 * descriptor's `map<K, V>` field as a repeated `XEntry{key, value}` message,
 * so `cursors: {s1: 4}` would fail to serialize and map replies would decode as
 * arrays. The map fields are rebuilt from their entry types first.
 *
 * @param {Uint8Array} descriptorSet
 * @returns {protoLoader.PackageDefinition}
 */
export function loadDescriptorSet(descriptorSet) {
  // Root.fromDescriptor is added by the descriptor extension; its typings miss it.
  const Root = /** @type {any} */ (protobuf.Root);
  /** @type {protobuf.Root} */
  const root = Root.fromDescriptor(descriptor.FileDescriptorSet.decode(descriptorSet));
  root.resolveAll();
  restoreMapFields(root);
  return protoLoader.fromJSON(root.toJSON(), LOADER_OPTIONS);
}

/** @param {protobuf.NamespaceBase} namespace */
function restoreMapFields(namespace) {
  for (const nested of namespace.nestedArray) {
    if (nested instanceof protobuf.Type) {
      for (const field of [...nested.fieldsArray]) {
        const entry = field.resolvedType;
        // An entry is nested in the message that holds the map. protobufjs 7
        // also flags that holder as a map entry, but a holder has nested types.
        if (
          !field.repeated ||
          !(entry instanceof protobuf.Type) ||
          entry.parent !== nested ||
          !entry.options?.map_entry ||
          entry.nestedArray.length > 0
        ) {
          continue;
        }
        const { key, value } = entry.fields;
        nested.remove(field);
        nested.remove(entry);
        nested.add(new protobuf.MapField(field.name, field.id, key.type, value.type, field.options));
        delete nested.options?.map_entry;
      }
    }
    if (nested instanceof protobuf.Namespace) restoreMapFields(nested);
  }
}

/**
 * Adds `authorization: Bearer <token>` to every call. An interceptor rather
 * than call credentials: grpc-js refuses to compose call credentials with an
 * insecure channel, and the embedded stack listens in plaintext on loopback.
 *
 * @param {string} token
 * @returns {grpc.Interceptor}
 */
export function bearerToken(token) {
  return (options, nextCall) =>
    new grpc.InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        metadata.set('authorization', `Bearer ${token}`);
        next(metadata, listener);
      },
    });
}

/**
 * @typedef {object} GatewayOptions
 * @property {string} address host:port of the gateway
 * @property {string} [token] bearer token; calls without one are UNAUTHENTICATED
 * @property {string} [descriptorSet] see loadGatewayService
 * @property {grpc.ChannelCredentials} [credentials] insecure by default
 */

/** The gateway's RPCs as promises (unary) and a readable stream (Connect). */
export class GatewayClient {
  /** @type {grpc.Client & Record<string, any>} */
  #stub;

  /** @param {GatewayOptions} options */
  constructor({ address, token, descriptorSet, credentials }) {
    const Service = loadGatewayService(descriptorSet);
    this.#stub = /** @type {any} */ (
      new Service(address, credentials ?? grpc.credentials.createInsecure(), {
        interceptors: token ? [bearerToken(token)] : [],
      })
    );
  }

  /**
   * Calls one unary RPC of GatewayService by name, e.g. `call('CreateSession',
   * { cwd: '/src' })`. Rejects with the grpc error (`err.code` is a `status`).
   *
   * @param {string} method
   * @param {object} [request]
   * @param {{ deadlineMs?: number }} [options]
   * @returns {Promise<any>}
   */
  call(method, request = {}, { deadlineMs = DEFAULT_DEADLINE_MS } = {}) {
    const rpc = this.#stub[method];
    if (typeof rpc !== 'function' || rpc.responseStream) {
      return Promise.reject(new TypeError(`GatewayService has no unary method ${method}`));
    }
    const deadline = new Date(Date.now() + deadlineMs);
    return new Promise((resolve, reject) => {
      rpc.call(this.#stub, request, { deadline }, (/** @type {any} */ err, /** @type {any} */ reply) =>
        err ? reject(err) : resolve(reply),
      );
    });
  }

  /**
   * Opens the client's frame stream. The first frame is `connected`.
   *
   * @param {{ client_id: string, generation?: number, cursors?: Record<string, number> }} request
   * @returns {grpc.ClientReadableStream<any>}
   */
  connect(request) {
    return this.#stub.Connect(request);
  }

  close() {
    this.#stub.close();
  }
}

/**
 * Keeps every frame of a Connect stream and lets a caller wait for the first
 * one that matches, whether it already arrived or is still to come. Meant for
 * scripts and tests: it holds all frames until the stream ends.
 */
export class FrameReader {
  /** @type {any[]} */
  #frames = [];
  /** @type {Set<{ match: (frame: any) => boolean, resolve: (frame: any) => void, reject: (err: Error) => void }>} */
  #waiters = new Set();
  /** @type {Error | null} */
  #closed = null;
  #stream;

  /** @param {grpc.ClientReadableStream<any>} stream */
  constructor(stream) {
    this.#stream = stream;
    stream.on('data', (frame) => {
      this.#frames.push(frame);
      for (const waiter of this.#waiters) {
        if (waiter.match(frame)) {
          this.#waiters.delete(waiter);
          waiter.resolve(frame);
        }
      }
    });
    stream.on('error', (err) => this.#close(err));
    stream.on('end', () => this.#close(new Error('the Connect stream ended')));
  }

  /** Every frame received so far. */
  get frames() {
    return [...this.#frames];
  }

  /**
   * @param {(frame: any) => boolean} match
   * @param {{ timeoutMs?: number, what?: string }} [options]
   * @returns {Promise<any>}
   */
  waitFor(match, { timeoutMs = DEFAULT_DEADLINE_MS, what = 'a matching frame' } = {}) {
    const found = this.#frames.find(match);
    if (found) return Promise.resolve(found);
    if (this.#closed) return Promise.reject(this.#closed);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters.delete(waiter);
        reject(new Error(`no ${what} within ${timeoutMs} ms`));
      }, timeoutMs);
      const waiter = {
        match,
        /** @param {any} frame */
        resolve: (frame) => (clearTimeout(timer), resolve(frame)),
        /** @param {Error} err */
        reject: (err) => (clearTimeout(timer), reject(err)),
      };
      this.#waiters.add(waiter);
    });
  }

  /** Cancels the call; a CANCELLED status after this is expected, not an error. */
  cancel() {
    this.#close(new Error('the Connect stream was cancelled'));
    this.#stream.cancel();
  }

  /** @param {Error} err */
  #close(err) {
    this.#closed ??= err;
    for (const waiter of this.#waiters) waiter.reject(this.#closed);
    this.#waiters.clear();
  }
}

/**
 * Converts a decoded google.protobuf.Value (as LOADER_OPTIONS decodes it) to
 * plain JSON-like JavaScript.
 *
 * @param {any} value
 * @returns {unknown}
 */
export function fromValue(value) {
  switch (value?.kind) {
    case 'null_value':
      return null;
    case 'number_value':
    case 'string_value':
    case 'bool_value':
      return value[value.kind];
    case 'struct_value':
      return Object.fromEntries(
        Object.entries(value.struct_value.fields ?? {}).map(([key, field]) => [key, fromValue(field)]),
      );
    case 'list_value':
      return (value.list_value.values ?? []).map(fromValue);
    default:
      return undefined;
  }
}
