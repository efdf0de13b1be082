"""`agenthost up`: the whole stack on this machine, all services in this
process (the embedded default) or each in its own (--processes). The
`agenthost` command line is the client's (clients/cli); this command plugs
into it through the `agenthost.commands` entry point, so the client never
imports the services."""

# Not `from __future__ import annotations`, as clients/cli/app.py says why.

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn
from urllib.parse import quote

import typer
from rich.console import Console
from rich.text import Text

from agenthost_core.choices import ApprovalsName, OnOff, SandboxName
from agenthost_core.locations import (
    ENV_DATA_DIR,
    TOKEN_FILE,
    default_data_dir,
    remove_gateway_address,
    write_gateway_address,
)

if TYPE_CHECKING:
    from services.common.config import TlsFiles
    from services.embedded import EmbeddedStack
    from services.supervisor import Supervisor

console = Console()
errors = Console(stderr=True)
DEFAULT_DATA_DIR = default_data_dir()


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
    sandbox: Annotated[
        SandboxName | None,
        typer.Option(
            help="New sessions' sandbox (over the user's settings.json; a workspace's "
            ".agenthost/settings.json may only narrow it). Default: workspace-write.",
            rich_help_panel="Defaults of new sessions",
            show_default=False,
        ),
    ] = None,
    approvals: Annotated[
        ApprovalsName | None,
        typer.Option(
            help="New sessions' approval policy (as --sandbox). Default: ask.",
            rich_help_panel="Defaults of new sessions",
            show_default=False,
        ),
    ] = None,
    network: Annotated[
        OnOff | None,
        typer.Option(
            help="Whether new sessions' commands reach the network (as --sandbox). Default: off.",
            rich_help_panel="Defaults of new sessions",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Start every service on loopback: all in this process (the embedded
    default), or each in its own with --processes."""
    from services.common.heap import hold_collections

    # Until the stack serves (services/common/heap.py).
    hold_collections()
    # Imported here: the client commands need none of the services.
    from services.agentruntime.defaults import ENV_APPROVALS, ENV_NETWORK, ENV_SANDBOX
    from services.agentruntime.models.catalog import ModelsFileError
    from services.common.config import LOOPBACK, WEB_ORIGINS_ENV, split_origins
    from services.common.database import InvalidDatabaseUrl
    from services.common.errors import StorageUnavailable
    from services.common.logs import configure_logging
    from services.common.server import PortInUse

    configure_logging("agenthost", "WARNING")
    # The stack (and the services --processes starts) read the model from the environment.
    for name, value in (("AGENTHOST_MODEL", model), ("AGENTHOST_MODEL_BASE_URL", model_base_url)):
        if value:
            os.environ[name] = value
    # New sessions' defaults, read by the runtime (services/agentruntime/defaults.py).
    for name, choice in (
        (ENV_SANDBOX, sandbox),
        (ENV_APPROVALS, approvals),
        (ENV_NETWORK, network),
    ):
        if choice is not None:
            os.environ[name] = str(choice)
    try:
        _use_models_file(models_file, data_dir.resolve())
    except ModelsFileError as error:
        _fail(f"error: {error}")
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
    except _errors(maybe=("services.supervisor", "StackFailed")) as error:
        _fail(f"error: {error}; the other services are stopped")
    except _errors(InvalidDatabaseUrl, maybe=("services.common.postgres", "SchemaTooNew")) as error:
        _fail(f"error: {error}")
    except _errors(StorageUnavailable, maybe=("psycopg", "OperationalError")) as error:
        _fail(f"error: the database cannot be reached: {str(error).strip()}")


def _errors(
    *errors: type[BaseException], maybe: tuple[str, str]
) -> tuple[type[BaseException], ...]:
    """`errors`, and the exception `maybe` names (module, name) if the stack
    loaded its module (psycopg loads only for a PostgreSQL database, the
    supervisor only with --processes): a start that never imported it cannot
    have raised it, nor need import it."""
    module = sys.modules.get(maybe[0])
    return errors if module is None else (*errors, getattr(module, maybe[1]))


def _use_models_file(given: Path | None, data_dir: Path) -> None:
    """Check the models file before anything starts (a mistake is a
    ModelsFileError naming the file and key) and hand it to the runtime, in
    this process or in the supervised ones, through AGENTHOST_MODELS_FILE."""
    from services.agentruntime.models.catalog import ENV_MODELS_FILE, load_catalog, models_file

    path = models_file(os.environ, data_dir, given)
    if path is None:
        return
    load_catalog(path.resolve())
    os.environ[ENV_MODELS_FILE] = str(path.resolve())


@asynccontextmanager
async def embedded_stack(data_dir: Path) -> AsyncIterator[str]:
    """The whole stack in this process for one client call (`agenthost exec`
    when no stack answers), with the data `agenthost up` would use in
    `data_dir`, on free loopback ports, with no web port and no address file
    (it is the call's own): yields the gateway's address, and stops every
    service when the call is done. Reached through the `agenthost.stacks`
    entry point, so the client imports no service. A start that fails
    raises (a models file's mistake as ModelsFileError, naming file and key)."""
    from services.common.logs import configure_logging
    from services.embedded import EmbeddedStack

    configure_logging("agenthost", "WARNING")
    data_dir = await asyncio.to_thread(data_dir.resolve)
    await asyncio.to_thread(_use_models_file, None, data_dir)
    stack = EmbeddedStack(data_dir, port_override=0, web=False, web_files=None)
    await stack.start()
    try:
        yield stack.addresses["gateway"]
    finally:
        await stack.stop()


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
    from services.agentruntime.models.catalog import model_in_use
    from services.common.config import TlsFiles
    from services.common.topology import DEFAULT_PORTS, DEFAULT_WEB_PORT

    # The gateway over TLS when AGENTHOST_TLS_CERT_FILE and _KEY_FILE are set.
    tls = TlsFiles.from_env(os.environ)
    port_override = 0 if free_ports else None
    stack = _stack(processes, data_dir, host, port_override, tls, web_origins)
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
        # Before the up line: whoever waits for it finds the address file too.
        recorded.append(addresses["gateway"])
        write_gateway_address(data_dir, addresses["gateway"])
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
    # The gateway address this stack recorded (removed again on a clean stop).
    recorded: list[str] = []
    try:
        await stack.run_until_signalled(on_up=announce)
    finally:
        for address in recorded:
            remove_gateway_address(data_dir, address)


def _stack(
    processes: bool,
    data_dir: Path,
    host: str,
    port_override: int | None,
    tls: "TlsFiles | None",
    web_origins: tuple[str, ...],
) -> "EmbeddedStack | Supervisor":
    if processes:
        from services.supervisor import Supervisor

        return Supervisor(data_dir, host, port_override, gateway_tls=tls, web_origins=web_origins)
    # Imports every service, which the supervisor's children do instead.
    from services.embedded import EmbeddedStack

    return EmbeddedStack(data_dir, host, port_override, gateway_tls=tls, web_origins=web_origins)


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
