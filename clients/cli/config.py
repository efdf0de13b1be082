"""Where the CLI finds the gateway and its bearer token."""

from __future__ import annotations

from pathlib import Path

DEFAULT_GATEWAY = "127.0.0.1:7100"
DEFAULT_DATA_DIR = Path(".agenthost")
ENV_GATEWAY = "AGENTHOST_GATEWAY"
ENV_TOKEN = "AGENTHOST_TOKEN"
# The file `agenthost up` writes inside its data folder.
TOKEN_FILE = "token"


class ConfigError(Exception):
    pass


def resolve_token(token: str | None, data_dir: Path) -> str:
    """`--token` / AGENTHOST_TOKEN (typer fills `token` from either), else the
    token file that `agenthost up` wrote under the data folder."""
    if token:
        return token
    path = data_dir / TOKEN_FILE
    try:
        text = path.read_text().strip()
    except OSError as error:
        raise ConfigError(
            f"no token: pass --token, set {ENV_TOKEN}, or run `agenthost up` "
            f"(it writes {path}): {error.strerror}"
        ) from None
    if not text:
        raise ConfigError(f"the token file {path} is empty")
    return text
