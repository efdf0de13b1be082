"""Sessions a person can find and manage, through the gateway and the SDK:
titles, previews and markers in the list, rename, archive, fork, delete and
export; another account can do none of it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clients.sdk import AgentHostClient, Backoff, InvalidArgumentError, NotFoundError
from services.agentruntime.models.builtin import ScriptedReply, ScriptedToolCall
from services.sessionlog.client import SessionLogClient
from tests.support.events import turn_end, turn_start, user
from tests.support.gateway import ALICE, BOB, GatewayHarness, running_gateway

WAIT_S = 10.0


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[GatewayHarness]:
    async with running_gateway(tmp_path / "data") as harness:
        yield harness


@pytest.fixture
async def alice(gateway: GatewayHarness) -> AsyncIterator[AgentHostClient]:
    async with AgentHostClient(gateway.address, ALICE, backoff=Backoff(max_s=0.2)) as client:
        yield client


@pytest.fixture
async def bob(gateway: GatewayHarness) -> AsyncIterator[AgentHostClient]:
    async with AgentHostClient(gateway.address, BOB, backoff=Backoff(max_s=0.2)) as client:
        yield client


@pytest.fixture
def folder(tmp_path: Path) -> str:
    path = tmp_path / "project"
    path.mkdir()
    return str(path)


async def chatted(client: AgentHostClient, workspace_id: str, text: str) -> str:
    """A session of the workspace with one finished exchange."""
    session_id = (await client.connect_workspace(workspace_id)).session.id
    session = await client.open_session(session_id)
    await session.prompt(text)
    await session.wait_until(
        lambda s: not s.running and any(e.HasField("turn_end") for e in s.events), WAIT_S
    )
    return session_id


async def test_the_list_shows_titles_previews_and_markers_and_hides_blanks(
    gateway: GatewayHarness, alice: AgentHostClient, folder: str
) -> None:
    workspace = await alice.create_workspace(folder)
    first = await chatted(alice, workspace.id, "Fix the   login\nbug please")
    blank = (await alice.connect_workspace(workspace.id)).session.id
    listed = await alice.list_sessions()
    assert [s.id for s in listed] == [blank, first]  # the reusable blank shows, newest first
    done = listed[1]
    assert done.title == "Fix the login bug please"
    assert done.preview == "Echo: Fix the login\nbug please".replace("\n", " ")
    assert not done.running and not done.waiting and done.updated_at.seconds > 0

    # An abandoned blank (a newer one replaced it as the reusable one) is hidden.
    await alice.create_session(workspace_id=workspace.id)
    assert blank not in {s.id for s in await alice.list_sessions()}

    # Running and waiting for an approval show in the list.
    session = await alice.open_session(first)
    gateway.model.enqueue(
        ScriptedReply(tool_calls=[ScriptedToolCall("write_file", {"path": "a", "content": "x"})])
    )
    await session.prompt("write a file")
    await session.wait_until(lambda s: bool(s.questions), WAIT_S)
    marked = next(s for s in await alice.list_sessions() if s.id == first)
    assert marked.running and marked.waiting == "approval"
    await session.answer_question(next(iter(session.questions)), deny="not now")
    await session.wait_until(lambda s: not s.running, WAIT_S)
    after = next(s for s in await alice.list_sessions() if s.id == first)
    assert not after.running and after.waiting == ""


async def test_rename_archive_and_unarchive(alice: AgentHostClient, folder: str) -> None:
    workspace = await alice.create_workspace(folder)
    session_id = await chatted(alice, workspace.id, "hello")
    renamed = await alice.rename_session(session_id, "The login work")
    assert renamed.title == "The login work"
    # A later prompt does not name it again.
    session = await alice.open_session(session_id)
    await session.prompt("more")
    await session.wait_until(
        lambda s: sum(e.HasField("turn_end") for e in s.events) == 2 and not s.running, WAIT_S
    )
    assert (await alice.list_sessions())[0].title == "The login work"
    archived = await alice.archive_session(session_id)
    assert archived.archived
    assert session_id not in {s.id for s in await alice.list_sessions()}
    with_archived = await alice.list_sessions(include_archived=True)
    assert [s.archived for s in with_archived if s.id == session_id] == [True]
    back = await alice.archive_session(session_id, archived=False)
    assert not back.archived and back.title == "The login work"
    assert session_id in {s.id for s in await alice.list_sessions()}


async def test_a_fork_joins_the_workspace_and_inherits_plan_and_settings(
    alice: AgentHostClient, folder: str
) -> None:
    workspace = await alice.create_workspace(folder)
    source_id = await chatted(alice, workspace.id, "design it")
    source = await alice.open_session(source_id)
    await source.set_plan(True)
    await source.set_settings(approvals="never")
    fork = await alice.fork_session(source_id)
    assert fork.forked_from == source_id and fork.cwd == folder and fork.title == "design it (fork)"
    assert fork.id in (await alice.list_workspaces())[0].session_ids
    forked = await alice.open_session(fork.id)
    assert forked.plan.state is not None and forked.plan.state.active
    assert forked.settings is not None and forked.settings.approvals == "never"
    # Up to a seq: the fork keeps the log until then.
    early = await alice.fork_session(source_id, up_to_seq=1)
    assert early.last_seq == 1


async def test_delete_removes_the_session_and_its_log(alice: AgentHostClient, folder: str) -> None:
    workspace = await alice.create_workspace(folder)
    session_id = await chatted(alice, workspace.id, "remove me")
    await alice.delete_session(session_id)
    assert session_id not in {s.id for s in await alice.list_sessions(include_archived=True)}
    assert session_id not in (await alice.list_workspaces())[0].session_ids
    with pytest.raises(NotFoundError):
        await alice.plan_mode(session_id)
    with pytest.raises(NotFoundError):
        await alice.delete_session(session_id)


async def test_export_gives_every_event_as_a_json_line(alice: AgentHostClient, folder: str) -> None:
    workspace = await alice.create_workspace(folder)
    session_id = await chatted(alice, workspace.id, "export me")
    lines = [line async for line in alice.export_session(session_id)]
    events = [json.loads(line) for line in lines]
    # Protobuf JSON: int64 as strings, defaults (seq 0) left out.
    assert [int(e.get("seq", 0)) for e in events] == list(range(len(events)))
    assert any(e.get("userMessage", {}).get("text") == "export me" for e in events)
    assert all("\n" not in line for line in lines)


async def test_lists_page_by_an_opaque_token(alice: AgentHostClient, folder: str) -> None:
    workspace = await alice.create_workspace(folder)
    made = [await chatted(alice, workspace.id, f"message {n}") for n in range(5)]
    seen: list[str] = []
    token = ""
    while True:
        page, token = await alice.list_sessions_page(page_size=2, page_token=token)
        assert len(page) <= 2
        seen += [s.id for s in page]
        if not token:
            break
    listed = [s.id for s in await alice.list_sessions()]
    assert seen == listed and set(made) <= set(seen)
    with pytest.raises(InvalidArgumentError) as bad:
        await alice.list_sessions_page(page_token="not-a-token")
    assert bad.value.reason == "BAD_PAGE_TOKEN"


async def test_an_account_with_more_sessions_than_one_internal_request_lists_them_all(
    gateway: GatewayHarness, alice: AgentHostClient, folder: str
) -> None:
    workspace = await alice.create_workspace(folder)
    made = [(await alice.create_session(workspace_id=workspace.id)).id for _ in range(1001)]
    # Each with a whole turn, as the runtime writes it (straight to the log:
    # 1001 model turns would only slow the test). Closed: the runtime closes
    # a turn no runtime holds as interrupted, which would move its session
    # to the top of the list while it is read.
    channel = gateway.stack.channel("sessionlog")
    try:
        log = SessionLogClient(channel)
        for session_id in made:
            await log.append(session_id, [turn_start("t-1"), user("hi"), turn_end("t-1")])
    finally:
        await channel.close()
    listed = [s.id for s in await alice.list_sessions()]
    assert sorted(listed) == sorted(made)


async def test_another_account_can_do_none_of_it(
    alice: AgentHostClient, bob: AgentHostClient, folder: str
) -> None:
    workspace = await alice.create_workspace(folder)
    session_id = await chatted(alice, workspace.id, "mine")
    attempts = [
        bob.rename_session(session_id, "taken"),
        bob.archive_session(session_id),
        bob.fork_session(session_id),
        bob.delete_session(session_id),
    ]
    for attempt in attempts:
        with pytest.raises(NotFoundError):
            await attempt
    with pytest.raises(NotFoundError):
        _ = [line async for line in bob.export_session(session_id)]
    assert await bob.list_sessions() == []
    mine = next(s for s in await alice.list_sessions() if s.id == session_id)
    assert mine.title == "mine" and not mine.archived
    # No fork of bob's joined alice's workspace.
    assert list((await alice.list_workspaces())[0].session_ids) == [session_id]


async def test_a_session_is_created_in_an_existing_folder_and_refused_for_a_missing_one(
    alice: AgentHostClient, folder: str
) -> None:
    """A session made with only a cwd gets (or joins) the folder's workspace;
    a cwd that does not exist is refused like a workspace path, and leaves
    neither a workspace nor a session behind."""
    session = await alice.create_session(cwd=folder)
    assert session.cwd == folder
    [workspace] = await alice.list_workspaces()
    assert workspace.path == session.cwd and list(workspace.session_ids) == [session.id]

    for missing in (f"{folder}/not-yet", "/"):
        with pytest.raises(InvalidArgumentError) as refused:
            await alice.create_session(cwd=missing)
        assert refused.value.reason == "INVALID_WORKSPACE_PATH"
        assert refused.value.violations, "the answer names the field to fix"
    assert [w.path for w in await alice.list_workspaces()] == [workspace.path]
    assert [s.id for s in await alice.list_sessions()] == [session.id]
