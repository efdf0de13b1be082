"""The agenthost Python SDK (async): a connection to the gateway with
reconnects and fences, and live session objects.

    async with AgentHostClient("127.0.0.1:7100", token) as client:
        session = await client.open_session(session_id)
        await session.set_plan(True)
        print(session.plan.describe())
"""

from .connection import (
    AgentHostClient,
    Backoff,
    ConnectionState,
    PlanAnswer,
    WorkspaceSession,
)
from .errors import (
    AgentBusyError,
    AgentHostError,
    ClientClosedError,
    FailedPreconditionError,
    InvalidArgumentError,
    InvalidReplyError,
    NotFoundError,
    StaleRequestError,
    SupersededError,
    TransportError,
    UnauthenticatedError,
)
from .history import Gap, History
from .plan import (
    Decision,
    PlanState,
    PlanTicket,
    PlanTracker,
    PlanValue,
    PlanView,
    RequestKind,
    Verdict,
)
from .projection import ProjectionStore
from .session import (
    CommandResult,
    CommandsChanged,
    ConnectionChanged,
    EventAppended,
    HistoryLoaded,
    PlanChanged,
    PlanReply,
    ProjectionChanged,
    PromptMode,
    PromptResult,
    QuestionAsked,
    QuestionClosed,
    Session,
    StatusChanged,
    Update,
    Updates,
    assistant_texts,
    user_texts,
)

__all__ = [
    "AgentBusyError",
    "AgentHostClient",
    "AgentHostError",
    "Backoff",
    "ClientClosedError",
    "CommandResult",
    "CommandsChanged",
    "ConnectionChanged",
    "ConnectionState",
    "Decision",
    "EventAppended",
    "FailedPreconditionError",
    "Gap",
    "History",
    "HistoryLoaded",
    "InvalidArgumentError",
    "InvalidReplyError",
    "NotFoundError",
    "PlanAnswer",
    "PlanChanged",
    "PlanReply",
    "PlanState",
    "PlanTicket",
    "PlanTracker",
    "PlanValue",
    "PlanView",
    "ProjectionChanged",
    "ProjectionStore",
    "PromptMode",
    "PromptResult",
    "QuestionAsked",
    "QuestionClosed",
    "RequestKind",
    "Session",
    "StaleRequestError",
    "StatusChanged",
    "SupersededError",
    "TransportError",
    "UnauthenticatedError",
    "Update",
    "Updates",
    "Verdict",
    "WorkspaceSession",
    "assistant_texts",
    "user_texts",
]
