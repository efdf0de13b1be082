"""A machine for escape tests (test_confinement.py and its neighbours):
a session's folder, the stack's data directory with its token, a tokens
file elsewhere, another session's folder and a plain folder, all under
/var/tmp (a confined command gets a private /tmp, which would hide a /tmp
folder for the wrong reason)."""

from __future__ import annotations

import uuid
from pathlib import Path

from services.agentruntime.confinement import Jail, hidden_from_env
from services.agentruntime.gates import READ_ONLY, WORKSPACE_WRITE

CONFINED = (READ_ONLY, WORKSPACE_WRITE)
TOKEN = "tok-" + uuid.uuid4().hex
SECRET = "secret-" + uuid.uuid4().hex


class Machine:
    """A session's folder, the stack's data directory with its token, a
    tokens file elsewhere, another session's folder and a plain folder."""

    def __init__(self, base: Path) -> None:
        self.workspace = base / "workspace"
        self.data = base / "data"
        self.other = base / "other-workspace"
        self.outside = base / "outside"
        self.tokens_file = base / "tokens.json"
        for folder in (self.workspace, self.data, self.other, self.outside):
            folder.mkdir()
        (self.data / "token").write_text(TOKEN)
        (self.data / "sessionlog.db").write_text("log")
        (self.other / "notes.txt").write_text(SECRET)
        self.tokens_file.write_text(f'{{"{TOKEN}": "local"}}')
        (self.workspace / "calc.py").write_text("def add(a, b):\n    return a + b\n")

    def jail(self, sandbox: str, *, network: bool = False, max_processes: int = 64) -> Jail:
        env = {"AGENTHOST_TOKENS_FILE": str(self.tokens_file)}
        hidden = (*hidden_from_env(env, self.data), self.other)
        return Jail(sandbox, self.workspace, network, hidden, max_processes)

    def snapshot(self) -> dict[str, bytes]:
        """Every file under the folders a command must not change."""
        shown: dict[str, bytes] = {}
        for root in (self.data, self.other, self.outside, self.workspace):
            for path in sorted(root.rglob("*")):
                shown[str(path)] = path.read_bytes() if path.is_file() else b"<dir>"
        shown["tokens"] = self.tokens_file.read_bytes()
        return shown


def absent(*paths: Path) -> bool:
    return not any(path.exists() for path in paths)
