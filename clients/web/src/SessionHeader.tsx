import { dollars, tokens, usageLine, type Session } from "@agenthost/sdk/web";
import type { AppModel } from "./model.js";

/** The title, the model and its usage, the plan chip (the host's state, pending marker included) and cancel. */
export function SessionHeader({ model, session }: { model: AppModel; session: Session }) {
  const summary = model.summaries.get(session.id) ?? session.summary;
  const title = summary?.blank !== false && !summary?.title ? "New Session" : summary?.title || "Untitled";
  return (
    <header className="session-header">
      <h2 data-testid="session-heading" title={title}>
        {title}
      </h2>
      <UsageFigures session={session} />
      <ModelPicker model={model} session={session} />
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

/** The model of the session's next request, as its settings hold it; choosing one records it. */
function ModelPicker({ model, session }: { model: AppModel; session: Session }) {
  const fallback = model.models.find((m) => m.isDefault)?.name ?? "";
  const current = session.settings?.model || fallback;
  if (model.models.length === 0) return null;
  return (
    <label className="model-picker" data-testid="model-picker" title={`The model answers from the next model request on. ${settingsShown(session)}`}>
      Model{" "}
      <select data-testid="model-select" data-current={current} value={current} onChange={(event) => void model.chooseModel(event.target.value)}>
        {model.models.map((m) => (
          <option key={m.name} value={m.name} data-testid={`model-${m.name}`}>
            {m.name} ({tokens(m.contextWindow)}
            {m.prices !== undefined ? `, ${dollars(m.prices.input)}/${dollars(m.prices.output)} per M` : ""})
          </option>
        ))}
      </select>
    </label>
  );
}

/** The session's settings and where they came from (the defaults' sources, what they ignored). */
export function settingsShown(session: Session): string {
  const settings = session.settings;
  if (settings === undefined) return "";
  const values = `Sandbox ${settings.sandbox}, approvals ${settings.approvals}, network ${settings.network ? "on" : "off"}`;
  const origin =
    settings.origin === "defaults"
      ? `defaults from ${settings.sources.length > 0 ? settings.sources.join(", ") : "the built-in ones"}`
      : settings.origin === "session"
        ? "set in this session"
        : "the built-in defaults";
  const ignored = settings.problems.length > 0 ? ` Ignored: ${settings.problems.join("; ")}` : "";
  return `${values}: ${origin}.${ignored}`;
}

/** The last request's share of its model's context window and what the session cost. */
function UsageFigures({ session }: { session: Session }) {
  const usage = session.usage;
  if (usage === undefined) return null;
  const detail =
    `${usage.requests} model requests: ${usage.promptTokens} prompt tokens (${usage.cachedPromptTokens} cached), ` +
    `${usage.completionTokens} completion tokens; last model ${usage.model}`;
  return (
    <span
      className="marker usage"
      data-testid="usage"
      data-context-tokens={usage.contextTokens}
      data-context-window={usage.contextWindow}
      data-cost={usage.cost ?? ""}
      title={detail}
    >
      {usageLine(usage)}
    </span>
  );
}
