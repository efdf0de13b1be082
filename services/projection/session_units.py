"""The projection units every deployment folds: open questions, the
sandbox, approval, model and network settings, the turn status, the model
usage, the permission rules and the MCP servers. Each is a fold of
agenthost_core/folds.py wrapped as a unit, so the views clients see are
computed by the same code the runtime acts on."""

from __future__ import annotations

from typing import Any

from agenthost_core import folds
from services.agentruntime.capabilities import projection_units
from services.sessionlog import usage

from .unit import FoldUnit, ProjectionUnit

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
SESSION_UNITS: tuple[ProjectionUnit[Any], ...] = (
    QUESTIONS_UNIT,
    SETTINGS_UNIT,
    STATUS_UNIT,
    USAGE_UNIT,
    PERMISSIONS_UNIT,
    MCP_UNIT,
    # The runtime's capabilities' views (the files in context, the task list, ...).
    *projection_units(),
)
