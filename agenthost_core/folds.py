"""The one fold of a session's log: everything a service or a client knows
about a session is a pure function of its events.

Plan mode (committed mode, a selection waiting for a boundary, what the last
model request showed), the turn (open or not, its step, tool calls waiting
for results, inputs waiting to run), open questions and the grants their
answers gave, the permission rules in force, the sandbox, approval and
network settings, the title and whether the
session is still blank: each is folded here, once, and imported by plan mode,
the projection units, the runtime, the session stores and the SDK. Nothing
else derives them, so no two views of a session can disagree about the same
log position, and any replica rebuilds them from the log alone.

Every fold is incremental (`fold(state, event)`); each part's fold returns
the very same object when an event changes nothing (the projection engine,
whose units are those parts, relies on it; the whole SessionState moves its
last_seq with every event); all serialise to JSON for checkpoints. Folding
incrementally, refolding cold and restoring a checkpoint then folding the
rest give equal states (see the property tests).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agenthost.sessionlog.v1 import events_pb2 as ev

from .plan import PlanState

Event = ev.Event

# The id of the system-prompt section plan mode contributes while active.
PLAN_POLICY_SECTION_ID = "plan:policy"
# Event kinds (oneof names) that end a session's blank state: a turn began or
# a user message was accepted. Plan-mode, command and title events do not.
BLANK_ENDING_KINDS = frozenset({"turn_start", "user_message"})
# Answered question ids remembered, so a late second answer is told apart
# from an unknown question.
ANSWERED_KEPT = 64

# Wire enums <-> the names the views and the SDK use.
PRESENTATIONS = {
    ev.QUESTION_PRESENTATION_GENERIC: "generic",
    ev.QUESTION_PRESENTATION_PLAN_REVIEW: "plan-review",
    ev.QUESTION_PRESENTATION_TOOL_APPROVAL: "tool-approval",
}
SANDBOXES = {
    ev.SANDBOX_READ_ONLY: "read-only",
    ev.SANDBOX_WORKSPACE_WRITE: "workspace-write",
    ev.SANDBOX_FULL: "full",
}
APPROVAL_POLICIES = {
    ev.APPROVAL_POLICY_ASK: "ask",
    ev.APPROVAL_POLICY_ASK_FOR_COMMANDS: "ask-for-commands",
    ev.APPROVAL_POLICY_NEVER: "never",
}
DEFAULT_SANDBOX = "workspace-write"
DEFAULT_APPROVALS = "ask"


def _kind(event: Event) -> str:
    return event.WhichOneof("body") or ""


def committed_plan(event: Event) -> bool | None:
    """The plan mode a plan/mode event commits (None: the event is not one)."""
    return event.plan_mode.active if _kind(event) == "plan_mode" else None


def last_title(events: Iterable[Event]) -> str | None:
    """The title the last session/title of `events` sets (None: none)."""
    titles = [e.session_title.title for e in events if e.HasField("session_title")]
    return titles[-1] if titles else None


# How long a title made from a first message, and a preview, may be.
TITLE_CHARS = 80
PREVIEW_CHARS = 160
# The "waiting" marker of a session, by the presentation of its open question.
WAITING_FOR = {"plan-review": "review", "tool-approval": "approval", "generic": "answer"}


def one_line(text: str, limit: int) -> str:
    """`text` on one line, cut to `limit` characters (with an ellipsis)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def title_from_message(text: str) -> str:
    """The title a session gets from its first user message."""
    return one_line(text, TITLE_CHARS)


FORK_MARK = " (fork)"


def fork_title(title: str) -> str:
    """A fork's title: its source's, marked, so the two rows of a list differ."""
    return title[: 512 - len(FORK_MARK)] + FORK_MARK


@dataclass(frozen=True)
class SummaryChange:
    """What a batch of events changes in a session's listed summary (None:
    unchanged). The session stores keep these as columns, so a list is one
    query; the rules live here, with the folds they mirror."""

    title: str | None = None
    preview: str | None = None
    ends_blank: bool = False
    running: bool | None = None
    # "review", "approval" or "answer" while a question waits; "" once none does.
    waiting: str | None = None


def summary_change(events: Iterable[Event]) -> SummaryChange:
    events = list(events)
    previews = [m for e in events if (m := _message_text(e))]
    running, waiting = None, None
    for event in events:
        running = r if (r := running_after(event)) is not None else running
        waiting = w if (w := _waiting_after(event)) is not None else waiting
    return SummaryChange(
        title=last_title(events),
        preview=one_line(previews[-1], PREVIEW_CHARS) if previews else None,
        ends_blank=any(_kind(e) in BLANK_ENDING_KINDS for e in events),
        running=running,
        waiting=waiting,
    )


