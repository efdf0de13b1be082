"""Whether a tool call runs at once, is refused, or asks its user first, by
what a session's log holds: its sandbox and approval policy (gates.py), what
its "allow for this session" answers granted, its permission rules, and the
workspace rules its folder's other sessions hold. And what an approval
question shows, and what an "always allow" answer records with it.
"""

from __future__ import annotations

import logging
import uuid

from agenthost.sessionlog.v1 import events_pb2 as ev

from agenthost_core.folds import (
    SESSION_SCOPE,
    WORKSPACE_SCOPE,
    Approval,
    PermissionRule,
    Question,
    SessionState,
    permission_rule_event,
)
from services.sessionlog.port import SessionLogPort

from . import gates
from .neighbours import Neighbours
from .tools import Call

log = logging.getLogger("agenthost.runtime")


def decision(call: Call, state: SessionState) -> gates.Decision:
    """The decision by the session's own log: its settings, its "allow for
    this session" grants and the rules it holds."""
    settings = state.settings
    grant = call.tool.approval(call.args).grant
    rules = (rule.grant for rule in state.permissions.rules)
    granted = grant in state.questions.grants or any(gates.rule_covers(r, grant) for r in rules)
    return gates.decide(call.tool.effect, settings.sandbox, settings.approvals, granted=granted)


async def workspace_allows(
    call: Call,
    session_id: str,
    cwd: str,
    log_port: SessionLogPort,
    neighbours: Neighbours | None,
) -> bool:
    """Whether a workspace rule another session of this folder holds covers
    the call (read from their logs, asked only before a question)."""
    if neighbours is None:
        return False
    grant = call.tool.approval(call.args).grant
    try:
        members = await neighbours.sharing(session_id, cwd)
    except Exception as error:  # the workspace service away: we ask
        log.warning("cannot list the workspace's sessions: %s", error)
        return False
    for member in members:
        try:
            state = await log_port.load_state(member)
        except Exception as error:  # a broken neighbour only means we ask
            log.warning("cannot read %s's rules: %s", member, error)
            continue
        if any(gates.rule_covers(r.grant, grant) for r in state.permissions.workspace_rules(cwd)):
            return True
    return False


def approval_question(approval: Approval) -> ev.QuestionAsked:
    return ev.QuestionAsked(
        presentation=ev.QUESTION_PRESENTATION_TOOL_APPROVAL,
        title=f"Allow {approval.summary}?"[:512],
        body=approval.detail[:262144],
        approval=ev.ToolApproval(
            tool=approval.tool,
            summary=approval.summary[:4096],
            detail=approval.detail[:262144],
            grant=approval.grant[:4096],
        ),
    )


def rule_events(question: Question, answer: ev.QuestionAnswer, cwd: str) -> list[ev.Event]:
    """The permission/rule_added an "always allow" answer records."""
    kind = answer.WhichOneof("kind")
    grant = question.approval.grant if question.approval else ""
    if kind not in ("always_allow_session", "always_allow_workspace") or not grant:
        return []
    workspace = kind == "always_allow_workspace"
    rule = PermissionRule(
        f"rule-{uuid.uuid4().hex}",
        grant,
        WORKSPACE_SCOPE if workspace else SESSION_SCOPE,
        cwd if workspace else "",
    )
    added = permission_rule_event(rule, question.question_id)
    return [ev.Event(id=f"rule-{uuid.uuid4().hex}", permission_rule_added=added)]
