"""The agenthost command line."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from rich.console import Console

from clients.sdk import AgentHostClient, AgentHostError, TransportError

from .config import (
    DEFAULT_DATA_DIR,
    DEFAULT_GATEWAY,
    ENV_DATA_DIR,
    ENV_GATEWAY,
    ENV_TOKEN,
    TOKEN_FILE,
    ConfigError,
)
from .config import resolve_token as _resolve_token

app = typer.Typer(help="agenthost: run the stack and talk to it.", no_args_is_help=True)
workspace_app = typer.Typer(help="Workspaces: the folders sessions are grouped by.")
sessions_app = typer.Typer(help="Sessions of your workspaces.")
plan_app = typer.Typer(help="Plan mode of a session.")
app.add_typer(workspace_app, name="workspace")
app.add_typer(sessions_app, name="sessions")
app.add_typer(plan_app, name="plan")
console = Console()
errors = Console(stderr=True)

T = TypeVar("T")

Gateway = Annotated[
    str,
    typer.Option("--gateway", envvar=ENV_GATEWAY, help="The gateway's address (host:port)."),
]
Token = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar=ENV_TOKEN,
        help="Bearer token (default: the token file under --data-dir).",
        show_default=False,
    ),
]
DataDir = Annotated[
    Path,
    typer.Option(
        "--data-dir",
        envvar=ENV_DATA_DIR,
        help="Where `agenthost up` keeps its data and token (its token is read from here).",
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="One JSON document, for scripts.")]


@app.callback()
def main() -> None:
    """agenthost command line."""


@app.command()
def up(
    data_dir: Annotated[
        Path, typer.Option(envvar=ENV_DATA_DIR, help="Where the SQLite files and the token live.")
    ] = DEFAULT_DATA_DIR,
    host: Annotated[str, typer.Option(help="Address every service listens on.")] = "127.0.0.1",
    free_ports: Annotated[
        bool, typer.Option(help="Pick free ports instead of the defaults.")
    ] = False,
) -> None:
    """Start every service on loopback (the embedded default)."""
    from services.common.logs import configure_logging

    configure_logging("agenthost", "WARNING")
    asyncio.run(_run_stack(data_dir.resolve(), host, 0 if free_ports else None))


async def _run_stack(data_dir: Path, host: str, port_override: int | None) -> None:
    # Imported here: the client commands need none of the services.
    from services.embedded import EmbeddedStack

    stack = EmbeddedStack(data_dir=data_dir, host=host, port_override=port_override)
    await stack.start()
    addresses = stack.addresses
    token_file = data_dir / TOKEN_FILE
    console.print(f"[bold green]agenthost is up[/] (data in {data_dir})")
    console.print(f"  gateway      grpc://{addresses['gateway']}   <- clients talk to this")
    for name, address in addresses.items():
        if name != "gateway":
            console.print(f"  {name:<12} grpc://{address}   (internal)")
    console.print(f"Your bearer token is in {token_file}")
    console.print("Try, in the folder you want to work in: agenthost chat")
    console.print("Stop with Ctrl-C.")
    # A machine-readable line for scripts and tests.
    print(json.dumps({"agenthost": "up", "addresses": addresses}), flush=True)
    await stack.run_until_signalled()


# -- client commands ------------------------------------------------------------------


def _run_client(
    gateway: str,
    token: str | None,
    data_dir: Path,
    work: Callable[[AgentHostClient], Awaitable[T]],
) -> T:
    """Run `work` with a client of the gateway; errors as one line and exit 1."""
    try:
        bearer = _resolve_token(token, data_dir)
    except ConfigError as error:
        errors.print(f"[red]error:[/] {error}", highlight=False)
        raise typer.Exit(2) from None

    async def run() -> T:
        client = AgentHostClient(gateway, bearer)
        try:
            return await work(client)
        finally:
            await client.close()

    try:
        return asyncio.run(run())
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except TransportError as error:
        errors.print(
            f"[red]error:[/] cannot reach the gateway at {gateway} ({error.code}); "
            "is `agenthost up` running?",
            highlight=False,
        )
        raise typer.Exit(1) from None
    except AgentHostError as error:
        errors.print(f"[red]error:[/] {error.message} ({error.reason or error.code})")
        raise typer.Exit(1) from None


def _line(text: str) -> None:
    """One output line as is: no markup, no highlighting, never wrapped."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def _print_json(data: object) -> None:
    print(json.dumps(data, indent=2), flush=True)


