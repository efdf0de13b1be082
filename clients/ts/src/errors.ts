// Typed errors: every failed gateway call surfaces as an AgentHostError with
// the gRPC code, the stable reason and domain of its google.rpc.ErrorInfo
// detail, and the field violations of its google.rpc.BadRequest detail.

import { Code, ConnectError } from "@connectrpc/connect";
import { BadRequestSchema, ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.js";

/** Reasons the gateway sends (ErrorInfo.reason) that clients branch on. */
export const Reason = {
  STALE: "STALE",
  AGENT_BUSY: "AGENT_BUSY",
  INVALID_REQUEST: "INVALID_REQUEST",
  QUESTION_ANSWERED: "QUESTION_ANSWERED",
  SESSION_NOT_FOUND: "SESSION_NOT_FOUND",
  UNAUTHENTICATED: "UNAUTHENTICATED",
  /** A model name the deployment does not configure (UpdateSessionSettings). */
  UNKNOWN_MODEL: "UNKNOWN_MODEL",
  /** A prompt's `@path` (or resource) names a file the agent may not read (Prompt). */
  FILE_REFERENCE_REFUSED: "FILE_REFERENCE_REFUSED",
  /** An image is no image by its bytes, too large, or one too many (Prompt). */
  IMAGE_REFUSED: "IMAGE_REFUSED",
  /** The session's model takes no images (Prompt with images). */
  MODEL_TAKES_NO_IMAGES: "MODEL_TAKES_NO_IMAGES",
  /** A digest names no image the session holds (Prompt, ReadImage). */
  IMAGE_NOT_FOUND: "IMAGE_NOT_FOUND",
  // Raised by the SDK itself.
  INVALID_REPLY: "INVALID_REPLY",
  SUPERSEDED: "SUPERSEDED",
  CLIENT_CLOSED: "CLIENT_CLOSED",
  PLAN_SELECTION_FAILED: "PLAN_SELECTION_FAILED",
  HISTORY_GAP: "HISTORY_GAP",
  TIMEOUT: "TIMEOUT",
  /** The gateway went away during the call; it may have taken effect. */
  CUT_OFF: "CUT_OFF",
} as const;

/** One violated field of an invalid request (google.rpc.BadRequest). */
export interface FieldViolation {
  /** The field's path, e.g. `title` or `fence.client_id`. */
  readonly field: string;
  readonly description: string;
}

export interface AgentHostErrorInit {
  code?: Code;
  reason?: string;
  domain?: string;
  metadata?: Record<string, string>;
  violations?: FieldViolation[];
  cause?: unknown;
}

// Codes that say the gateway was not reached or did not answer in time.
const TRANSPORT_CODES = new Set([Code.Unavailable, Code.DeadlineExceeded]);

/** A failed call, or a failure the SDK raises (reason INVALID_REPLY, …). */
export class AgentHostError extends Error {
  /** The gRPC status code (Connect's Code enum has the same numbers). */
  readonly code: Code;
  /** ErrorInfo.reason ("" when the error carried none). */
  readonly reason: string;
  /** ErrorInfo.domain ("agenthost" for the gateway's own errors). */
  readonly domain: string;
  readonly metadata: Readonly<Record<string, string>>;
  /** BadRequest's field violations (INVALID_ARGUMENT). */
  readonly violations: readonly FieldViolation[];

  constructor(message: string, init: AgentHostErrorInit = {}) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = "AgentHostError";
    this.code = init.code ?? Code.Unknown;
    this.reason = init.reason ?? "";
    this.domain = init.domain ?? "";
    this.metadata = { ...init.metadata };
    this.violations = [...(init.violations ?? [])];
  }

  /** The gateway fenced the request out; nothing was applied. */
  get stale(): boolean {
    return this.reason === Reason.STALE;
  }

  /** The gateway could not be reached, went away during the call, or did not answer in time. */
  get transport(): boolean {
    return TRANSPORT_CODES.has(this.code) && (this.reason === "" || this.reason === Reason.CUT_OFF);
  }

  /** `Code.FailedPrecondition/STALE: …`, for logs. */
  override toString(): string {
    return `AgentHostError(${Code[this.code]}/${this.reason || "-"}: ${this.message})`;
  }

  /**
   * The typed form of whatever a call threw; `signal` is the call's own. The
   * gateway never answers Canceled itself: a call cancelled by the far side
   * (gRPC cancels the calls that race a server's shutdown) is the gateway
   * going away mid-call, Unavailable/CUT_OFF, as the Python SDK reports it.
   */
  static from(error: unknown, signal?: AbortSignal): AgentHostError {
    if (error instanceof AgentHostError) return error;
    const connect = ConnectError.from(error);
    if (connect.code === Code.Canceled && !signal?.aborted) {
      return new AgentHostError(`the gateway went away during the call (${connect.rawMessage}); it may have taken effect`, {
        code: Code.Unavailable,
        reason: Reason.CUT_OFF,
        cause: error,
      });
    }
    const [info] = connect.findDetails(ErrorInfoSchema);
    const violations = connect
      .findDetails(BadRequestSchema)
      .flatMap((detail) => detail.fieldViolations)
      .map(({ field, description }) => ({ field, description }));
    return new AgentHostError(connect.rawMessage || Code[connect.code], {
      code: connect.code,
      reason: info?.reason ?? "",
      domain: info?.domain ?? "",
      metadata: info?.metadata ?? {},
      violations,
      cause: error,
    });
  }
}
