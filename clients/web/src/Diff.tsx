// A unified diff as the page shows it: one row per line, added and removed
// lines coloured, hunk headers with their line numbers. Text only (React
// escapes it): a diff holds whatever the files hold.
import "./rich.css";

/** How each line of a unified diff looks. */
function lineKind(line: string): string {
  if (line.startsWith("+++") || line.startsWith("---")) return "file";
  if (line.startsWith("@@")) return "hunk";
  if (line.startsWith("+")) return "added";
  if (line.startsWith("-")) return "removed";
  if (line.startsWith("…") || line.startsWith("\\")) return "note";
  return "context";
}

export function looksLikeDiff(text: string): boolean {
  return text.startsWith("--- ") && text.includes("\n@@ ");
}

export function Diff({ diff, testId }: { diff: string; testId?: string }) {
  const lines = diff.replace(/\n$/, "").split("\n");
  return (
    <pre className="diff" data-testid={testId}>
      {lines.map((line, index) => (
        <div key={index} className={`diff-line ${lineKind(line)}`} data-kind={lineKind(line)}>
          {line || " "}
        </div>
      ))}
    </pre>
  );
}
