"""The exit codes of `agenthost exec`: how its turn ended. A module of its
own: the command's help shows them, and the command line's start-up need
not import the turn's code (exec_turn.py and the SDK) to show it."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    COMPLETED = 0
    # The turn ended with an error (the model or a tool failed).
    TURN_FAILED = 1
    # A usage error or bad input (an unknown model or session, an empty prompt).
    USAGE = 2
    # Cancelled (Ctrl-C, recorded in the log) or interrupted.
    CANCELLED = 3
    # The stack could not be reached or started.
    NO_STACK = 4


EXIT_CODES = (
    "Exit codes:\n"
    "  0  the turn completed\n"
    "  1  the turn ended with an error (the model or a tool failed)\n"
    "  2  usage error or bad input (e.g. an unknown model or session)\n"
    "  3  cancelled (Ctrl-C cancels the turn, recorded) or interrupted\n"
    "  4  the stack could not be reached or started"
)
