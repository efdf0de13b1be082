import { useState, type FormEvent } from "react";
import type { AppModel, Summary, Workspace } from "./model.js";

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

function SessionRow({ model, summary }: { model: AppModel; summary: Summary }) {
  const markers = model.markers(summary.id);
  const current = model.session?.id === summary.id;
  return (
    <li
      className={current ? "session-row current" : "session-row"}
      data-testid="session-row"
      data-session-id={summary.id}
      data-running={markers.running}
      data-plan-pending={markers.planPending !== undefined}
    >
      <button onClick={() => void model.openSession(summary.id)}>
        <span className="title" data-testid="session-title">
          {summary.blank ? "New Session" : summary.title || summary.preview || "Untitled"}
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
