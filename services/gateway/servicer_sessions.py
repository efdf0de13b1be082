"""The gateway's calls on sessions (create, list, rename, archive, fork,
delete, export, open, history pages): adapters over the workflows, as the
servicer is (servicer.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TypeAlias

import grpc
from agenthost.gateway.v1 import gateway_pb2 as gw

from services.projection.client import ProjectionClient
from services.sessionlog.port import SessionLogPort
from services.workspace.client import WorkspaceClient

from . import listing, searching
from .agent_loads import AgentLoads
from .hub import Hub
from .opening import DEFAULT_MESSAGE_LIMIT, SessionOpener
from .scope import CallScope
from .session_admin import SessionAdmin

Context: TypeAlias = grpc.aio.ServicerContext


def _limit(request: gw.OpenSessionRequest | gw.HistoryPageRequest) -> int:
    return request.message_limit if request.HasField("message_limit") else DEFAULT_MESSAGE_LIMIT


class SessionCalls:
    """A part of GatewayServicer; the attributes are the servicer's."""

    log: SessionLogPort
    workspaces: WorkspaceClient
    projections: ProjectionClient
    scope: CallScope
    admin: SessionAdmin
    opener: SessionOpener
    agents: AgentLoads
    hub: Hub

    async def CreateSession(
        self, request: gw.CreateSessionRequest, context: Context
    ) -> gw.CreateSessionResponse:
        await self.scope.read(request)
        workspace_id = request.workspace_id if request.HasField("workspace_id") else None
        summary = await self.admin.create(
            self.scope.account, workspace_id, request.cwd, request.session_id
        )
        return gw.CreateSessionResponse(session=summary, seq=summary.last_seq)

    async def ListSessions(
        self, request: gw.ListSessionsRequest, context: Context
    ) -> gw.ListSessionsResponse:
        account = self.scope.account
        if request.parent_session_id:
            await self.scope.own(request.parent_session_id)
            rows = await listing.children(self.log, self.projections, request.parent_session_id)
        else:
            if request.workspace_id:
                workspaces = [await self.workspaces.get(account, request.workspace_id)]
            else:
                workspaces = await self.workspaces.list(account)
            ids = [sid for w in workspaces for sid in (*w.session_ids, *w.archived_session_ids)]
            summaries = {s.id: s for s in await listing.summaries(self.log, ids)}
            archived = request.include_archived
            rows = listing.visible(workspaces, summaries, include_archived=archived)
        size = request.page_size if request.HasField("page_size") else None
        shown, next_token = listing.page(rows, request.page_token, size)
        return gw.ListSessionsResponse(sessions=shown, next_page_token=next_token)

    async def SearchSessions(
        self, request: gw.SearchSessionsRequest, context: Context
    ) -> gw.SearchSessionsResponse:
        return await searching.search(self.log, self.workspaces, self.scope.account, request)

    async def RenameSession(
        self, request: gw.RenameSessionRequest, context: Context
    ) -> gw.RenameSessionResponse:
        async with self.scope.mutating(request.fence, request.session_id) as account:
            summary = await self.admin.rename(account, request.session_id, request.title)
            return gw.RenameSessionResponse(session=summary)

    async def ArchiveSession(
        self, request: gw.ArchiveSessionRequest, context: Context
    ) -> gw.ArchiveSessionResponse:
        async with self.scope.mutating(request.fence, request.session_id) as account:
            summary = await self.admin.archive(account, request.session_id, request.archived)
            return gw.ArchiveSessionResponse(session=summary)

    async def ForkSession(
        self, request: gw.ForkSessionRequest, context: Context
    ) -> gw.ForkSessionResponse:
        async with self.scope.mutating(request.fence, request.session_id) as account:
            up_to = request.up_to_seq if request.HasField("up_to_seq") else None
            return gw.ForkSessionResponse(
                session=await self.admin.fork(account, request.session_id, up_to)
            )

    async def DeleteSession(
        self, request: gw.DeleteSessionRequest, context: Context
    ) -> gw.DeleteSessionResponse:
        async with self.scope.mutating(request.fence, request.session_id) as account:
            await self.admin.delete(account, request.session_id)
            return gw.DeleteSessionResponse()

    async def ExportSession(
        self, request: gw.ExportSessionRequest, context: Context
    ) -> AsyncIterator[gw.ExportSessionResponse]:
        await self.scope.own(request.session_id)
        async for line in self.admin.export(request.session_id):
            yield gw.ExportSessionResponse(line=line)

    async def OpenSession(
        self, request: gw.OpenSessionRequest, context: Context
    ) -> gw.OpenSessionResponse:
        """The tail page and the projection block as of one log position."""
        await self.scope.read(request)
        await self.scope.own(request.session_id)
        opened = await self.opener.open(request.session_id, _limit(request))
        page, block = opened.page, opened.block
        reply = gw.OpenSessionResponse(
            running=opened.running,
            session=page.session,
            events=page.events,
            has_more=page.has_more,
            before_seq=page.before_seq,
            seq=opened.seq,
            projections=block.values if block is not None else {},
        )
        if block is None:
            reply.projection_error = f"projections unavailable now: {opened.block_error}"
        texts, outputs = self.hub.texts.snapshot(request.session_id)
        reply.live.extend(texts)
        reply.live_output.extend(outputs)
        return reply

    async def HistoryPage(
        self, request: gw.HistoryPageRequest, context: Context
    ) -> gw.HistoryPageResponse:
        await self.scope.own(request.session_id)
        await self.agents.load_for_read(request.session_id)
        page = await self.log.tail_page(
            request.session_id, before_seq=request.before_seq, message_limit=_limit(request)
        )
        return gw.HistoryPageResponse(
            events=page.events,
            has_more=page.has_more,
            before_seq=page.before_seq,
            seq=page.last_seq,
        )
