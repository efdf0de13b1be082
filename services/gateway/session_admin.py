"""A session's life through the gateway: created (in a workspace, or in
the account's workspace at a folder), renamed, archived, forked, deleted and
exported. Each new session is granted to its account and announced on that
account's streams."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.sessionlog.v1 import events_pb2 as ev
from google.protobuf import json_format

from agenthost_core.folds import fork_title
from services.common.errors import PeerUnavailable
from services.sessionlog.port import SessionLogPort, SessionSummary
from services.workspace.client import WorkspaceClient

from .access import SessionAccess
from .hub import Frame, Hub
from .runtime_port import RuntimePort
from .session_ids import scoped_session_id
from .stream import READ_BATCH


@dataclass(frozen=True)
class SessionAdmin:
    log: SessionLogPort
    workspaces: WorkspaceClient
    access: SessionAccess
    runtime: RuntimePort
    hub: Hub

    def announce(self, account: str, summary: SessionSummary) -> None:
        """A new session of `account`: its own, and shown on its streams."""
        self.access.granted(account, summary.id)
        added = gw.SessionAdded(summary=summary, blank=summary.blank)
        self.hub.broadcast(account, Frame(session_added=added))

    def joined(self, account: str, summary: SessionSummary, reused: bool) -> None:
        """A session ConnectWorkspace chose: a reused one is the account's,
        a new one is also announced."""
        if reused:
            self.access.granted(account, summary.id)
        else:
            self.announce(account, summary)

    async def create(
        self, account: str, workspace_id: str | None, cwd: str, chosen_id: str
    ) -> SessionSummary:
        """A chosen session id is scoped to the account (see session_ids); a
        refused create in a new folder leaves no workspace behind."""
        session_id = scoped_session_id(account, chosen_id) if chosen_id else None
        if workspace_id is not None:
            summary = await self.workspaces.create_session(account, workspace_id, session_id)
        else:
            _, summary = await self.workspaces.create_session_at(account, cwd, session_id)
        self.announce(account, summary)
        return summary

    async def summary(self, account: str, session_id: str) -> SessionSummary:
        """One session's summary, with its archived flag."""
        summary = await self.log.get_session(session_id)
        workspace = await self.workspaces.find_session_workspace(account, session_id)
        summary.archived = workspace is not None and session_id in workspace.archived_session_ids
        return summary

    async def rename(self, account: str, session_id: str, title: str) -> SessionSummary:
        await self.log.append(session_id, [ev.Event(session_title=ev.SessionTitle(title=title))])
        return await self.summary(account, session_id)

    async def archive(self, account: str, session_id: str, archived: bool) -> SessionSummary:
        """An archived session's jobs and terminals are stopped first (with
        no runtime to ask, none runs them: the next to start records them
        lost)."""
        workspace = await self.access.workspace_of(account, session_id)
        if archived:
            with contextlib.suppress(PeerUnavailable):
                await self.runtime.stop_processes(session_id)
        await self.workspaces.archive(account, workspace.id, session_id, archived)
        return await self.summary(account, session_id)

    async def fork(self, account: str, session_id: str, up_to: int | None) -> SessionSummary:
        """The fork joins the source's workspace and inherits its log: plan
        state and settings come with it, and its title marked as a fork's
        (a session/title event of the fork's log)."""
        workspace = await self.access.workspace_of(account, session_id)
        fork = await self.log.fork(session_id, up_to)
        if fork.title:
            title = ev.Event(session_title=ev.SessionTitle(title=fork_title(fork.title)))
            await self.log.append(fork.id, [title])
            fork = await self.log.get_session(fork.id)
        await self.workspaces.add_session(account, workspace.id, fork.id)
        self.announce(account, fork)
        return fork

    async def delete(self, account: str, session_id: str) -> None:
        """A running turn is cancelled and its jobs and terminals stopped; the
        session leaves its workspace first (so it is never recreated), then
        its log goes."""
        await self.runtime.cancel(session_id)
        await self.runtime.stop_processes(session_id)
        await self.workspaces.remove_session(account, session_id)
        await self.log.delete_session(session_id)
        self.access.revoked(account, session_id)

    async def export(self, session_id: str) -> AsyncIterator[str]:
        """Every event of the log, one JSON line each, in order; after the
        first event referencing an image, the image (its bytes in base64)."""
        after, exported = -1, set[str]()
        while True:
            page = await self.log.read(session_id, from_seq=after + 1, limit=READ_BATCH)
            for event in page.events:
                yield json_format.MessageToJson(event, indent=None, sort_keys=True)
                for ref in _images_of(event):
                    if ref.digest not in exported:
                        exported.add(ref.digest)
                        yield await self._image_line(session_id, ref)
            if len(page.events) < READ_BATCH:
                return
            after = page.events[-1].seq

    async def _image_line(self, session_id: str, ref: ev.ImageRef) -> str:
        image = await self.log.read_image(session_id, ref.digest)
        stored = ev.ImageRef(digest=image.digest, media_type=image.media_type, size=len(image.data))
        line = gw.ReadImageResponse(image=stored, data=image.data)
        return json_format.MessageToJson(line, indent=None, sort_keys=True)


def _images_of(event: ev.Event) -> list[ev.ImageRef]:
    """The images an event references (its user/message's, a queued input's)."""
    if event.HasField("user_message"):
        return list(event.user_message.images)
    if event.HasField("input_queued"):
        return list(event.input_queued.message.images)
    return []
