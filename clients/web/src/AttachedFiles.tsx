import type { eventsV1 } from "@agenthost/sdk/web";

/** The files a user message attached (its `@path`s, an editor's resources), under its text. */
export function AttachedFiles({ files }: { files: readonly eventsV1.AttachedFile[] }) {
  if (files.length === 0) return null;
  return (
    <div className="attached" data-testid="attached-files">
      {files.map((file) => (
        <span key={file.path} data-testid="attached-file" data-path={file.path} title={file.cut ? `only the first part was sent (${file.size} in all)` : undefined}>
          📎 {file.path}
          {file.cut ? " (cut)" : ""}
        </span>
      ))}
    </div>
  );
}
