"""Where the stack `agenthost up` runs keeps its data, the bearer token and
the gateway's address clients read, and where a user's own agenthost files
live: written once for the launcher, the services and the clients."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

ENV_DATA_DIR = "AGENTHOST_DATA_DIR"
# The file `agenthost up` writes inside its data folder.
TOKEN_FILE = "token"
# Beside the token while `agenthost up` serves: its gateway's address
# (host:port), so clients find a stack on any port (--base-port, --free-ports).
GATEWAY_FILE = "gateway"


def write_gateway_address(data_dir: Path, address: str) -> Path:
    """Record the gateway's address in the data folder, atomically (a reader
    sees the old file or the new one, never half of one); its path."""
    path = data_dir / GATEWAY_FILE
    partial = data_dir / f".{GATEWAY_FILE}.{os.getpid()}"
    partial.write_text(f"{address}\n")
    os.replace(partial, path)
    return path


def recorded_gateway_address(data_dir: Path) -> str | None:
    """The address `agenthost up` recorded in the data folder (None: none)."""
    try:
        address = (data_dir / GATEWAY_FILE).read_text().strip()
    except OSError:
        return None
    return address or None


def remove_gateway_address(data_dir: Path, address: str) -> None:
    """Remove the address file on a clean stop, unless it names another
    stack's address now (one started on the same data folder since)."""
    if recorded_gateway_address(data_dir) == address:
        with contextlib.suppress(FileNotFoundError):
            (data_dir / GATEWAY_FILE).unlink()


def default_data_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where `agenthost up` keeps its data and token, so the CLI finds them from
    any folder: AGENTHOST_DATA_DIR, else the per-user state folder
    ($XDG_STATE_HOME/agenthost, by default ~/.local/state/agenthost)."""
    env = os.environ if env is None else env
    if env.get(ENV_DATA_DIR):
        return Path(env[ENV_DATA_DIR]).expanduser()
    state = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state).expanduser() / "agenthost"


ENV_CONFIG_DIR = "AGENTHOST_CONFIG_DIR"


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """The user's agenthost config folder (their settings, global
    instructions, skills, commands, agents, hooks): AGENTHOST_CONFIG_DIR,
    else $XDG_CONFIG_HOME/agenthost, by default ~/.config/agenthost."""
    env = os.environ if env is None else env
    if env.get(ENV_CONFIG_DIR):
        return Path(env[ENV_CONFIG_DIR]).expanduser()
    config = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config).expanduser() / "agenthost"
