"""Background jobs and terminals, as a person's agent uses them: the whole
stack behind the gateway, the SDK as the client, the local OpenAI-compatible
provider as the model, real bubblewrap around every command.

A dev server started in the background answers a later command, its output
is read by offset, and it is gone after job_kill, after its session is
deleted and after it is archived; the model hears of a job's end at its
next request; a Python REPL is driven through a terminal; starting a job or
a terminal and typing into one are commands for the approval policy; and a
job whose runtime was killed shows as lost once a runtime starts again."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from clients.sdk import AgentHostClient, Backoff, Session
from services.agentruntime.confinement import probe
from services.agentruntime.models.catalog import load_catalog
from services.agentruntime.models.tests.fake_provider import (
    DONE,
    FakeProvider,
    ProviderReply,
    finish_chunk,
    text_chunk,
    tool_fragment,
    usage_chunk,
)
from services.common.client import open_channel
from services.common.internal_auth import TOKEN_ENV
from services.embedded import EmbeddedStack
from services.gateway.accounts import TokenStore
from services.sessionlog.client import SessionLogClient
from tests.support.process_stack import process_stack

pytestmark = pytest.mark.skipif(
    probe() is not None, reason=f"commands cannot be confined here: {probe()}"
)

TOKEN = "token-jobs"
WAIT_S = 20.0
MODELS_FILE = """
default = "fake"
[providers.local]
base_url = "{url}"
[models.fake]
provider = "local"
id = "fake"
context_window = 64000
"""


# -- the model's replies ---------------------------------------------------------------------


def text_reply(text: str) -> ProviderReply:
    return ProviderReply(stream=[text_chunk(text), finish_chunk("stop"), usage_chunk(500, 5), DONE])


def calls(*wanted: tuple[str, str, dict[str, Any]]) -> ProviderReply:
    """Tool calls, each (call id, tool, arguments)."""
    fragments = [
        tool_fragment(n, call_id=call_id, name=name, arguments=json.dumps(args))
        for n, (call_id, name, args) in enumerate(wanted)
    ]
    return ProviderReply(stream=[*fragments, finish_chunk("tool_calls"), usage_chunk(500, 5), DONE])


def fetch(port: int, path: str) -> str:
    """A command that fetches a page of the server, trying until it serves
    (the model's own retry, inside the sandbox)."""
    return (
        "python3 -c 'import time, urllib.request, urllib.error\n"
        "for _ in range(200):\n"
        "    try:\n"
        f'        page = urllib.request.urlopen("http://127.0.0.1:{port}{path}", timeout=2)\n'
        "        print(page.read().decode())\n"
        "        break\n"
        "    except urllib.error.HTTPError as e:\n"
        '        print("status", e.code); break\n'
        "    except OSError:\n"
        "        time.sleep(0.05)\n'"
    )


def free_port() -> int:
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        port: int = probe_socket.getsockname()[1]
        return port


def refused(port: int) -> bool:
    """Whether nothing listens on the port any more."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


# -- the stack --------------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "hello.txt").write_text("hello from the workspace\n")
    return folder


@pytest.fixture
async def client(tmp_path: Path, provider: FakeProvider) -> AsyncIterator[AgentHostClient]:
    models = tmp_path / "models.toml"
    models.write_text(MODELS_FILE.format(url=provider.url))
    stack = EmbeddedStack(
        tmp_path / "data",
        port_override=0,
        model=load_catalog(models, {}),
        tokens=TokenStore({TOKEN: "alice"}),
    )
    await stack.start()
    try:
        address = stack.addresses["gateway"]
        async with AgentHostClient(address, TOKEN, backoff=Backoff(max_s=0.2)) as connected:
            yield connected
    finally:
        await stack.stop()


async def opened(client: AgentHostClient, project: Path, *, approvals: str = "never") -> Session:
    workspace = await client.create_workspace(str(project))
    session_id = (await client.connect_workspace(workspace.id)).session.id
    session = await client.open_session(session_id)
    await session.set_settings(approvals=approvals, network=True)
    return session


def turns_ended(session: Session) -> int:
    return sum(e.HasField("turn_end") for e in session.events)


async def turn(session: Session, text: str) -> None:
    ended = turns_ended(session)
    await session.prompt(text)
    await session.wait_until(lambda s: turns_ended(s) > ended and not s.running, WAIT_S)


def result(session: Session, call_id: str) -> ev.ToolResult:
    found = [e.tool_result for e in session.events if e.tool_result.call_id == call_id]
    assert found, f"no result for {call_id}"
    return found[-1]


def shown(result: ev.ToolResult) -> str:
    return result.output if result.ok else result.error


def ended_jobs(session: Session) -> dict[str, ev.JobEnded]:
    return {e.job_ended.job_id: e.job_ended for e in session.events if e.HasField("job_ended")}


def jobs_view(session: Session) -> dict[str, dict[str, Any]]:
    view = session.projections.get("jobs")
    if not isinstance(view, dict):
        return {}
    return {job["job_id"]: job for job in view["jobs"]}


async def serving(session: Session, provider: FakeProvider, port: int) -> None:
    """The model starts a dev server in the background, then fetches a page
    of it from another command."""
    serve = f"python3 -u -m http.server {port} --bind 127.0.0.1"
    provider.enqueue(
        calls(("start", "shell", {"command": serve, "background": True})),
        calls(("fetch", "shell", {"command": fetch(port, "/hello.txt")})),
        text_reply("It serves."),
    )
    await turn(session, "start the dev server and fetch hello.txt")
    started = result(session, "start")
    assert started.ok and "Started job-1 in the background" in started.output, shown(started)
    fetched = result(session, "fetch")
    assert fetched.ok and "hello from the workspace" in fetched.output, shown(fetched)


# -- background jobs ------------------------------------------------------------------------


async def test_a_dev_server_answers_a_later_command_is_read_by_offset_and_ends_with_job_kill(
    client: AgentHostClient, provider: FakeProvider, project: Path
) -> None:
    session = await opened(client, project)
    port = free_port()
    await serving(session, provider, port)

    provider.enqueue(calls(("read-1", "job_output", {"job_id": "job-1"})), text_reply("ok"))
    await turn(session, "what did it say?")
    first = result(session, "read-1").output
    assert f"Serving HTTP on 127.0.0.1 port {port}" in first and "GET /hello.txt" in first
    assert "Job job-1 is running" in first
    found = re.search(r"next offset (\d+)", first)
    assert found is not None
    offset = int(found.group(1))

    provider.enqueue(
        calls(("fetch-2", "shell", {"command": fetch(port, "/missing.txt")})),
        calls(("read-2", "job_output", {"job_id": "job-1", "offset": offset})),
        text_reply("ok"),
    )
    await turn(session, "fetch a missing page, then read what is new")
    assert "status 404" in result(session, "fetch-2").output
    second = result(session, "read-2").output
    assert f"Output bytes {offset}-" in second
    assert (
        "GET /missing.txt" in second and "Serving HTTP" not in second and "hello.txt" not in second
    )

    provider.enqueue(calls(("kill", "job_kill", {"job_id": "job-1"})), text_reply("Stopped."))
    await turn(session, "stop the server")
    killed = result(session, "kill")
    assert killed.ok and "Job job-1 was killed (signal 15): stopped by the model" in killed.output
    assert refused(port)
    ended = ended_jobs(session)["job-1"]
    assert ended.reason == ev.JOB_END_REASON_KILLED and ended.signal == 15
    await session.wait_until(
        lambda s: jobs_view(s).get("job-1", {}).get("state") == "killed", WAIT_S
    )
    listing = await session.execute_command("jobs")
    assert re.search(
        r"job-1\s+killed \(signal 15\)\s+\$ python3 -u -m http.server", listing.message
    )


async def test_deleting_the_session_stops_its_dev_server(
    client: AgentHostClient, provider: FakeProvider, project: Path
) -> None:
    session = await opened(client, project)
    port = free_port()
    await serving(session, provider, port)
    await client.delete_session(session.id)
    assert refused(port)


async def test_archiving_the_session_stops_its_dev_server_and_says_so(
    client: AgentHostClient, provider: FakeProvider, project: Path
) -> None:
    session = await opened(client, project)
    port = free_port()
    await serving(session, provider, port)
    await client.archive_session(session.id)
    assert refused(port)
    await session.wait_until(lambda s: "job-1" in ended_jobs(s), WAIT_S)
    ended = ended_jobs(session)["job-1"]
    assert ended.reason == ev.JOB_END_REASON_CLOSED
    assert ended.message == "its session was archived or deleted"


async def test_a_forks_copy_of_a_running_job_shows_as_lost_and_the_source_keeps_serving(
    client: AgentHostClient, provider: FakeProvider, project: Path
) -> None:
    session = await opened(client, project)
    port = free_port()
    await serving(session, provider, port)
    fork = await client.open_session((await client.fork_session(session.id)).id)
    await fork.wait_until(lambda s: "job-1" in ended_jobs(s), WAIT_S)
    assert ended_jobs(fork)["job-1"].reason == ev.JOB_END_REASON_LOST
    assert "job-1" not in ended_jobs(session) and not refused(port)
    assert jobs_view(session)["job-1"]["state"] == "running"


async def test_the_model_hears_of_a_jobs_end_at_its_next_request_once_unless_a_tool_told_it(
    client: AgentHostClient, provider: FakeProvider, project: Path
) -> None:
    session = await opened(client, project)
    provider.enqueue(
        calls(
            ("one", "shell", {"command": "echo done-$((6*7)); exit 3", "background": True}),
            ("two", "shell", {"command": "echo quiet", "background": True}),
            ("wait-two", "job_wait", {"job_id": "job-2", "timeout_s": 20}),
        ),
        text_reply("Both started."),
    )
    await turn(session, "run two things in the background")
    waited = result(session, "wait-two")
    assert (
        waited.ok and "Job job-2 exited with code 0" in waited.output and "quiet" in waited.output
    )
    await session.wait_until(lambda s: {"job-1", "job-2"} <= set(ended_jobs(s)), WAIT_S)

    provider.enqueue(text_reply("I see."))
    await turn(session, "anything new?")
    notices = [
        e.context_added.text
        for e in session.events
        if e.HasField("context_added") and e.context_added.capability == "jobs"
    ]
    # One notice, of job-1 only: job_wait told the model of job-2's end.
    assert len(notices) == 1 and "job-2" not in notices[0]
    assert notices[0].startswith(
        "[Background job job-1 ($ echo done-$((6*7)); exit 3) exited with code 3"
    )
    assert "done-42" in notices[0]
    told = json.dumps(provider.requests[-1].body["messages"])
    assert json.dumps(notices[0])[1:-1] in told

    provider.enqueue(text_reply("Still nothing."))
    await turn(session, "and now?")
    again = json.dumps(provider.requests[-1].body["messages"])
    assert again.count("exited with code 3") == 1  # the one notice, in the history


# -- terminals --------------------------------------------------------------------------------


async def test_a_python_repl_is_driven_through_a_terminal(
    client: AgentHostClient, provider: FakeProvider, project: Path
) -> None:
    session = await opened(client, project)
    provider.enqueue(
        calls(("open", "terminal_open", {"command": "python3 -q"})),
        calls(("define", "terminal_send", {"terminal_id": "term-1", "text": "x = 6 * 7"})),
        calls(
            (
                "ask",
                "terminal_send",
                {"terminal_id": "term-1", "text": "print(x + 1)", "wait_for": "^43\n>>>"},
            )
        ),
        calls(("read", "terminal_read", {"terminal_id": "term-1"})),
        calls(("close", "terminal_close", {"terminal_id": "term-1"})),
        text_reply("x is 42."),
    )
    await turn(session, "use a python REPL")
    assert ">>>" in result(session, "open").output
    asked = result(session, "ask")
    assert asked.ok and "wait_for matched." in asked.output, shown(asked)
    screen = result(session, "read").output
    assert ">>> x = 6 * 7\n>>> print(x + 1)\n43\n>>>" in screen
    closed = result(session, "close")
    assert closed.ok and "Terminal term-1 was killed" in closed.output
    (started,) = [e.job_started for e in session.events if e.HasField("job_started")]
    assert started.kind == ev.JOB_KIND_TERMINAL and started.command == "python3 -q"
    assert started.sandbox == "workspace-write" and started.network
    listing = await session.execute_command("terminals")
    assert re.search(r"term-1\s+killed.*\$ python3 -q", listing.message)


async def test_typing_into_a_terminal_opened_under_a_wider_sandbox_than_now_is_refused(
    client: AgentHostClient, provider: FakeProvider, project: Path
) -> None:
    session = await opened(client, project)  # the network on
    provider.enqueue(calls(("open", "terminal_open", {})), text_reply("Opened."))
    await turn(session, "open a shell")
    await session.set_settings(network=False)
    provider.enqueue(
        calls(("type", "terminal_send", {"terminal_id": "term-1", "text": "curl example.com"})),
        text_reply("Refused."),
    )
    await turn(session, "fetch something")
    typed = result(session, "type")
    assert not typed.ok and typed.error == (
        "Not sent: term-1 was opened with the network on, and it is off now; "
        "close it (terminal_close) and open another."
    )


async def test_starting_a_job_or_a_terminal_and_typing_into_one_ask_first(
    client: AgentHostClient, provider: FakeProvider, project: Path
) -> None:
    session = await opened(client, project, approvals="ask-for-commands")
    provider.enqueue(
        calls(("start", "shell", {"command": "sleep 30", "background": True})),
        calls(("open", "terminal_open", {})),
        calls(("type", "terminal_send", {"terminal_id": "term-1", "text": "echo hi"})),
        calls(("read", "terminal_read", {"terminal_id": "term-1"})),
        text_reply("done"),
    )
    await session.prompt("start things")
    asked: list[str] = []
    for answer in ("deny", "allow", "deny"):
        await session.wait_until(lambda s: len(s.questions) == 1, WAIT_S)
        (question,) = session.questions.values()
        asked.append(question.title)
        if answer == "allow":
            await session.answer_question(question.question_id, allow_once=True)
        else:
            await session.answer_question(question.question_id, deny="not now")
        await session.wait_until(answered(question.question_id), WAIT_S)
    await session.wait_until(lambda s: turns_ended(s) == 1 and not s.running, WAIT_S)
    assert asked == [
        "Allow $ sleep 30 (in the background)?",
        "Allow open a terminal: $ (the user's shell)?",
        "Allow type into term-1: echo hi?",
    ]
    assert not result(session, "start").ok and not result(session, "type").ok
    assert result(session, "read").ok  # reading a terminal asks nothing
    started = [e.job_started.job_id for e in session.events if e.HasField("job_started")]
    assert started == ["term-1"]


def answered(question_id: str) -> Callable[[Session], bool]:
    return lambda session: question_id not in session.questions


# -- a runtime killed -------------------------------------------------------------------------


async def test_a_job_whose_runtime_was_killed_shows_as_lost_once_a_runtime_starts_again(
    tmp_path: Path, provider: FakeProvider, project: Path
) -> None:
    models = tmp_path / "models.toml"
    models.write_text(MODELS_FILE.format(url=provider.url))
    marker = f"marker-{uuid.uuid4().hex}"
    command = f"sleep 600; echo {marker}"
    env = {"AGENTHOST_MODELS_FILE": str(models)}
    async with process_stack(tmp_path / "data", env) as stack:
        async with AgentHostClient(stack.gateway, stack.token) as alice:
            session = await opened(alice, project)
            provider.enqueue(
                calls(("start", "shell", {"command": command, "background": True})),
                text_reply("Started."),
            )
            await turn(session, "start a long job")
            assert result(session, "start").ok
            assert running_with(marker)
            session_id = session.id
        stack.kill("agentruntime")
        await stack.restart("agentruntime")
        # No client asks for the session: the runtime settles it as it starts.
        address = stack.processes["sessionlog"].address
        token = stack.processes["sessionlog"].env[TOKEN_ENV]
        async with open_channel(address, token) as channel:
            ended = await next_job_end(SessionLogClient(channel), session_id)
        assert ended.job_id == "job-1" and ended.reason == ev.JOB_END_REASON_LOST
        assert ended.message.startswith("its runtime stopped before it ended")
        assert not running_with(marker)
        async with AgentHostClient(stack.gateway, stack.token) as alice:
            after = await alice.open_session(session_id)
            await after.wait_until(lambda s: jobs_view(s)["job-1"]["state"] == "lost", WAIT_S)
            listing = await after.execute_command("jobs")
            assert re.search(r"job-1\s+lost\s+\$ sleep 600", listing.message)


async def next_job_end(log: SessionLogClient, session_id: str) -> ev.JobEnded:
    """The first job/ended of the session's log, followed as it is written."""
    async with asyncio.timeout(WAIT_S):
        async for item in log.subscribe(session_id):
            if isinstance(item, ev.Event) and item.HasField("job_ended"):
                return item.job_ended
    raise AssertionError("the log subscription ended")


def running_with(marker: str) -> bool:
    """Whether a process of this machine has `marker` in its command line."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False
