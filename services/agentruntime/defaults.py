"""A new session's default settings: sandbox, approvals, network and model.

Sources, lowest first: the built-in defaults (workspace-write, ask, network
off, the deployment's default model, which `agenthost up --model` or the
models file chooses); the user's settings file (`settings.json` in their
agenthost config folder: agenthost_core/locations.py); the deployment's
flags (`agenthost up --sandbox/--approvals/--network`, handed to the runtime
as the AGENTHOST_DEFAULT_* variables); then the workspace's
`<folder>/.agenthost/settings.json`. Each file is a JSON object with the
keys `sandbox`, `approvals`, `network` (true/false) and `model`; other keys
are left for others (hooks), and every reader of the files reads them
through settings_files.py. A workspace file may come with a repository
someone cloned: it may narrow what the deployment's defaults allow, never
widen them. A malformed file or value, or a widening one, is ignored,
logged and listed with the settings (`problems`); never fatal.

The runtime resolves them when it loads a blank session whose log holds no
settings of its own, and records them (origin "defaults", with the sources)
only when they differ from the built-in ones: a never-used session stays
lazy, the log stays the truth every client reads, and a later change made
in the session wins as any later event does."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenthost_core.folds import (
    APPROVAL_POLICIES,
    ORIGIN_BUILT_IN,
    ORIGIN_DEFAULTS,
    SANDBOXES,
    SettingsFold,
)
from agenthost_core.locations import config_dir

from .settings_files import SETTINGS_FILE, WORKSPACE_SETTINGS, read_settings

if TYPE_CHECKING:
    from .agent import Agent

log = logging.getLogger("agenthost.runtime.defaults")

# What `agenthost up --sandbox/--approvals/--network` hand to the runtime.
ENV_SANDBOX = "AGENTHOST_DEFAULT_SANDBOX"
ENV_APPROVALS = "AGENTHOST_DEFAULT_APPROVALS"
ENV_NETWORK = "AGENTHOST_DEFAULT_NETWORK"
DEPLOYMENT = "agenthost up"
# From the narrowest to the widest: a workspace file may only move left.
SANDBOX_ORDER = ("read-only", "workspace-write", "full")
APPROVALS_ORDER = ("ask", "ask-for-commands", "never")
assert set(SANDBOX_ORDER) == set(SANDBOXES.values())
assert set(APPROVALS_ORDER) == set(APPROVAL_POLICIES.values())
KEYS = ("sandbox", "approvals", "network", "model")


@dataclass
class _Layering:
    """The defaults as the sources are laid on, lowest first."""

    known_model: Callable[[str], bool]
    value: SettingsFold = field(default_factory=SettingsFold)
    sources: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def lay(self, source: str, given: Mapping[str, Any], *, narrow_only: bool = False) -> None:
        """Lay one source's values on the defaults so far (with `narrow_only`,
        a value wider than the one it would replace is refused)."""
        changes: dict[str, Any] = {}
        for key in KEYS:
            if key not in given:
                continue
            value, problem = _checked(key, given[key], self.known_model)
            if problem is None and narrow_only:
                problem = _widens(key, value, self.value)
            if problem is not None:
                self.problems.append(f"{source}: {problem}; ignored")
            else:
                changes[key] = value
        if changes:
            self.value = replace(self.value, **changes)
            self.sources.append(source)

    def read(self, path: Path, *, narrow_only: bool = False) -> None:
        """Lay a settings file on, when there is one."""
        given = self._file(path)
        if given is not None:
            self.lay(str(path), given, narrow_only=narrow_only)

    def _file(self, path: Path) -> Mapping[str, Any] | None:
        read = read_settings(path)
        if read.problem is not None:
            self.problems.append(read.problem)
        return read.data

    def result(self) -> SettingsFold:
        return replace(
            self.value,
            origin=ORIGIN_DEFAULTS,
            sources=tuple(self.sources),
            problems=tuple(self.problems),
        )


def _checked(key: str, value: object, known_model: Callable[[str], bool]) -> tuple[Any, str | None]:
    """The value, or why it is refused."""
    if key == "sandbox" and value not in SANDBOX_ORDER:
        return None, f"sandbox {value!r} is not one of {', '.join(SANDBOX_ORDER)}"
    if key == "approvals" and value not in APPROVALS_ORDER:
        return None, f"approvals {value!r} is not one of {', '.join(APPROVALS_ORDER)}"
    if key == "network":
        if value in ("on", "off"):
            return value == "on", None
        if not isinstance(value, bool):
            return None, f"network {value!r} is not true or false"
    if key == "model" and (not isinstance(value, str) or (value and not known_model(value))):
        return None, f"model {value!r} is not a configured model"
    return value, None


def _widens(key: str, value: Any, current: SettingsFold) -> str | None:
    """Why `value` would widen the current defaults (None: it does not)."""
    if key == "sandbox" and SANDBOX_ORDER.index(value) > SANDBOX_ORDER.index(current.sandbox):
        return f"sandbox {value!r} would widen the deployment's {current.sandbox!r}"
    if key == "approvals" and (
        APPROVALS_ORDER.index(value) > APPROVALS_ORDER.index(current.approvals)
    ):
        return f"approvals {value!r} would widen the deployment's {current.approvals!r}"
    if key == "network" and value and not current.network:
        return "network on would widen the deployment's network off"
    return None


@dataclass(frozen=True)
class SessionDefaults:
    """Where new sessions' defaults come from; the files are read at each
    resolution (a user may edit them while the stack runs)."""

    # The user's settings file (None: no user settings).
    user_file: Path | None = None
    # The deployment's flags, as `agenthost up` hands them on.
    deployment: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SessionDefaults:
        env = os.environ if env is None else env
        names = {"sandbox": ENV_SANDBOX, "approvals": ENV_APPROVALS, "network": ENV_NETWORK}
        flags = {key: env[name] for key, name in names.items() if env.get(name)}
        return cls(config_dir(env) / SETTINGS_FILE, flags)

    def resolve(self, folder: Path, known_model: Callable[[str], bool]) -> SettingsFold:
        """The defaults of a session in `folder` (origin "defaults", with
        their sources and problems)."""
        layers = _Layering(known_model)
        if self.user_file is not None:
            layers.read(self.user_file)
        if self.deployment:
            layers.lay(DEPLOYMENT, self.deployment)
        layers.read(folder / WORKSPACE_SETTINGS, narrow_only=True)
        return layers.result()


def to_record(current: SettingsFold, resolved: SettingsFold) -> bool:
    """Whether a loaded blank session should record `resolved`: its log
    holds no settings (origin built-in) and they say something the built-in
    ones do not (other values, or problems to show)."""
    if current.origin != ORIGIN_BUILT_IN:
        return False
    return resolved.values() != SettingsFold().values() or bool(resolved.problems)


async def apply_defaults(
    defaults: SessionDefaults, agent: Agent, known_model: Callable[[str], bool]
) -> None:
    """Record a blank session's defaults, when it has none of its own yet."""
    state = agent.state
    if not state.blank or state.settings.origin != ORIGIN_BUILT_IN:
        return
    resolved = defaults.resolve(agent.cwd, known_model)
    for problem in resolved.problems:
        log.warning("default settings: %s", problem, extra={"session_id": agent.session_id})
    if to_record(state.settings, resolved):
        await agent.record_settings(resolved)
