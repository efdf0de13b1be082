"""Service configuration from the environment, overridable by arguments."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from .internal_auth import token_from_env

DEFAULT_DATA_DIR = Path(".agenthost")
TLS_CERT_ENV = "AGENTHOST_TLS_CERT_FILE"
TLS_KEY_ENV = "AGENTHOST_TLS_KEY_FILE"


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
    AGENTHOST_GRACE_S (shutdown grace period), AGENTHOST_DRAIN_S (how long
    health reports NOT_SERVING while still serving, before shutdown starts,
    so a load balancer can stop routing), AGENTHOST_LOG_LEVEL, and the
    stack's internal token (AGENTHOST_INTERNAL_TOKEN or _FILE: see
    internal_auth.py).
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
    extra: dict[str, str] = field(default_factory=dict)

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
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]
