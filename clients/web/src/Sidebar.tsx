import { useEffect, useState, type FormEvent } from "react";
import type { AppModel, SearchHit, Summary, Workspace } from "./model.js";

// Enough of an id to tell two sessions apart ("s-" and six characters).
const SHORT_ID = 8;

export function Sidebar({ model }: { model: AppModel }) {
  return (
    <nav className="sidebar" data-testid="sidebar">
      <h1>agenthost</h1>
      <SearchBox model={model} />
      {model.search !== undefined ? (
        <SearchResults model={model} />
      ) : (
        <>
          <AddWorkspace model={model} />
          {model.workspaces.map((workspace) => (
            <WorkspaceGroup key={workspace.id} model={model} workspace={workspace} />
          ))}
        </>
      )}
    </nav>
  );
}

// How long typing pauses before the box searches.
const SEARCH_PAUSE_MS = 200;

/** Searches the sessions as one types (Escape clears); the lists come back when it is empty. */
function SearchBox({ model }: { model: AppModel }) {
  const [query, setQuery] = useState("");
  useEffect(() => {
    const timer = setTimeout(() => void model.searchSessions(query), SEARCH_PAUSE_MS);
    return () => clearTimeout(timer);
  }, [model, query]);
  return (
    <input
      type="search"
      className="session-search"
      data-testid="session-search"
      placeholder="Search sessions"
      aria-label="Search sessions"
      value={query}
      onChange={(event) => setQuery(event.target.value)}
      onKeyDown={(event) => {
        if (event.key === "Escape") setQuery("");
      }}
    />
  );
}

const MATCHED: Record<number, string> = { 1: "title", 2: "prompt", 3: "answer", 4: "path" };

function SearchResults({ model }: { model: AppModel }) {
  const { hits, query } = model.search!;
  if (hits.length === 0) {
    return (
      <p className="search-empty" data-testid="search-empty">
        No session matches “{query}”.
      </p>
    );
  }
  return (
    <ul className="search-results" data-testid="search-results">
      {hits.map((hit) => (
        <SearchRow key={hit.sessionId} model={model} hit={hit} />
      ))}
    </ul>
  );
}

/** A session found: its title, where it matched, and the snippet with the matched words marked. */
function SearchRow({ model, hit }: { model: AppModel; hit: SearchHit }) {
  const current = model.session?.id === hit.sessionId;
  const where = MATCHED[hit.snippetMatch] ?? "";
  return (
    <li className={current ? "session-row search-hit current" : "session-row search-hit"} data-testid="search-hit" data-session-id={hit.sessionId}>
      <button onClick={() => void model.openSession(hit.sessionId)}>
        <span className="title" data-testid="session-title" title={hit.title}>
          {hit.title || "Untitled"}
        </span>
        <span className="session-meta">
          {hit.cwd.split("/").pop() || hit.cwd}
          {where && ` · ${where}`}
          {hit.archived && " · archived"}
        </span>
        <span className="snippet" data-testid="search-snippet">
          {hit.snippet.map((part, n) => (part.highlighted ? <mark key={n}>{part.text}</mark> : <span key={n}>{part.text}</span>))}
        </span>
      </button>
    </li>
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
