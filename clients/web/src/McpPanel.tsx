import type { JsonValue, Session } from "@agenthost/sdk/web";

/** One configured MCP server in the `mcp` projection (the host's JSON). */
export interface McpServerView {
  name: string;
  state: string;
  transport: string;
  tools: number;
  error: string;
  scope: string;
}

export function mcpServers(value: JsonValue | undefined): McpServerView[] {
  const servers = typeof value === "object" && value !== null && !Array.isArray(value) ? value["servers"] : undefined;
  if (!Array.isArray(servers)) return [];
  return servers.flatMap((server) =>
    typeof server === "object" && server !== null && !Array.isArray(server) && typeof server["name"] === "string"
      ? [
          {
            name: server["name"],
            state: String(server["state"] ?? ""),
            transport: String(server["transport"] ?? ""),
            tools: Number(server["tools"] ?? 0),
            error: String(server["error"] ?? ""),
            scope: String(server["scope"] ?? ""),
          },
        ]
      : [],
  );
}

/** The MCP servers as the session's last model request saw them (hidden when none is configured). */
export function McpPanel({ session }: { session: Session }) {
  const servers = mcpServers(session.projections.get("mcp"));
  if (servers.length === 0) return null;
  const ready = servers.filter((server) => server.state === "ready").length;
  return (
    <details className="mcp-panel" data-testid="mcp-panel">
      <summary>
        MCP servers: {ready}/{servers.length} ready
      </summary>
      <ul>
        {servers.map((server) => (
          <li key={server.name} className={`mcp-server ${server.state}`} data-testid="mcp-server" data-name={server.name} data-state={server.state}>
            <strong>{server.name}</strong> <span className="mcp-state">{describe(server)}</span>{" "}
            <span className="mcp-where">
              {server.transport} · {server.scope}
            </span>
          </li>
        ))}
      </ul>
    </details>
  );
}

function describe(server: McpServerView): string {
  if (server.state === "ready") return `ready, ${server.tools} tools`;
  if (server.state === "failed") return `failed: ${server.error} (retrying)`;
  return server.state;
}
