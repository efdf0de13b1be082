"""A browser's side of the gateway's web port, spoken with a plain HTTP
client: gRPC-Web (binary) and the Connect protocol (JSON unary, enveloped
streams), their framing and their error shapes, written from the protocols'
specifications so the tests check the wire itself."""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import unquote

import httpx
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2

SERVICE = "agenthost.gateway.v1.GatewayService"
END_STREAM = 0x02  # Connect: the envelope that ends a stream (JSON)
TRAILERS = 0x80  # gRPC-Web: the frame that carries the trailers
M = TypeVar("M", bound=Message)


def envelope(data: bytes, flags: int = 0) -> bytes:
    return struct.pack(">BI", flags, len(data)) + data


def unpad(text: str) -> bytes:
    """Base64 that may lack its padding (Connect sends it unpadded)."""
    return base64.b64decode(text + "=" * (-len(text) % 4))


@dataclass
class WebStatus:
    """How a call ended, as a browser client reads it."""

    code: str  # Connect's code names ("ok", "invalid_argument", ...)
    message: str = ""
    details: list[Message] = field(default_factory=list)

    def reason(self) -> str | None:
        for detail in self.details:
            if isinstance(detail, error_details_pb2.ErrorInfo):
                return str(detail.reason)
        return None

    def violations(self) -> list[tuple[str, str]]:
        for detail in self.details:
            if isinstance(detail, error_details_pb2.BadRequest):
                return [(v.field, v.description) for v in detail.field_violations]
        return []


# gRPC status numbers to Connect's names.
CODES = [
    "ok",
    "canceled",
    "unknown",
    "invalid_argument",
    "deadline_exceeded",
    "not_found",
    "already_exists",
    "permission_denied",
    "resource_exhausted",
    "failed_precondition",
    "aborted",
    "out_of_range",
    "unimplemented",
    "internal",
    "unavailable",
    "data_loss",
    "unauthenticated",
]
DETAIL_TYPES: dict[str, type[Message]] = {
    "google.rpc.ErrorInfo": error_details_pb2.ErrorInfo,
    "google.rpc.BadRequest": error_details_pb2.BadRequest,
}


def _detail(type_name: str, value: bytes) -> Message:
    cls = DETAIL_TYPES.get(type_name)
    if cls is None:
        raise AssertionError(f"unexpected error detail {type_name}")
    return cls.FromString(value)


@dataclass
class Browser:
    """Calls as a page at `origin` would make them, with `token` as its
    bearer token (None: no authorization header)."""

    http: httpx.AsyncClient
    base_url: str
    token: str | None
    origin: str | None = None

    def headers(self, content_type: str) -> dict[str, str]:
        headers = {"content-type": content_type}
        if self.token is not None:
            headers["authorization"] = f"Bearer {self.token}"
        if self.origin is not None:
            headers["origin"] = self.origin
        return headers

    def url(self, method: str) -> str:
        return f"{self.base_url}/{SERVICE}/{method}"

    # -- gRPC-Web, binary ---------------------------------------------------------------

    async def grpc_web(
        self, method: str, request: Message, reply_type: type[M]
    ) -> tuple[M | None, WebStatus, httpx.Response]:
        response = await self.http.post(
            self.url(method),
            content=envelope(request.SerializeToString()),
            headers={**self.headers("application/grpc-web+proto"), "x-grpc-web": "1"},
        )
        assert response.status_code == 200, response.text
        reply: M | None = None
        trailers: dict[str, str] = dict(response.headers)  # a trailers-only answer
        body = response.content
        while body:
            flags, length = struct.unpack(">BI", body[:5])
            data, body = body[5 : 5 + length], body[5 + length :]
            if flags & TRAILERS:
                lines = data.decode().split("\r\n")
                trailers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (x.partition(":") for x in lines if x)
                }
            else:
                reply = reply_type.FromString(data)
        return reply, _grpc_status(trailers), response

    # -- Connect, JSON unary --------------------------------------------------------------

    async def connect_unary(
        self, method: str, request: Message, reply_type: type[M]
    ) -> tuple[M | None, WebStatus, httpx.Response]:
        response = await self.http.post(
            self.url(method),
            content=json_format.MessageToJson(request),
            headers={**self.headers("application/json"), "connect-protocol-version": "1"},
        )
        if response.status_code == 200:
            reply = json_format.Parse(response.content, reply_type())
            return reply, WebStatus("ok"), response
        return None, _connect_error(response.json()), response

    # -- Connect, a server stream -----------------------------------------------------------

    async def connect_stream(
        self, method: str, request: Message, reply_type: type[M]
    ) -> AsyncGenerator[M | WebStatus]:
        """Each message as it arrives, then how the stream ended."""
        async with self.http.stream(
            "POST",
            self.url(method),
            content=envelope(request.SerializeToString()),
            headers={**self.headers("application/connect+proto"), "connect-protocol-version": "1"},
        ) as response:
            assert response.status_code == 200
            held = b""
            async for chunk in response.aiter_raw():
                held += chunk
                while len(held) >= 5:
                    flags, length = struct.unpack(">BI", held[:5])
                    if len(held) < 5 + length:
                        break
                    data, held = held[5 : 5 + length], held[5 + length :]
                    if flags & END_STREAM:
                        end = json.loads(data or b"{}")
                        yield _connect_error(end["error"]) if "error" in end else WebStatus("ok")
                        return
                    yield reply_type.FromString(data)


def _grpc_status(trailers: dict[str, str]) -> WebStatus:
    code = CODES[int(trailers["grpc-status"])]
    message = unquote(trailers.get("grpc-message", ""))
    details: list[Message] = []
    if "grpc-status-details-bin" in trailers:
        status = status_pb2.Status.FromString(unpad(trailers["grpc-status-details-bin"]))
        details = [_detail(d.type_url.rsplit("/", 1)[-1], d.value) for d in status.details]
    return WebStatus(code, message, details)


def _connect_error(error: dict[str, object]) -> WebStatus:
    raw = error.get("details") or []
    assert isinstance(raw, list)
    details = [_detail(str(d["type"]), unpad(str(d["value"]))) for d in raw]
    return WebStatus(str(error["code"]), str(error.get("message", "")), details)
