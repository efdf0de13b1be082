// The session's settings (the `settings` projection: sandbox, approval
// policy, model, network), what its model requests used (the `usage` projection) and
// the models it can switch to (ListModels), as plain values.

import type { ModelInfo as ModelInfoMessage } from "../gen/agenthost/runtime/v1/runtime_pb.js";
import type { JsonValue } from "./projection.js";

export interface Settings {
  /** "read-only", "workspace-write" or "full". */
  readonly sandbox: string;
  /** "ask", "ask-for-commands" or "never". */
  readonly approvals: string;
  /** A name of `listModels`; "" is the deployment's default model. */
  readonly model: string;
  /** Whether confined commands may reach the network (`/network on`). */
  readonly network: boolean;
  /**
   * Where they came from: "built-in" (nothing recorded), "defaults" (the
   * settings files and `agenthost up` flags in `sources`, with what was
   * ignored in `problems`) or "session" (a change made in the session).
   */
  readonly origin: string;
  readonly sources: readonly string[];
  readonly problems: readonly string[];
}

/**
 * What the session's model requests used: the last request's context (its
 * prompt and answer) against its model's window, and the session's totals.
 * `cost` is in USD, summed over the requests whose model has prices
 * (undefined when none had).
 */
export interface Usage {
  readonly model: string;
  readonly contextTokens: number;
  readonly contextWindow: number;
  readonly contextShare: number;
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly cachedPromptTokens: number;
  readonly requests: number;
  readonly cost: number | undefined;
  /** The last figures are an estimate (the provider reported none). */
  readonly estimated: boolean;
}

/** USD per million tokens; cached input costs `input` when `cachedInput` is absent. */
export interface ModelPrices {
  readonly input: number;
  readonly output: number;
  readonly cachedInput: number | undefined;
}

export interface ModelInfo {
  /** What `setModel` takes. */
  readonly name: string;
  readonly provider: string;
  readonly providerModel: string;
  readonly contextWindow: number;
  readonly maxOutputTokens: number;
  readonly prices: ModelPrices | undefined;
  readonly isDefault: boolean;
  /** The model takes images (a prompt's, a tool's). */
  readonly images: boolean;
}

/** A `settings` projection value (undefined when it breaks the contract). */
export function settingsOf(view: JsonValue | undefined): Settings | undefined {
  if (!isRecord(view) || typeof view["sandbox"] !== "string" || typeof view["approvals"] !== "string") return undefined;
  const model = view["model"] ?? "";
  const network = view["network"] ?? false;
  const origin = view["origin"] ?? "built-in";
  const sources = view["sources"] ?? [];
  const problems = view["problems"] ?? [];
  if (typeof model !== "string" || typeof network !== "boolean" || typeof origin !== "string") return undefined;
  if (!isStrings(sources) || !isStrings(problems)) return undefined;
  return { sandbox: view["sandbox"], approvals: view["approvals"], model, network, origin, sources, problems };
}

function isStrings(value: JsonValue): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === "string");
}

const COUNTS = ["context_tokens", "context_window", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "requests"] as const;

/** A `usage` projection value; undefined before the first request (or when malformed). */
export function usageOf(view: JsonValue | undefined): Usage | undefined {
  if (!isRecord(view)) return undefined;
  const counts = COUNTS.map((key) => view[key]);
  if (!counts.every((n) => typeof n === "number" && n >= 0)) return undefined;
  const [contextTokens, contextWindow, promptTokens, completionTokens, cachedPromptTokens, requests] = counts as number[];
  const { model, context_share: share, cost, estimated } = view;
  if (typeof model !== "string" || typeof share !== "number" || (cost !== null && typeof cost !== "number")) return undefined;
  return {
    model,
    contextTokens: contextTokens!,
    contextWindow: contextWindow!,
    contextShare: share,
    promptTokens: promptTokens!,
    completionTokens: completionTokens!,
    cachedPromptTokens: cachedPromptTokens!,
    requests: requests!,
    cost: cost === null ? undefined : cost,
    estimated: estimated === true,
  };
}

/** `ctx 41% · 52k/128k · $0.08`: the context in use and what the session cost (`~`: estimated). */
export function usageLine(usage: Usage): string {
  const mark = usage.estimated ? "~" : "";
  let shown = usage.contextWindow
    ? `ctx ${mark}${Math.round(usage.contextShare * 100)}% · ${tokens(usage.contextTokens)}/${tokens(usage.contextWindow)}`
    : `ctx ${mark}${tokens(usage.contextTokens)}`;
  if (usage.cost !== undefined) shown += ` · ${dollars(usage.cost)}`;
  return shown;
}

/** A token count as people read it: 950, 52k, 1.2M. */
export function tokens(count: number): string {
  if (count < 1000) return String(count);
  if (count < 1_000_000) return `${Math.floor(count / 1000)}k`;
  return `${(count / 1_000_000).toFixed(1)}M`;
}

export function dollars(amount: number): string {
  return amount >= 0.01 || amount === 0 ? `$${amount.toFixed(2)}` : `$${amount.toFixed(4)}`;
}

export function modelInfoOf(info: ModelInfoMessage): ModelInfo {
  const prices = info.prices === undefined ? undefined : { input: info.prices.input, output: info.prices.output, cachedInput: info.prices.cachedInput };
  return {
    name: info.name,
    provider: info.provider,
    providerModel: info.providerModel,
    contextWindow: Number(info.contextWindow),
    maxOutputTokens: Number(info.maxOutputTokens),
    prices,
    isDefault: info.isDefault,
    images: info.images,
  };
}

function isRecord(value: unknown): value is Record<string, JsonValue> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