def _message_text(event: Event) -> str:
    if event.HasField("assistant_message"):
        return event.assistant_message.text
    if event.HasField("user_message") and event.user_message.source.kind != ev.SOURCE_KIND_PLUGIN:
        return event.user_message.text
    return ""


def _waiting_after(event: Event) -> str | None:
    kind = _kind(event)
    if kind == "question_asked":
        return WAITING_FOR.get(PRESENTATIONS.get(event.question_asked.presentation, ""), "answer")
    if kind in ("question_answered", "turn_end"):
        return ""
    return None


# -- plan mode ----------------------------------------------------------------------


# The event kinds fold_plan reads: any other leaves its state as it is.
PLAN_KINDS = frozenset({"plan_mode", "plan_selection"})


def fold_plan(state: PlanState, event: Event) -> PlanState:
    """The plan state after one more event (the same object when unchanged)."""
    kind = _kind(event)
    if kind == "plan_mode":
        # A commit outdates every selection made before it, whoever made it.
        new = PlanState(event.plan_mode.active)
    elif kind == "plan_selection":
        new = state.selecting(event.plan_selection.active)
    else:
        return state
    return state if new == state else new


# The event kinds fold_model_saw_plan reads.
MODEL_SAW_PLAN_KINDS = frozenset({"request_header", "user_message"})


def fold_model_saw_plan(saw: bool | None, plan: PlanState, event: Event) -> bool | None:
    """The plan state the model's view last showed: whether the last
    request/header carried the plan policy, or what a later switch notice
    told it (it reads that notice too); None before any request, when there
    is no model view to notify about."""
    kind = _kind(event)
    if kind == "request_header":
        return shows_plan_policy(event.request_header)
    if kind == "user_message" and is_plan_notice(event.user_message):
        # Recorded with the switch it tells of: the model reads the state just committed.
        return plan.active
    return saw


# The plugin whose notices tell the model of the user's plan-mode switches.
PLAN_NOTICE_PLUGIN = "plan-mode"


def is_plan_notice(message: ev.UserMessage) -> bool:
    source = message.source
    return source.kind == ev.SOURCE_KIND_PLUGIN and source.plugin == PLAN_NOTICE_PLUGIN


def shows_plan_policy(header: ev.RequestHeader) -> bool:
    return any(section.id == PLAN_POLICY_SECTION_ID for section in header.sections)


# -- the turn -----------------------------------------------------------------------


@dataclass(frozen=True)
class PendingCall:
    """A tool call of the open step that has no result yet."""

    call_id: str
    name: str
    args_json: str


@dataclass(frozen=True)
class QueuedInput:
    """A prompt taken while a turn ran, not yet recorded as a user/message."""

    input_id: str
    text: str
    # Steered inputs join the next step; the others wait for the next turn.
    steer: bool
    # Its input/queued holds the user/message to record (files attached).
    attached: bool = False


@dataclass(frozen=True)
class TurnFold:
    open: bool = False
    turn_id: str = ""
    # The number of the last step started in the open turn (-1: none yet).
    step: int = -1
    step_open: bool = False
    calls: tuple[PendingCall, ...] = ()
    inputs: tuple[QueuedInput, ...] = ()

    @property
    def queued(self) -> tuple[QueuedInput, ...]:
        return tuple(i for i in self.inputs if not i.steer)

    @property
    def steered(self) -> tuple[QueuedInput, ...]:
        return tuple(i for i in self.inputs if i.steer)


def running_after(event: Event) -> bool | None:
    """Whether a turn is open after `event`; None when it does not say."""
    return {"turn_start": True, "turn_end": False}.get(_kind(event))


# The event kinds fold_turn reads: any other leaves its state as it is.
TURN_KINDS = frozenset(
    {
        "turn_start",
        "turn_end",
        "step_start",
        "step_end",
        "tool_call",
        "tool_result",
        "input_queued",
        "user_message",
    }
)


def fold_turn(state: TurnFold, event: Event) -> TurnFold:
    kind = _kind(event)
    if kind == "turn_start":
        new = TurnFold(open=True, turn_id=event.turn_start.turn_id, inputs=state.inputs)
    elif kind == "turn_end":
        new = TurnFold(inputs=state.inputs)
    elif kind == "step_start":
        new = replace(state, step=event.step_start.step, step_open=True, calls=())
    elif kind == "step_end":
        new = replace(state, step_open=False, calls=())
    elif kind in ("tool_call", "tool_result"):
        calls = _calls_after(state.calls, event)
        if calls == state.calls:
            return state
        new = replace(state, calls=calls)
    elif kind in ("input_queued", "user_message"):
        inputs = _inputs_after(state.inputs, event)
        # A user message that ran no queued input (most of them) changes
        # nothing: no state is made only to be compared and dropped.
        if inputs == state.inputs:
            return state
        new = replace(state, inputs=inputs)
    else:
        return state
    return state if new == state else new


