// One hook's run in the transcript: a small row saying which event's hook
// ran and what it did, as the CLI's line says it (`hook PreToolUse: blocked
// the call (exit 2): its reason`), with its command and output in the
// tooltip. A hook that failed or hung says so; the turn went on.
import type { eventsV1 } from "@agenthost/sdk/web";

// What a hook's decision did (hook/run's `decision`).
const DECISIONS: Record<string, string> = {
  allow: "allowed the call",
  deny: "blocked the call",
  ask: "asked the user",
  stop: "stopped the turn",
  context: "added context",
};
// What a block did, by event.
const BLOCKS: Record<string, string> = {
  UserPromptSubmit: "blocked the prompt",
  PostToolUse: "sent feedback",
  Stop: "kept the turn going",
  SubagentStop: "kept the subagent going",
};
const REASON_CHARS = 200;

/** The row's text (the CLI's hook_line without its leading dot). */
export function hookLine(run: eventsV1.HookRun): string {
  let what = run.decision === "block" ? (BLOCKS[run.event] ?? "blocked") : (DECISIONS[run.decision] ?? "");
  if (what === "") what = run.note || "ok";
  else if (run.note) what = `${what} (${run.note})`;
  if (run.exitCode !== undefined && run.exitCode !== 0 && what !== run.note) what = `${what} (exit ${run.exitCode})`;
  const reason = run.reason && run.decision ? `: ${run.reason.split(/\s+/).join(" ").slice(0, REASON_CHARS)}` : "";
  return `hook ${run.event}: ${what}${reason}`;
}

export function HookRow({ run }: { run: eventsV1.HookRun }) {
  const failed = run.decision === "" && run.note !== "";
  const shown = [run.command, run.output, run.errors].filter((text) => text !== "").join("\n");
  return (
    <div className={failed ? "notice hook failed" : "notice hook"} data-testid="hook-run" data-event={run.event} data-decision={run.decision} title={shown}>
      {hookLine(run)}
    </div>
  );
}
