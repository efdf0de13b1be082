"""What a connection to an MCP server is in, without the MCP SDK: the
runtime imports this at start, and the SDK (connection.py) only once a
folder configures a server."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import mcp_types as types


class State(enum.Enum):
    CONNECTING = "connecting"
    READY = "ready"
    FAILED = "failed"


@dataclass(frozen=True)
class ServerState:
    state: State
    tools: tuple[types.Tool, ...] = ()
    error: str = ""
