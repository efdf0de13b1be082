"""Calls between the services of one process, without the loopback hop.

The embedded stack runs every service in one process and event loop; over
loopback gRPC each call between them costs about one bare echo of CPU in
grpc.aio (HTTP/2 framing, the socket, grpc's core and its callbacks), so an
operation that crosses three services paid three. A LocalChannel stands
where a grpc.aio.Channel would: the generated stubs, and so every client and
port, are unchanged. Only the transport is gone:

- each call runs the peer's handler behind the peer host's own guard
  (guarded.py): readiness, the internal token, validation, deadlines, error
  mapping, the log line and the graceful stop's count are the gRPC port's;
- request and reply are copied through their bytes, as on the wire, so the
  two sides never share a message;
- a failure is the grpc.aio.AioRpcError a remote call raises (an abort's
  status with its details; DEADLINE_EXCEEDED when the timeout passes;
  UNAVAILABLE when the peer is down and the call does not wait for it), so
  every client maps it to the same domain error;
- a unary handler runs in its caller's task (a task of its own would cost
  two turns of the event loop per call), so it is cancelled with its caller;
  the only context variable a handler sets, the deadline its guard records,
  is the caller's again when the call returns. A server stream runs in a
  task of its own, with the fresh context variables a served call has;
- a server stream runs ahead of its reader by at most STREAM_BUFFER
  messages, ends DEADLINE_EXCEEDED at its deadline and UNAVAILABLE when its
  service stops.

A service is reachable here from the moment its port is bound until its
server stops (ServiceHost), as a port would be; `wait_for_ready` waits for
it across a restart, until the call's timeout.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import grpc

from .deadlines import callers_deadline_kept
from .guarded import CallContext

log = logging.getLogger("agenthost.local")

Serializer = Callable[[Any], bytes]
Deserializer = Callable[[bytes], Any]
Metadata = tuple[tuple[str, str], ...]

# Messages a server stream may run ahead of its reader (gRPC's flow control
# does the same over a connection).
STREAM_BUFFER = 16


def rpc_error(
    code: grpc.StatusCode, details: str, trailing: tuple[tuple[str, str | bytes], ...] = ()
) -> grpc.aio.AioRpcError:
    """What a failed remote call raises."""
    return grpc.aio.AioRpcError(
        code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailing), details=details
    )


class LocalContext(CallContext):
    """A local call's context: the caller's metadata and deadline."""

    def __init__(self, metadata: Metadata, deadline: float | None) -> None:
        super().__init__()
        self._metadata = metadata
        self.deadline = deadline

    def invocation_metadata(self) -> Metadata:
        return self._metadata

    def time_remaining(self) -> float | None:
        if self.deadline is None:
            return None
        return max(self.deadline - asyncio.get_running_loop().time(), 0.0)

    def peer(self) -> str:
        return "local"

    def failure(self) -> grpc.aio.AioRpcError:
        """The abort, as the caller's AioRpcError."""
        return rpc_error(self.code() or grpc.StatusCode.UNKNOWN, self.details(), self.trailing())


class LocalEndpoint:
    """One running service's guarded handlers, and the streams it serves."""

    def __init__(self, handlers: Mapping[str, grpc.RpcMethodHandler]) -> None:
        self._handlers = handlers
        self._streams: set[_ServerStream] = set()
        self._no_streams = asyncio.Event()
        self._no_streams.set()

    def handler(self, method: str) -> grpc.RpcMethodHandler:
        handler = self._handlers.get(method)
        if handler is None:
            raise rpc_error(grpc.StatusCode.UNIMPLEMENTED, f"Method not found: {method}")
        return handler

    def serving(self, stream: _ServerStream) -> None:
        self._streams.add(stream)
        self._no_streams.clear()

    def served(self, stream: _ServerStream) -> None:
        self._streams.discard(stream)
        if not self._streams:
            self._no_streams.set()

    async def streams_ended(self) -> None:
        """Once no stream is served (each ended, or its reader went away)."""
        await self._no_streams.wait()

    async def stop(self) -> None:
        """End the streams still open, as a stopping server does."""
        for stream in list(self._streams):
            stream.end(rpc_error(grpc.StatusCode.UNAVAILABLE, "the service is stopping"))
        await self.streams_ended()


class LocalEndpoints:
    """The services of this process reachable in-process, by name."""

    def __init__(self) -> None:
        self._endpoints: dict[str, LocalEndpoint] = {}
        self._up: dict[str, asyncio.Event] = {}

    def add(self, name: str, endpoint: LocalEndpoint) -> None:
        self._endpoints[name] = endpoint
        self._event(name).set()

    def remove(self, name: str, endpoint: LocalEndpoint) -> None:
        if self._endpoints.get(name) is endpoint:
            del self._endpoints[name]
            self._up[name] = asyncio.Event()

    def _event(self, name: str) -> asyncio.Event:
        return self._up.setdefault(name, asyncio.Event())

    async def find(self, name: str, wait: bool, deadline: float | None) -> LocalEndpoint:
        """`name`'s endpoint; while it is down, UNAVAILABLE, or with `wait`
        the endpoint once it is up (DEADLINE_EXCEEDED at `deadline`)."""
        while (endpoint := self._endpoints.get(name)) is None:
            if not wait:
                raise rpc_error(grpc.StatusCode.UNAVAILABLE, f"{name} is not running")
            try:
                async with asyncio.timeout_at(deadline):
                    await self._event(name).wait()
            except TimeoutError:
                raise rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
        return endpoint


