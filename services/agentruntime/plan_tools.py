"""Plan mode's contributions to the runtime: the exit_plan_mode tool (always
registered, so the tool catalog never changes with the mode) and /plan."""

from __future__ import annotations

import json
from typing import Any

from services.common.errors import DomainError

from .ports import PlanModePort
from .questions import PLAN_REVIEW
from .tools import Tool, ToolContext, ToolOutcome

EXIT_PLAN_MODE = "exit_plan_mode"
APPROVE_LABEL = "Approve"

NOT_IN_PLAN_MODE = "exit_plan_mode can only be used in plan mode."
NOT_A_PLAN = "The plan must be a markdown document that starts with a heading."
NOT_UNDERSTOOD = "The review answer was not understood; the plan was not approved."
DISMISSED = (
    "The user dismissed the plan review and took over. Stay in plan mode and wait "
    "for their message before doing anything else."
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "plan": {
            "type": "string",
            "description": "The complete plan: a markdown document starting with a heading.",
        }
    },
    "required": ["plan"],
    "additionalProperties": False,
}


def is_markdown_plan(plan: object) -> bool:
    return isinstance(plan, str) and plan.lstrip().startswith("#")


def exit_plan_mode_tool(plan_mode: PlanModePort) -> Tool:
    async def run(context: ToolContext, args: dict[str, Any]) -> ToolOutcome:
        if not await plan_mode.is_active(context.session_id):
            return ToolOutcome(ok=False, error=NOT_IN_PLAN_MODE)
        plan = args.get("plan")
        if not is_markdown_plan(plan):
            return ToolOutcome(ok=False, error=NOT_A_PLAN)
        answer = await context.questions.ask(
            context.session_id,
            "Review the plan",
            str(plan),
            presentation=PLAN_REVIEW,
            approve_label=APPROVE_LABEL,
        )
        if not answer.is_well_formed():
            return ToolOutcome(ok=False, error=NOT_UNDERSTOOD)
        if answer.feedback:
            return ToolOutcome(
                ok=False, error=f"The user wants to keep planning: {answer.feedback}"
            )
        if answer.dismiss:
            return ToolOutcome(ok=False, error=DISMISSED)
        try:
            await plan_mode.exit_plan_mode(context.session_id)
        except DomainError as error:
            return ToolOutcome(ok=False, error=error.message)
        return ToolOutcome(ok=True, output=json.dumps({"approved": True}))

    return Tool(
        EXIT_PLAN_MODE,
        "Present the complete plan for the user's review and leave plan mode once they approve it.",
        PARAMETERS,
        run,
    )
