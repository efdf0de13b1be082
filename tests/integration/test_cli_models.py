"""`agenthost chat` with two configured models, in a real terminal (pexpect):
/model lists them with the session's marked, /model NAME switches (the next
request goes to that model), an unknown name is refused in one line, and
the status line shows the usage the log records (`ctx 41% · 52k/128k · $0.08`).

The stack runs in this process, on a thread of its own, so the test can see
which model answered and record model requests' usage in the log as the
runtime does."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import pexpect
import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.agentruntime.models.builtin import BuiltinAdapter
from services.agentruntime.models.catalog import ModelCatalog, Prices, spec_of_adapter
from services.embedded import EmbeddedStack
from services.sessionlog.client import SessionLogClient
from services.sessionlog.port import Event
from tests.integration.test_cli import CPR_ANSWER, CPR_REQUEST, TIMEOUT_S
from tests.support.hosts import REPO

T = TypeVar("T")


@dataclass
class ThreadedStack:
    stack: EmbeddedStack
    loop: asyncio.AbstractEventLoop
    echo: BuiltinAdapter
    alt: BuiltinAdapter

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(TIMEOUT_S)

    async def record_usage(self, *used: ev.ModelUsage) -> None:
        """Append after the session's turn ended (so these are its last
        model requests, whatever the runtime recorded of its own)."""
        log = SessionLogClient(self.stack.channel("sessionlog"))
        [session], _ = await log.list_sessions(10, "")
        async with asyncio.timeout(TIMEOUT_S):
            async for item in log.subscribe(session.id, after_seq=-1):
                if isinstance(item, Event) and item.HasField("turn_end"):
                    break
        events = [ev.Event(id=f"usage-{n}", model_usage=u) for n, u in enumerate(used)]
        await log.append(session.id, events)


@contextmanager
def threaded_stack(data_dir: Path) -> Iterator[ThreadedStack]:
    echo, alt = BuiltinAdapter(), BuiltinAdapter(model="builtin-alt")
    priced = replace(spec_of_adapter(alt, "alt"), prices=Prices(1.0, 2.0))
    catalog = ModelCatalog(
        [spec_of_adapter(echo, "builtin"), priced], adapters={"builtin": echo, "alt": alt}
    )
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    running = ThreadedStack(
        EmbeddedStack(data_dir, port_override=0, model=catalog, web=False), loop, echo, alt
    )
    try:
        running.run(running.stack.start())
        yield running
    finally:
        running.run(running.stack.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(TIMEOUT_S)
        loop.close()


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[ThreadedStack]:
    with threaded_stack(tmp_path / "data") as running:
        yield running


def test_chat_lists_and_switches_models_and_shows_the_usage(
    stack: ThreadedStack, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    data_dir = stack.stack.data_dir
    stack.stack.token()
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "TERM": "xterm",
        "NO_COLOR": "1",
        "AGENTHOST_GATEWAY": stack.stack.addresses["gateway"],
    }
    child = pexpect.spawn(
        sys.executable,
        ["-m", "clients.cli", "chat", "--data-dir", str(data_dir), "--workspace", str(project)],
        cwd=str(REPO),
        env=env,
        encoding="utf-8",
        timeout=TIMEOUT_S,
        dimensions=(60, 200),
    )

    def expect(text: str) -> None:
        # A terminal answers cursor position requests (prompt_toolkit draws
        # its bottom toolbar only then).
        while child.expect_exact([text, CPR_REQUEST]) == 1:
            child.send(CPR_ANSWER)

    try:
        expect("plan: off · sandbox: workspace-write · approvals: ask · model: builtin · shift-tab")
        child.sendline("/model")
        expect("* builtin  builtin/builtin-echo  32k context  (default)")
        expect("  alt      builtin/builtin-alt  32k context  $1.00/$2.00 per M in/out")
        child.sendline("/model gpt-9")
        expect("no model 'gpt-9'; the configured models are: builtin, alt")
        child.sendline("/model alt")
        expect("sandbox: workspace-write, approvals: ask, model: alt")
        expect("approvals: ask · model: alt · shift-tab")
        child.sendline("hello")
        expect("assistant: Echo: hello")
        assert (len(stack.alt.requests), len(stack.echo.requests)) == (1, 0)

        # Two model requests' usage as the runtime records it: the context
        # is the last one's, the cost the sum.
        first = ev.ModelUsage(
            model="builtin-alt",
            prompt_tokens=10_000,
            completion_tokens=500,
            context_window=128_000,
            cost=0.05,
        )
        second = ev.ModelUsage(
            model="builtin-alt",
            prompt_tokens=50_000,
            completion_tokens=2_500,
            context_window=128_000,
            cost=0.03,
        )
        stack.run(stack.record_usage(first, second))
        expect("model: alt · ctx 41% · 52k/128k · $0.08 · shift-tab")
        child.sendline("/model")
        expect("* alt")
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0


def test_up_refuses_a_bad_models_file_in_one_line_naming_the_key(tmp_path: Path) -> None:
    models = tmp_path / "models.toml"
    models.write_text("[models.fast]\nprovider = 'nobody'\ncontext_window = 1000\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path)}
    refused = subprocess.run(
        [sys.executable, "-m", "clients.cli", "up", "--free-ports", "--models-file", str(models)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"error: {models}: models.fast.provider: names no provider under [providers] ('nobody')"
    )
