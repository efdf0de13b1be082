"""The log is the one source of truth, written down once: each fold of a
session's log lives in agenthost_core/folds.py, the SDK is typed and
documented, and nothing of the old duplicates comes back."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.hosts import REPO

FOLDS = REPO / "agenthost_core" / "folds.py"
# Event kinds whose meaning is folded (plan mode, turns, questions, settings,
# title): only the fold module may look at them.
FOLDED_KINDS = (
    "plan_mode",
    "plan_selection",
    "question_asked",
    "question_answered",
    "session_settings",
    "session_title",
    "mcp_status",
)
GONE = (
    "services/gateway/plan_cache.py",
    "services/planmode/fold.py",
    "services/planmode/pending_store.py",
    "clients/sdk/tracker.py",
)


def python_files(*tops: str) -> list[Path]:
    return [
        path
        for top in tops
        for path in sorted((REPO / top).rglob("*.py"))
        if "tests" not in path.relative_to(REPO).parts
    ]


def test_the_old_duplicates_are_gone() -> None:
    assert [p for p in GONE if (REPO / p).exists()] == []
    for path in python_files("services", "clients"):
        assert not re.search(r"\bPlanCache\b|\bPendingStore\b", path.read_text()), path


def test_only_the_fold_module_reads_the_folded_event_kinds() -> None:
    """Reading an event's kind is `HasField("x")` or `WhichOneof(...) == "x"`;
    outside folds.py, only writers (and renderers of the log) name these."""
    readers: list[str] = []
    for path in python_files("services", "clients"):
        if path == FOLDS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "HasField":
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Constant) and arg.value in FOLDED_KINDS:
                    readers.append(f"{path.relative_to(REPO)}:{node.lineno} {arg.value}")
            if isinstance(node, ast.Compare) and any(
                isinstance(c, ast.Constant) and c.value in FOLDED_KINDS for c in node.comparators
            ):
                readers.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not readers, readers


def test_the_sdk_is_typed_and_documents_every_public_name() -> None:
    assert (REPO / "clients" / "sdk" / "py.typed").exists()
    undocumented: list[str] = []
    for path in python_files("clients/sdk"):
        module = ast.parse(path.read_text())
        if ast.get_docstring(module) is None:
            undocumented.append(str(path.relative_to(REPO)))
        for node in module.body:
            undocumented += _undocumented(node, path)
    assert not undocumented, undocumented


def _undocumented(node: ast.stmt, path: Path, owner: str = "") -> list[str]:
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return []
    name = f"{owner}{node.name}"
    if node.name.startswith("_"):
        return []
    missing = [] if ast.get_docstring(node) else [f"{path.relative_to(REPO)}: {name}"]
    if isinstance(node, ast.ClassDef):
        for child in node.body:
            missing += _undocumented(child, path, f"{name}.")
    return missing
