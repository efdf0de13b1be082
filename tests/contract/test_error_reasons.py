"""Error reasons are a contract: every google.rpc.ErrorInfo reason raised
under services/ is declared in proto/agenthost/common/v1/errors.proto, every
declared one is raised somewhere, and the reasons the SDK matches exist."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from clients.sdk import errors as sdk_errors
from services.common import errors
from tests.support.hosts import REPO

# The classes whose first argument is the reason.
ERROR_CLASSES = frozenset(
    {
        "DomainError",
        "NotFound",
        "AlreadyExists",
        "FailedPrecondition",
        "InvalidArgument",
        "OutOfRange",
        "Unavailable",
        "Unauthenticated",
    }
)


def reasons_in(source: str) -> Iterator[str]:
    """Reason literals of one module: `REASON = "X"` class attributes, the first
    argument of an error class's call (or of `super().__init__`), and
    `ErrorInfo(reason="X")`."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "REASON" for t in node.targets
        ):
            if isinstance(node.value, ast.Constant) and node.value.value:
                yield str(node.value.value)
        elif isinstance(node, ast.Call):
            name = _called(node.func)
            if name in ERROR_CLASSES or name == "__init__":
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    yield first.value
            if name == "ErrorInfo":
                for keyword in node.keywords:
                    if keyword.arg == "reason" and isinstance(keyword.value, ast.Constant):
                        yield str(keyword.value.value)


def _called(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def raised_reasons() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted((REPO / "services").rglob("*.py")):
        if "tests" in path.parts:
            continue
        for reason in reasons_in(path.read_text()):
            found.setdefault(reason, []).append(str(path.relative_to(REPO)))
    return found


def test_every_reason_raised_is_declared() -> None:
    undeclared = {
        r: where for r, where in raised_reasons().items() if r not in errors.declared_reasons()
    }
    assert not undeclared, f"declare these in errors.proto: {undeclared}"


def test_every_declared_reason_is_raised() -> None:
    unused = errors.declared_reasons() - set(raised_reasons())
    assert not unused, f"declared in errors.proto but raised nowhere: {sorted(unused)}"


def test_the_sdk_matches_declared_reasons_and_its_own_are_not_wire_reasons() -> None:
    assert set(sdk_errors.SERVER_REASONS) <= errors.declared_reasons()
    assert not set(sdk_errors.SDK_REASONS) & errors.declared_reasons()


def test_the_sdk_names_every_reason_through_its_constants() -> None:
    """No reason is spelled out in the SDK outside errors.py, so none can
    drift from the lists checked above."""
    literal = []
    for path in sorted((REPO / "clients" / "sdk").rglob("*.py")):
        if "tests" in path.parts or path.name == "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.keyword)
                and node.arg == "reason"
                and isinstance(node.value, ast.Constant)
            ):
                literal.append(f"{path.relative_to(REPO)}:{node.value.lineno}")
    assert not literal, literal


def test_the_scanner_finds_a_new_reason(tmp_path: Path) -> None:
    snippet = """
class Gone(NotFound):
    REASON = "GONE_FOR_GOOD"

def f():
    raise Unavailable("NEW_THING", "x")

class Other(FailedPrecondition):
    def __init__(self):
        super().__init__("THIRD_ONE", "y")
"""
    assert sorted(reasons_in(snippet)) == ["GONE_FOR_GOOD", "NEW_THING", "THIRD_ONE"]


def test_an_undeclared_reason_fails_at_class_definition() -> None:
    with pytest.raises(errors.UndeclaredReason):

        class Invented(errors.NotFound):
            REASON = "INVENTED_JUST_NOW"