def _calls_after(calls: tuple[PendingCall, ...], event: Event) -> tuple[PendingCall, ...]:
    if event.HasField("tool_call"):
        call = event.tool_call
        return (*calls, PendingCall(call.call_id, call.name, call.args_json))
    return tuple(c for c in calls if c.call_id != event.tool_result.call_id)


def _inputs_after(inputs: tuple[QueuedInput, ...], event: Event) -> tuple[QueuedInput, ...]:
    if event.HasField("input_queued"):
        queued = event.input_queued
        steer = queued.mode == ev.INPUT_MODE_STEER
        attached = queued.HasField("message")
        return (*inputs, QueuedInput(queued.input_id, queued.text, steer, attached))
    # A queued input runs as the user/message whose event id is its input id.
    return tuple(i for i in inputs if i.input_id != event.id)


def status_view(state: TurnFold) -> dict[str, Any]:
    """The `status` projection value."""
    return {"running": state.open, "queued": len(state.queued)}


# -- questions ----------------------------------------------------------------------


@dataclass(frozen=True)
class Approval:
    tool: str
    summary: str
    detail: str
    # What "allow for this session" allows from then on.
    grant: str


@dataclass(frozen=True)
class Question:
    question_id: str
    presentation: str
    title: str
    body: str
    approve_label: str = ""
    turn_id: str = ""
    call_id: str = ""
    approval: Approval | None = None
    # Asked inside a subagent and shown here: the child and its question.
    child_session_id: str = ""
    child_question_id: str = ""

    @classmethod
    def from_event(cls, asked: ev.QuestionAsked) -> Question:
        approval = None
        if asked.HasField("approval"):
            a = asked.approval
            approval = Approval(a.tool, a.summary, a.detail, a.grant)
        return cls(
            asked.question_id,
            PRESENTATIONS.get(asked.presentation, "generic"),
            asked.title,
            asked.body,
            asked.approve_label,
            asked.turn_id,
            asked.call_id,
            approval,
            asked.child_session_id,
            asked.child_question_id,
        )


@dataclass(frozen=True)
class QuestionsFold:
    open: tuple[Question, ...] = ()
    # The latest answered question ids, oldest first (at most ANSWERED_KEPT).
    answered: tuple[str, ...] = ()
    # What answers "allow for this session" granted (see Approval.grant).
    grants: frozenset[str] = field(default_factory=frozenset)

    def find(self, question_id: str) -> Question | None:
        return next((q for q in self.open if q.question_id == question_id), None)


# The event kinds fold_questions reads: any other leaves its state as it is.
QUESTIONS_KINDS = frozenset(
    {"question_asked", "question_answered", "question_withdrawn", "turn_end"}
)


def fold_questions(state: QuestionsFold, event: Event) -> QuestionsFold:
    kind = _kind(event)
    if kind == "question_asked":
        return replace(state, open=(*state.open, Question.from_event(event.question_asked)))
    if kind == "question_answered":
        return _answered(state, event.question_answered)
    if kind == "question_withdrawn" and state.find(event.question_withdrawn.question_id):
        gone = event.question_withdrawn.question_id
        return replace(state, open=tuple(q for q in state.open if q.question_id != gone))
    if kind == "turn_end" and state.open:
        # A question is open only while its turn waits for it.
        return replace(state, open=())
    return state


def _answered(state: QuestionsFold, answered: ev.QuestionAnswered) -> QuestionsFold:
    question = state.find(answered.question_id)
    if question is None:
        return state  # a stray answer changes nothing: the first one won
    grants = state.grants
    grant = question.approval.grant if question.approval else ""
    if answered.answer.WhichOneof("kind") == "allow_for_session" and grant:
        grants = grants | {grant}
    return QuestionsFold(
        open=tuple(q for q in state.open if q.question_id != question.question_id),
        answered=(*state.answered, question.question_id)[-ANSWERED_KEPT:],
        grants=grants,
    )


def questions_view(state: QuestionsFold) -> list[dict[str, Any]]:
    """The `questions` projection value: the open questions, oldest first."""
    return [_question_dict(q) for q in state.open]


def _question_dict(question: Question) -> dict[str, Any]:
    view: dict[str, Any] = {
        "question_id": question.question_id,
        "presentation": question.presentation,
        "title": question.title,
        "body": question.body,
        "approve_label": question.approve_label,
        "turn_id": question.turn_id,
        "call_id": question.call_id,
    }
    if question.child_session_id:
        view["child_session_id"] = question.child_session_id
    if question.approval is not None:
        a = question.approval
        view["approval"] = {
            "tool": a.tool,
            "summary": a.summary,
            "detail": a.detail,
            "grant": a.grant,
        }
    return view


