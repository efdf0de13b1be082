"""A session's subagents, folded from its whole log (subagent/started and
subagent/ended): the `subagents` projection clients show (the web client
opens a child's transcript from it) and ListSessions lists under a parent."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from agenthost.sessionlog.v1 import events_pb2 as ev

from services.projection.unit import FoldUnit


@dataclass(frozen=True)
class ChildView:
    session_id: str
    agent_type: str
    description: str
    # The task call that started it last (a follow-up is another call).
    call_id: str
    running: bool = True
    # What its turns used, as each ended (a model/usage naming it).
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None


@dataclass(frozen=True)
class SubagentsFold:
    children: tuple[ChildView, ...] = ()


CHILDREN_KINDS = frozenset({"subagent_started", "subagent_ended", "model_usage"})


def fold_children(state: SubagentsFold, event: ev.Event) -> SubagentsFold:
    kind = event.WhichOneof("body")
    if kind == "subagent_started":
        started = event.subagent_started
        known = next((c for c in state.children if c.session_id == started.child_session_id), None)
        if known is None:
            child = ChildView(
                started.child_session_id,
                started.agent_type,
                started.description,
                started.call_id,
            )
            return SubagentsFold((*state.children, child))
        updated = replace(known, call_id=started.call_id, running=True)
        return SubagentsFold(tuple(updated if c is known else c for c in state.children))
    if kind == "subagent_ended":
        ended = event.subagent_ended.child_session_id
        children = tuple(
            replace(c, running=False) if c.session_id == ended else c for c in state.children
        )
        new = SubagentsFold(children)
        return state if new == state else new
    if kind == "model_usage" and event.model_usage.child_session_id:
        used = event.model_usage
        return SubagentsFold(
            tuple(
                replace(
                    c,
                    requests=c.requests + used.requests,
                    prompt_tokens=c.prompt_tokens + used.prompt_tokens,
                    completion_tokens=c.completion_tokens + used.completion_tokens,
                    cost=(c.cost or 0.0) + used.cost if used.HasField("cost") else c.cost,
                )
                if c.session_id == used.child_session_id
                else c
                for c in state.children
            )
        )
    return state


def children_view(state: SubagentsFold) -> dict[str, Any]:
    """The `subagents` projection value: the session's children, oldest first."""
    return {
        "children": [
            {
                "session_id": c.session_id,
                "agent_type": c.agent_type,
                "description": c.description,
                "call_id": c.call_id,
                "running": c.running,
                "requests": c.requests,
                "prompt_tokens": c.prompt_tokens,
                "completion_tokens": c.completion_tokens,
                "cost": c.cost,
            }
            for c in state.children
        ]
    }


def load_children(data: dict[str, Any]) -> SubagentsFold:
    return SubagentsFold(tuple(ChildView(**c) for c in data["children"]))


def child_ids(view: object) -> list[str]:
    """The children's session ids a `subagents` projection value lists."""
    children = view.get("children") if isinstance(view, dict) else None
    if not isinstance(children, list):
        return []
    return [str(c["session_id"]) for c in children if isinstance(c, dict) and "session_id" in c]


SUBAGENTS_UNIT = FoldUnit(
    "subagents", 2, SubagentsFold, fold_children, children_view, load_children, CHILDREN_KINDS
)
