"""The browsers' port: bound when the service starts, served by the web
stack (web.py: hypercorn, starlette, connect-python) from its first
connection on.

The stack is the largest import of a service that serves browsers (a
sixth of the embedded stack's start-up and its memory), and most starts
never see a browser: a CLI, an editor or a script talks gRPC. So the socket
is bound and listening at start (the banner gives its URL, a second `up`
finds the port taken), and the kernel queues the connections that arrive
before the stack is up; the first one readable on the socket loads it,
then hypercorn accepts that connection and every later one.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from .config import TlsFiles

if TYPE_CHECKING:
    from .web import WebServer

log = logging.getLogger("agenthost.server")

# Makes the application to serve once the stack is loaded (its imports
# happen inside).
AppFactory = Callable[[], Awaitable[Any]]


class PortTaken(OSError):
    """The web port is in use (ServiceHost raises its PortInUse for it)."""


def bind(listen: str) -> socket.socket:
    """A listening socket on host:port (port 0: a free one); PortTaken when
    the port is in use."""
    host, _, port = listen.rpartition(":")
    family, kind, proto, _, address = socket.getaddrinfo(
        host.strip("[]") or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Frames are small and must go out as they come (accepted sockets
        # inherit it).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            sock.bind(address)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise PortTaken(errno.EADDRINUSE, f"port {port} is in use", listen) from error
            raise
        sock.listen(1024)
    except BaseException:
        sock.close()
        raise
    return sock


class WebPort:
    """A bound browser port; `make_app()` is awaited, and the web
    server started on the socket, when the first connection arrives."""

    def __init__(
        self, sock: socket.socket, tls: TlsFiles | None, grace_s: float, make_app: AppFactory
    ) -> None:
        self._sock: socket.socket | None = sock
        self._tls = tls
        self._grace_s = grace_s
        self._make_app = make_app
        host, port = sock.getsockname()[:2]
        self.scheme = "https" if tls is not None else "http"
        self.port: int = port
        self.url = f"{self.scheme}://{f'[{host}]' if ':' in host else host}:{port}"
        self._loading: asyncio.Task[None] | None = None
        self._server: WebServer | None = None

    def open(self) -> None:
        """Wait for the first connection (queued by the kernel meanwhile)."""
        assert self._sock is not None
        asyncio.get_running_loop().add_reader(self._sock.fileno(), self._first_connection)

    @property
    def loaded(self) -> bool:
        """Whether the web stack serves the port."""
        return self._server is not None

    def _first_connection(self) -> None:
        assert self._sock is not None
        asyncio.get_running_loop().remove_reader(self._sock.fileno())
        self._loading = asyncio.create_task(self._load(), name="web-load")

    async def _load(self) -> None:
        try:
            from .web import WebServer

            app = await self._make_app()
            assert self._sock is not None
            self._server = WebServer(self._sock.detach(), self._tls, self._grace_s)
            self._sock = None  # the server owns its descriptor now
            self._server.start(app)
        except Exception:
            log.exception("the web server failed to start")
            self._close_socket()  # the queued browsers see the connection end

    async def stop(self) -> None:
        """Stop accepting; requests under way finish within the grace period."""
        if self._loading is not None and not self._loading.done():
            await self._loading
        if self._server is not None:
            await self._server.stop()
        self._close_socket()

    def _close_socket(self) -> None:
        if self._sock is None:
            return
        asyncio.get_running_loop().remove_reader(self._sock.fileno())  # if still waiting
        self._sock.close()
        self._sock = None
