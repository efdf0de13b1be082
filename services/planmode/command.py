"""The `/plan` command's argument grammar."""

from __future__ import annotations

from dataclasses import dataclass

PLAN_COMMAND_NAME = "plan"
OFF = "off"

OFF_WITH_EXTRA_MESSAGE = (
    "/plan off takes nothing after it: use /plan off to leave plan mode, "
    "or /plan <message> to plan."
)


@dataclass(frozen=True)
class PlanCommand:
    active: bool
    # Text to send as the next user message once plan mode is selected.
    steer_text: str | None = None


@dataclass(frozen=True)
class PlanCommandError:
    message: str


def parse_plan_args(args: str | None) -> PlanCommand | PlanCommandError:
    text = (args or "").strip()
    if not text:
        return PlanCommand(active=True)
    if text == OFF:
        return PlanCommand(active=False)
    if text.split(maxsplit=1)[0] == OFF:
        return PlanCommandError(OFF_WITH_EXTRA_MESSAGE)
    return PlanCommand(active=True, steer_text=text)
