import type { Session } from "@agenthost/sdk/web";
import type { AppModel } from "./model.js";

/** The title, the plan chip (the host's state, pending marker included) and cancel. */
export function SessionHeader({ model, session }: { model: AppModel; session: Session }) {
  const summary = model.summaries.get(session.id) ?? session.summary;
  return (
    <header className="session-header">
      <h2 data-testid="session-heading">{summary?.blank !== false && !summary?.title ? "New Session" : summary?.title || "Untitled"}</h2>
      <PlanChip model={model} session={session} />
      {session.running && (
        <>
          <span className="marker running" data-testid="turn-running">
            running
          </span>
          <button data-testid="cancel" onClick={() => void model.cancel()}>
            Cancel
          </button>
        </>
      )}
    </header>
  );
}

function PlanChip({ model, session }: { model: AppModel; session: Session }) {
  const { available, state } = session.plan;
  if (available === false) return <span className="plan-chip unavailable" data-testid="plan-chip" data-available="false">no plan mode</span>;
  if (state === undefined) return <span className="plan-chip" data-testid="plan-chip" data-loading="true">plan …</span>;
  // The choice a click makes: away from the target the host holds now.
  const target = state.pending ?? state.active;
  return (
    <span className={`plan-chip ${state.active ? "active" : ""}`} data-testid="plan-chip" data-active={state.active} data-pending={state.pending ?? "none"}>
      <span data-testid="plan-state">Plan mode {state.active ? "on" : "off"}</span>
      {state.pending !== undefined && (
        <span className="marker pending" data-testid="plan-pending" title="Takes effect at the next model request">
          → {state.pending ? "on" : "off"} at the next step
        </span>
      )}
      <button data-testid="plan-toggle" onClick={() => void model.choosePlan(!target)}>
        {target ? "Leave plan mode" : "Plan mode"}
      </button>
    </span>
  );
}
