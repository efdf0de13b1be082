import { TextKind, eventsV1, type Session } from "@agenthost/sdk/web";
import { useEffect, useRef, type ReactNode } from "react";
import { AttachedFiles } from "./AttachedFiles.js";
import { MessageImages } from "./DraftImages.js";
import { HookRow } from "./HookRow.js";
import { Markdown } from "./Markdown.js";
import type { AppModel } from "./model.js";
import { ToolRow, answersByCall } from "./ToolRow.js";
import { TurnChanges } from "./TurnChanges.js";

type Event = Session["events"][number];

/**
 * The logged events of the window, then the text of the step running now
 * (or, while the model is awaited, a line saying so). Scrolled to its end
 * as it grows, and kept there when something below takes room from it (a
 * question, a command's answer) unless the reader scrolled up.
 */
export function Transcript({ model, session }: { model: AppModel; session: Session }) {
  const box = useRef<HTMLDivElement>(null);
  const end = useRef<HTMLDivElement>(null);
  const atEnd = useRef(true);
  const results = resultsByCall(session.events);
  const answers = answersByCall(session.events);
  const live = session.live.steps();
  const lastSeq = session.lastSeq;
  const waiting = session.running && live.length === 0 && awaitingModel(session.events);
  useEffect(() => {
    // A block, not an expression: newer browsers return a promise from scrollIntoView.
    void end.current?.scrollIntoView({ block: "end" });
  }, [lastSeq, live.length, waiting]);
  useEffect(() => {
    const element = box.current;
    if (element === null) return;
    const keep = new ResizeObserver(() => {
      if (atEnd.current) element.scrollTop = element.scrollHeight;
    });
    keep.observe(element);
    return () => keep.disconnect();
  }, []);
  const onScroll = () => {
    const element = box.current;
    if (element !== null) atEnd.current = element.scrollHeight - element.scrollTop - element.clientHeight < AT_END_PX;
  };
  return (
    <div className="transcript" data-testid="transcript" ref={box} onScroll={onScroll}>
      {session.events.map((event) => (
        <EventView key={String(event.seq)} model={model} session={session} event={event} results={results} answers={answers} outputOf={(callId) => session.live.outputOf(callId)} />
      ))}
      {live.map((step) => (
        <div
          key={`${step.turnId}/${step.step}/${step.kind}`}
          className={step.kind === TextKind.REASONING ? "message assistant reasoning live" : "message assistant live"}
          data-testid={step.kind === TextKind.REASONING ? "live-reasoning" : "live-text"}
        >
          {step.kind === TextKind.REASONING ? step.text : <Markdown text={step.text} />}
        </div>
      ))}
      {waiting && (
        <div className="notice waiting" data-testid="waiting" role="status">
          Thinking…
        </div>
      )}
      <div ref={end} />
    </div>
  );
}

// How close to its end a transcript counts as read to the end (its padding
// stays below the last line when it is scrolled into view).
const AT_END_PX = 40;
// What the model is awaited after (a turn or a step began, a tool returned),
// and what ends that wait (its text is logged, a call runs or asks, the turn ends).
const AWAITED_AFTER = new Set(["userMessage", "turnStart", "stepStart", "toolResult"]);
const NOT_AWAITED_AFTER = new Set(["assistantMessage", "toolCall", "questionAsked", "turnEnd"]);

/** Whether the last thing that happened leaves the model to be awaited. */
function awaitingModel(events: readonly Event[]): boolean {
  for (let index = events.length - 1; index >= 0; index -= 1) {
    const kind = events[index]?.body.case ?? "";
    if (AWAITED_AFTER.has(kind)) return true;
    if (NOT_AWAITED_AFTER.has(kind)) return false;
  }
  return false;
}

function resultsByCall(events: readonly Event[]): Map<string, eventsV1.ToolResult> {
  const results = new Map<string, eventsV1.ToolResult>();
  for (const event of events) if (event.body.case === "toolResult") results.set(event.body.value.callId, event.body.value);
  return results;
}

function EventView({
  model,
  session,
  event,
  results,
  answers,
  outputOf,
}: {
  model: AppModel;
  session: Session;
  event: Event;
  results: Map<string, eventsV1.ToolResult>;
  answers: Map<string, string>;
  outputOf: (callId: string) => string;
}): ReactNode {
  const body = event.body;
  switch (body.case) {
    case "userMessage":
      return body.value.source?.kind === eventsV1.SourceKind.PLUGIN ? (
        <div className="notice" data-testid="notice">
          {body.value.text}
        </div>
      ) : (
        <div className="message user" data-testid="user-message">
          {body.value.text}
          <AttachedFiles files={body.value.files} />
          <MessageImages session={session} images={body.value.images} />
        </div>
      );
    case "assistantMessage":
      return body.value.text ? (
        <div className="message assistant" data-testid="assistant-message">
          <Markdown text={body.value.text} />
        </div>
      ) : null;
    case "toolCall": {
      const call = body.value;
      const child = call.name === "task" ? session.subagents.find((c) => c.callId === call.callId) : undefined;
      return (
        <ToolRow
          call={call}
          result={results.get(call.callId)}
          answer={answers.get(call.callId)}
          liveOutput={outputOf(call.callId)}
          child={child}
          openChild={(childId) => void model.openChild(session.id, childId)}
        />
      );
    }
    case "checkpoint": {
      // The turn's whole checkpoint (recorded at its end), while the conversation holds the turn.
      const turnId = body.value.turnId;
      const turn = body.value.after ? session.checkpoints.find((t) => t.turnId === turnId) : undefined;
      return turn === undefined ? null : <TurnChanges model={model} session={session} turn={turn} />;
    }
    case "planMode":
      return (
        <div className="notice plan" data-testid="plan-event" data-active={body.value.active}>
          Plan mode {body.value.active ? "on" : "off"}
        </div>
      );
    case "commandDone":
      return body.value.message ? (
        <div className="notice command-done" data-testid="command-done">
          {body.value.message}
        </div>
      ) : null;
    case "compaction":
      return (
        <div className="notice compaction" data-testid="compaction" data-trigger={body.value.trigger}>
          ── conversation compacted ({tokens(body.value.tokensBefore)} → {tokens(body.value.tokensAfter)} tokens) ──
        </div>
      );
    case "hookRun":
      return <HookRow run={body.value} />;
    case "turnEnd":
      return body.value.reason === eventsV1.TurnEndReason.COMPLETED ? null : (
        <div className="notice" data-testid="turn-ended" data-reason={eventsV1.TurnEndReason[body.value.reason]}>
          Turn ended: {eventsV1.TurnEndReason[body.value.reason]?.toLowerCase()} {body.value.error}
        </div>
      );
    default:
      return null;
  }
}

/** 52000 -> "52k": the size of the model's view around a compaction. */
function tokens(count: bigint): string {
  const n = Number(count);
  return n >= 1000 ? `${Math.round(n / 1000)}k` : String(n);
}
