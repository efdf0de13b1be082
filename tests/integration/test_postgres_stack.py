"""The whole embedded stack on PostgreSQL, chosen the way a deployment
chooses it (AGENTHOST_DATABASE_URL, AGENTHOST_DATABASE_SCHEMA): a session,
a prompt answered by the built-in model and a workspace outlive the stack,
and a new stack on an empty data folder finds them all, so they can only
have come from PostgreSQL. A setting the stack cannot use stops
`agenthost up` with one line, never falling back to SQLite."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import psycopg
import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.sessionlog.v1 import events_pb2
from psycopg import sql

from tests.integration.test_up_processes import _prompt_through_the_gateway, agenthost_up
from tests.support.folders import Folders
from tests.support.gateway import Client, running_gateway
from tests.support.hosts import REPO
from tests.support.postgres import POSTGRES_DSN, stack_on_postgres

pytestmark = pytest.mark.postgres


@pytest.fixture
async def database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    """The stack's database setting points at a schema of this test's own."""
    async with stack_on_postgres(tmp_path, monkeypatch, "stack") as schema:
        yield schema


def is_idle(session_id: str):  # type: ignore[no-untyped-def]
    return lambda f: (
        f.HasField("session_status")
        and f.session_status.session_id == session_id
        and not f.session_status.running
    )


def texts(events: Iterable[events_pb2.Event]) -> list[str]:
    found: list[str] = []
    for event in events:
        if event.HasField("user_message"):
            found.append(event.user_message.text)
        elif event.HasField("assistant_message"):
            found.append(event.assistant_message.text)
    return found


def sqlite_files(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*.db")]


async def row_counts(schema: str) -> dict[str, int]:
    async with await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as db:
        counts = {}
        for table in ("sessions", "events", "workspaces", "memberships", "projection_sessions"):
            query = sql.SQL("SELECT count(*) FROM {}.{}").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            row = await (await db.execute(query)).fetchone()
            assert row is not None
            counts[table] = int(row[0])
        return counts


async def test_the_stack_keeps_everything_in_postgresql_across_a_restart(
    database: str, tmp_path: Path, folders: Folders
) -> None:
    project, other = folders("/project"), folders("/other")
    async with running_gateway(tmp_path / "first") as gateway:
        client: Client = gateway.client()
        await client.connect()
        created = await client.stub.CreateSession(
            gw.CreateSessionRequest(cwd=project, fence=client.fence())
        )
        session_id = created.session.id
        await client.stub.Prompt(
            gw.PromptRequest(session_id=session_id, text="hello postgres", fence=client.fence())
        )
        await client.next_frame(is_idle(session_id), seen_or_next=True)
        workspace = (
            await client.stub.CreateWorkspace(gw.CreateWorkspaceRequest(path=other))
        ).workspace
        before = await client.stub.OpenSession(
            gw.OpenSessionRequest(session_id=session_id, fence=client.fence())
        )

    counts = await row_counts(database)
    assert counts["sessions"] == 1 and counts["events"] >= 2
    assert counts["workspaces"] == 2 and counts["memberships"] == 1
    assert counts["projection_sessions"] == 1  # the projection's checkpoint, taken on stop

    empty = tmp_path / "second"
    async with running_gateway(empty) as gateway:
        client = gateway.client()
        listed = await client.stub.ListSessions(gw.ListSessionsRequest())
        opened = await client.stub.OpenSession(
            gw.OpenSessionRequest(session_id=session_id, fence=client.fence())
        )
        workspaces = (await client.stub.ListWorkspaces(gw.ListWorkspacesRequest())).workspaces

    assert [s.id for s in listed.sessions] == [session_id]
    assert texts(opened.events)[0] == "hello postgres" and len(texts(opened.events)) == 2
    assert texts(opened.events) == texts(before.events)
    assert dict(opened.projections) == dict(before.projections)
    assert [(w.path, list(w.session_ids)) for w in workspaces] == [
        (project, [session_id]),
        (other, []),
    ]
    assert workspace.id in {w.id for w in workspaces}
    # Nothing was kept in SQLite files: the data folders hold no database.
    assert sqlite_files(tmp_path) == []


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ({"AGENTHOST_DATABASE_URL": "mysql://db/x"}, "is neither sqlite:///folder nor"),
        ({"AGENTHOST_DATABASE_SCHEMA": "Stack-A"}, "schema 'Stack-A'"),
        (
            {"AGENTHOST_DATABASE_URL": "postgresql://postgres@127.0.0.1:1/test?connect_timeout=2"},
            "the database cannot be reached",
        ),
    ],
)
def test_agenthost_up_refuses_a_database_it_cannot_use_in_one_line(
    setting: dict[str, str], said: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTHOST_")}
    env.update(setting, AGENTHOST_DATA_DIR=str(tmp_path / "data"))
    done = subprocess.run(
        [sys.executable, "-m", "clients.cli", "up", "--free-ports"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 1
    assert said in done.stderr and "Traceback" not in done.stderr + done.stdout
    assert sqlite_files(tmp_path) == []  # nothing was started on SQLite instead


@pytest.mark.parametrize("mode", ["--processes", "--one-process"])
async def test_agenthost_up_runs_every_service_on_the_database_it_is_given(
    database: str, tmp_path: Path, mode: str
) -> None:
    # A shell set up for a deployed session log: `up` follows the stack's setting only.
    elsewhere = {"AGENTHOST_SESSIONLOG_DSN": "postgresql://nobody@127.0.0.1:1/none"}
    with agenthost_up(tmp_path, mode, env=elsewhere) as up:
        await _prompt_through_the_gateway(up, tmp_path)
        up.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(up.wait) == 0

    counts = await row_counts(database)
    assert counts["sessions"] == 1 and counts["workspaces"] == 1
    assert counts["memberships"] == 1 and counts["projection_sessions"] == 1
    assert sqlite_files(tmp_path) == []
