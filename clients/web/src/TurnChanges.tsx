// The files a turn changed, under the turn: each with its change and line
// counts, the turn's diff on a click, and Undo (Redo once undone). A file
// someone changed since the turn is listed first and overwritten only when
// the user says so; otherwise it is left alone.
import type { Restored, Session, TurnCheckpoint } from "@agenthost/sdk/web";
import { useState } from "react";
import { Diff } from "./Diff.js";
import type { AppModel } from "./model.js";

type Kind = "undo" | "redo";

export function TurnChanges({ model, session, turn }: { model: AppModel; session: Session; turn: TurnCheckpoint }) {
  const [diff, setDiff] = useState<string | undefined>(undefined);
  const [asking, setAsking] = useState<{ kind: Kind; skipped: string[] } | undefined>(undefined);
  const kind: Kind = turn.undone ? "redo" : "undo";
  const restore = async (chosen: Kind, options: { force?: boolean; check?: boolean }): Promise<Restored | undefined> =>
    model.restore(chosen === "undo" ? (o) => session.undo(turn.number, o) : (o) => session.redo(turn.number, o), options);
  const start = async () => {
    const checked = await restore(kind, { check: true });
    if (checked === undefined) return;
    if (checked.skipped.length > 0) setAsking({ kind, skipped: checked.skipped });
    else await restore(kind, {});
  };
  const finish = async (force: boolean) => {
    const chosen = asking?.kind ?? kind;
    setAsking(undefined);
    await restore(chosen, { force });
  };
  const toggleDiff = async () => {
    if (diff !== undefined) return setDiff(undefined);
    const shown = await model.turnDiff(session, turn.number);
    if (shown !== undefined) setDiff(shown);
  };
  return (
    <section className={`turn-changes ${turn.undone ? "undone" : ""}`} data-testid="turn-changes" data-turn={turn.number} data-undone={turn.undone}>
      <div className="turn-changes-head">
        <span>
          {turn.files.length} file{turn.files.length === 1 ? "" : "s"} changed{turn.undone ? " (undone)" : ""}
        </span>
        <button className="link" data-testid="turn-diff-toggle" onClick={() => void toggleDiff()}>
          {diff === undefined ? "Diff" : "Hide diff"}
        </button>
        <button data-testid={`turn-${kind}`} onClick={() => void start()}>
          {turn.undone ? "Redo" : "Undo"}
        </button>
      </div>
      <ul>
        {turn.files.map((file) => (
          <li key={file.path} data-testid="turn-file" data-change={file.change}>
            <code>{file.path}</code> {file.change}
            {!file.binary && (
              <span className="counts">
                {" "}
                +{file.linesAdded} −{file.linesRemoved}
              </span>
            )}
          </li>
        ))}
      </ul>
      {asking !== undefined && (
        <div className="turn-conflict" data-testid="turn-conflict" role="alert">
          Changed since the turn by someone other than the agent: {asking.skipped.join(", ")}.
          <button data-testid="turn-overwrite" onClick={() => void finish(true)}>
            Overwrite them
          </button>
          <button data-testid="turn-keep" onClick={() => void finish(false)}>
            Leave them
          </button>
        </div>
      )}
      {diff !== undefined && <Diff diff={diff} testId="turn-diff" />}
    </section>
  );
}