def question_from_view(view: dict[str, Any]) -> Question:
    """A `questions` projection entry as a Question (the inverse of the view)."""
    approval = view.get("approval")
    return Question(
        question_id=str(view.get("question_id", "")),
        presentation=str(view.get("presentation", "generic")),
        title=str(view.get("title", "")),
        body=str(view.get("body", "")),
        approve_label=str(view.get("approve_label", "")),
        turn_id=str(view.get("turn_id", "")),
        call_id=str(view.get("call_id", "")),
        child_session_id=str(view.get("child_session_id", "")),
        approval=None
        if not isinstance(approval, dict)
        else Approval(
            str(approval.get("tool", "")),
            str(approval.get("summary", "")),
            str(approval.get("detail", "")),
            str(approval.get("grant", "")),
        ),
    )


def asked(event: Event) -> Question | None:
    """The question an event asks (question/asked), else None."""
    return Question.from_event(event.question_asked) if _kind(event) == "question_asked" else None


def question_event(question: Question) -> ev.QuestionAsked:
    """The question/asked value recording `question` (the inverse of
    Question.from_event)."""
    asked = ev.QuestionAsked(
        question_id=question.question_id,
        presentation=_wire(PRESENTATIONS, question.presentation),
        title=question.title,
        body=question.body,
        approve_label=question.approve_label,
        turn_id=question.turn_id,
        call_id=question.call_id,
        child_session_id=question.child_session_id,
        child_question_id=question.child_question_id,
    )
    if question.approval is not None:
        a = question.approval
        asked.approval.CopyFrom(
            ev.ToolApproval(tool=a.tool, summary=a.summary, detail=a.detail, grant=a.grant)
        )
    return asked


class CallAnswers:
    """The answer each tool call's question got (call_id -> answer), as a
    renderer of the log reads them (a denied call shows as denied)."""

    def __init__(self) -> None:
        self._call_of: dict[str, str] = {}  # question_id -> call_id
        self.answers: dict[str, ev.QuestionAnswer] = {}

    def add(self, event: Event) -> None:
        kind = _kind(event)
        if kind == "question_asked" and event.question_asked.call_id:
            self._call_of[event.question_asked.question_id] = event.question_asked.call_id
        elif kind == "question_answered":
            call_id = self._call_of.get(event.question_answered.question_id)
            if call_id is not None:
                self.answers[call_id] = event.question_answered.answer

    @classmethod
    def of(cls, events: Iterable[Event]) -> CallAnswers:
        found = cls()
        for event in events:
            found.add(event)
        return found


# -- settings -------------------------------------------------------------------------


# Where a session's settings came from: nothing logged yet (the built-in
# defaults), the defaults resolved when the blank session was first loaded
# (services/agentruntime/defaults.py), or a change made in the session.
ORIGIN_BUILT_IN = "built-in"
ORIGIN_DEFAULTS = "defaults"
ORIGIN_SESSION = "session"
SETTINGS_ORIGINS = {
    ev.SETTINGS_ORIGIN_UNSPECIFIED: ORIGIN_SESSION,
    ev.SETTINGS_ORIGIN_SESSION: ORIGIN_SESSION,
    ev.SETTINGS_ORIGIN_DEFAULTS: ORIGIN_DEFAULTS,
}


@dataclass(frozen=True)
class SettingsFold:
    sandbox: str = DEFAULT_SANDBOX
    approvals: str = DEFAULT_APPROVALS
    # The configured model's name; "" is the deployment's default model.
    model: str = ""
    # Whether confined commands may reach the network (/network on).
    network: bool = False
    origin: str = ORIGIN_BUILT_IN
    # With origin "defaults": what contributed (settings files, "agenthost
    # up"), lowest first, and what was ignored on the way.
    sources: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    def values(self) -> tuple[str, str, str, bool]:
        """What the settings allow and use, whatever their origin."""
        return (self.sandbox, self.approvals, self.model, self.network)

    def changed(
        self, sandbox: str | None, approvals: str | None, model: str | None, network: bool | None
    ) -> SettingsFold | None:
        """The settings a change made in the session records (None given:
        kept), or None when it changes no value."""
        wanted = SettingsFold(
            sandbox or self.sandbox,
            approvals or self.approvals,
            self.model if model is None else model,
            self.network if network is None else network,
            ORIGIN_SESSION,
        )
        return None if wanted.values() == self.values() else wanted


# The event kinds fold_settings reads: any other leaves its state as it is.
SETTINGS_KINDS = frozenset({"session_settings"})


def fold_settings(state: SettingsFold, event: Event) -> SettingsFold:
    if _kind(event) != "session_settings":
        return state
    settings = event.session_settings
    new = SettingsFold(
        SANDBOXES.get(settings.sandbox, DEFAULT_SANDBOX),
        APPROVAL_POLICIES.get(settings.approvals, DEFAULT_APPROVALS),
        settings.model,
        settings.network,
        SETTINGS_ORIGINS.get(settings.origin, ORIGIN_SESSION),
        tuple(settings.sources),
        tuple(settings.problems),
    )
    return state if new == state else new


