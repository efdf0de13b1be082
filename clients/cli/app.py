"""The agenthost command line."""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated

import typer
from agenthost.sessionlog.v1.session_log_pb2 import SessionSummary
from agenthost.workspace.v1.workspace_pb2 import Workspace

from clients.sdk import AgentHostClient

from .chat_commands import chat_help
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
from .config import DEFAULT_DATA_DIR, DEFAULT_GATEWAY
from .sessions import row, sessions_app

app = typer.Typer(help="agenthost: run the stack and talk to it.", no_args_is_help=True)
workspace_app = typer.Typer(help="Workspaces: the folders sessions are grouped by.")
plan_app = typer.Typer(help="Plan mode of a session.")
app.add_typer(workspace_app, name="workspace")
app.add_typer(sessions_app, name="sessions")
app.add_typer(plan_app, name="plan")


@app.callback()
def main() -> None:
    """agenthost command line."""


def _plug_in_commands() -> None:
    """The commands other packages add (the stack's `up`: services/launcher.py),
    found through the `agenthost.commands` entry points, so the client knows
    none of them by name."""
    for entry in sorted(entry_points(group="agenthost.commands"), key=lambda e: e.name):
        app.command(name=entry.name)(entry.load())


_plug_in_commands()


# -- client commands ------------------------------------------------------------------


