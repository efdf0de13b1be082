"""SearchSessions: the account's sessions found by their words (a plain
function over the workspace client and the session log's port).

The scope is the account's: the members of its workspaces (one workspace
when asked, archived members only when asked), handed to the log's search
as the sessions it may rank, so another account's session is never ranked,
let alone answered. The hits' titles and folders are read from the log for
the page alone.
"""

from __future__ import annotations

from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.sessionlog.v1 import session_log_pb2 as sl

from services.sessionlog.port import SessionLogPort
from services.sessionlog.search import TIME_FILTERS
from services.workspace.client import WorkspaceClient

from . import listing


async def search(
    log: SessionLogPort,
    workspaces: WorkspaceClient,
    account: str,
    request: gw.SearchSessionsRequest,
) -> gw.SearchSessionsResponse:
    if request.workspace_id:
        found = [await workspaces.get(account, request.workspace_id)]
    else:
        found = await workspaces.list(account)
    # session id -> (workspace id, archived)
    scope: dict[str, tuple[str, bool]] = {}
    for workspace in found:
        for session_id in workspace.session_ids:
            scope[session_id] = (workspace.id, False)
        if request.include_archived:
            for session_id in workspace.archived_session_ids:
                scope[session_id] = (workspace.id, True)
    asked = sl.SearchSessionsRequest(
        query=request.query, session_ids=list(scope), page_token=request.page_token
    )
    if request.HasField("page_size"):
        asked.page_size = request.page_size
    for name in TIME_FILTERS:
        if request.HasField(name):
            getattr(asked, name).CopyFrom(getattr(request, name))
    reply = await log.search_sessions(asked)
    summaries = {
        s.id: s for s in await listing.summaries(log, [hit.session_id for hit in reply.hits])
    }
    answer = gw.SearchSessionsResponse(next_page_token=reply.next_page_token)
    for hit in reply.hits:
        summary = summaries.get(hit.session_id)
        if summary is None:
            continue  # deleted since the search
        workspace_id, archived = scope[hit.session_id]
        answer.hits.add(
            session_id=hit.session_id,
            title=summary.title,
            workspace_id=workspace_id,
            cwd=summary.cwd,
            updated_at=summary.updated_at,
            archived=archived,
            matched=hit.matched,
            snippet_match=hit.snippet_match,
            snippet=hit.snippet,
        )
    return answer
