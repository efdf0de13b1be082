"""A service's method handlers behind its host's guard, for callers other
than grpc.aio's server: browsers (web.py) and the other services of the same
process (local.py).

The guard's intercept_service only wraps the handlers a servicer registers,
so they are collected with a stand-in server from the definition's
`register` (the generated add_*Servicer_to_server) and each is wrapped once
by the host's own ServiceInterceptor: admission, tokens, validation,
deadlines, error mapping, the log line per call and the graceful stop's count
of unary calls are the same code and the same state as on the gRPC port.
They are called with a CallContext: the part of grpc.aio.ServicerContext the
guard and the servicers use. An abort keeps its status there, details
(grpc-status-details-bin) included, for the caller to send in its own form.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from .interceptors import ServiceInterceptor

Register = Callable[[Any], None]
Trailing = tuple[tuple[str, str | bytes], ...]


class _Registrar:
    """Stands in for grpc.aio.Server while a definition registers its
    servicers: keeps each method's handler by its path."""

    def __init__(self) -> None:
        self.handlers: dict[str, grpc.RpcMethodHandler] = {}

    def add_registered_method_handlers(
        self, service: str, handlers: Mapping[str, grpc.RpcMethodHandler]
    ) -> None:
        for name, handler in handlers.items():
            self.handlers[f"/{service}/{name}"] = handler

    def add_generic_rpc_handlers(self, _handlers: Sequence[object]) -> None:
        pass  # the same handlers, also registered by name above


@dataclass(frozen=True)
class _CallDetails:
    """grpc.HandlerCallDetails, as the guard reads it."""

    method: str
    invocation_metadata: tuple[tuple[str, str], ...] = ()


async def guarded_handlers(
    register: Register, guard: ServiceInterceptor
) -> dict[str, grpc.RpcMethodHandler]:
    """Every method `register` adds, by its path (/package.Service/Method),
    as the gRPC port runs it: behind `guard`."""
    registrar = _Registrar()
    register(registrar)
    guarded: dict[str, grpc.RpcMethodHandler] = {}
    for path, handler in registrar.handlers.items():

        async def registered(
            _details: object, handler: grpc.RpcMethodHandler = handler
        ) -> grpc.RpcMethodHandler:
            return handler

        guarded[path] = await guard.intercept_service(registered, _CallDetails(path))
    return guarded


class CallContext:
    """What the guard and the servicers use of grpc.aio.ServicerContext,
    for a call that did not come through grpc.aio's server: abort() keeps
    the status (read back with code(), details() and trailing()) and raises
    AbortError as grpc.aio's does. Subclasses say where the metadata and
    the deadline come from."""

    def __init__(self) -> None:
        self._code: grpc.StatusCode | None = None
        self._details = ""
        self._trailing: Trailing = ()

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()

    def time_remaining(self) -> float | None:
        return None

    def peer(self) -> str:
        return ""

    def code(self) -> grpc.StatusCode | None:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing(self) -> Trailing:
        return self._trailing

    def set_code(self, code: grpc.StatusCode) -> None:
        self._code = code

    def set_details(self, details: str) -> None:
        self._details = details

    def set_trailing_metadata(self, metadata: Iterable[tuple[str, str | bytes]]) -> None:
        self._trailing = tuple(metadata)

    async def abort(
        self,
        code: grpc.StatusCode,
        details: str = "",
        trailing_metadata: Iterable[tuple[str, str | bytes]] = (),
    ) -> None:
        self._code, self._details = code, details
        self._trailing = tuple(trailing_metadata)
        raise grpc.aio.AbortError()
