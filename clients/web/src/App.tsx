import { useEffect, useSyncExternalStore } from "react";
import { Composer } from "./Composer.js";
import { showSessionInUrl } from "./location.js";
import type { AppModel } from "./model.js";
import { SessionHeader } from "./SessionHeader.js";
import { McpPanel } from "./McpPanel.js";
import { PermissionRules, QuestionCards } from "./Questions.js";
import { Sidebar } from "./Sidebar.js";
import { TodoStrip } from "./TodoStrip.js";
import { Transcript } from "./Transcript.js";

export function App({ model }: { model: AppModel | undefined }) {
  if (model === undefined) return <NoToken />;
  return <Connected model={model} />;
}

function NoToken() {
  return (
    <main className="no-token" data-testid="no-token">
      <h1>agenthost</h1>
      <p>
        This page needs the gateway's token. Open the address <code>agenthost up</code> printed (the one ending in{" "}
        <code>#token=…</code>), or run <code>make run</code> and open its web address.
      </p>
    </main>
  );
}

/** Subscribes a component to every change of the model. */
export function useModel(model: AppModel): void {
  useSyncExternalStore(model.subscribe, model.snapshot);
}

function Connected({ model }: { model: AppModel }) {
  useModel(model);
  useEffect(() => {
    showSessionInUrl(model.session?.id ?? model.opening);
  }, [model.session, model.opening]);
  return (
    <div className="app">
      <Sidebar model={model} />
      <main className="conversation">
        <StatusBar model={model} />
        {model.session === undefined ? <NoSession model={model} /> : <OpenSession model={model} />}
        <Composer model={model} />
      </main>
    </div>
  );
}

function StatusBar({ model }: { model: AppModel }) {
  const state = model.client.state;
  return (
    <div className="status-bar">
      <span className={`connection connection-${state}`} data-testid="connection" data-state={state}>
        {state}
      </span>
      <button className="link" data-testid="reconnect" onClick={() => model.client.cut()} title="Drop the stream and connect again">
        Reconnect
      </button>
      {model.error !== undefined && (
        <span className="error" data-testid="error" role="alert">
          {model.error}
        </span>
      )}
    </div>
  );
}

function NoSession({ model }: { model: AppModel }) {
  return (
    <div className="empty" data-testid="no-session">
      {model.opening !== undefined ? "Opening the session…" : "Choose a workspace: New session, or pick a session on the left."}
    </div>
  );
}

function OpenSession({ model }: { model: AppModel }) {
  const session = model.session!;
  return (
    <section className="session" data-testid="session" data-session-id={session.id}>
      <SessionHeader model={model} session={session} />
      <McpPanel session={session} />
      <TodoStrip session={session} />
      {model.parents.has(session.id) && (
        <div className="notice subagent-of" data-testid="subagent-of">
          A subagent's transcript.{" "}
          <button className="link" data-testid="back-to-parent" onClick={() => void model.openSession(model.parents.get(session.id)!)}>
            Back to the session that started it
          </button>
        </div>
      )}
      <Transcript model={model} session={session} />
      <QuestionCards model={model} session={session} />
      <PermissionRules model={model} session={session} />
      {model.notice !== undefined && (
        <pre className="command-reply" data-testid="notice">
          {model.notice}
        </pre>
      )}
    </section>
  );
}
