"""What every agenthost command shares: where the gateway and the token are,
and how a command talks to the gateway (errors as one line, exit 1)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from agenthost.sessionlog.v1.session_log_pb2 import SessionSummary
from rich.console import Console
from rich.text import Text

from .config import (
    ENV_DATA_DIR,
    ENV_GATEWAY,
    ENV_TOKEN,
    ConfigError,
    find_gateway,
    resolve_token,
    tls_roots,
    token_source,
    unexpected_answer,
)

if TYPE_CHECKING:
    from clients.sdk import AgentHostClient

console = Console()
errors = Console(stderr=True)

T = TypeVar("T")

Gateway = Annotated[
    str | None,
    typer.Option(
        "--gateway",
        envvar=ENV_GATEWAY,
        help="The gateway's address (host:port); default: the one `agenthost up` recorded "
        "in the data folder (its `gateway` file), else 127.0.0.1:7100.",
        show_default=False,
    ),
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


def run_client(
    gateway: str | None,
    token: str | None,
    data_dir: Path,
    work: Callable[[AgentHostClient], Awaitable[T]],
) -> T:
    """Run `work` with a client of the gateway (`gateway`, else the one `up`
    recorded, else the default); errors as one line and exit 1."""
    # The SDK loads with the first client command, not with the command line
    # (`agenthost up` needs none of it).
    from clients.sdk import AgentHostClient, AgentHostError

    found = find_gateway(gateway, data_dir)
    try:
        bearer = resolve_token(token, data_dir)
    except ConfigError as error:
        errors.print(f"[red]error:[/] {error}", highlight=False)
        raise typer.Exit(2) from None

    async def run() -> T:
        client = AgentHostClient(found.address, bearer, tls_roots=tls_roots())
        try:
            return await work(client)
        finally:
            await client.close()

    try:
        return asyncio.run(run())
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except AgentHostError as error:
        said = unexpected_answer(error, found, token_source(token, data_dir))
        said = said or f"{error.message} ({error.reason or error.code})"
        errors.print(Text.assemble(("error:", "red"), f" {said}"), highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


def line(text: str) -> None:
    """One output line as is: no markup, no highlighting, never wrapped."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def print_json(data: object) -> None:
    print(json.dumps(data, indent=2), flush=True)


# Picks a session among the workspace's recent ones (most recent first),
# given the client and the workspace's id (to search it); None: none.
Chooser = Callable[["AgentHostClient", str, list[SessionSummary]], Awaitable[str | None]]


async def workspace_session(
    client: AgentHostClient,
    folder: str,
    choose: Chooser | None = None,
    say: Callable[[str], None] = line,
) -> str:
    """The folder's workspace (added when new): a session `choose` picks
    among its recent ones, else its reusable session; notes go to `say`."""
    known = {w.path for w in await client.list_workspaces()}
    workspace = await client.create_workspace(folder)
    if workspace.path not in known:
        say(f"added a workspace for {workspace.path}")
    if choose is not None:
        recent = [s for s in await client.list_sessions(workspace.id) if not s.blank]
        chosen = await choose(client, workspace.id, recent)
        if chosen is not None:
            return chosen
        say("no earlier session here: starting a new one")
    return (await client.connect_workspace(workspace.id)).session.id


async def most_recent(
    client: AgentHostClient, workspace_id: str, sessions: list[SessionSummary]
) -> str | None:
    return sessions[0].id if sessions else None
