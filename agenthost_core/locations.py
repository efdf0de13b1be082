"""Where the stack `agenthost up` runs keeps its data and the bearer token
clients read: written once for the launcher and the command line."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ENV_DATA_DIR = "AGENTHOST_DATA_DIR"
# The file `agenthost up` writes inside its data folder.
TOKEN_FILE = "token"


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
