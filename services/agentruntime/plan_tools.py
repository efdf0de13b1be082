"""Plan mode's contribution to the tool catalog: exit_plan_mode, always
registered so the catalog never changes with the mode. It asks the user to
review the plan (a plan-review question, recorded in the log) and leaves plan
mode only once they approve."""

from __future__ import annotations

import json
from typing import Any

from agenthost.sessionlog.v1 import events_pb2

from services.common.errors import DomainError

from .ports import PlanModePort
from .tools import Args, Review, Tool, ToolContext, ToolDisplay, ToolOutcome

EXIT_PLAN_MODE = "exit_plan_mode"
APPROVE_LABEL = "Approve"

NOT_IN_PLAN_MODE = "exit_plan_mode can only be used in plan mode."
NOT_A_PLAN = "The plan must be a markdown document that starts with a heading."
KEEP_PLANNING = "The user wants to keep planning: "
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
    async def review(context: ToolContext, args: Args) -> Review | ToolOutcome:
        if not await plan_mode.is_active(context.session_id):
            return ToolOutcome(ok=False, error=NOT_IN_PLAN_MODE)
        plan = args.get("plan")
        if not is_markdown_plan(plan):
            return ToolOutcome(ok=False, error=NOT_A_PLAN)
        return Review("Review the plan", str(plan), APPROVE_LABEL)

    async def reviewed(
        context: ToolContext, args: Args, answer: events_pb2.QuestionAnswer
    ) -> ToolOutcome:
        kind = answer.WhichOneof("kind")
        if kind == "feedback":
            return ToolOutcome(ok=False, error=KEEP_PLANNING + answer.feedback)
        if kind == "dismiss":
            return ToolOutcome(ok=False, error=DISMISSED)
        if kind != "approve" or not answer.approve:
            return ToolOutcome(ok=False, error=NOT_UNDERSTOOD)
        try:
            await plan_mode.exit_plan_mode(context.session_id, context.lease_token)
        except DomainError as error:
            return ToolOutcome(ok=False, error=error.message)
        approved = ToolDisplay(summary="plan approved")
        return ToolOutcome(ok=True, output=json.dumps({"approved": True}), display=approved)

    async def run(context: ToolContext, args: Args) -> ToolOutcome:
        raise AssertionError("exit_plan_mode always asks for a review first")

    return Tool(
        EXIT_PLAN_MODE,
        "Present the complete plan for the user's review and leave plan mode once they approve it.",
        PARAMETERS,
        run,
        review=review,
        reviewed=reviewed,
    )
