"""Whether a tool call may run: the sandbox and the approval policy, two
hard limits that plan mode never touches (plan mode only steers the model).

A pure table, tested by properties: reads always run; the sandbox refuses
what it forbids without asking; within the sandbox the approval policy says
whether the user is asked, unless a permission rule (an earlier "allow for
this session", or an "always allow" rule of the session or its workspace)
covers the call. A rule only skips the question: it never widens the sandbox.

Commands run under every sandbox: `read-only` and `workspace-write` confine
them with the operating system (confinement.py) to what the file tools may
change (nothing, or the session's folder); `full` runs them unconfined.
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
    if sandbox == READ_ONLY and effect is Effect.WRITE:
        return Decision(
            Gate.REFUSE,
            "the sandbox is read-only: file changes are refused (the user can change it with "
            "/sandbox workspace-write)",
        )
    if granted or approvals == NEVER:
        return ALLOW
    if effect is Effect.WRITE and approvals == ASK_FOR_COMMANDS:
        return ALLOW
    return ASK_USER


SHELL_GRANT = "shell:"
# Characters that chain, substitute or redirect: a command holding any of
# them after a rule's prefix does more than the rule allowed.
SHELL_OPERATORS = frozenset(";&|`$()<>\n\r\\\"'*?[]{}!#~")


def rule_covers(rule: str, grant: str) -> bool:
    """Whether a permission rule covers a call whose grant is `grant`: the
    same grant (a tool, "edit"), or for commands "shell:<prefix>" followed by
    plain arguments only (`npm test` covers `npm test -- -k x`, never
    `npm test && curl …` nor `npm tests`)."""
    if rule == grant:
        return True
    if not (rule.startswith(SHELL_GRANT) and grant.startswith(SHELL_GRANT)):
        return False
    prefix, command = rule.removeprefix(SHELL_GRANT).strip(), grant.removeprefix(SHELL_GRANT)
    if not prefix or not command.startswith(prefix + " "):
        return False
    return not SHELL_OPERATORS.intersection(command[len(prefix) :])


def confines_paths(sandbox: str) -> bool:
    """Only the full sandbox lets file tools reach outside the session's folder."""
    return sandbox != FULL
