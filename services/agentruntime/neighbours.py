"""The other sessions a command or a permission rule has to know about.

* What a confined command must not see: the stack's own files (fixed at
  start) and every other session's folder, unless it holds or equals the
  command's own folder. Answered from the session log's list of sessions,
  read at most once per `ttl_s` (commands run often; sessions are made
  rarely, and a session made meanwhile is hidden from the next command),
  by one caller at a time, and kept as its distinct folders: thousands of
  sessions share a few folders, and a command must not cost a pass over
  every session ever made.
* Which sessions share a workspace: their workspace-scoped permission rules
  apply here too. Answered by the workspace service, which keeps the
  memberships of each account (so one account's rules never reach another's
  session of the same folder); without it, no session shares its rules.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

from services.sessionlog.port import SessionLogPort

from .ports import WorkspaceMembersPort

PAGE = 500
TTL_S = 2.0


class Neighbours:
    def __init__(
        self,
        log: SessionLogPort,
        fixed_hidden: Sequence[Path] = (),
        workspaces: WorkspaceMembersPort | None = None,
        ttl_s: float = TTL_S,
    ) -> None:
        self._log = log
        self._workspaces = workspaces
        self._fixed = tuple(fixed_hidden)
        self._ttl_s = ttl_s
        # The distinct folders of every session as last listed, and when.
        self._folders: frozenset[Path] = frozenset()
        self._read_at = -float("inf")
        # Callers that find the list stale while it is being read wait for
        # that reading instead of each reading every session again.
        self._listing = asyncio.Lock()

    async def _all_folders(self) -> frozenset[Path]:
        """The folder of every session (listed at most once per ttl_s)."""
        if not self._stale():
            return self._folders
        async with self._listing:
            if self._stale():  # not read meanwhile by the caller we waited for
                self._folders = await self._list_folders()
                self._read_at = time.monotonic()
        return self._folders

    def _stale(self) -> bool:
        return time.monotonic() - self._read_at >= self._ttl_s

    async def _list_folders(self) -> frozenset[Path]:
        cwds: set[str] = set()
        token = ""
        while True:
            page, token = await self._log.list_sessions(PAGE, token)
            cwds.update(summary.cwd for summary in page)
            if not token:
                # Paths made once per distinct folder, not per session.
                return frozenset(Path(cwd) for cwd in cwds if cwd)

    async def hidden_from(self, cwd: Path) -> tuple[Path, ...]:
        """What a command run in `cwd` must not see (cwd as the log has it:
        canonical, symlinks resolved when the session was made)."""
        folders, holding = await self._all_folders(), set(cwd.parents)
        foreign = sorted(p for p in folders if p != cwd and p not in holding)
        return (*self._fixed, *foreign)

    async def sharing(self, session_id: str, cwd: str) -> list[str]:
        """The other sessions of the session's workspace, when its folder is
        the workspace's (asked only before an approval question)."""
        if self._workspaces is None:
            return []
        path, members = await self._workspaces.workspace_members(session_id)
        return list(members) if path == cwd else []
