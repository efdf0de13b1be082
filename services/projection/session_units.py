"""The projection units every deployment folds: open questions, the
sandbox, approval, model and network settings, the turn status, the model
usage, the permission rules and the MCP servers. Each is a fold of
agenthost_core/folds.py wrapped as a unit, so the views clients see are
computed by the same code the runtime acts on."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from agenthost.sessionlog.v1 import events_pb2

from agenthost_core import folds
from services.sessionlog import usage

from .unit import View

S = TypeVar("S")


@dataclass(frozen=True)
class FoldUnit(Generic[S]):
    """A projection unit made of one fold of the session log."""

    key: str
    state_version: int
    initial: Callable[[], S]
    fold: Callable[[S, events_pb2.Event], S]
    show: Callable[[S], View]
    restore: Callable[[dict[str, Any]], S]
    # The event kinds `fold` reads (None: any): the fold's own constant.
    kinds: frozenset[str] | None = None

    def init(self) -> S:
        return self.initial()

    def apply(self, state: S, event: events_pb2.Event) -> S:
        return self.fold(state, event)

    def view(self, state: S) -> View:
        return self.show(state)

    def dump(self, state: S) -> bytes:
        return folds.dump_state(state)

    def load(self, data: bytes) -> S:
        return self.restore(json.loads(data))


QUESTIONS_UNIT = FoldUnit(
    "questions",
    1,
    folds.QuestionsFold,
    folds.fold_questions,
    folds.questions_view,
    folds.load_questions,
    folds.QUESTIONS_KINDS,
)
SETTINGS_UNIT = FoldUnit(
    "settings",
    4,
    folds.SettingsFold,
    folds.fold_settings,
    folds.settings_view,
    folds.load_settings,
    folds.SETTINGS_KINDS,
)
STATUS_UNIT = FoldUnit(
    "status",
    1,
    folds.TurnFold,
    folds.fold_turn,
    folds.status_view,
    folds.load_turn,
    folds.TURN_KINDS,
)
USAGE_UNIT = FoldUnit(
    "usage",
    1,
    usage.UsageFold,
    usage.fold_usage,
    usage.usage_view,
    usage.load_usage,
    usage.USAGE_KINDS,
)
# The rules granted in the session's log and in force (its workspace-scoped
# ones apply to the workspace's other sessions too, see the runtime).
PERMISSIONS_UNIT = FoldUnit(
    "permissions",
    1,
    folds.PermissionsFold,
    folds.fold_permissions,
    folds.permissions_view,
    folds.load_permissions,
    folds.PERMISSIONS_KINDS,
)
MCP_UNIT = FoldUnit(
    "mcp",
    1,
    folds.McpFold,
    folds.fold_mcp,
    folds.mcp_view,
    folds.load_mcp,
    folds.MCP_KINDS,
)
SESSION_UNITS = (
    QUESTIONS_UNIT,
    SETTINGS_UNIT,
    STATUS_UNIT,
    USAGE_UNIT,
    PERMISSIONS_UNIT,
    MCP_UNIT,
)
