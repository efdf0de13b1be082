"""The other sessions a command or a permission rule has to know about.

Two questions, both answered from the session log's list of sessions (the
log is the truth: no second registry of folders or rules):

* what a confined command must not see: the stack's own files (fixed at
  start) and every other session's folder, unless it holds or equals the
  command's own folder;
* which sessions share a folder (a workspace): their workspace-scoped
  permission rules apply here too.

The list is read at most once per `ttl_s` (commands run often; sessions are
made rarely, and a session made meanwhile is hidden from the next command).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from services.sessionlog.port import SessionLogPort

PAGE = 500
TTL_S = 2.0


class Neighbours:
    def __init__(
        self, log: SessionLogPort, fixed_hidden: Sequence[Path] = (), ttl_s: float = TTL_S
    ) -> None:
        self._log = log
        self._fixed = tuple(fixed_hidden)
        self._ttl_s = ttl_s
        self._cwds: dict[str, str] = {}
        self._read_at = -float("inf")

    async def _sessions(self, fresh: bool = False) -> dict[str, str]:
        """Session id -> cwd of every session (cached for ttl_s unless fresh)."""
        if not fresh and time.monotonic() - self._read_at < self._ttl_s:
            return self._cwds
        cwds: dict[str, str] = {}
        token = ""
        while True:
            page, token = await self._log.list_sessions(PAGE, token)
            cwds.update({summary.id: summary.cwd for summary in page})
            if not token:
                break
        self._cwds, self._read_at = cwds, time.monotonic()
        return cwds

    async def hidden_from(self, cwd: Path) -> tuple[Path, ...]:
        """What a command run in `cwd` must not see (cwd as the log has it:
        canonical, symlinks resolved when the session was made)."""
        own = cwd
        others = {Path(c) for c in (await self._sessions()).values() if c}
        foreign = sorted(p for p in others if p != own and p not in own.parents)
        return (*self._fixed, *foreign)

    async def sharing(self, session_id: str, cwd: str) -> list[str]:
        """The other sessions whose folder is `cwd` (its workspace's members),
        read afresh: asked only before an approval question."""
        sessions = await self._sessions(fresh=True)
        return [sid for sid, c in sessions.items() if c == cwd and sid != session_id]
