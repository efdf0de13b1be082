"""Tools from MCP servers (Model Context Protocol): configured per deployment
and per workspace (config.py), connected with the official `mcp` SDK
(connection.py), offered to the model as `mcp__<server>__<tool>` through the
same gates as the built-in tools, snapshotted at model-request boundaries
(servers.py)."""

from .servers import McpServers, McpSnapshot, tool_name

__all__ = ["McpServers", "McpSnapshot", "tool_name"]
