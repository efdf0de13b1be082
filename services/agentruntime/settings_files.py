"""The settings files the runtime reads, and the one reader of them.

A settings file is a JSON object; each key is someone's: `sandbox`,
`approvals`, `network` and `model` are a new session's defaults
(defaults.py), `hooks` are commands run at the session's points
(capabilities/hooks/). Every reader of a file goes through `read_settings`,
so a file is parsed one way and its problems are told one way: a missing
file is no problem, a malformed one is ignored with the reason why.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SETTINGS_FILE = "settings.json"
# The workspace's own, in the session's folder.
WORKSPACE_SETTINGS = Path(".agenthost") / SETTINGS_FILE
# Claude Code's project files, read for what they share with agenthost's
# (hooks), in its format unchanged.
CLAUDE_SETTINGS = (Path(".claude") / SETTINGS_FILE, Path(".claude") / "settings.local.json")


@dataclass(frozen=True)
class SettingsRead:
    """A file's object (None: none to use), and why it is not used when it is not."""

    data: Mapping[str, Any] | None
    problem: str | None = None


def read_settings(path: Path) -> SettingsRead:
    """The JSON object in `path`; no file is no problem, anything else that
    gives no object is one (said with the path)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return SettingsRead(None)
    except (OSError, UnicodeDecodeError) as error:
        return SettingsRead(None, f"{path}: cannot be read ({error}); ignored")
    except json.JSONDecodeError as error:
        return SettingsRead(None, f"{path}: is not valid JSON ({error}); ignored")
    if not isinstance(data, dict):
        return SettingsRead(None, f"{path}: is not a JSON object; ignored")
    return SettingsRead(data)
