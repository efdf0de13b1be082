"""Where the CLI finds the gateway and its bearer token."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

# Named here too: the CLI's modules and tests import them from this module.
from agenthost_core.locations import ENV_DATA_DIR as ENV_DATA_DIR
from agenthost_core.locations import GATEWAY_FILE, recorded_gateway_address
from agenthost_core.locations import TOKEN_FILE as TOKEN_FILE
from agenthost_core.locations import default_data_dir as default_data_dir

if TYPE_CHECKING:
    from clients.sdk import AgentHostError

DEFAULT_GATEWAY = "127.0.0.1:7100"
ENV_GATEWAY = "AGENTHOST_GATEWAY"
ENV_TOKEN = "AGENTHOST_TOKEN"
# A PEM file of the certificates that sign a gateway served over TLS.
ENV_GATEWAY_CA = "AGENTHOST_GATEWAY_CA"
DEFAULT_DATA_DIR = default_data_dir()


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class GatewayAddress:
    """The gateway to call, and where that address came from (errors say it)."""

    address: str
    source: str
    # Named by the user (--gateway, AGENTHOST_GATEWAY) rather than found.
    given: bool = False
    # Read from the address file `agenthost up` writes.
    recorded: bool = False


def find_gateway(
    given: str | None, data_dir: Path, env: Mapping[str, str] | None = None
) -> GatewayAddress:
    """`--gateway` / AGENTHOST_GATEWAY (typer fills `given` from either), else
    the address `agenthost up` recorded in the data folder, else the default."""
    env = os.environ if env is None else env
    if given:
        source = ENV_GATEWAY if env.get(ENV_GATEWAY) == given else "--gateway"
        return GatewayAddress(given, source, given=True)
    path = data_dir / GATEWAY_FILE
    recorded = recorded_gateway_address(data_dir)
    if recorded is not None:
        return GatewayAddress(recorded, f"{path}, written by `agenthost up`", recorded=True)
    return GatewayAddress(DEFAULT_GATEWAY, f"the default: there is no {path}")


def unexpected_answer(
    error: AgentHostError, gateway: GatewayAddress, token_from: str
) -> str | None:
    """What to tell the user when the gateway's answer shows the address or the
    token is wrong: which address was reached and where it came from (None:
    an ordinary error of the call, said as it is)."""
    # The SDK raised `error`: loaded already.
    from clients.sdk import TransportError, UnauthenticatedError
    from clients.sdk.errors import CUT_OFF

    where = f"{gateway.address} (from {gateway.source})"
    if isinstance(error, UnauthenticatedError):
        return (
            f"the gateway at {where} refused the bearer token from {token_from} "
            f"({error.code}: {error.message}); is it another stack's?"
        )
    if error.code == "UNIMPLEMENTED":
        return f"{where} answered, but it is not an agenthost gateway ({error.message})"
    if isinstance(error, TransportError) and error.reason != CUT_OFF:
        if "refused" in error.message:
            return f"nothing answers at {where}; is `agenthost up` running?"
        return f"no agenthost gateway answers at {where} ({error.code}: {error.message})"
    return None


def token_source(token: str | None, data_dir: Path, env: Mapping[str, str] | None = None) -> str:
    """Where the bearer token `resolve_token` gives comes from, as errors say it."""
    env = os.environ if env is None else env
    if token:
        return ENV_TOKEN if env.get(ENV_TOKEN) == token else "--token"
    return str(data_dir / TOKEN_FILE)


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
