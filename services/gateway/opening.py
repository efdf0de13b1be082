"""Opening a session: its tail page and its projection block as of one log
position, with the agent loaded when this gateway has not loaded it yet.

The projection block is a side read: without it (the projection service
slow or down) the page still opens, saying why the values are missing.
Loading a cold agent may append (the end of a turn a stopped runtime left
open), so reads that ended before the load did are made again."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import grpc
from agenthost.runtime.v1 import runtime_pb2 as rt

from services.common.errors import DomainError
from services.projection.client import Block, ProjectionClient
from services.sessionlog.port import SessionLogPort, TailPage

from .agent_loads import AgentLoads

log = logging.getLogger("agenthost.gateway")

# How long OpenSession and a resumed stream wait for the projection block.
SIDE_READ_TIMEOUT_S = 2.0
DEFAULT_MESSAGE_LIMIT = 50
STATUS_KEY = "status"


@dataclass(frozen=True)
class Projections:
    client: ProjectionClient

    async def block_or_why(
        self, session_id: str, doing: str, min_seq: int
    ) -> tuple[Block | None, Exception | None]:
        """Every projection value, or why there are none now (what is `doing`
        goes on without them)."""
        try:
            block = await self.client.block(
                session_id, min_seq=min_seq, within_s=SIDE_READ_TIMEOUT_S
            )
            return block, None
        except (DomainError, grpc.aio.AioRpcError) as error:
            log.warning("%s of %s without projections: %s", doing, session_id, error)
            return None, error


@dataclass(frozen=True)
class OpenedSession:
    page: TailPage
    block: Block | None
    # Why `block` is None.
    block_error: Exception | None
    running: bool

    @property
    def seq(self) -> int:
        """The log position both the page and the block are as of."""
        return self.page.last_seq if self.block is None else self.block.as_of_seq


def running_in(block: Block) -> bool | None:
    """Whether a turn runs, as the `status` projection value says (None: no such value)."""
    value = block.values.get(STATUS_KEY)
    return None if value is None else value.struct_value.fields["running"].bool_value


@dataclass(frozen=True)
class SessionOpener:
    log: SessionLogPort
    projections: Projections
    agents: AgentLoads

    async def open(self, session_id: str, limit: int) -> OpenedSession:
        status, (page, (block, error)) = await self._first_reads(session_id, limit)
        if block is None and status is None:  # `running` from the agent, then
            status = await self.agents.load(session_id)
        if status is not None and (
            (page.last_seq if block is None else block.as_of_seq) < status.last_seq
        ):
            page, (block, error) = await self._page_and_block(session_id, limit)
        return OpenedSession(page, block, error, running_of(status, block))

    async def _first_reads(
        self, session_id: str, limit: int
    ) -> tuple[rt.AgentStatus | None, tuple[TailPage, tuple[Block | None, Exception | None]]]:
        """The agent's load (None: loaded before) beside the page and the
        block. Most opens find the agent loaded: they read in this task, as
        two tasks for a gather would cost turns of the event loop."""
        if self.agents.loaded(session_id):
            return None, await self._page_and_block(session_id, limit)
        return await asyncio.gather(
            self.agents.load_for_read(session_id), self._page_and_block(session_id, limit)
        )

    async def _page_and_block(
        self, session_id: str, limit: int
    ) -> tuple[TailPage, tuple[Block | None, Exception | None]]:
        """The tail page and the projection block as of one log position. The
        block is asked as of the page's end, which the projection service's
        feed has mostly folded already (it then reads nothing); when appends
        came in between, the page is read again, cut where the block is."""
        page = await self.log.tail_page(session_id, message_limit=limit)
        block, error = await self.projections.block_or_why(
            session_id, "open", min_seq=page.last_seq
        )
        if block is not None and block.as_of_seq != page.last_seq:
            page = await self.log.tail_page(
                session_id, before_seq=block.as_of_seq + 1, message_limit=limit
            )
        return page, (block, error)


def running_of(status: rt.AgentStatus | None, block: Block | None) -> bool:
    """The block's `status` value when it has one (as of the block), else the agent's."""
    shown = None if block is None else running_in(block)
    if shown is not None:
        return shown
    return status is not None and status.running