def settings_view(state: SettingsFold) -> dict[str, Any]:
    """The `settings` projection value: the values, and where they came from
    (`origin`: "built-in", "defaults" or "session"; with "defaults", the
    `sources` that contributed and the `problems` ignored on the way)."""
    return {
        "sandbox": state.sandbox,
        "approvals": state.approvals,
        "model": state.model,
        "network": state.network,
        "origin": state.origin,
        "sources": list(state.sources),
        "problems": list(state.problems),
    }


def settings_event(state: SettingsFold) -> ev.SessionSettings:
    """The session/settings value recording `state` (built-in values
    recorded are a change made in the session)."""
    origin = ev.SETTINGS_ORIGIN_DEFAULTS if state.origin == ORIGIN_DEFAULTS else None
    return ev.SessionSettings(
        sandbox=_wire(SANDBOXES, state.sandbox),
        approvals=_wire(APPROVAL_POLICIES, state.approvals),
        model=state.model,
        network=state.network,
        origin=origin or ev.SETTINGS_ORIGIN_SESSION,
        sources=state.sources,
        problems=state.problems,
    )


def _wire(names: Mapping[Any, str], name: str) -> Any:
    return next(value for value, known in names.items() if known == name)


# -- permission rules -------------------------------------------------------------------

SESSION_SCOPE = "session"
WORKSPACE_SCOPE = "workspace"
PERMISSION_SCOPES = {
    ev.PERMISSION_SCOPE_SESSION: SESSION_SCOPE,
    ev.PERMISSION_SCOPE_WORKSPACE: WORKSPACE_SCOPE,
}


@dataclass(frozen=True)
class PermissionRule:
    rule_id: str
    # What it covers (see gates.rule_covers): "edit", a tool, "shell:<prefix>".
    grant: str
    scope: str
    # Workspace scope: the folder whose sessions it applies to.
    workspace_path: str = ""


@dataclass(frozen=True)
class PermissionsFold:
    """The rules granted in this session's log and not revoked, oldest first."""

    rules: tuple[PermissionRule, ...] = ()

    def find(self, rule_id: str) -> PermissionRule | None:
        return next((rule for rule in self.rules if rule.rule_id == rule_id), None)

    def workspace_rules(self, path: str) -> tuple[PermissionRule, ...]:
        return tuple(
            r for r in self.rules if r.scope == WORKSPACE_SCOPE and r.workspace_path == path
        )


# The event kinds fold_permissions reads: any other leaves its state as it is.
PERMISSIONS_KINDS = frozenset({"permission_rule_added", "permission_rule_revoked"})


def fold_permissions(state: PermissionsFold, event: Event) -> PermissionsFold:
    kind = _kind(event)
    if kind == "permission_rule_added":
        added = event.permission_rule_added
        if state.find(added.rule_id) is not None:
            return state
        scope = PERMISSION_SCOPES.get(added.scope, SESSION_SCOPE)
        rule = PermissionRule(added.rule_id, added.grant, scope, added.workspace_path)
        return PermissionsFold((*state.rules, rule))
    if kind == "permission_rule_revoked" and state.find(event.permission_rule_revoked.rule_id):
        gone = event.permission_rule_revoked.rule_id
        return PermissionsFold(tuple(r for r in state.rules if r.rule_id != gone))
    return state


def permissions_view(state: PermissionsFold) -> list[dict[str, str]]:
    """The `permissions` projection value: the rules in force, oldest first."""
    return [
        {
            "rule_id": rule.rule_id,
            "grant": rule.grant,
            "scope": rule.scope,
            "workspace_path": rule.workspace_path,
        }
        for rule in state.rules
    ]


def permission_rule_event(rule: PermissionRule, question_id: str = "") -> ev.PermissionRuleAdded:
    """The permission/rule_added value recording `rule`."""
    return ev.PermissionRuleAdded(
        rule_id=rule.rule_id,
        grant=rule.grant,
        scope=_wire(PERMISSION_SCOPES, rule.scope),
        workspace_path=rule.workspace_path,
        question_id=question_id,
    )


# -- MCP servers ---------------------------------------------------------------------------

MCP_STATES = {
    ev.MCP_SERVER_STATE_CONNECTING: "connecting",
    ev.MCP_SERVER_STATE_READY: "ready",
    ev.MCP_SERVER_STATE_FAILED: "failed",
}


@dataclass(frozen=True)
class McpServerView:
    """One configured MCP server as the session's last model request saw it."""

    name: str
    state: str
    transport: str = ""
    tools: int = 0
    error: str = ""
    scope: str = ""


