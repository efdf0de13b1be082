"""How a client connection and its open sessions talk: two small interfaces,
so neither module imports the other's class. The connection (connection.py)
drives every open session through `SessionFeed` (the stream's frames and its
ups and downs); a session (session.py) reaches the gateway only through the
`SessionHost` its connection is."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.gateway.v1 import gateway_pb2_grpc as gw_grpc
from agenthost.runtime.v1 import runtime_pb2 as rt
from google.protobuf.message import Message

from .errors import AgentHostError
from .models import ModelInfo
from .sessions import SessionList


class SessionFeed(Protocol):
    """What the connection tells an open session."""

    @property
    def id(self) -> str:
        """The session's id."""

    def on_frame(self, frame: gw.ConnectResponse) -> None:
        """A frame of the stream about this session."""

    def on_generation(self, generation: int) -> None:
        """A reconnect attempt begins: requests begun before are superseded."""

    def on_connected(self, generation: int) -> None:
        """The gateway confirmed the stream (again)."""

    def on_disconnected(self) -> None:
        """The stream broke; the connection is reconnecting."""


class SessionHost(Protocol):
    """What an open session needs of its connection."""

    stub: gw_grpc.GatewayServiceStub
    generation: int
    failure: AgentHostError | None
    session_list: SessionList

    async def call(
        self,
        rpc: Callable[..., Awaitable[Any]],
        request: Message,
        *,
        deadline: float | None = None,
    ) -> Any:
        """One unary call with a deadline; failures as typed errors."""

    def fence(self) -> gw.RequestFence:
        """The next request's fence."""

    def plan_read(self, session_id: str) -> gw.PlanModeRequest:
        """A plan read that reflects this client's own plan writes."""

    def plan_written(self, session_id: str, seq: int) -> None:
        """A plan write of this client landed at `seq`."""

    async def list_commands(self, session_id: str) -> list[rt.CommandInfo]:
        """The slash commands the session offers."""

    async def list_models(self, session_id: str) -> list[ModelInfo]:
        """The models the session can switch to."""

    def closed(self, session: SessionFeed) -> None:
        """The session stopped following its frames."""
