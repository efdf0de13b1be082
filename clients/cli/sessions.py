"""`agenthost sessions ...`: find, name, archive, fork, delete and export sessions."""

# Not `from __future__ import annotations`, as clients/cli/app.py says why.

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.sessionlog.v1 import session_log_pb2 as sl
from rich.text import Text

from .common import (
    AsJson,
    DataDir,
    Gateway,
    Token,
    console,
    errors,
    line,
    print_json,
    run_client,
)
from .config import DEFAULT_DATA_DIR

if TYPE_CHECKING:
    from clients.sdk import AgentHostClient

sessions_app = typer.Typer(help="Sessions of your workspaces.")

SessionId = Annotated[str, typer.Argument(help="The session id.")]


def markers(summary: sl.SessionSummary) -> str:
    """`running`, `waiting for review` / `approval`, `archived`, joined."""
    shown = []
    if summary.running:
        shown.append("running")
    if summary.waiting:
        shown.append(f"waiting for {summary.waiting}")
    if summary.archived:
        shown.append("archived")
    return ", ".join(shown)


def when(summary: sl.SessionSummary, now: datetime | None = None) -> str:
    """How long ago a session was updated: `just now`, `5 min ago`, `3 h ago`, a date."""
    updated = summary.updated_at.ToDatetime(tzinfo=UTC)
    seconds = ((now or datetime.now(UTC)) - updated).total_seconds()
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    return updated.strftime("%Y-%m-%d")


def title_of(summary: sl.SessionSummary) -> str:
    return summary.title or ("New Session" if summary.blank else "(untitled)")


def row(summary: sl.SessionSummary) -> str:
    """One line of the table: id, title, time, markers, preview."""
    extra = f"  [{markers(summary)}]" if markers(summary) else ""
    preview = f"  — {summary.preview}" if summary.preview else ""
    return f"{summary.id}  {title_of(summary)}  ({when(summary)}){extra}{preview}"


def as_dict(summary: sl.SessionSummary) -> dict[str, object]:
    return {
        "id": summary.id,
        "cwd": summary.cwd,
        "title": summary.title,
        "updated_at": summary.updated_at.ToJsonString(),
        "preview": summary.preview,
        "running": summary.running,
        "waiting": summary.waiting,
        "archived": summary.archived,
        "last_seq": summary.last_seq,
        "blank": summary.blank,
    }


