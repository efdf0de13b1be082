import type { PathEntry, Session } from "@agenthost/sdk/web";
import { useEffect, useState } from "react";

const LISTED = 20;

/** The `@path` being typed before the caret: where its path starts and what of it is typed. */
export function typedReference(text: string, caret: number): { start: number; prefix: string } | undefined {
  const match = /(?:^|\s)@([^\s"]*)$/.exec(text.slice(0, caret));
  if (match === null) return undefined;
  const prefix = match[1] ?? "";
  return { start: caret - prefix.length, prefix };
}

/** `text` with the typed `@path` before `caret` replaced by `path`, and the caret after it. */
export function withPath(text: string, caret: number, path: string): { text: string; caret: number } | undefined {
  const typed = typedReference(text, caret);
  if (typed === undefined) return undefined;
  return { text: text.slice(0, typed.start) + path + text.slice(caret), caret: typed.start + path.length };
}

/** The session folder's paths the `@path` before the caret may complete to (ListPaths, as the agent's file tools see the folder). */
export function usePathSuggestions(session: Session | undefined, text: string, caret: number): PathEntry[] {
  const prefix = typedReference(text, caret)?.prefix;
  const [listed, setListed] = useState<{ prefix: string; entries: PathEntry[] }>();
  useEffect(() => {
    if (session === undefined || prefix === undefined) return;
    let current = true;
    session.listPaths(prefix, LISTED).then(
      (list) => current && setListed({ prefix, entries: list.entries }),
      () => current && setListed(undefined), // no suggestions rather than an error
    );
    return () => {
      current = false;
    };
  }, [session, prefix]);
  return prefix !== undefined && listed?.prefix === prefix ? listed.entries : [];
}

/** The suggestions under the composer: a click (or Tab, for the first) takes one. */
export function PathSuggestions({ entries, choose }: { entries: PathEntry[]; choose: (path: string) => void }) {
  if (entries.length === 0) return null;
  return (
    <ul className="path-suggestions" data-testid="path-suggestions" role="listbox">
      {entries.map((entry) => (
        <li key={entry.path} role="option" aria-selected={false}>
          <button type="button" className={entry.folder ? "link folder" : "link"} data-testid="path-suggestion" data-path={entry.path} onMouseDown={(event) => event.preventDefault()} onClick={() => choose(entry.path)}>
            {entry.path}
          </button>
        </li>
      ))}
    </ul>
  );
}
