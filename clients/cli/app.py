"""The agenthost command line."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn
from urllib.parse import quote

import typer
from agenthost.sessionlog.v1.session_log_pb2 import SessionSummary
from agenthost.workspace.v1.workspace_pb2 import Workspace
from rich.text import Text

from clients.sdk import AgentHostClient

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
from .config import DEFAULT_DATA_DIR, DEFAULT_GATEWAY, ENV_DATA_DIR, TOKEN_FILE
from .sessions import row, sessions_app

if TYPE_CHECKING:
    from services.embedded import EmbeddedStack
    from services.supervisor import Supervisor

app = typer.Typer(help="agenthost: run the stack and talk to it.", no_args_is_help=True)
workspace_app = typer.Typer(help="Workspaces: the folders sessions are grouped by.")
plan_app = typer.Typer(help="Plan mode of a session.")
app.add_typer(workspace_app, name="workspace")
app.add_typer(sessions_app, name="sessions")
app.add_typer(plan_app, name="plan")


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
    base_port: Annotated[
        int | None,
        typer.Option(
            help="The gateway's port; the internal services take the next five, "
            "browsers (gRPC-Web, Connect) the one after.",
            min=1,
            max=65530,
        ),
    ] = None,
    processes: Annotated[
        bool,
        typer.Option(
            "--processes/--one-process",
            help="Each service in a process of its own, supervised by this one (more "
            "throughput under load, five times the memory), or all in this one.",
        ),
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(
            envvar="AGENTHOST_MODEL",
            help="The model turns call (with --model-base-url); the key is read from "
            "AGENTHOST_MODEL_API_KEY.",
            rich_help_panel="Model",
        ),
    ] = None,
    model_base_url: Annotated[
        str | None,
        typer.Option(
            envvar="AGENTHOST_MODEL_BASE_URL",
            help="An OpenAI-compatible server, e.g. https://api.openai.com/v1 or "
            "http://localhost:11434/v1; without it the built-in model answers (it echoes).",
            rich_help_panel="Model",
        ),
    ] = None,
    web_origin: Annotated[
        list[str] | None,
        typer.Option(
            help="Another origin (scheme://host:port) whose pages may call the gateway "
            "from a browser; repeatable; also AGENTHOST_WEB_ORIGINS, comma-separated. "
            "The gateway's own loopback origins always may.",
        ),
    ] = None,
    models_file: Annotated[
        Path | None,
        typer.Option(
            envvar="AGENTHOST_MODELS_FILE",
            help="The models file (TOML: providers and models, see examples/models.toml); "
            "else models.toml in the data folder if there is one, else the model "
            "AGENTHOST_MODEL_* name (or the built-in one).",
        ),
    ] = None,
    mcp_config: Annotated[
        Path | None,
        typer.Option(
            help='The deployment\'s MCP servers file ({"mcpServers": ...}; default '
            "DATA_DIR/mcp.json); each workspace adds its .agenthost/mcp.json.",
        ),
    ] = None,
) -> None:
    """Start every service on loopback: all in this process (the embedded
    default), or each in its own with --processes."""
    # Imported here: the client commands need none of the services.
    import psycopg

    from services.common.config import LOOPBACK, WEB_ORIGINS_ENV, split_origins
    from services.common.database import InvalidDatabaseUrl
    from services.common.errors import StorageUnavailable
    from services.common.logs import configure_logging
    from services.common.postgres import SchemaTooNew
    from services.common.server import PortInUse
    from services.supervisor import StackFailed

    configure_logging("agenthost", "WARNING")
    # The stack (and the services --processes starts) read the model from the environment.
    for name, value in (("AGENTHOST_MODEL", model), ("AGENTHOST_MODEL_BASE_URL", model_base_url)):
        if value:
            os.environ[name] = value
    _use_models_file(models_file, data_dir.resolve())
    if mcp_config is not None:
        # Read by the agent runtime (services/agentruntime/mcp/config.py).
        os.environ["AGENTHOST_MCP_CONFIG"] = str(mcp_config.resolve())
    origins = (
        LOOPBACK,
        *split_origins(os.environ.get(WEB_ORIGINS_ENV, "")),
        *(web_origin or []),
    )
    try:
        asyncio.run(_run_stack(data_dir.resolve(), host, free_ports, base_port, processes, origins))
    except PortInUse as error:
        _fail(f"port {error.port} is in use; is agenthost already running? use --free-ports")
    except StackFailed as error:
        _fail(f"error: {error}; the other services are stopped")
    except (InvalidDatabaseUrl, SchemaTooNew) as error:
        _fail(f"error: {error}")
    except (StorageUnavailable, psycopg.OperationalError) as error:
        _fail(f"error: the database cannot be reached: {str(error).strip()}")


def _use_models_file(given: Path | None, data_dir: Path) -> None:
    """Check the models file before anything starts (a mistake is one line
    naming the file and key) and hand it to the runtime, in this process or
    in the supervised ones, through AGENTHOST_MODELS_FILE."""
    from services.agentruntime.models.catalog import (
        ENV_MODELS_FILE,
        ModelsFileError,
        load_catalog,
        models_file,
    )

    path = models_file(os.environ, data_dir, given)
    if path is None:
        return
    try:
        load_catalog(path.resolve())
    except ModelsFileError as error:
        _fail(f"error: {error}")
    os.environ[ENV_MODELS_FILE] = str(path.resolve())


def _page_url(web_url: str | None, token_file: Path) -> str | None:
    """The web client's address with the bearer token in its fragment: a
    fragment never leaves the browser (no request, log or Referer carries
    it), and the page moves it to the tab's sessionStorage and off the
    address bar at once. It is the token file's, shown to whoever started
    the stack (who can read that file anyway)."""
    if web_url is None or not token_file.is_file():
        return None
    return f"{web_url}/#token={quote(token_file.read_text().strip(), safe='')}"


def _fail(message: str) -> NoReturn:
    errors.print(message, markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(1) from None


async def _run_stack(
    data_dir: Path,
    host: str,
    free_ports: bool,
    base_port: int | None,
    processes: bool,
    web_origins: tuple[str, ...],
) -> None:
    from services.agentruntime.models.factory import model_in_use
    from services.common.config import TlsFiles
    from services.common.topology import DEFAULT_PORTS, DEFAULT_WEB_PORT

    # The gateway over TLS when AGENTHOST_TLS_CERT_FILE and _KEY_FILE are set.
    tls = TlsFiles.from_env(os.environ)
    port_override = 0 if free_ports else None
    stack: EmbeddedStack | Supervisor
    if processes:
        from services.supervisor import Supervisor

        stack = Supervisor(data_dir, host, port_override, gateway_tls=tls, web_origins=web_origins)
    else:  # imports every service, which the supervisor's children do instead
        from services.embedded import EmbeddedStack

        stack = EmbeddedStack(
            data_dir, host, port_override, gateway_tls=tls, web_origins=web_origins
        )
    if base_port is not None and not free_ports:
        shift = base_port - DEFAULT_PORTS["gateway"]
        stack.addresses = {name: f"{host}:{port + shift}" for name, port in DEFAULT_PORTS.items()}
        stack.web_listen = f"{host}:{DEFAULT_WEB_PORT + shift}"

    def announce() -> None:
        addresses = stack.addresses
        token_file = data_dir / TOKEN_FILE
        console.print(f"[bold green]agenthost is up[/] (data in {data_dir})")
        console.print(f"  gateway      grpc://{addresses['gateway']}   <- clients talk to this")
        page = _page_url(stack.web_url, data_dir / TOKEN_FILE) if stack.web_files else None
        if page is not None:
            # Never wrapped: the address is copied or clicked whole.
            console.print(
                f"  {'web':<12} {page}   <- open in a browser (the web client)",
                soft_wrap=True,
                highlight=False,
            )
        else:
            console.print(f"  {'web':<12} {stack.web_url}   <- browsers (gRPC-Web, Connect)")
        for name, address in addresses.items():
            if name != "gateway":
                console.print(f"  {name:<12} grpc://{address}   (internal)")
        chosen = model_in_use()
        console.print(f"  {'model':<12} {chosen.name}   <- {chosen.server}", highlight=False)
        if chosen.server.startswith(("http://", "https://")):
            checks.add(asyncio.get_running_loop().create_task(_check_model_server(chosen.server)))
        console.print(f"Your bearer token is in {token_file}")
        console.print(stack.confinement, markup=False, highlight=False, soft_wrap=True)
        console.print("Try, in the folder you want to work in: agenthost chat")
        console.print("Stop with Ctrl-C.")
        # A machine-readable line for scripts and tests.
        up = {
            "agenthost": "up",
            "addresses": addresses,
            "web": stack.web_url,
            "page": page,
            "model": {"name": chosen.name, "server": chosen.server},
        }
        print(json.dumps(up), flush=True)

    checks: set[asyncio.Task[None]] = set()
    await stack.run_until_signalled(on_up=announce)


async def _check_model_server(base_url: str) -> None:
    """A warning when the model server does not answer (turns would fail)."""
    from services.agentruntime.models.factory import unreachable_reason

    reason = await unreachable_reason(base_url)
    if reason is not None:
        said = (
            f"the model server {base_url} cannot be reached ({reason}); "
            "turns will fail until it can (check --model-base-url)"
        )
        console.print(Text.assemble(("warning: ", "yellow"), said), soft_wrap=True)


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


@app.command()
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
    """Chat with the agent of a session, with /plan, /plan <message>, /plan off.

    Without --session it connects to the workspace of the given folder, or
    of the current one (adding it, with a notice, when there is none), and
    reuses its blank session or starts one; --continue takes its most recent
    session instead, --resume offers its recent sessions to pick from."""
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