class LocalChannel:
    """A grpc.aio.Channel to the service `name` of this process, for the
    generated stubs; `metadata` goes with every call (the internal token)."""

    def __init__(self, endpoints: LocalEndpoints, name: str, metadata: Metadata = ()) -> None:
        self._endpoints = endpoints
        self._name = name
        self._metadata = metadata

    def unary_unary(
        self,
        method: str,
        request_serializer: Serializer,
        response_deserializer: Deserializer,
        **_: object,
    ) -> Callable[..., Any]:
        async def call(
            request: Any,
            *,
            timeout: float | None = None,  # noqa: ASYNC109 (grpc.aio's signature)
            metadata: Metadata | None = None,
            wait_for_ready: bool | None = None,
            **_: object,
        ) -> Any:
            deadline = _deadline(timeout)
            endpoint = await self._endpoints.find(self._name, bool(wait_for_ready), deadline)
            handler = endpoint.handler(method)
            context = LocalContext((*self._metadata, *(metadata or ())), deadline)
            served = handler.unary_unary(
                handler.request_deserializer(request_serializer(request)), context
            )
            try:
                with callers_deadline_kept():
                    async with asyncio.timeout_at(deadline):
                        reply = await served
            except TimeoutError:
                raise rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None
            except grpc.aio.AbortError:
                raise context.failure() from None
            except Exception as error:  # a handler's bug: UNKNOWN, as grpc answers it
                log.exception("local call %s failed", method)
                raise rpc_error(grpc.StatusCode.UNKNOWN, f"Unexpected {error!r}") from None
            return response_deserializer(handler.response_serializer(reply))

        return call

    def unary_stream(
        self,
        method: str,
        request_serializer: Serializer,
        response_deserializer: Deserializer,
        **_: object,
    ) -> Callable[..., _StreamCall]:
        def call(
            request: Any,
            *,
            timeout: float | None = None,
            metadata: Metadata | None = None,
            wait_for_ready: bool | None = None,
            **_: object,
        ) -> _StreamCall:
            stream = _ServerStream(
                self._endpoints,
                self._name,
                method,
                request_serializer(request),
                LocalContext((*self._metadata, *(metadata or ())), _deadline(timeout)),
                bool(wait_for_ready),
            )
            return _StreamCall(stream, response_deserializer)

        return call

    async def close(self) -> None:
        pass  # nothing held: the calls end with their callers


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else asyncio.get_running_loop().time() + timeout


class _End:
    """Put in a stream's buffer to wake its reader: the stream has ended."""


_END = _End()


class _ServerStream:
    """The serving side of one local server stream: a task running the
    handler ahead of the reader, into a bounded buffer."""

    def __init__(
        self,
        endpoints: LocalEndpoints,
        name: str,
        method: str,
        request: bytes,
        context: LocalContext,
        wait: bool,
    ) -> None:
        self.buffer: asyncio.Queue[bytes | _End] = asyncio.Queue(STREAM_BUFFER)
        # Why it ended: None while it runs or when it ran to its end.
        self.failure: grpc.aio.AioRpcError | None = None
        self.ended = False
        self._context = context
        self._stopping: grpc.aio.AioRpcError | None = None
        self._task = asyncio.get_running_loop().create_task(
            self._serve(endpoints, name, method, request, wait), context=contextvars.Context()
        )

    async def _serve(
        self, endpoints: LocalEndpoints, name: str, method: str, request: bytes, wait: bool
    ) -> None:
        endpoint: LocalEndpoint | None = None
        try:
            endpoint = await endpoints.find(name, wait, self._context.deadline)
            endpoint.serving(self)
            handler = endpoint.handler(method)
            replies = handler.unary_stream(handler.request_deserializer(request), self._context)
            async with asyncio.timeout_at(self._context.deadline):
                async for reply in replies:
                    await self.buffer.put(handler.response_serializer(reply))
        except TimeoutError:
            self.failure = rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
        except grpc.aio.AioRpcError as error:
            self.failure = error
        except grpc.aio.AbortError:
            self.failure = self._context.failure()
        except asyncio.CancelledError:
            self.failure = self._stopping or rpc_error(grpc.StatusCode.CANCELLED, "Cancelled")
        except Exception as error:  # a handler's bug: UNKNOWN, as grpc answers it
            log.exception("local stream %s failed", method)
            self.failure = rpc_error(grpc.StatusCode.UNKNOWN, f"Unexpected {error!r}")
        finally:
            self.ended = True
            if endpoint is not None:
                endpoint.served(self)
            if not self.buffer.full():  # else the reader is not waiting
                self.buffer.put_nowait(_END)

    def end(self, failure: grpc.aio.AioRpcError) -> None:
        """Stop serving; the reader gets `failure` after what it was sent."""
        self._stopping = failure
        self._task.cancel()

    def cancel(self) -> None:
        self._task.cancel()


class _StreamCall:
    """The reading side (grpc.aio's UnaryStreamCall, as the clients use it):
    iterate it or read() it, or cancel it. Dropped unread, it cancels its stream."""

    def __init__(self, stream: _ServerStream, deserialize: Deserializer) -> None:
        self._stream = stream
        self._deserialize = deserialize
        weakref.finalize(self, stream.cancel)

    def cancel(self) -> bool:
        self._stream.cancel()
        return True

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def read(self) -> Any:
        """The next message, or grpc.aio.EOF after the last."""
        try:
            return await self.__anext__()
        except StopAsyncIteration:
            return grpc.aio.EOF

    async def __anext__(self) -> Any:
        stream = self._stream
        while True:
            if stream.buffer.empty() and stream.ended:
                if stream.failure is not None:
                    raise stream.failure
                raise StopAsyncIteration
            item = await stream.buffer.get()
            if not isinstance(item, _End):
                return self._deserialize(item)
