"""Plan-mode configuration: exactly `{section: non-empty string}`.

The deployment chooses the policy text; nothing else is configurable (no named
modes, tool filters or sandbox settings), so any other key is a load error
rather than a silently ignored typo.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEFAULT_SECTION = (
    "You are in plan mode. Explore and design before presenting the complete plan "
    "through exit_plan_mode."
)
ALLOWED_KEYS = frozenset({"section"})


class PlanModeConfigError(ValueError):
    """The plan-mode configuration cannot be used; the message says why."""


@dataclass(frozen=True)
class PlanModeConfig:
    # Sent verbatim to the model (system prompt, order 50) while plan mode is active.
    section: str = DEFAULT_SECTION

    def __post_init__(self) -> None:
        if not isinstance(self.section, str) or not self.section.strip():
            raise PlanModeConfigError("plan-mode config: 'section' must be non-empty text")


def config_from_mapping(data: Mapping[str, object]) -> PlanModeConfig:
    unknown = sorted(set(data) - ALLOWED_KEYS)
    if unknown:
        raise PlanModeConfigError(
            f"plan-mode config: unknown key(s) {', '.join(map(repr, unknown))}; "
            "the only key is 'section'"
        )
    if "section" not in data:
        raise PlanModeConfigError("plan-mode config: 'section' is required")
    section = data["section"]
    if not isinstance(section, str):
        raise PlanModeConfigError(
            f"plan-mode config: 'section' must be text, not {type(section).__name__}"
        )
    return PlanModeConfig(section=section)


def load_config(path: Path) -> PlanModeConfig:
    """Reads a JSON object like {"section": "..."} from `path`."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise PlanModeConfigError(f"plan-mode config {str(path)!r}: {error}") from error
    if not isinstance(data, dict):
        raise PlanModeConfigError(f"plan-mode config {str(path)!r}: expected a JSON object")
    return config_from_mapping(data)


# Names a JSON file `{"section": "..."}`: the policy text shown in plan mode.
CONFIG_ENV = "AGENTHOST_PLANMODE_CONFIG"


def config_from_env(env: Mapping[str, str]) -> PlanModeConfig:
    """The config AGENTHOST_PLANMODE_CONFIG names, else the default; read by
    plan mode and by the runtime, which shows the same section when plan
    mode cannot answer."""
    path = env.get(CONFIG_ENV)
    return load_config(Path(path)) if path else PlanModeConfig()
