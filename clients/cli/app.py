"""The agenthost command line."""

# Not `from __future__ import annotations`: typer reads every command's
# parameters at each start of `agenthost`, and string annotations cost it an
# eval apiece (about 20 ms of every command's start).

import asyncio
import os
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from agenthost.sessionlog.v1.session_log_pb2 import SessionSummary
from agenthost.workspace.v1.workspace_pb2 import Workspace
from rich.text import Text

from agenthost_core.choices import ApprovalsName, OnOff, SandboxName

from .chat_commands import chat_help
from .common import (
    AsJson,
    DataDir,
    Gateway,
    Token,
    console,
    errors,
    line,
    most_recent,
    print_json,
    run_client,
    workspace_session,
)
from .config import DEFAULT_DATA_DIR
from .exit_codes import EXIT_CODES, ExitCode
from .sessions import hit_text, row, sessions_app

if TYPE_CHECKING:
    from clients.sdk import AgentHostClient

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
    gateway: Gateway = None,
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

    async def work(client: "AgentHostClient") -> None:
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
    gateway: Gateway = None,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """List your workspaces."""

    async def work(client: "AgentHostClient") -> None:
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
    gateway: Gateway = None,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """Show a session's plan state (with its pending marker)."""

    async def work(client: "AgentHostClient") -> None:
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
    gateway: Gateway = None,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """Select plan mode on or off: now when idle, at the next model request
    while a turn runs."""
    if mode not in ("on", "off"):
        errors.print(f"[red]error:[/] expected on or off, not {mode!r}", highlight=False)
        raise typer.Exit(2)

    async def work(client: "AgentHostClient") -> None:
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
    gateway: Gateway = None,
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
    choose = most_recent if continue_last else _picked if resume else None

    async def work(client: "AgentHostClient") -> int:
        session_id = session or await workspace_session(client, folder, choose)
        opened = await client.open_session(session_id)
        return await Chat(opened, console, client=client).run()

    code = run_client(gateway, token, data_dir, work)
    raise typer.Exit(code)


@app.command("exec", epilog=EXIT_CODES)
def exec_(
    prompt: Annotated[
        str | None,
        typer.Argument(
            help="The prompt; `-` (or none, with stdin not a terminal): read it from stdin.",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="The session's model (a configured name).")
    ] = None,
    sandbox: Annotated[
        SandboxName | None, typer.Option("--sandbox", help="The session's sandbox.")
    ] = None,
    approvals: Annotated[
        ApprovalsName | None,
        typer.Option(
            "--approvals",
            help="When the agent would ask: exec cannot ask, so what needs asking is denied.",
        ),
    ] = None,
    network: Annotated[
        OnOff | None, typer.Option("--network", help="Whether commands reach the network.")
    ] = None,
    session: Annotated[str | None, typer.Option("--session", help="Continue this session.")] = None,
    continue_last: Annotated[
        bool,
        typer.Option("--continue", "-c", help="Continue the workspace's most recent session."),
    ] = False,
    workspace: Annotated[
        Path | None,
        typer.Option("--workspace", help="Work in this folder's workspace (default: here)."),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="One JSON object per line: the session, each logged event, the live text, "
            "the turn's end with its reason and usage.",
        ),
    ] = False,
    gateway: Gateway = None,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Run one prompt to the end of its turn and print the answer: for scripts and CI.

    The answer streams to stdout (each tool call leaves one line on stderr).
    Settings given here apply to the session before the prompt. Nothing can
    be asked: a tool approval or a plan review is denied, with a reason that
    says how to allow it. A new session of the folder's workspace, unless
    --session or --continue. With no stack running, it starts one for the
    call (data in --data-dir) and stops it after."""
    from .exec_turn import ExecOptions, run_exec

    if session is not None and (workspace is not None or continue_last):
        errors.print("[red]error:[/] --session goes alone")
        raise typer.Exit(ExitCode.USAGE)
    text = _prompt_text(prompt)
    folder = str((workspace or Path(os.getcwd())).expanduser().resolve())
    problem = _not_a_project_folder(folder)
    if problem is not None:
        errors.print(f"[red]error:[/] {folder} {problem}", highlight=False, soft_wrap=True)
        raise typer.Exit(ExitCode.USAGE)
    given = {"model": model, "sandbox": sandbox, "approvals": approvals}
    settings: dict[str, object] = {k: str(v) for k, v in given.items() if v is not None}
    if network is not None:
        settings["network"] = network is OnOff.ON
    options = ExecOptions(text, folder, session, continue_last, settings, as_json)
    raise typer.Exit(run_exec(options, gateway, token, data_dir))


def _prompt_text(prompt: str | None) -> str:
    """The prompt given, or stdin's (for `-`, or none given with stdin not a
    terminal); a missing or empty one is a usage error."""
    if prompt is None and sys.stdin.isatty():
        errors.print("[red]error:[/] give a prompt, or pipe one to stdin")
        raise typer.Exit(2)
    text = sys.stdin.read() if prompt in (None, "-") else prompt
    if not text.strip():
        errors.print("[red]error:[/] the prompt is empty")
        raise typer.Exit(2)
    return text.strip()


@app.command()
def acp(
    gateway: Gateway = None,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Serve an editor over the Agent Client Protocol on stdin/stdout (e.g. Zed's
    agent_servers); starts the stack in the background when none answers."""
    from clients.acp.server import serve

    raise typer.Exit(serve(gateway, token, data_dir))


RESUME_SHOWN = 20


async def _picked(
    client: "AgentHostClient", workspace_id: str, sessions: list[SessionSummary]
) -> str | None:
    """Show the recent sessions and ask which one (Enter: the first); words
    instead of a number search the workspace's sessions (titles, prompts,
    answers, paths) and offer the sessions found, best first."""
    shown: list[tuple[str, str]] = [(s.id, row(s)) for s in sessions[:RESUME_SHOWN]]
    if not shown:
        return None
    rows: list[Text] = [Text(text) for _, text in shown]
    while True:
        for number, text in enumerate(rows, start=1):
            console.print(Text(f"{number:>2}. ") + text, highlight=False, soft_wrap=True)
        answer = await asyncio.to_thread(
            typer.prompt, "resume which? (a number, or words to search)", default="1"
        )
        answer = answer.strip()
        if answer.isdigit() and 1 <= int(answer) <= len(shown):
            return shown[int(answer) - 1][0]
        if answer.isdigit() or not answer:
            line(f"a number from 1 to {len(shown)}")
            continue
        found = await client.search_sessions(
            answer, workspace_id=workspace_id, page_size=RESUME_SHOWN
        )
        if not found.hits:
            line(f"no session here matches {answer!r}")
            continue
        shown = [(hit.session_id, hit.title) for hit in found.hits]
        rows = [hit_text(hit) for hit in found.hits]