@dataclass(frozen=True)
class McpFold:
    servers: tuple[McpServerView, ...] = ()


# The event kinds fold_mcp reads: any other leaves its state as it is.
MCP_KINDS = frozenset({"mcp_status"})


def fold_mcp(state: McpFold, event: Event) -> McpFold:
    if _kind(event) != "mcp_status":
        return state
    new = McpFold(tuple(mcp_server_view(s) for s in event.mcp_status.servers))
    return state if new == state else new


def mcp_server_view(status: ev.McpServerStatus) -> McpServerView:
    return McpServerView(
        name=status.name,
        state=MCP_STATES.get(status.state, "connecting"),
        transport=status.transport,
        tools=status.tools,
        error=status.error,
        scope=status.scope,
    )


def mcp_status_event(servers: Iterable[McpServerView]) -> ev.McpStatus:
    """The mcp/status value recording `servers`."""
    return ev.McpStatus(
        servers=[
            ev.McpServerStatus(
                name=s.name,
                state=_wire(MCP_STATES, s.state),
                transport=s.transport,
                tools=s.tools,
                error=s.error[:4096],
                scope=s.scope,
            )
            for s in servers
        ]
    )


def mcp_view(state: McpFold) -> dict[str, Any]:
    """The `mcp` projection value: each server's state, in configuration order."""
    return {"servers": [_plain(server) for server in state.servers]}


def load_mcp(data: dict[str, Any]) -> McpFold:
    return McpFold(tuple(McpServerView(**server) for server in data["servers"]))


# -- a subagent's header --------------------------------------------------------------------


@dataclass(frozen=True)
class ChildHeader:
    """What a subagent's session (a child) is, from its subagent/header."""

    parent_session_id: str
    parent_call_id: str
    agent_type: str
    description: str
    depth: int
    # The tools it is offered (empty: all of its parent's).
    tools: tuple[str, ...] = ()
    prompt: str = ""

    @classmethod
    def from_event(cls, header: ev.SubagentHeader) -> ChildHeader:
        return cls(
            header.parent_session_id,
            header.parent_call_id,
            header.agent_type,
            header.description,
            header.depth,
            tuple(header.tools),
            header.prompt,
        )


# -- jobs and terminals -------------------------------------------------------------------

BACKGROUND, TERMINAL = "background", "terminal"
JOB_KINDS_SHOWN = {ev.JOB_KIND_BACKGROUND: BACKGROUND, ev.JOB_KIND_TERMINAL: TERMINAL}
RUNNING = "running"
JOB_ENDS_SHOWN = {
    ev.JOB_END_REASON_EXITED: "exited",
    ev.JOB_END_REASON_KILLED: "killed",
    ev.JOB_END_REASON_CLOSED: "closed",
    ev.JOB_END_REASON_LOST: "lost",
}
# Ended jobs a fold keeps (every running one is kept), and how much of a
# command line: a session that ran thousands keeps a small state.
JOBS_ENDED_KEPT = 50
JOB_COMMAND_CHARS = 200


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    # BACKGROUND or TERMINAL.
    kind: str
    command: str
    call_id: str = ""
    # RUNNING, or how it ended: "exited", "killed", "closed" or "lost".
    state: str = RUNNING
    exit_code: int | None = None
    signal: int | None = None
    message: str = ""
    output_bytes: int = 0

    @property
    def running(self) -> bool:
        return self.state == RUNNING


@dataclass(frozen=True)
class JobsFold:
    """The session's background jobs and terminals, oldest first."""

    jobs: tuple[JobRecord, ...] = ()
    # How many of each kind were ever started: the next is numbered after.
    backgrounds: int = 0
    terminals: int = 0

    def find(self, job_id: str) -> JobRecord | None:
        return next((job for job in self.jobs if job.job_id == job_id), None)

    def running(self) -> tuple[JobRecord, ...]:
        return tuple(job for job in self.jobs if job.running)


# The event kinds fold_jobs reads: any other leaves its state as it is.
JOBS_KINDS = frozenset({"job_started", "job_ended"})


def fold_jobs(state: JobsFold, event: Event) -> JobsFold:
    kind = _kind(event)
    if kind == "job_started":
        started = event.job_started
        record = JobRecord(
            started.job_id,
            JOB_KINDS_SHOWN.get(started.kind, BACKGROUND),
            one_line(started.command, JOB_COMMAND_CHARS),
            started.call_id,
        )
        terminal = record.kind == TERMINAL
        return JobsFold(
            _kept((*(j for j in state.jobs if j.job_id != record.job_id), record)),
            state.backgrounds + (not terminal),
            state.terminals + terminal,
        )
    if kind == "job_ended":
        ended = event.job_ended
        job = state.find(ended.job_id)
        if job is None or not job.running:
            return state
        over = replace(
            job,
            state=JOB_ENDS_SHOWN.get(ended.reason, "exited"),
            exit_code=ended.exit_code if ended.HasField("exit_code") else None,
            signal=ended.signal if ended.HasField("signal") else None,
            message=ended.message,
            output_bytes=ended.output_bytes,
        )
        jobs = _kept(tuple(over if j.job_id == job.job_id else j for j in state.jobs))
        return replace(state, jobs=jobs)
    return state


