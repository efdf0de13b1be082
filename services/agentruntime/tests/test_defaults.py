"""How a new session's defaults are resolved from their sources (the user's
settings file, the deployment's flags, the workspace's file): precedence, a
workspace file that may narrow but never widen, and files or values that are
wrong being reported and ignored, never fatal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agenthost_core.folds import SettingsFold
from agenthost_core.locations import config_dir
from services.agentruntime.defaults import (
    DEPLOYMENT,
    ENV_APPROVALS,
    ENV_NETWORK,
    ENV_SANDBOX,
    SessionDefaults,
    to_record,
)
from services.agentruntime.settings_files import WORKSPACE_SETTINGS

MODELS = {"fast", "deep"}


def known(name: str) -> bool:
    return name in MODELS


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    return tmp_path / "config" / "settings.json"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    (path / ".agenthost").mkdir(parents=True)
    return path


def write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_without_any_source_the_defaults_are_the_built_in_ones(
    user_file: Path, folder: Path
) -> None:
    resolved = SessionDefaults(user_file).resolve(folder, known)
    assert resolved.values() == SettingsFold().values()
    assert resolved.origin == "defaults" and resolved.sources == () and resolved.problems == ()
    assert not to_record(SettingsFold(), resolved)


def test_each_source_lies_over_the_ones_below_it(user_file: Path, folder: Path) -> None:
    write(user_file, {"sandbox": "full", "approvals": "never", "model": "deep", "hooks": {}})
    deployment = {"approvals": "ask-for-commands", "network": "on"}
    workspace = write(folder / WORKSPACE_SETTINGS, {"sandbox": "workspace-write"})
    resolved = SessionDefaults(user_file, deployment).resolve(folder, known)
    # The user's model, the deployment's approvals and network, the
    # workspace's (narrower) sandbox.
    assert resolved.values() == ("workspace-write", "ask-for-commands", "deep", True)
    assert resolved.sources == (str(user_file), DEPLOYMENT, str(workspace))
    assert resolved.problems == ()
    assert to_record(SettingsFold(), resolved)


def test_the_deployment_flags_come_from_the_environment(tmp_path: Path) -> None:
    env = {
        "AGENTHOST_CONFIG_DIR": str(tmp_path / "mine"),
        ENV_SANDBOX: "read-only",
        ENV_APPROVALS: "never",
        ENV_NETWORK: "off",
    }
    defaults = SessionDefaults.from_env(env)
    assert defaults.user_file == tmp_path / "mine" / "settings.json"
    assert defaults.deployment == {"sandbox": "read-only", "approvals": "never", "network": "off"}
    # Where the user's settings live: one lookup, for the runtime and the tests.
    assert config_dir({"XDG_CONFIG_HOME": "/x"}) == Path("/x/agenthost")
    assert config_dir({"HOME": "/h"}).name == "agenthost"


@pytest.mark.parametrize(
    ("deployment", "workspace", "values", "refused"),
    [
        # Widening: refused, whatever the values around it.
        ({}, {"sandbox": "full"}, ("workspace-write", "ask", "", False), "sandbox 'full'"),
        ({}, {"approvals": "never"}, ("workspace-write", "ask", "", False), "approvals 'never'"),
        ({}, {"network": True}, ("workspace-write", "ask", "", False), "network on"),
        (
            {"sandbox": "read-only"},
            {"sandbox": "workspace-write"},
            ("read-only", "ask", "", False),
            "sandbox 'workspace-write'",
        ),
        # Narrowing: taken.
        (
            {"sandbox": "full", "approvals": "never", "network": "on"},
            {"sandbox": "read-only", "approvals": "ask-for-commands", "network": False},
            ("read-only", "ask-for-commands", "", False),
            None,
        ),
    ],
)
def test_a_workspace_file_narrows_and_never_widens(
    user_file: Path,
    folder: Path,
    deployment: dict[str, str],
    workspace: dict[str, object],
    values: tuple[str, str, str, bool],
    refused: str | None,
) -> None:
    path = write(folder / WORKSPACE_SETTINGS, workspace)
    resolved = SessionDefaults(user_file, deployment).resolve(folder, known)
    assert resolved.values() == values
    if refused is None:
        assert resolved.problems == ()
    else:
        [problem] = resolved.problems
        assert problem.startswith(f"{path}: {refused} would widen the deployment's")
        assert problem.endswith("; ignored")


def test_the_user_file_may_widen_what_the_built_in_defaults_allow(
    user_file: Path, folder: Path
) -> None:
    write(user_file, {"sandbox": "full", "approvals": "never", "network": True})
    resolved = SessionDefaults(user_file).resolve(folder, known)
    assert resolved.values() == ("full", "never", "", True) and resolved.problems == ()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{not json", "is not valid JSON"),
        ('["sandbox", "full"]', "is not a JSON object"),
        (b"\xff\xfe{}", "cannot be read"),
    ],
)
def test_a_malformed_file_is_reported_and_ignored(
    user_file: Path, folder: Path, text: str | bytes, said: str
) -> None:
    write(user_file, text)
    resolved = SessionDefaults(user_file, {"approvals": "never"}).resolve(folder, known)
    # The other sources still apply.
    assert resolved.values() == ("workspace-write", "never", "", False)
    [problem] = resolved.problems
    assert problem.startswith(f"{user_file}: {said}") and problem.endswith("; ignored")
    assert to_record(SettingsFold(), resolved)


def test_a_malformed_value_is_reported_and_the_others_apply(user_file: Path, folder: Path) -> None:
    write(user_file, {"sandbox": "wide", "approvals": "never", "network": "yes", "model": "gpt"})
    write(folder / WORKSPACE_SETTINGS, {"model": "fast", "approvals": 3})
    resolved = SessionDefaults(user_file).resolve(folder, known)
    assert resolved.values() == ("workspace-write", "never", "fast", False)
    assert [p.split(": ", 1)[1] for p in resolved.problems] == [
        "sandbox 'wide' is not one of read-only, workspace-write, full; ignored",
        "network 'yes' is not true or false; ignored",
        "model 'gpt' is not a configured model; ignored",
        "approvals 3 is not one of ask, ask-for-commands, never; ignored",
    ]


def test_settings_of_the_session_own_are_never_replaced(user_file: Path, folder: Path) -> None:
    write(user_file, {"sandbox": "read-only"})
    resolved = SessionDefaults(user_file).resolve(folder, known)
    assert to_record(SettingsFold(), resolved)
    assert not to_record(SettingsFold(origin="session"), resolved)
    assert not to_record(SettingsFold(origin="defaults"), resolved)
