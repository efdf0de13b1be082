"""`python -m clients.cli` is the `agenthost` command."""

from clients.cli.app import app

app()
