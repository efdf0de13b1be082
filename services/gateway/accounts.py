"""Bearer tokens name accounts. Every gateway call carries
`authorization: Bearer <token>`; the account scopes everything it touches."""

from __future__ import annotations

import json
import secrets
from contextvars import ContextVar
from pathlib import Path

from services.common.errors import Unauthenticated

LOCAL_ACCOUNT = "local"

current_account: ContextVar[str] = ContextVar("agenthost_account")


class TokenStore:
    """Tokens from a JSON file `{"<token>": "<account id>", ...}`."""

    def __init__(self, tokens: dict[str, str]) -> None:
        self._tokens = dict(tokens)

    @classmethod
    def load(cls, path: Path) -> TokenStore:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in data.items()
        ):
            raise ValueError(f"{path}: expected a JSON object of token -> account id")
        return cls(data)

    def account_for(self, authorization: str | None) -> str:
        scheme, _, token = (authorization or "").partition(" ")
        account = self._tokens.get(token) if scheme.lower() == "bearer" else None
        if not account:
            raise Unauthenticated("UNAUTHENTICATED", "a valid bearer token is required")
        return account


def ensure_local_token(path: Path, account: str = LOCAL_ACCOUNT) -> str:
    """The embedded default's token file: made once, readable by its owner only."""
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    path.write_text(token + "\n")
    path.chmod(0o600)
    return token
