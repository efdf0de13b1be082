"""The layout shows the architecture, and the imports keep to it: the
clients and the shared core never import the services (not even inside a
function), and the core imports neither side. A client learns what it needs
from the wire, the SDK and `agenthost_core`; the stack's launcher plugs its
`up` command into the command line through an entry point."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.hosts import REPO


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in the file, at any depth."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module))
    return found


def imports_of(top: str, forbidden: tuple[str, ...]) -> list[str]:
    """Where a module under `top` (its tests left out) imports a forbidden package."""
    found = []
    for path in sorted((REPO / top).rglob("*.py")):
        if "tests" in path.relative_to(REPO).parts or "node_modules" in path.parts:
            continue
        for line, module in imported_modules(path):
            if module.split(".")[0] in forbidden:
                found.append(f"{path.relative_to(REPO)}:{line} imports {module}")
    return found


def test_no_client_imports_the_services() -> None:
    assert imports_of("clients", ("services",)) == []


def test_the_shared_core_imports_neither_side() -> None:
    assert imports_of("agenthost_core", ("services", "clients")) == []


def test_the_stack_launcher_plugs_into_the_command_line() -> None:
    from importlib.metadata import entry_points

    commands = {entry.name: entry.value for entry in entry_points(group="agenthost.commands")}
    assert commands == {"up": "services.launcher:up"}