def _kept(jobs: tuple[JobRecord, ...]) -> tuple[JobRecord, ...]:
    """Every running job and the latest JOBS_ENDED_KEPT ended ones, in order."""
    ended = [job.job_id for job in jobs if not job.running]
    dropped = set(ended[: max(len(ended) - JOBS_ENDED_KEPT, 0)])
    return tuple(job for job in jobs if job.job_id not in dropped) if dropped else jobs


def jobs_view(state: JobsFold) -> dict[str, Any]:
    """The `jobs` projection value: each job and terminal, oldest first."""
    return {"jobs": [_plain(job) for job in state.jobs]}


def load_jobs(data: dict[str, Any]) -> JobsFold:
    return JobsFold(
        tuple(JobRecord(**job) for job in data["jobs"]),
        int(data.get("backgrounds", 0)),
        int(data.get("terminals", 0)),
    )


# -- the whole session ------------------------------------------------------------------


@dataclass(frozen=True)
class SessionState:
    plan: PlanState = field(default_factory=PlanState)
    turn: TurnFold = field(default_factory=TurnFold)
    questions: QuestionsFold = field(default_factory=QuestionsFold)
    settings: SettingsFold = field(default_factory=SettingsFold)
    title: str = ""
    # No turn started and no user message accepted yet.
    blank: bool = True
    last_seq: int = -1
    # The seq of the latest compaction event (-1: none): where the model's
    # view of the conversation starts. Only the runtime's transcript reads it;
    # every other fold reads the whole log, compacted or not.
    last_compaction_seq: int = -1
    permissions: PermissionsFold = field(default_factory=PermissionsFold)
    # The plan state the model's view last showed (fold_model_saw_plan).
    model_saw_plan: bool | None = None
    # Runs of events (first, last seq) that rewinds took out of the model's
    # view; as compaction, only the view reads them.
    hidden: tuple[tuple[int, int], ...] = ()
    # Set when the session is a subagent's (its subagent/header).
    child: ChildHeader | None = None
    # The background jobs and terminals (the runtime settles, when it loads
    # the session, those its log shows running that run nowhere now).
    jobs: JobsFold = field(default_factory=JobsFold)

    def in_view(self, seq: int) -> bool:
        """Whether the model's view may show the event at `seq` (a rewind
        has not taken it out)."""
        return not any(first <= seq <= last for first, last in self.hidden)


def fold(state: SessionState, event: Event) -> SessionState:
    """The state after one more event."""
    return fold_events(state, (event,))


def fold_events(
    state: SessionState, events: Iterable[Event], seqs: Iterable[int] | None = None
) -> SessionState:
    """The state after a batch of events, in log order: `fold` of each, with
    one SessionState made at the end rather than one per event (cold loads
    and checkpoint renewals fold hundreds at a time). `seqs`: the events'
    seqs, for events that do not carry theirs (an append's, as it was sent,
    numbered by its result)."""
    plan, turn, questions, settings = state.plan, state.turn, state.questions, state.settings
    title, blank, last_seq = state.title, state.blank, state.last_seq
    compaction, hidden, child = state.last_compaction_seq, state.hidden, state.child
    permissions, model_saw_plan, jobs = state.permissions, state.model_saw_plan, state.jobs
    folded = False
    numbered = ((e.seq, e) for e in events) if seqs is None else zip(seqs, events, strict=True)
    for seq, event in numbered:
        folded = True
        kind = _kind(event)
        # Each fold sees only the kinds it reads (the others would give its
        # state back as it is): most events concern one fold, or none.
        if kind in PLAN_KINDS:
            plan = fold_plan(plan, event)
        if kind in MODEL_SAW_PLAN_KINDS:
            model_saw_plan = fold_model_saw_plan(model_saw_plan, plan, event)
        if kind in TURN_KINDS:
            turn = fold_turn(turn, event)
        if kind in QUESTIONS_KINDS:
            questions = fold_questions(questions, event)
        if kind in SETTINGS_KINDS:
            settings = fold_settings(settings, event)
        if kind in PERMISSIONS_KINDS:
            permissions = fold_permissions(permissions, event)
        if kind in JOBS_KINDS:
            jobs = fold_jobs(jobs, event)
        title = event.session_title.title if kind == "session_title" else title
        blank = blank and kind not in BLANK_ENDING_KINDS
        last_seq = max(last_seq, seq)
        compaction = seq if kind == "compaction" else compaction
        if kind == "subagent_header":
            child = ChildHeader.from_event(event.subagent_header)
        if kind == "rewind":
            # The view now ends at the turn kept, then goes on after this event.
            hidden = (*hidden, (event.rewind.to_seq + 1, seq))
            compaction = event.rewind.view_compaction_seq
    if not folded:
        return state
    return SessionState(
        plan,
        turn,
        questions,
        settings,
        title,
        blank,
        last_seq,
        compaction,
        permissions,
        model_saw_plan,
        hidden,
        child,
        jobs,
    )


