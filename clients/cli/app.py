"""The agenthost command line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from services.common.logs import configure_logging
from services.embedded import TOKEN_FILE, EmbeddedStack

app = typer.Typer(help="agenthost: run the stack and talk to it.", no_args_is_help=True)
console = Console()


@app.callback()
def main() -> None:
    """agenthost command line."""


@app.command()
def up(
    data_dir: Annotated[Path, typer.Option(help="Where the SQLite files live.")] = Path(
        ".agenthost"
    ),
    host: Annotated[str, typer.Option(help="Address every service listens on.")] = "127.0.0.1",
    free_ports: Annotated[
        bool, typer.Option(help="Pick free ports instead of the defaults.")
    ] = False,
) -> None:
    """Start every service on loopback (the embedded default)."""
    configure_logging("agenthost", "WARNING")
    asyncio.run(_run_stack(data_dir.resolve(), host, 0 if free_ports else None))


async def _run_stack(data_dir: Path, host: str, port_override: int | None) -> None:
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
    console.print("Try: .venv/bin/agenthost chat   or   .venv/bin/python examples/first_call.py")
    console.print("Stop with Ctrl-C.")
    # A machine-readable line for scripts and tests.
    print(json.dumps({"agenthost": "up", "addresses": addresses}), flush=True)
    await stack.run_until_signalled()
