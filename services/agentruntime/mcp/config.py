"""Which MCP servers a session's model may use: the deployment's file and
the workspace's, in the common `{"mcpServers": {name: {...}}}` shape.

The deployment's file is AGENTHOST_MCP_CONFIG (`agenthost up --mcp-config`),
else `<data dir>/mcp.json`; a workspace adds `<workspace>/.agenthost/mcp.json`,
whose servers replace the deployment's of the same name. A server is
`{"command": ..., "args": [...], "env": {...}}` (stdio) or `{"url": ...}`
(streamable HTTP); optional `"timeout"` bounds one tool call in seconds.
A stdio server runs confined like a command under workspace-write (launch.py):
`"network": true` lets it reach the network (off by default), `"sandbox":
"full"` runs it unconfined (the user's explicit choice, like /sandbox full).
Example: `{"command": "npx", "args": ["-y", "some-server"], "network": true,
"env": {"npm_config_cache": "/tmp/npm"}}` (HOME is read-only; /tmp is its own).
A file that cannot be read or parsed does not stop the others: it shows as a
failed entry of the `mcp` projection, named after its scope.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIG_ENV = "AGENTHOST_MCP_CONFIG"
DEPLOYMENT_FILE = "mcp.json"
WORKSPACE_FILE = Path(".agenthost") / "mcp.json"
DEPLOYMENT = "deployment"
WORKSPACE = "workspace"
STDIO = "stdio"
HTTP = "http"
# A server's name is part of its tools' names (mcp__<server>__<tool>).
SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# How long one tool call may take unless the server's entry says otherwise.
DEFAULT_CALL_TIMEOUT_S = 60.0
# How long starting, connecting and listing the tools may take.
DEFAULT_STARTUP_TIMEOUT_S = 15.0
# How a stdio server runs: confined in its folder (the default), or not at all.
CONFINED = "workspace-write"
UNCONFINED = "full"
SERVER_SANDBOXES = (CONFINED, UNCONFINED)


class McpConfigError(ValueError):
    """A configuration file the runtime cannot use, and why."""


@dataclass(frozen=True)
class ServerConfig:
    name: str
    scope: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str = ""
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    # A stdio server's confinement: its network, and whether it is confined.
    network: bool = False
    sandbox: str = CONFINED

    @property
    def transport(self) -> str:
        return HTTP if self.url else STDIO


@dataclass(frozen=True)
class BrokenConfig:
    """A configuration file that could not be used."""

    scope: str
    path: Path
    error: str


@dataclass(frozen=True)
class McpConfig:
    """The servers of one workspace, in configuration order, and the files
    that could not be used."""

    servers: tuple[ServerConfig, ...] = ()
    broken: tuple[BrokenConfig, ...] = field(default_factory=tuple)


def deployment_path(env: Mapping[str, str], data_dir: Path) -> Path:
    return Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else data_dir / DEPLOYMENT_FILE


def load(deployment: Path | None, workspace: Path) -> McpConfig:
    """The servers configured for a session working in `workspace`."""
    servers: dict[str, ServerConfig] = {}
    broken: list[BrokenConfig] = []
    files = [(DEPLOYMENT, deployment), (WORKSPACE, workspace / WORKSPACE_FILE)]
    for scope, path in files:
        if path is None or not path.is_file():
            continue
        try:
            for server in parse(path.read_text(encoding="utf-8"), scope):
                servers.pop(server.name, None)
                servers[server.name] = server
        except (OSError, UnicodeDecodeError, McpConfigError) as error:
            broken.append(BrokenConfig(scope, path, f"{path}: {error}"))
    return McpConfig(tuple(servers.values()), tuple(broken))


def parse(text: str, scope: str) -> list[ServerConfig]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise McpConfigError(f"not JSON: {error}") from None
    entries = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(entries, dict):
        raise McpConfigError('expected {"mcpServers": {name: {...}}}')
    return [_server(name, entry, scope) for name, entry in entries.items()]


def _server(name: str, entry: Any, scope: str) -> ServerConfig:
    if not SERVER_NAME.match(name):
        raise McpConfigError(f"server name {name!r}: letters, digits, '_' and '-' only (1-64)")
    if not isinstance(entry, dict):
        raise McpConfigError(f"server {name!r}: expected an object")
    command, url = entry.get("command"), entry.get("url")
    if bool(command) == bool(url):
        raise McpConfigError(f"server {name!r}: give either a command (stdio) or a url (http)")
    if url is not None and not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        raise McpConfigError(f"server {name!r}: url must be an http(s) address")
    args, env = entry.get("args", []), entry.get("env", {})
    if command is not None and not isinstance(command, str):
        raise McpConfigError(f"server {name!r}: command must be a string")
    if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
        raise McpConfigError(f"server {name!r}: args must be a list of strings")
    if not (isinstance(env, dict) and all(isinstance(v, str) for v in env.values())):
        raise McpConfigError(f"server {name!r}: env must map names to strings")
    network, sandbox = entry.get("network", False), entry.get("sandbox", CONFINED)
    if not isinstance(network, bool):
        raise McpConfigError(f"server {name!r}: network must be true or false")
    if sandbox not in SERVER_SANDBOXES:
        choices = " or ".join(repr(s) for s in SERVER_SANDBOXES)
        raise McpConfigError(f"server {name!r}: sandbox must be {choices}, not {sandbox!r}")
    if url and ("network" in entry or "sandbox" in entry):
        raise McpConfigError(
            f"server {name!r}: network and sandbox apply to stdio servers (a command), not a url"
        )
    return ServerConfig(
        name=name,
        scope=scope,
        command=command or "",
        args=tuple(args),
        env=tuple(sorted(env.items())),
        url=url or "",
        call_timeout_s=_seconds(entry, "timeout", name, DEFAULT_CALL_TIMEOUT_S),
        startup_timeout_s=_seconds(entry, "startupTimeout", name, DEFAULT_STARTUP_TIMEOUT_S),
        network=network,
        sandbox=sandbox,
    )


def _seconds(entry: dict[str, Any], key: str, name: str, default: float) -> float:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise McpConfigError(f"server {name!r}: {key} is a positive number of seconds")
    return float(value)
