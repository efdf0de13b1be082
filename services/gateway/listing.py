"""What a session list shows, and its pages (plain functions), and the
summaries it is made of, read from the session log.

A list shows every session of the account's workspaces, most recently
updated first, except blank ones: of those, only the session each workspace
would reuse (its newest blank, active member with the workspace's cwd, as
ConnectWorkspace chooses) shows, so "New Session" has one row per workspace
and abandoned blanks vanish. Pages are cut after an opaque token naming the
last row a page showed (its update time and id), so a session updated while
someone pages moves to the top instead of shifting every page after it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence

from agenthost.sessionlog.v1 import session_log_pb2 as sl
from agenthost.workspace.v1 import workspace_pb2 as ws

from services.agentruntime.capabilities.subagents.children import SUBAGENTS_UNIT, child_ids
from services.common import page_tokens
from services.common.errors import SessionNotFound
from services.projection.client import ProjectionClient
from services.sessionlog.port import SessionLogPort

DEFAULT_PAGE_SIZE = 50


def visible(
    workspaces: Iterable[ws.Workspace],
    summaries: Mapping[str, sl.SessionSummary],
    *,
    include_archived: bool = False,
) -> list[sl.SessionSummary]:
    """The rows a list shows, most recently updated first."""
    rows: list[sl.SessionSummary] = []
    for workspace in workspaces:
        reused = reusable_blank(workspace, summaries)
        for session_id in workspace.session_ids:
            summary = summaries.get(session_id)
            if summary is not None and (not summary.blank or session_id == reused):
                rows.append(summary)
        if include_archived:
            for session_id in workspace.archived_session_ids:
                if (summary := summaries.get(session_id)) is not None and not summary.blank:
                    archived = sl.SessionSummary()
                    archived.CopyFrom(summary)
                    archived.archived = True
                    rows.append(archived)
    return sorted(rows, key=_order)


def reusable_blank(workspace: ws.Workspace, summaries: Mapping[str, sl.SessionSummary]) -> str:
    """The session ConnectWorkspace would hand out again ("" when none)."""
    for session_id in reversed(workspace.session_ids):  # the newest member first
        summary = summaries.get(session_id)
        if summary is not None and summary.blank and summary.cwd == workspace.path:
            return session_id
    return ""


def page(
    rows: Sequence[sl.SessionSummary], token: str, size: int | None
) -> tuple[list[sl.SessionSummary], str]:
    """The page after `token` (from the start when empty) and the next token."""
    size = size or DEFAULT_PAGE_SIZE
    start = 0
    if token:
        after = page_tokens.decode(token)
        start = next((i for i, row in enumerate(rows) if _order(row) > after), len(rows))
    shown = list(rows[start : start + size])
    more = start + size < len(rows)
    return shown, page_tokens.encode(_order(shown[-1])) if more and shown else ""


def _order(summary: sl.SessionSummary) -> page_tokens.Place:
    return (-summary.updated_at.ToMicroseconds(), summary.id)


# Session ids per list request to the session log (its limit).
LIST_CHUNK = 1000


async def summaries(log: SessionLogPort, session_ids: list[str]) -> list[sl.SessionSummary]:
    """The summaries of these sessions (durable ones by pages of the log's
    list, lazy ones one by one); unknown ids are left out."""
    durable: list[sl.SessionSummary] = []
    for start in range(0, len(session_ids), LIST_CHUNK):
        chunk = session_ids[start : start + LIST_CHUNK]
        token = ""
        while True:
            found, token = await log.list_sessions(
                page_size=LIST_CHUNK, page_token=token, session_ids=chunk
            )
            durable += found
            if not token:
                break
    listed = {s.id for s in durable}
    lazy = []
    for session_id in session_ids:
        if session_id not in listed:
            with contextlib.suppress(SessionNotFound):
                lazy.append(await log.get_session(session_id))
    return [*durable, *lazy]


async def children(
    log: SessionLogPort, projection: ProjectionClient, parent_id: str
) -> list[sl.SessionSummary]:
    """The subagents' sessions a session started, as its `subagents`
    projection lists them, most recently updated first."""
    snapshot = await projection.get(parent_id, keys=[SUBAGENTS_UNIT.key])
    ids = child_ids(snapshot.values.get(SUBAGENTS_UNIT.key))
    return sorted(await summaries(log, ids), key=_order)
