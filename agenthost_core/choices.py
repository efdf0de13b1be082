"""The settings a person names on the command line (`agenthost up`'s
defaults, `agenthost exec`'s session settings), as the choices the help
lists: the same names the folds and the `settings` projection use."""

from __future__ import annotations

import enum

from agenthost_core.folds import APPROVAL_POLICIES, SANDBOXES


class SandboxName(enum.StrEnum):
    READ_ONLY = "read-only"
    WORKSPACE_WRITE = "workspace-write"
    FULL = "full"


class ApprovalsName(enum.StrEnum):
    ASK = "ask"
    ASK_FOR_COMMANDS = "ask-for-commands"
    NEVER = "never"


class OnOff(enum.StrEnum):
    ON = "on"
    OFF = "off"


assert {str(name) for name in SandboxName} == set(SANDBOXES.values())
assert {str(name) for name in ApprovalsName} == set(APPROVAL_POLICIES.values())
