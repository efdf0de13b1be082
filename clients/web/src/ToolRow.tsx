// One tool call in the transcript: its tool, what it was asked to do (its
// main argument), how it ended, and a bounded preview of what it returned
// (a file change's diff, a command's first lines of output) that opens in
// full on a click. How it ended comes from the log: a call the user denied
// and a plan the user sent back ("keep planning") are not failures.
import type { Session, Subagent, eventsV1 } from "@agenthost/sdk/web";
import { useState } from "react";
import { Diff } from "./Diff.js";
import "./rich.css";

type Event = Session["events"][number];

/** How a call ended, as the row shows it. */
export type CallState = "running" | "ok" | "failed" | "denied" | "kept-planning" | "dismissed";

const ANSWERED_STATES: Record<string, CallState> = { deny: "denied", feedback: "kept-planning", dismiss: "dismissed" };
const STATE_LABELS: Record<CallState, string> = {
  running: "running",
  ok: "done",
  failed: "failed",
  denied: "denied",
  "kept-planning": "kept planning",
  dismissed: "dismissed",
};
const PREVIEW_LINES = 8;

/** The answer given to each call's question (callId -> the answer's kind), from the log. */
export function answersByCall(events: readonly Event[]): Map<string, string> {
  const callOfQuestion = new Map<string, string>();
  const answers = new Map<string, string>();
  for (const event of events) {
    const body = event.body;
    if (body.case === "questionAsked" && body.value.callId) callOfQuestion.set(body.value.questionId, body.value.callId);
    if (body.case === "questionAnswered") {
      const call = callOfQuestion.get(body.value.questionId);
      const kind = body.value.answer?.kind.case;
      if (call !== undefined && kind !== undefined) answers.set(call, kind);
    }
  }
  return answers;
}

export function callState(result: eventsV1.ToolResult | undefined, answer: string | undefined): CallState {
  if (result === undefined) return "running";
  if (result.ok) return "ok";
  return (answer !== undefined ? ANSWERED_STATES[answer] : undefined) ?? "failed";
}

/** The argument that says what the call does: a path, a command, a pattern. */
export function mainArgument(call: eventsV1.ToolCall): string {
  let args: unknown;
  try {
    args = JSON.parse(call.argsJson);
  } catch {
    return call.argsJson.slice(0, 200);
  }
  if (typeof args !== "object" || args === null) return "";
  const record = args as Record<string, unknown>;
  for (const name of ["command", "path", "pattern", "query", "url", "plan"]) {
    const value = record[name];
    if (typeof value !== "string") continue;
    const first = value.trim().split("\n")[0] ?? "";
    return name === "command" ? `$ ${value}` : first;
  }
  const shown = JSON.stringify(args);
  return shown === "{}" ? "" : shown.length > 200 ? `${shown.slice(0, 200)}…` : shown;
}

export function ToolRow({
  call,
  result,
  answer,
  liveOutput,
  child,
  openChild,
}: {
  call: eventsV1.ToolCall;
  result: eventsV1.ToolResult | undefined;
  answer: string | undefined;
  /** What a running command printed so far. */
  liveOutput: string;
  /** The subagent a task call started. */
  child?: Subagent | undefined;
  openChild?: (childId: string) => void;
}) {
  const state = callState(result, answer);
  const summary = result?.display?.summary || mainArgument(call);
  return (
    <div className={`tool-call ${state}`} data-testid="tool-call" data-tool={call.name} data-state={state}>
      <div className="tool-head">
        <span className="tool-name">{call.name}</span>
        <span className="tool-summary" data-testid="tool-summary">
          {summary}
        </span>
        <span className={`tool-state ${state}`} data-testid="tool-state">
          {STATE_LABELS[state]}
        </span>
      </div>
      {child !== undefined && (
        <div className="subagent" data-testid="subagent" data-child-id={child.sessionId} data-running={child.running}>
          ↳ subagent <b>{child.agentType}</b> · {child.description} · {child.running ? "running" : "done"}
          {child.requests > 0 && ` · ${child.requests} request${child.requests === 1 ? "" : "s"}`}{" "}
          <button className="link" data-testid="subagent-open" onClick={() => openChild?.(child.sessionId)}>
            Open its transcript
          </button>
        </div>
      )}
      {result !== undefined ? <ToolOutput result={result} /> : liveOutput && <LiveOutput text={liveOutput} />}
    </div>
  );
}

function ToolOutput({ result }: { result: eventsV1.ToolResult }) {
  const diff = result.display?.diff;
  if (diff) return <Diff diff={diff} testId="tool-diff" />;
  return <Preview text={result.ok ? result.output : result.error} />;
}

/** A running command's last lines, as they come. */
function LiveOutput({ text }: { text: string }) {
  const lines = text.replace(/\n$/, "").split("\n");
  return (
    <div className="tool-output">
      <pre data-testid="tool-live-output">{lines.slice(-PREVIEW_LINES).join("\n")}</pre>
    </div>
  );
}

/** The first lines of a call's output; all of it on a click. */
function Preview({ text }: { text: string }) {
  const [open, setOpen] = useState(false);
  const lines = text.replace(/\n$/, "").split("\n");
  if (!text.trim()) return null;
  const hidden = lines.length - PREVIEW_LINES;
  return (
    <div className="tool-output">
      <pre data-testid="tool-result">{open || hidden <= 0 ? text : lines.slice(0, PREVIEW_LINES).join("\n")}</pre>
      {hidden > 0 && (
        <button className="link" data-testid="tool-more" onClick={() => setOpen(!open)}>
          {open ? "show less" : `show ${hidden} more lines`}
        </button>
      )}
    </div>
  );
}
