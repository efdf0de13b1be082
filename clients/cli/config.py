"""Where the CLI finds the gateway and its bearer token."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

# Named here too: the CLI's modules and tests import them from this module.
from agenthost_core.locations import ENV_DATA_DIR as ENV_DATA_DIR
from agenthost_core.locations import TOKEN_FILE as TOKEN_FILE
from agenthost_core.locations import default_data_dir as default_data_dir

DEFAULT_GATEWAY = "127.0.0.1:7100"
ENV_GATEWAY = "AGENTHOST_GATEWAY"
ENV_TOKEN = "AGENTHOST_TOKEN"
# A PEM file of the certificates that sign a gateway served over TLS.
ENV_GATEWAY_CA = "AGENTHOST_GATEWAY_CA"
DEFAULT_DATA_DIR = default_data_dir()


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


def tls_roots(env: Mapping[str, str] | None = None) -> bytes | None:
    """The certificates to trust for a gateway behind TLS (None: plaintext)."""
    env = os.environ if env is None else env
    path = env.get(ENV_GATEWAY_CA)
    return Path(path).expanduser().read_bytes() if path else None
