import { useState, type FormEvent } from "react";
import type { AppModel, Summary, Workspace } from "./model.js";

// Enough of an id to tell two sessions apart ("s-" and six characters).
const SHORT_ID = 8;

export function Sidebar({ model }: { model: AppModel }) {
  return (
    <nav className="sidebar" data-testid="sidebar">
      <h1>agenthost</h1>
      <AddWorkspace model={model} />
      {model.workspaces.map((workspace) => (
        <WorkspaceGroup key={workspace.id} model={model} workspace={workspace} />
      ))}
    </nav>
  );
}

function AddWorkspace({ model }: { model: AppModel }) {
  const [path, setPath] = useState("");
  const add = (event: FormEvent) => {
    event.preventDefault();
    if (path.trim()) void model.addWorkspace(path.trim()).then(() => setPath(""));
  };
  return (
    <form className="add-workspace" onSubmit={add}>
      <input
        data-testid="workspace-path"
        placeholder="/absolute/path/to/a/folder"
        value={path}
        onChange={(event) => setPath(event.target.value)}
        aria-label="Workspace folder"
      />
      <button type="submit" data-testid="add-workspace">
        Add workspace
      </button>
    </form>
  );
}

function WorkspaceGroup({ model, workspace }: { model: AppModel; workspace: Workspace }) {
  return (
    <section className="workspace" data-testid="workspace" data-path={workspace.path}>
      <header>
        <span className="workspace-path" title={workspace.path}>
          {workspace.path.split("/").pop() || workspace.path}
        </span>
        <button data-testid="new-session" onClick={() => void model.newSession(workspace.id)}>
          New session
        </button>
      </header>
      <ul>
        {model.sessionsOf(workspace).map((summary) => (
          <SessionRow key={summary.id} model={model} summary={summary} />
        ))}
      </ul>
    </section>
  );
}

/**
 * One session: its title on one row (the whole of it in the tooltip), and
 * below it when it was last active and the start of its id, which tell
 * apart sessions of one title; then its markers.
 */
function SessionRow({ model, summary }: { model: AppModel; summary: Summary }) {
  const markers = model.markers(summary.id);
  const current = model.session?.id === summary.id;
  const title = summary.blank ? "New Session" : summary.title || summary.preview || "Untitled";
  return (
    <li
      className={current ? "session-row current" : "session-row"}
      data-testid="session-row"
      data-session-id={summary.id}
      data-running={markers.running}
      data-plan-pending={markers.planPending !== undefined}
    >
      <button onClick={() => void model.openSession(summary.id)}>
        <span className="title" data-testid="session-title" title={title}>
          {title}
        </span>
        <span className="session-meta" data-testid="session-meta" title={summary.id}>
          {whenActive(summary)} · {summary.id.slice(0, SHORT_ID)}
        </span>
        {markers.running && (
          <span className="marker running" data-testid="marker-running" title="A turn is running">
            running
          </span>
        )}
        {markers.planPending !== undefined && (
          <span className="marker pending" data-testid="marker-plan-pending" title="A plan mode choice waits for the next model request">
            plan {markers.planPending ? "on" : "off"} pending
          </span>
        )}
        {markers.waiting && (
          <span className="marker waiting" data-testid="marker-waiting">
            {markers.waiting}
          </span>
        )}
      </button>
    </li>
  );
}

/** When a session was last active: the time today, the date before. */
function whenActive(summary: Summary): string {
  const seconds = summary.updatedAt?.seconds ?? summary.createdAt?.seconds;
  if (seconds === undefined) return "";
  const when = new Date(Number(seconds) * 1000);
  const time = when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  if (when.toDateString() === new Date().toDateString()) return time;
  return `${when.toLocaleDateString([], { month: "short", day: "numeric" })} ${time}`;
}