# -- checkpoints --------------------------------------------------------------------------

# The format of a dumped SessionState: bump it when a fold changes what it
# keeps, and checkpoints of the older format are refolded from the log.
STATE_VERSION = 8


def dump_state(state: object) -> bytes:
    """Any fold state as JSON (for checkpoints), as `_plain` would make it
    plain: the C encoder writes plain values, lists, tuples and dicts itself
    and asks `_plain_one` only for the rest, so the long lists of ids a
    state keeps cost no Python call apiece (through `_plain`, a session of
    25,000 turns took 10 ms a checkpoint)."""
    return json.dumps(state, sort_keys=True, default=_plain_one).encode()


def _plain_one(value: object) -> Any:
    """One level of `_plain`, for what JSON cannot write as it is."""
    if isinstance(value, frozenset):
        return sorted(value)
    if hasattr(value, "__dataclass_fields__"):
        return {name: getattr(value, name) for name in value.__dataclass_fields__}
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        return list(value)  # a state's own sequence type (TurnIds)
    raise TypeError(f"a fold state cannot hold {type(value).__name__}")


def _plain(value: object) -> Any:
    """`value` JSON-shaped all the way down (a view of a fold's values)."""
    if value is None or isinstance(value, (str, int, float)):
        return value  # first: most of a state's values are these
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return _plain(_plain_one(value))


def load_plan(data: dict[str, Any]) -> PlanState:
    return PlanState.from_view(data)


def load_turn(data: dict[str, Any]) -> TurnFold:
    return TurnFold(
        open=bool(data["open"]),
        turn_id=str(data["turn_id"]),
        step=int(data["step"]),
        step_open=bool(data["step_open"]),
        calls=tuple(PendingCall(**c) for c in data["calls"]),
        inputs=tuple(QueuedInput(**i) for i in data["inputs"]),
    )


def load_questions(data: dict[str, Any]) -> QuestionsFold:
    return QuestionsFold(
        open=tuple(_load_question(q) for q in data["open"]),
        answered=tuple(str(a) for a in data["answered"]),
        grants=frozenset(str(g) for g in data["grants"]),
    )


def _load_question(data: dict[str, Any]) -> Question:
    approval = data["approval"]
    return Question(**{**data, "approval": None if approval is None else Approval(**approval)})


def load_settings(data: dict[str, Any]) -> SettingsFold:
    # Checkpoints from before the model or network setting have none: the
    # defaults. (Those from before origins are refolded: STATE_VERSION.)
    return SettingsFold(
        sandbox=str(data["sandbox"]),
        approvals=str(data["approvals"]),
        model=str(data.get("model", "")),
        network=bool(data.get("network", False)),
        origin=str(data.get("origin", ORIGIN_BUILT_IN)),
        sources=tuple(str(source) for source in data.get("sources", ())),
        problems=tuple(str(problem) for problem in data.get("problems", ())),
    )


def load_permissions(data: dict[str, Any]) -> PermissionsFold:
    return PermissionsFold(rules=tuple(PermissionRule(**rule) for rule in data["rules"]))


def load_state(raw: bytes) -> SessionState:
    data = json.loads(raw)
    return SessionState(
        plan=load_plan(data["plan"]),
        turn=load_turn(data["turn"]),
        questions=load_questions(data["questions"]),
        settings=load_settings(data["settings"]),
        title=str(data["title"]),
        blank=bool(data["blank"]),
        last_seq=int(data["last_seq"]),
        last_compaction_seq=int(data["last_compaction_seq"]),
        permissions=load_permissions(data["permissions"]),
        model_saw_plan=_optional_bool(data["model_saw_plan"]),
        # Checkpoints from before rewinds existed have none.
        hidden=tuple((int(a), int(b)) for a, b in data.get("hidden", ())),
        child=_child(data.get("child")),
        jobs=load_jobs(data["jobs"]),
    )


def _child(data: dict[str, Any] | None) -> ChildHeader | None:
    return None if data is None else ChildHeader(**{**data, "tools": tuple(data["tools"])})


def _optional_bool(value: object) -> bool | None:
    return None if value is None else bool(value)
