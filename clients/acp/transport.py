"""Newline-delimited JSON-RPC on stdio that answers bad input instead of
dropping it: a line that is no JSON gets -32700 (Parse error), JSON that is
no request object gets -32600 (Invalid Request); the process keeps serving."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

# The library's stdio framing (a private module: the package is pinned, and
# the tests drive this transport with the official client).
from acp._transport import NdjsonTransport
from acp.task import MessageSender

log = logging.getLogger("agenthost.acp")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def _error(code: int, message: str, request_id: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def check_message(line: bytes) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """A line as (message, None) or, when it is bad, (None, the error reply)."""
    try:
        message = json.loads(line)
    except ValueError as error:
        return None, _error(PARSE_ERROR, f"Parse error: {error}")
    if not isinstance(message, dict):
        return None, _error(INVALID_REQUEST, "Invalid Request: not a JSON-RPC object")
    request_id = message.get("id")
    if request_id is not None and not isinstance(request_id, str | int):
        return None, _error(INVALID_REQUEST, "Invalid Request: id is a string or number")
    method = message.get("method")
    if "method" in message and not isinstance(method, str):
        return None, _error(INVALID_REQUEST, "Invalid Request: method is a string", request_id)
    if method is None and ("result" not in message and "error" not in message):
        return None, _error(INVALID_REQUEST, "Invalid Request: no method", request_id)
    return message, None


class CheckedTransport(NdjsonTransport):
    """The library's stdio transport, with bad lines answered."""

    def __init__(self, reader: asyncio.StreamReader, sender: MessageSender) -> None:
        super().__init__(reader, sender)

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if not line:
                return None
            line = line.strip()
            if not line:
                continue
            message, error = check_message(line)
            if message is not None:
                return message
            log.info("refused a bad message: %s", error)
            await self.send(error or {})

    async def send(self, message: dict[str, Any]) -> None:
        # Error data (e.g. validation details) as plain JSON, whatever it held.
        await super().send(json.loads(json.dumps(message, default=str)))