@workspace_app.command("add")
def workspace_add(
    path: Annotated[Path, typer.Argument(help="The folder (made absolute).")],
    gateway: Gateway = DEFAULT_GATEWAY,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """Add a workspace for a folder (the existing one when known)."""

    folder = str(path.expanduser().resolve())

    async def work(client: AgentHostClient) -> None:
        workspace = await client.create_workspace(folder)
        if as_json:
            _print_json({"id": workspace.id, "path": workspace.path})
        else:
            _line(f"workspace {workspace.id}  {workspace.path}")

    _run_client(gateway, token, data_dir, work)


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
            _print_json(
                [{"id": w.id, "path": w.path, "sessions": list(w.session_ids)} for w in workspaces]
            )
            return
        if not workspaces:
            _line("no workspaces yet: agenthost workspace add PATH")
        for w in workspaces:
            count = len(w.session_ids)
            _line(f"{w.id}  {w.path}  ({count} session{'s' if count != 1 else ''})")

    _run_client(gateway, token, data_dir, work)


@sessions_app.command("list")
def sessions_list(
    workspace: Annotated[
        Path | None, typer.Option("--workspace", help="Only this workspace's folder.")
    ] = None,
    gateway: Gateway = DEFAULT_GATEWAY,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
    as_json: AsJson = False,
) -> None:
    """List the sessions of your workspaces."""

    folder = str(workspace.expanduser().resolve()) if workspace is not None else None

    async def work(client: AgentHostClient) -> None:
        workspace_id = None
        if folder is not None:
            workspace_id = (await client.create_workspace(folder)).id
        sessions = await client.list_sessions(workspace_id)
        if as_json:
            _print_json(
                [
                    {
                        "id": s.id,
                        "cwd": s.cwd,
                        "title": s.title,
                        "last_seq": s.last_seq,
                        "blank": s.blank,
                    }
                    for s in sessions
                ]
            )
            return
        if not sessions:
            _line("no sessions yet: agenthost chat")
        for s in sessions:
            title = s.title or ("(blank)" if s.blank else "(untitled)")
            _line(f"{s.id}  {s.cwd}  {title}  last_seq {s.last_seq}")

    _run_client(gateway, token, data_dir, work)


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
            _print_json(
                None
                if state is None
                else {"active": state.active, "pending": state.pending, "seq": answer.seq}
            )
            return
        _line(f"plan: {state.describe() if state is not None else 'unavailable'}")

    _run_client(gateway, token, data_dir, work)


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
            _print_json(
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
        _line(f"plan: {shown} ({answer.outcome})")

    _run_client(gateway, token, data_dir, work)


@app.command()
def chat(
    workspace: Annotated[
        Path | None,
        typer.Option("--workspace", help="Chat in this folder's workspace (added if new)."),
    ] = None,
    session: Annotated[str | None, typer.Option("--session", help="Continue this session.")] = None,
    gateway: Gateway = DEFAULT_GATEWAY,
    token: Token = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
) -> None:
    """Chat with the agent of a session, with /plan, /plan <message>, /plan off.

    Without --session it connects to the workspace of the given folder, or
    of the current one (adding it, with a notice, when there is none), and
    reuses its blank session or starts one."""
    from .chat import Chat

    if workspace is not None and session is not None:
        errors.print("[red]error:[/] give --workspace or --session, not both")
        raise typer.Exit(2)

    folder = str((workspace or Path(os.getcwd())).expanduser().resolve())

    async def work(client: AgentHostClient) -> int:
        session_id = session or await _workspace_session(client, folder)
        opened = await client.open_session(session_id)
        return await Chat(opened, console).run()

    code = _run_client(gateway, token, data_dir, work)
    raise typer.Exit(code)


async def _workspace_session(client: AgentHostClient, folder: str) -> str:
    """The reusable session of the folder's workspace, added when new."""
    known = {w.path for w in await client.list_workspaces()}
    workspace = await client.create_workspace(folder)
    if workspace.path not in known:
        _line(f"added a workspace for {workspace.path}")
    return (await client.connect_workspace(workspace.id)).session.id
