"""Service configuration from the environment, overridable by arguments."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from .errors import InvalidRequest
from .internal_auth import token_from_env
from .topology import ADVERTISE_HOST_ENV

DEFAULT_DATA_DIR = Path(".agenthost")
TLS_CERT_ENV = "AGENTHOST_TLS_CERT_FILE"
TLS_KEY_ENV = "AGENTHOST_TLS_KEY_FILE"
WEB_LISTEN_ENV = "AGENTHOST_WEB_LISTEN"
WEB_ORIGINS_ENV = "AGENTHOST_WEB_ORIGINS"
WEB_FILES_ENV = "AGENTHOST_WEB_FILES_DIR"
# In the origins setting: the web port's own origins under loopback names
# (http://127.0.0.1:PORT, http://localhost:PORT, http://[::1]:PORT), known
# only once the port is bound (it may be picked free).
LOOPBACK = "loopback"
# The web client as `make web` builds it (clients/web/dist in this checkout).
BUILT_WEB_CLIENT = Path(__file__).resolve().parents[2] / "clients" / "web" / "dist"


@dataclass(frozen=True)
class TlsFiles:
    """A service's certificate chain and private key, PEM files."""

    cert: Path
    key: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> TlsFiles | None:
        cert, key = env.get(TLS_CERT_ENV), env.get(TLS_KEY_ENV)
        if not cert and not key:
            return None
        if not (cert and key):
            raise SystemExit(f"TLS needs both {TLS_CERT_ENV} and {TLS_KEY_ENV}")
        return cls(Path(cert), Path(key))

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.ssl_server_credentials([(self.key.read_bytes(), self.cert.read_bytes())])


@dataclass(frozen=True)
class ServiceConfig:
    """Where a service listens and keeps its data.

    Environment: AGENTHOST_LISTEN (host:port), AGENTHOST_DATA_DIR,
    AGENTHOST_ADVERTISE_HOST (where peers reach a replica listening on every
    interface), AGENTHOST_GRACE_S (shutdown grace period), AGENTHOST_DRAIN_S (how long
    health reports NOT_SERVING while still serving, before shutdown starts,
    so a load balancer can stop routing), AGENTHOST_LOG_LEVEL, and the
    stack's internal token (AGENTHOST_INTERNAL_TOKEN or _FILE: see
    internal_auth.py). A public service (the gateway) also serves browsers
    (gRPC-Web and Connect, see web.py) at AGENTHOST_WEB_LISTEN when it is
    set, allowing the origins in AGENTHOST_WEB_ORIGINS (comma-separated;
    `loopback` stands for the web port's own origins on loopback) and
    serving the files of AGENTHOST_WEB_FILES_DIR (the web client) there.
    """

    name: str
    listen: str = "127.0.0.1:0"
    data_dir: Path = DEFAULT_DATA_DIR
    grace_s: float = 5.0
    drain_s: float = 0.0
    log_level: str = "INFO"
    internal_token: str | None = None
    # TLS for this service's port: PEM certificate chain and key files (the
    # gateway's, in a deployment; AGENTHOST_TLS_CERT_FILE, AGENTHOST_TLS_KEY_FILE).
    tls: TlsFiles | None = None
    # Where browsers reach a public service (None: nowhere), the other
    # origins allowed to call it, and the web client's files served there.
    web_listen: str | None = None
    web_origins: tuple[str, ...] = ()
    web_files: Path | None = None
    # Where peers reach this replica when it listens on every interface
    # (AGENTHOST_ADVERTISE_HOST; unset: the host's own address).
    advertise_host: str | None = None
    # The address of each peer as configured (a target may name several
    # replicas: services/common/topology.py).
    peer_addresses: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(
        cls, name: str, env: dict[str, str] | None = None, **overrides: object
    ) -> ServiceConfig:
        env = dict(os.environ) if env is None else env
        values: dict[str, object] = {
            "name": name,
            "listen": env.get("AGENTHOST_LISTEN", "127.0.0.1:0"),
            "data_dir": Path(env.get("AGENTHOST_DATA_DIR", str(DEFAULT_DATA_DIR))),
            "grace_s": float(env.get("AGENTHOST_GRACE_S", "5")),
            "drain_s": float(env.get("AGENTHOST_DRAIN_S", "0")),
            "log_level": env.get("AGENTHOST_LOG_LEVEL", "INFO"),
            "internal_token": token_from_env(env),
            "tls": TlsFiles.from_env(env),
            "web_listen": env.get(WEB_LISTEN_ENV) or None,
            "web_origins": split_origins(env.get(WEB_ORIGINS_ENV, "")),
            "web_files": Path(env[WEB_FILES_ENV]) if env.get(WEB_FILES_ENV) else None,
            "advertise_host": env.get(ADVERTISE_HOST_ENV) or None,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


def web_client_files(env: Mapping[str, str]) -> Path | None:
    """What the stacks of `agenthost up` serve on the web port:
    AGENTHOST_WEB_FILES_DIR when set, else the built web client when there
    is one (None: no page, the port serves calls only)."""
    if env.get(WEB_FILES_ENV):
        return Path(env[WEB_FILES_ENV])
    return BUILT_WEB_CLIENT if (BUILT_WEB_CLIENT / "index.html").is_file() else None


def split_origins(text: str) -> tuple[str, ...]:
    """Origins from a comma-separated list."""
    return tuple(origin.strip() for origin in text.split(",") if origin.strip())


def seconds_from_env(env: Mapping[str, str], name: str, default: float, most: float) -> float:
    """A duration setting in seconds: `default` when unset, else a number in
    (0, most]; anything else is refused naming the variable."""
    raw = env.get(name, "")
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value <= most:
        raise InvalidRequest(name, f"must be a number of seconds above 0, at most {most:g}")
    return value