@sessions_app.command("list")
def sessions_list(
    workspace: Annotated[
        Path | None, typer.Option("--workspace", help="Only this workspace's folder.")
    ] = None,
    archived: Annotated[bool, typer.Option("--archived", help="Archived ones too.")] = False,
    gateway: Gateway = None,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """List your sessions, most recent first: title, time, markers, last message."""
    folder = str(workspace.expanduser().resolve()) if workspace is not None else None

    async def work(client: "AgentHostClient") -> None:
        workspace_id = (await client.create_workspace(folder)).id if folder else None
        sessions = await client.list_sessions(workspace_id, include_archived=archived)
        if as_json:
            print_json([as_dict(s) for s in sessions])
            return
        if not sessions:
            line("no sessions yet: agenthost chat")
        for summary in sessions:
            line(row(summary))

    run_client(gateway, token, data_dir, work)


MATCHES = {
    sl.SEARCH_MATCH_TITLE: "title",
    sl.SEARCH_MATCH_PROMPT: "prompt",
    sl.SEARCH_MATCH_ANSWER: "answer",
    sl.SEARCH_MATCH_PATH: "path",
}


def hit_text(hit: gw.SessionSearchHit, now: datetime | None = None) -> Text:
    """One hit: id, title, time, where the snippet is from, and the snippet
    with its matched words bold (a terminal shows it; a pipe gets the text)."""
    updated = sl.SessionSummary(updated_at=hit.updated_at)
    archived = "  [archived]" if hit.archived else ""
    where = MATCHES.get(hit.snippet_match, "")
    text = Text(f"{hit.session_id}  {hit.title or '(untitled)'}  ({when(updated, now)}){archived}")
    text.append(f"  — {where}: " if where else "  — ")
    for part in hit.snippet:
        flat = " ".join(part.text.split())  # one line, whatever the snippet spans
        if part.text[:1].isspace():
            flat = " " + flat
        if part.text[-1:].isspace() and flat:
            flat += " "
        text.append(flat, style="bold" if part.highlighted else None)
    return text


def hit_dict(hit: gw.SessionSearchHit) -> dict[str, object]:
    return {
        "id": hit.session_id,
        "title": hit.title,
        "workspace_id": hit.workspace_id,
        "cwd": hit.cwd,
        "updated_at": hit.updated_at.ToJsonString(),
        "archived": hit.archived,
        "matched": [MATCHES[m] for m in hit.matched if m in MATCHES],
        "snippet": [{"text": p.text, "highlighted": p.highlighted} for p in hit.snippet],
    }


def since_time(since: str) -> datetime:
    """`--since`: a date (2026-05-01), a time (2026-05-01T12:00), or an age
    (30m, 12h, 7d, 2w) before now."""
    units = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
    text = since.strip()
    if text[:-1].isdigit() and text[-1:] in units:
        return datetime.now(UTC) - timedelta(seconds=int(text[:-1]) * units[text[-1]])
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(
            "a date (2026-05-01), a time (2026-05-01T12:00) or an age (30m, 12h, 7d, 2w)"
        ) from None
    return moment if moment.tzinfo else moment.astimezone()


@sessions_app.command("search")
def sessions_search(
    query: Annotated[
        str,
        typer.Argument(
            help='Words to find (all of them), "a phrase", -excluded, or `or` between '
            "alternatives; in titles, prompts, answers and the paths tools touched."
        ),
    ],
    workspace: Annotated[
        Path | None, typer.Option("--workspace", help="Only this workspace's folder.")
    ] = None,
    archived: Annotated[bool, typer.Option("--archived", help="Archived ones too.")] = False,
    since: Annotated[
        str | None,
        typer.Option("--since", help="Only sessions updated since: 2026-05-01, 7d, 12h."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=100, help="At most this many.")] = 20,
    gateway: Gateway = None,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """Find your sessions by their words, best match first, each with a snippet."""
    folder = str(workspace.expanduser().resolve()) if workspace is not None else None
    after = since_time(since) if since is not None else None

    async def work(client: "AgentHostClient") -> None:
        workspace_id = (await client.create_workspace(folder)).id if folder else None
        found = await client.search_sessions(
            query,
            workspace_id=workspace_id,
            include_archived=archived,
            updated_after=after,
            page_size=limit,
        )
        if as_json:
            print_json([hit_dict(hit) for hit in found.hits])
            return
        if not found.hits:
            line(f"no session matches {query!r}")
        for hit in found.hits:
            console.print(hit_text(hit), highlight=False, soft_wrap=True)

    run_client(gateway, token, data_dir, work)


@sessions_app.command("rename")
def sessions_rename(
    session: SessionId,
    title: Annotated[str, typer.Argument(help="The new title.")],
    gateway: Gateway = None,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Give a session a title."""

    async def work(client: "AgentHostClient") -> None:
        line(row(await client.rename_session(session, title)))

    run_client(gateway, token, data_dir, work)


@sessions_app.command("archive")
def sessions_archive(
    session: SessionId,
    gateway: Gateway = None,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Archive a session (lists leave it out unless --archived)."""

    async def work(client: "AgentHostClient") -> None:
        line(row(await client.archive_session(session)))

    run_client(gateway, token, data_dir, work)


@sessions_app.command("unarchive")
def sessions_unarchive(
    session: SessionId,
    gateway: Gateway = None,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Bring an archived session back."""

    async def work(client: "AgentHostClient") -> None:
        line(row(await client.archive_session(session, archived=False)))

    run_client(gateway, token, data_dir, work)


@sessions_app.command("fork")
def sessions_fork(
    session: SessionId,
    up_to: Annotated[
        int | None, typer.Option("--up-to", help="The last seq the fork keeps.", min=0)
    ] = None,
    gateway: Gateway = None,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """A new session with this one's log (up to a seq), in the same workspace."""

    async def work(client: "AgentHostClient") -> None:
        line(row(await client.fork_session(session, up_to)))

    run_client(gateway, token, data_dir, work)


@sessions_app.command("delete")
def sessions_delete(
    session: SessionId,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask.")] = False,
    gateway: Gateway = None,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Delete a session and its whole log."""
    if not yes and not typer.confirm(f"Delete session {session} and its log?"):
        errors.print("not deleted")
        raise typer.Exit(1)

    async def work(client: "AgentHostClient") -> None:
        await client.delete_session(session)
        line(f"deleted {session}")

    run_client(gateway, token, data_dir, work)


@sessions_app.command("export")
def sessions_export(
    session: SessionId,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
    gateway: Gateway = None,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """A session's events as JSON lines."""

    async def work(client: "AgentHostClient") -> None:
        target = output.open("w", encoding="utf-8") if output else sys.stdout
        try:
            async for event_line in client.export_session(session):
                target.write(event_line + "\n")
        finally:
            if output:
                target.close()

    run_client(gateway, token, data_dir, work)
