"""Whether a tool call may run: the sandbox and the approval policy, two
hard limits that plan mode never touches (plan mode only steers the model).

A pure table, tested by properties: reads always run; the sandbox refuses
what it forbids without asking; within the sandbox the approval policy says
whether the user is asked, unless an earlier "allow for this session" granted
the call.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

READ_ONLY = "read-only"
WORKSPACE_WRITE = "workspace-write"
FULL = "full"
SANDBOXES = (READ_ONLY, WORKSPACE_WRITE, FULL)

ASK = "ask"
ASK_FOR_COMMANDS = "ask-for-commands"
NEVER = "never"
APPROVAL_POLICIES = (ASK, ASK_FOR_COMMANDS, NEVER)


class Effect(enum.Enum):
    # Reads and searches the session's folder.
    READ = "read"
    # Changes files.
    WRITE = "write"
    # Runs a command.
    COMMAND = "command"
    # Changes nothing outside the conversation (e.g. exit_plan_mode).
    NONE = "none"


class Gate(enum.Enum):
    ALLOW = "allow"
    ASK = "ask"
    REFUSE = "refuse"


@dataclass(frozen=True)
class Decision:
    gate: Gate
    # Why a refused call was refused (for the model and the user).
    reason: str = ""


ALLOW = Decision(Gate.ALLOW)
ASK_USER = Decision(Gate.ASK)


def decide(effect: Effect, sandbox: str, approvals: str, *, granted: bool) -> Decision:
    if effect in (Effect.READ, Effect.NONE):
        return ALLOW
    if sandbox == READ_ONLY:
        what = "file changes" if effect is Effect.WRITE else "commands"
        return Decision(
            Gate.REFUSE,
            f"the sandbox is read-only: {what} are refused (the user can change it with "
            "/sandbox workspace-write)",
        )
    if granted or approvals == NEVER:
        return ALLOW
    if effect is Effect.WRITE and approvals == ASK_FOR_COMMANDS:
        return ALLOW
    return ASK_USER


def confines_paths(sandbox: str) -> bool:
    """Only the full sandbox lets file tools reach outside the session's folder."""
    return sandbox != FULL
