// The settings and usage projection values as the SDK reads them (no gateway).

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { settingsOf, tokens, usageLine, usageOf } from "../src/index.js";

const USAGE = {
  model: "deepseek-chat",
  context_tokens: 52_500,
  context_window: 128_000,
  context_share: 52_500 / 128_000,
  prompt_tokens: 60_000,
  completion_tokens: 3_000,
  cached_prompt_tokens: 900,
  requests: 2,
  cost: 0.08,
  estimated: false,
};

describe("models and usage", () => {
  test("the usage value reads as figures and as the status line", () => {
    const usage = usageOf(USAGE);
    assert.deepEqual(usage, {
      model: "deepseek-chat",
      contextTokens: 52_500,
      contextWindow: 128_000,
      contextShare: 52_500 / 128_000,
      promptTokens: 60_000,
      completionTokens: 3_000,
      cachedPromptTokens: 900,
      requests: 2,
      cost: 0.08,
      estimated: false,
    });
    assert.equal(usageLine(usage!), "ctx 41% · 52k/128k · $0.08");
    assert.equal(usageLine({ ...usage!, cost: undefined, estimated: true }), "ctx ~41% · 52k/128k");
    assert.equal(usageLine({ ...usage!, contextWindow: 0, cost: 0.004 }), "ctx 52k · $0.0040");
    assert.deepEqual([tokens(950), tokens(1_234_567)], ["950", "1.2M"]);
  });

  test("no usage before the first request, and none from a malformed value", () => {
    assert.equal(usageOf(null), undefined);
    assert.equal(usageOf(undefined), undefined);
    assert.equal(usageOf({ ...USAGE, requests: "two" }), undefined);
    assert.equal(usageOf({ ...USAGE, cost: null })?.cost, undefined);
  });

  test("the settings value carries the model, empty for the default, and the network, off by default", () => {
    assert.deepEqual(settingsOf({ sandbox: "read-only", approvals: "ask", model: "alt", network: true }), {
      sandbox: "read-only",
      approvals: "ask",
      model: "alt",
      network: true,
      origin: "built-in",
      sources: [],
      problems: [],
    });
    assert.equal(settingsOf({ sandbox: "read-only", approvals: "ask" })?.model, "");
    assert.equal(settingsOf({ sandbox: "read-only", approvals: "ask" })?.network, false);
    assert.equal(settingsOf({ sandbox: "read-only", approvals: "ask", network: "yes" }), undefined);
    assert.equal(settingsOf({ sandbox: 1 }), undefined);
  });

  test("the settings value says where it came from: the defaults' sources and what they ignored", () => {
    const view = { sandbox: "read-only", approvals: "ask", origin: "defaults", sources: ["/home/u/.config/agenthost/settings.json", "agenthost up"], problems: ["x: bad; ignored"] };
    const settings = settingsOf(view);
    assert.equal(settings?.origin, "defaults");
    assert.deepEqual(settings?.sources, view.sources);
    assert.deepEqual(settings?.problems, view.problems);
    assert.equal(settingsOf({ ...view, sources: "agenthost up" }), undefined);
    assert.equal(settingsOf({ ...view, problems: [3] }), undefined);
  });
});
