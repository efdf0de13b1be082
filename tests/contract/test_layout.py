"""The layout shows the architecture, and the imports keep to it: the
clients and the shared core never import the services (not even inside a
function), and the core imports neither side. A client learns what it needs
from the wire, the SDK and `agenthost_core`; the stack's launcher plugs its
`up` command into the command line through an entry point."""

from __future__ import annotations

import ast
import re
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
    stacks = {entry.name: entry.value for entry in entry_points(group="agenthost.stacks")}
    assert stacks == {"embedded": "services.launcher:embedded_stack"}


def relative_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level}


def private_reaches(path: Path, names: set[str]) -> list[str]:
    """`x._y` where `x` is one of `names` (or `self._client`): another object's private parts."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")):
            continue
        if node.attr.startswith("__"):
            continue
        owner = node.value
        if (isinstance(owner, ast.Name) and owner.id in names) or (
            isinstance(owner, ast.Attribute) and owner.attr == "_client"
        ):
            found.append(f"{path.relative_to(REPO)}:{node.lineno} .{node.attr}")
    return found


def test_the_sdk_connection_and_sessions_meet_only_through_their_interfaces() -> None:
    sdk = REPO / "clients" / "sdk"
    assert "connection" not in relative_imports(sdk / "session.py")
    assert "connection" not in relative_imports(sdk / "feed.py")
    assert private_reaches(sdk / "connection.py", {"session", "existing"}) == []
    assert private_reaches(sdk / "session.py", {"client"}) == []


def test_the_typescript_session_never_names_its_connection() -> None:
    source = (REPO / "clients" / "ts" / "src" / "session.ts").read_text()
    assert '"./connection.js"' not in source  # it knows its host as feed.ts's SessionHost
    assert "#client: SessionHost" in source


def test_the_gateway_servicer_is_a_thin_adapter() -> None:
    """Its workflows live in plain modules of the gateway: the servicer (and
    its parts, one per group of calls) has no error handling of its own and
    reads no projection value's fields."""
    for path in sorted((REPO / "services" / "gateway").glob("servicer*.py")):
        source = path.read_text()
        assert len(source.splitlines()) < 300, path.name
        tree = ast.parse(source)
        assert not any(isinstance(node, ast.Try) for node in ast.walk(tree)), path.name
        assert "json" not in {module for _, module in imported_modules(path)}, path.name
        assert "struct_value" not in source and ".fields[" not in source, path.name


def test_the_plan_state_is_defined_once() -> None:
    pattern = re.compile(r"^\s*class (PlanState|PlanFold)\b|^\s*class \w*PlanView\w*\b", re.M)
    found = [
        f"{path.relative_to(REPO)}"
        for top in ("agenthost_core", "services", "clients")
        for path in (REPO / top).rglob("*.py")
        if "node_modules" not in path.parts and pattern.search(path.read_text())
    ]
    assert found == ["agenthost_core/plan.py"]


def test_each_session_store_leaves_reading_paging_and_fork_to_the_shared_algorithms() -> None:
    for name in ("sqlite_store.py", "postgres_store.py"):
        source = (REPO / "services" / "sessionlog" / name).read_text()
        for algorithm in ("read", "tail_page", "fork"):
            assert f"algorithms.{algorithm}(" in source, (name, algorithm)
        assert "_page_start" not in source and "_copies" not in source, name


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(tops: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules of `tops` it imports, at any depth (in a
    function, under TYPE_CHECKING); `from package import module` names the
    module, not the package. Tests are left out."""
    paths = {
        module_name(path): path
        for top in tops
        for path in (REPO / top).rglob("*.py")
        if "tests" not in path.relative_to(REPO).parts and "node_modules" not in path.parts
    }
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parent, *([base] if base else [])])
                for alias in node.names:
                    edges.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base)
        graph[name] = {module for module in edges if module in paths and module != name}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import one another, round (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(group) > 1:
                circles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def test_no_modules_import_one_another_round() -> None:
    """A circle makes its modules one (none can be read or loaded alone) and
    breaks at import time when its order changes: a piece both sides need
    belongs to one of them, or below both."""
    assert import_circles(import_graph(("agenthost_core", "services", "clients"))) == []