@workspace_app.command("add")
def workspace_add(
    path: Annotated[Path, typer.Argument(help="An existing folder (made absolute).")],
    gateway: Gateway = DEFAULT_GATEWAY,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """Add a workspace for a folder (the existing one when known)."""

    folder = str(path.expanduser().resolve())
    # The service refuses these too; saying so here spares a round trip and
    # names the folder as the user typed it.
    problem = _not_a_project_folder(folder)
    if problem is not None:
        errors.print(f"[red]error:[/] {path} {problem}", highlight=False, soft_wrap=True)
        raise typer.Exit(2)

    async def work(client: AgentHostClient) -> None:
        workspace = await client.create_workspace(folder)
        if as_json:
            print_json({"id": workspace.id, "path": workspace.path})
        else:
            line(f"workspace {workspace.id}  {workspace.path}")

    run_client(gateway, token, data_dir, work)


def _not_a_project_folder(folder: str) -> str | None:
    """Why `folder` (absolute, resolved) cannot be a workspace, or None."""
    if folder == "/":
        return "is the root of the file system; choose a project folder"
    if not os.path.exists(folder):
        return "does not exist"
    if not os.path.isdir(folder):
        return "is not a folder"
    return None


@workspace_app.command("list")
def workspace_list(
    gateway: Gateway = DEFAULT_GATEWAY,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """List your workspaces."""

    async def work(client: AgentHostClient) -> None:
        workspaces = await client.list_workspaces()
        if as_json:
            print_json(
                [
                    {
                        "id": w.id,
                        "path": w.path,
                        "sessions": list(w.session_ids),
                        "archived": list(w.archived_session_ids),
                    }
                    for w in workspaces
                ]
            )
            return
        if not workspaces:
            line("no workspaces yet: agenthost workspace add PATH")
        for w in workspaces:
            line(f"{w.id}  {w.path}  ({_session_counts(w)})")

    run_client(gateway, token, data_dir, work)


def _session_counts(workspace: Workspace) -> str:
    """'2 active sessions, 1 archived': what each number counts."""
    active, archived = len(workspace.session_ids), len(workspace.archived_session_ids)
    counts = f"{active} active session{'s' if active != 1 else ''}"
    return counts + (f", {archived} archived" if archived else "")


@plan_app.command("get")
def plan_get(
    session: Annotated[str, typer.Argument(help="The session id.")],
    gateway: Gateway = DEFAULT_GATEWAY,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """Show a session's plan state (with its pending marker)."""

    async def work(client: AgentHostClient) -> None:
        answer = await client.plan_mode(session)
        state = answer.value.state
        if as_json:
            print_json(
                None
                if state is None
                else {"active": state.active, "pending": state.pending, "seq": answer.seq}
            )
            return
        line(f"plan: {state.describe() if state is not None else 'unavailable'}")

    run_client(gateway, token, data_dir, work)


@plan_app.command("set")
def plan_set(
    session: Annotated[str, typer.Argument(help="The session id.")],
    mode: Annotated[str, typer.Argument(help="on or off", metavar="on|off")],
    gateway: Gateway = DEFAULT_GATEWAY,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """Select plan mode on or off: now when idle, at the next model request
    while a turn runs."""
    if mode not in ("on", "off"):
        errors.print(f"[red]error:[/] expected on or off, not {mode!r}", highlight=False)
        raise typer.Exit(2)

    async def work(client: AgentHostClient) -> None:
        answer = await client.set_plan_mode(session, mode == "on")
        state = answer.value.state
        if as_json:
            print_json(
                None
                if state is None
                else {
                    "active": state.active,
                    "pending": state.pending,
                    "outcome": answer.outcome,
                    "seq": answer.seq,
                }
            )
            return
        shown = state.describe() if state is not None else "unavailable"
        line(f"plan: {shown} ({answer.outcome})")

    run_client(gateway, token, data_dir, work)


@app.command(help=chat_help())
def chat(
    workspace: Annotated[
        Path | None,
        typer.Option("--workspace", help="Chat in this folder's workspace (added if new)."),
    ] = None,
    session: Annotated[str | None, typer.Option("--session", help="Continue this session.")] = None,
    continue_last: Annotated[
        bool,
        typer.Option("--continue", "-c", help="Continue the workspace's most recent session."),
    ] = False,
    resume: Annotated[
        bool, typer.Option("--resume", "-r", help="Pick one of the workspace's recent sessions.")
    ] = False,
    gateway: Gateway = DEFAULT_GATEWAY,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    from .chat import Chat

    if session is not None and (workspace is not None or continue_last or resume):
        errors.print("[red]error:[/] --session goes alone")
        raise typer.Exit(2)
    if continue_last and resume:
        errors.print("[red]error:[/] give --continue or --resume, not both")
        raise typer.Exit(2)
    folder = str((workspace or Path(os.getcwd())).expanduser().resolve())
    choose = _most_recent if continue_last else _picked if resume else None

    async def work(client: AgentHostClient) -> int:
        session_id = session or await _workspace_session(client, folder, choose)
        opened = await client.open_session(session_id)
        return await Chat(opened, console).run()

    code = run_client(gateway, token, data_dir, work)
    raise typer.Exit(code)


@app.command()
def acp(
    gateway: Gateway = DEFAULT_GATEWAY,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Serve an editor over the Agent Client Protocol on stdin/stdout (e.g. Zed's
    agent_servers); starts the stack in the background when none answers."""
    from clients.acp.server import serve

    raise typer.Exit(serve(gateway, token, data_dir))


Chooser = Callable[[list[SessionSummary]], SessionSummary | None]
RESUME_SHOWN = 20


async def _workspace_session(
    client: AgentHostClient, folder: str, choose: Chooser | None = None
) -> str:
    """The folder's workspace (added when new): a session `choose` picks
    among its recent ones, else its reusable session."""
    known = {w.path for w in await client.list_workspaces()}
    workspace = await client.create_workspace(folder)
    if workspace.path not in known:
        line(f"added a workspace for {workspace.path}")
    if choose is not None:
        recent = [s for s in await client.list_sessions(workspace.id) if not s.blank]
        chosen = choose(recent)
        if chosen is not None:
            return chosen.id
        line("no earlier session here: starting a new one")
    return (await client.connect_workspace(workspace.id)).session.id


def _most_recent(sessions: list[SessionSummary]) -> SessionSummary | None:
    return sessions[0] if sessions else None


def _picked(sessions: list[SessionSummary]) -> SessionSummary | None:
    """Show the recent sessions and ask which one (Enter: the first)."""
    shown = sessions[:RESUME_SHOWN]
    if not shown:
        return None
    for number, summary in enumerate(shown, start=1):
        line(f"{number:>2}. {row(summary)}")
    while True:
        answer = typer.prompt("resume which?", default="1", show_default=True)
        if answer.isdigit() and 1 <= int(answer) <= len(shown):
            return shown[int(answer) - 1]
        line(f"a number from 1 to {len(shown)}")
