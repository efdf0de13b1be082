"""The browsers' port: answered from its first connection on, though the web
stack loads only then; a port nobody visited closes cleanly."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import pytest

from services.common.web_port import PortTaken, WebPort, bind


async def _hello(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"hello"})


class Factory:
    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail

    async def __call__(self) -> Any:
        self.calls += 1
        if self.fail:
            raise RuntimeError("no app today")
        return _hello


def _port(factory: Factory) -> WebPort:
    return WebPort(bind("127.0.0.1:0"), None, 1.0, factory)


async def test_browsers_that_connect_together_before_the_stack_loads_are_all_answered() -> None:
    factory = Factory()
    port = _port(factory)
    port.open()
    assert not port.loaded and factory.calls == 0  # nobody asked yet
    try:
        async with httpx.AsyncClient(timeout=20) as http:
            replies = await asyncio.gather(*(http.get(port.url) for _ in range(5)))
        assert [r.text for r in replies] == ["hello"] * 5
        assert port.loaded and factory.calls == 1
    finally:
        await port.stop()


async def test_a_port_nobody_visited_is_released_on_stop() -> None:
    port = _port(Factory())
    port.open()
    listen = f"127.0.0.1:{port.port}"
    with pytest.raises(PortTaken):
        bind(listen)
    await port.stop()
    bind(listen).close()  # free again


async def test_a_stack_that_fails_to_load_ends_the_waiting_connection() -> None:
    port = _port(Factory(fail=True))
    port.open()
    reader, writer = await asyncio.open_connection("127.0.0.1", port.port)
    try:
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        async with asyncio.timeout(20):  # ended (EOF or reset), never left hanging
            with contextlib.suppress(ConnectionResetError):
                assert await reader.read() == b""
    finally:
        writer.close()
        await port.stop()
