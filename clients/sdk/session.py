"""A live session as a client application holds it.

Opening loads the tail page and the projection block as of one log position
(history, plan, open questions, settings, running status, and the text so far
of a running step), then queries the full plan state. From then on the
connection's frames keep it current: events enter the history exactly once
(gaps are repaired from history pages), projection values keep the one with
the higher seq (one store; the plan state also moves behind the request
fences of `PlanTracker`), streamed text merges by offset. After a reconnect
the session refreshes (a small tail page and a plan query); after a `resync`
it reopens and replaces its history window.

Applications observe it through `updates()` (an async iterator of typed
updates), `wait_until(predicate)`, or by reading its attributes.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2
from agenthost.sessionlog.v1 import session_log_pb2 as sl
from google.protobuf import struct_pb2

from agenthost_core.folds import (
    APPROVAL_POLICIES,
    ORIGIN_SESSION,
    SANDBOXES,
    SETTINGS_ORIGINS,
    question_from_view,
    running_after,
)
from agenthost_core.folds import (
    Question as Question,  # re-exported: what QuestionAsked carries
)
from agenthost_core.folds import (
    committed_plan as committed_plan,  # re-exported: what a plan/mode event commits
)
from agenthost_core.folds import (
    last_title as last_title,  # re-exported: the title events set, read by the one fold
)

from .checkpoints import (
    REWIND_WHAT,
    Restored,
    Subagent,
    TurnCheckpoint,
    TurnDiff,
    checkpoints_value,
    diff_from,
    restored_from,
    subagents_value,
)
from .errors import (
    HISTORY_GAP,
    PLAN_SELECTION_FAILED,
    AgentHostError,
    HistoryGapError,
    InvalidReplyError,
    PlanSelectionFailedError,
    StaleRequestError,
    TransportError,
)
from .feed import SessionHost
from .history import History, HistoryGap
from .images import ImageLike, image_inputs
from .live import LiveText, step_key
from .models import ModelInfo, Usage, usage_value
from .plan import (
    UNAVAILABLE,
    Decision,
    PlanTicket,
    PlanTracker,
    PlanValue,
    RequestKind,
    SessionPlan,
    Verdict,
)
from .projection import JsonValue, ProjectionStore
from .references import PathEntry, PathList, Resource
from .todos import Todo, todos_value
from .validation import (
    approvals_value,
    frame_event,
    model_value,
    origin_value,
    outcome_name,
    plan_value,
    plan_value_of_view,
    sandbox_value,
    valid_events,
    wire_approvals,
    wire_sandbox,
)

log = logging.getLogger("agenthost.sdk")

Event = events_pb2.Event
# A refresh after a reconnect only needs the newest messages: the stream's
# catch-up brings the events.
REFRESH_MESSAGE_LIMIT = 1
REPAIR_MESSAGE_LIMIT = 500
# A `before_seq` past any log's end: HistoryPage then serves the newest page.
LATEST = 2**62


class PromptMode(enum.Enum):
    """How a prompt is taken: send, queue after the turn, or steer into it."""

    SEND = rt.PROMPT_MODE_SEND
    QUEUE = rt.PROMPT_MODE_QUEUE
    STEER = rt.PROMPT_MODE_STEER


class LoadMode(enum.IntEnum):
    # Merge a small tail page: running, questions, projections, plan.
    """What a (re)load does to the history window."""

    REFRESH = 1
    # Replace the history window (the first open, a resync).
    REPLACE = 2


# -- updates ------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryLoaded:
    """The history window was (re)loaded; `replaced` after a resync."""

    replaced: bool


@dataclass(frozen=True)
class EventAppended:
    """An event entered the history window."""

    event: Event


@dataclass(frozen=True)
class PlanChanged:
    """The plan view changed."""

    plan: SessionPlan


@dataclass(frozen=True)
class StatusChanged:
    """A turn started or ended."""

    running: bool


@dataclass(frozen=True)
class QuestionAsked:
    """A question opened (the plan review, a tool approval)."""

    question: Question


@dataclass(frozen=True)
class QuestionClosed:
    """A question was answered, or its turn ended."""

    question_id: str


@dataclass(frozen=True)
class ProjectionChanged:
    """A projection value changed."""

    key: str
    value: JsonValue


@dataclass(frozen=True)
class CommandsChanged:
    """The session's commands changed: list them again."""

    pass


@dataclass(frozen=True)
class ConnectionChanged:
    """The client's stream was lost or confirmed."""

    connected: bool
    generation: int


@dataclass(frozen=True)
class TextStreamed:
    """More of a running step's text (`kind` "answer" or "reasoning"):
    `delta` is what is new, `text` the step's text so far."""

    turn_id: str
    step: int
    kind: str
    delta: str
    text: str


@dataclass(frozen=True)
class OutputStreamed:
    """More of a running command's output."""

    call_id: str
    delta: str
    text: str


@dataclass(frozen=True)
class Settings:
    """The session's sandbox ("read-only", "workspace-write", "full"),
    approval policy ("ask", "ask-for-commands", "never") and model (a name
    of `list_models`; "" is the deployment's default model). Two Settings
    are equal when their values are, wherever they came from."""

    sandbox: str
    approvals: str
    model: str = ""
    # Whether confined commands may reach the network (/network on).
    network: bool = False
    # Where they came from: "built-in" (nothing recorded), "defaults" (the
    # settings files and `agenthost up` flags in `sources`, with what was
    # ignored in `problems`) or "session" (a change made in the session).
    origin: str = field(default="built-in", compare=False)
    sources: tuple[str, ...] = field(default=(), compare=False)
    problems: tuple[str, ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class SettingsChanged:
    """The sandbox, approval policy or model changed."""

    settings: Settings


@dataclass(frozen=True)
class UsageChanged:
    """A model request (or a compaction) changed the session's usage."""

    usage: Usage | None


Update = (
    HistoryLoaded
    | EventAppended
    | PlanChanged
    | StatusChanged
    | QuestionAsked
    | QuestionClosed
    | ProjectionChanged
    | CommandsChanged
    | ConnectionChanged
    | TextStreamed
    | OutputStreamed
    | SettingsChanged
    | UsageChanged
)


class Updates:
    """An async iterator over one subscriber's updates (unbounded queue)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._queue: asyncio.Queue[Update | None] = asyncio.Queue()

    def __aiter__(self) -> Updates:
        """The updates, as an async iterator."""
        return self

    async def __anext__(self) -> Update:
        """The next update (StopAsyncIteration once closed)."""
        item = await self._queue.get()
        if item is None:
            raise StopAsyncIteration
        return item

    async def next(self, within: float | None = None) -> Update:
        """The next update, waiting at most `within` seconds."""
        async with asyncio.timeout(within):
            return await self.__anext__()

    def close(self) -> None:
        """Stop receiving updates; iteration ends."""
        self._session._subscribers.discard(self)
        self._queue.put_nowait(None)

    def _push(self, update: Update | None) -> None:
        self._queue.put_nowait(update)


# -- results ------------------------------------------------------------------------


@dataclass(frozen=True)
class PlanReply:
    """One plan query or selection: what the gateway said and what the
    session's fences made of it."""

    value: PlanValue
    seq: int
    decision: Decision
    # Selections only: committed, queued, cancelled, noop.
    outcome: str | None = None


@dataclass(frozen=True)
class PromptResult:
    """How a prompt was taken, and the log seq after it."""

    mode: PromptMode
    running: bool
    seq: int


@dataclass(frozen=True)
class CommandResult:
    """A command's outcome and its user-facing message."""

    ok: bool
    message: str
    seq: int


class Session:
    """Created by `AgentHostClient.open_session`."""

    def __init__(self, client: SessionHost, session_id: str, message_limit: int) -> None:
        self._client = client
        self.id = session_id
        self.message_limit = message_limit
        self.summary: sl.SessionSummary | None = None
        self.history = History(session_id)
        self.running = False
        # The open questions (the plan review, tool approvals), oldest first.
        self.questions: dict[str, Question] = {}
        # None until the gateway said (the `settings` projection, or the
        # reply to this client's own change: the higher seq wins).
        self.settings: Settings | None = None
        self._settings_seq = -1
        # What the model requests used (the `usage` projection); None
        # before the first request.
        self.usage: Usage | None = None
        self.live = LiveText()
        self.projections = ProjectionStore()
        self.plan_tracker = PlanTracker(client.generation)
        # The last failed plan query (None after a successful one).
        self.plan_error: AgentHostError | None = None
        # The last failed (re)load.
        self.load_error: AgentHostError | None = None
        self.closed = False
        # Counters for the curious (and the tests).
        self.ignored_frames = 0
        self.dropped_loads = 0
        self.loads = 0
        self.repairs = 0
        # The seq `running` reflects: status frames follow their turn event.
        self._running_seq = -1
        self._last_event_seq = -1
        # The step running now, from its step/start (for the streamed text).
        self._step: tuple[str, int] | None = None
        self._load_wanted: LoadMode | None = None
        self._loader: asyncio.Task[None] | None = None
        self._first_load: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._plan_task: asyncio.Task[None] | None = None
        self._plan_again = False
        # Selections in flight, and whether a background query waits for them.
        self._selecting = 0
        self._plan_deferred = False
        self._repair_task: asyncio.Task[None] | None = None
        self._subscribers: set[Updates] = set()
        self._changed = asyncio.Event()

    # -- what it shows ------------------------------------------------------------------

    @property
    def permissions(self) -> list[dict[str, str]]:
        """The permission rules granted in this session's log and in force
        (the `permissions` projection): rule_id, grant, scope, workspace_path.
        `/permissions` (execute_command) lists the workspace's too."""
        view = self.projections.get("permissions")
        if not isinstance(view, list):
            return []
        return [{k: str(v) for k, v in rule.items()} for rule in view if isinstance(rule, dict)]

    @property
    def todos(self) -> list[Todo]:
        """The agent's task list (the `todos` projection); [] when it keeps none."""
        return todos_value(self.projections.get("todos"))

    @property
    def events(self) -> list[Event]:
        """The history window, contiguous, each event once, oldest first."""
        return self.history.events

    @property
    def last_seq(self) -> int:
        """The last seq of the contiguous history window."""
        return self.history.last_seq

    @property
    def plan(self) -> SessionPlan:
        """The plan view behind the fences."""
        return self.plan_tracker.view

    @property
    def cursor(self) -> int | None:
        """What the connection presents on reconnect: the last seq held."""
        return self.history.last_seq if self.history.based else None

    @property
    def loaded(self) -> bool:
        """Whether the first open succeeded."""
        first = self._first_load
        return first.done() and not first.cancelled() and first.exception() is None

    # -- observing ------------------------------------------------------------------------

    def updates(self) -> Updates:
        """Subscribe to updates from now on; `close()` the result when done."""
        subscriber = Updates(self)
        self._subscribers.add(subscriber)
        return subscriber

    async def wait_until(self, predicate: Callable[[Session], bool], within: float) -> None:
        """Wait (at most `within` seconds) until `predicate(self)` holds."""
        async with asyncio.timeout(within):
            while True:
                changed = self._changed
                if predicate(self):
                    return
                await changed.wait()

    def _notify(self, *updates: Update) -> None:
        for update in updates:
            for subscriber in list(self._subscribers):
                subscriber._push(update)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    # -- opening and reloading -----------------------------------------------------------

    async def load(self) -> None:
        """The first load: history, projections, then the full plan state."""
        self._request_load(LoadMode.REPLACE)
        await asyncio.shield(self._first_load)
        await self._plan_settled()

    async def _plan_settled(self) -> None:
        while self._plan_task is not None and not self._plan_task.done():
            await asyncio.wait([self._plan_task])

    def _request_load(self, mode: LoadMode) -> None:
        if self.closed:
            return
        wanted = self._load_wanted
        self._load_wanted = mode if wanted is None else max(wanted, mode)
        if self._loader is None or self._loader.done():
            self._loader = asyncio.create_task(self._run_loads(), name=f"load-{self.id}")

    async def _run_loads(self) -> None:
        while self._load_wanted is not None and not self.closed:
            mode, self._load_wanted = self._load_wanted, None
            try:
                done = await self._load_once(mode)
            except AgentHostError as error:
                self.load_error = error
                log.info("session %s: load failed (%s)", self.id, error)
                if not self._first_load.done():
                    self._first_load.set_exception(error)
                    return
                continue
            if not done:
                # Superseded by a reconnect: load again in the new generation.
                self.dropped_loads += 1
                wanted = self._load_wanted
                self._load_wanted = mode if wanted is None else max(wanted, mode)
                if self._client.failure is not None:
                    if not self._first_load.done():
                        self._first_load.set_exception(self._client.failure)
                    return
                continue
            self.load_error = None
            if not self._first_load.done():
                self._first_load.set_result(None)
            self._query_plan_soon()

    async def _load_once(self, mode: LoadMode) -> bool:
        """One OpenSession; False when a reconnect superseded it."""
        client = self._client
        generation = client.generation
        request = gw.OpenSessionRequest(fence=client.fence(), session_id=self.id)
        request.message_limit = (
            self.message_limit if mode is LoadMode.REPLACE else REFRESH_MESSAGE_LIMIT
        )
        try:
            reply: gw.OpenSessionResponse = await client.call(client.stub.OpenSession, request)
        except StaleRequestError:
            if client.generation != generation:
                return False
            raise
        except TransportError as error:
            # History must stay usable whatever else failed: read it on its own.
            return await self._load_history_only(mode, generation, error)
        if client.generation != generation:
            return False
        self.loads += 1
        self.summary = reply.session
        events = valid_events(list(reply.events), self.id)
        before = self.plan
        updates: list[Update] = []
        if mode is LoadMode.REPLACE:
            replaced = self.history.based
            if replaced:
                self.plan_tracker.reset()
                self.projections.clear()
                self._settings_seq = -1
                self.live.restart()
            self.history.replace(
                events, has_more=reply.has_more, before_seq=reply.before_seq, last_seq=reply.seq
            )
            updates.append(HistoryLoaded(replaced))
        else:
            updates += self._appended(self.history.ingest(events))
        updates += self._set_running(reply.running, reply.seq)
        if reply.projection_error:
            self.plan_error = TransportError(reply.projection_error)
        else:
            if "plan" not in reply.projections:
                self.plan_tracker.on_projection(UNAVAILABLE, reply.seq)
            for key, value in sorted(reply.projections.items()):
                updates += self._on_projection(key, value, reply.seq)
        for text in reply.live:
            updates += self._on_text(text)
        for output in reply.live_output:
            updates += self._on_output(output)
        if self.plan != before:
            updates.append(PlanChanged(self.plan))
        self._notify(*updates)
        self._repair_soon()
        return True

    def _apply_plan_reply(self, ticket: PlanTicket, value: gw.PlanModeValue, seq: int) -> None:
        try:
            parsed = plan_value(value)
        except InvalidReplyError as error:
            self.plan_tracker.on_failure(ticket)
            self.plan_error = error
            return
        self.plan_tracker.on_reply(ticket, parsed, seq)

    async def _load_history_only(
        self, mode: LoadMode, generation: int, cause: AgentHostError
    ) -> bool:
        client = self._client
        try:
            page: gw.HistoryPageResponse = await client.call(
                client.stub.HistoryPage,
                gw.HistoryPageRequest(
                    session_id=self.id, before_seq=LATEST, message_limit=self.message_limit
                ),
            )
        except AgentHostError:
            raise cause from None
        if client.generation != generation:
            return False
        self.loads += 1
        events = valid_events(list(page.events), self.id)
        updates: list[Update] = []
        if mode is LoadMode.REPLACE:
            replaced = self.history.based
            self.history.replace(
                events, has_more=page.has_more, before_seq=page.before_seq, last_seq=page.seq
            )
            updates.append(HistoryLoaded(replaced))
        else:
            updates += self._appended(self.history.ingest(events))
        self.plan_error = cause
        self._notify(*updates)
        self._repair_soon()
        return True

    # -- connection events -----------------------------------------------------------------

    def on_generation(self, generation: int) -> None:
        """A reconnect attempt begins: requests begun before are superseded."""
        self.plan_tracker.reconnected(generation)

    def on_connected(self, generation: int) -> None:
        """The gateway confirmed the stream: reload what may have been missed."""
        self.plan_tracker.reconnected(generation)
        self._notify(ConnectionChanged(True, generation))
        if self.history.based:
            self._request_load(LoadMode.REFRESH)

    def on_disconnected(self) -> None:
        """The stream broke; the connection is reconnecting."""
        self._notify(ConnectionChanged(False, self._client.generation))

    def on_frame(self, frame: gw.ConnectResponse) -> None:
        """A frame of the stream about this session."""
        if self.closed:
            return
        kind = frame.WhichOneof("frame")
        if kind == "session_event":
            event = frame_event(frame.session_event, self.id)
            if event is None:
                self.ignored_frames += 1
                self._notify()
                return
            self._last_event_seq = max(self._last_event_seq, event.seq)
            self._ingest([event])
        elif kind == "session_status":
            # It follows the turn event it reflects: the newest event seen.
            self._notify(*self._set_running(frame.session_status.running, self._last_event_seq))
        elif kind == "session_projection":
            change = frame.session_projection
            before = self.plan
            updates = self._on_projection(change.key, change.value, change.seq)
            if self.plan != before:
                updates.append(PlanChanged(self.plan))
            self._notify(*updates)
        elif kind == "assistant_delta":
            self._notify(*self._on_text(frame.assistant_delta))
        elif kind == "tool_output":
            self._notify(*self._on_output(frame.tool_output))
        elif kind == "resync":
            self._request_load(LoadMode.REPLACE)
        elif kind == "commands_changed":
            self._notify(CommandsChanged())

    def _set_running(self, running: bool, seq: int) -> list[Update]:
        if seq < self._running_seq:
            return []
        self._running_seq = seq
        if running == self.running:
            return []
        self.running = running
        return [StatusChanged(running)]

    def _on_projection(self, key: str, value: struct_pb2.Value, seq: int) -> list[Update]:
        """One projection value; the higher seq wins, then what it means."""
        if not self.projections.update(key, value, seq):
            return []
        view = self.projections.get(key)
        updates: list[Update] = [ProjectionChanged(key, view)]
        try:
            if key == "plan":
                self.plan_tracker.on_projection(plan_value_of_view(view), seq)
            elif key == "questions":
                updates += self._questions_now(view)
            elif key == "settings":
                network = bool(view.get("network", False)) if isinstance(view, dict) else False
                updates += self._settings_at(
                    Settings(
                        sandbox_value(view),
                        approvals_value(view),
                        model_value(view),
                        network,
                        *origin_value(view),
                    ),
                    seq,
                )
            elif key == "usage":
                self.usage = usage_value(view)
                updates.append(UsageChanged(self.usage))
            elif key == "status":
                updates += self._set_running(bool(view.get("running")), seq)
        except (InvalidReplyError, AttributeError, TypeError) as error:
            log.info("session %s: malformed %s projection ignored (%s)", self.id, key, error)
            self.ignored_frames += 1
        return updates

    def _settings_at(self, settings: Settings, seq: int) -> list[Update]:
        """The settings as of `seq` (a projection value, or the reply to a
        change): an older one than held is dropped."""
        if seq < self._settings_seq:
            return []
        self._settings_seq = seq
        changed = settings != self.settings
        # Kept even when only where they came from changed (not compared).
        self.settings = settings
        return [SettingsChanged(settings)] if changed else []

    def _questions_now(self, view: JsonValue) -> list[Update]:
        if not isinstance(view, list):
            raise TypeError("questions is a list")
        now = {q.question_id: q for q in (question_from_view(item) for item in view)}
        updates: list[Update] = [QuestionClosed(qid) for qid in self.questions if qid not in now]
        updates += [QuestionAsked(q) for qid, q in now.items() if qid not in self.questions]
        self.questions = now
        return updates

    def _on_text(self, delta: rt.AssistantDelta) -> list[Update]:
        fresh = self.live.add_text(delta)
        if not fresh:
            return []
        key = step_key(delta)
        text = self.live.text_of(key.turn_id, key.step, key.kind)
        return [TextStreamed(key.turn_id, key.step, key.kind, fresh, text)]

    def _on_output(self, delta: rt.ToolOutputDelta) -> list[Update]:
        fresh = self.live.add_output(delta)
        if not fresh:
            return []
        return [OutputStreamed(delta.call_id, fresh, self.live.outputs[delta.call_id])]

    # -- events -------------------------------------------------------------------------------

    def _ingest(self, events: list[Event]) -> None:
        updates = self._appended(self.history.ingest(events))
        if updates:
            self._notify(*updates)
        self._repair_soon()

    def _appended(self, events: Iterable[Event]) -> list[Update]:
        updates: list[Update] = []
        for event in events:
            self._follow_streams(event)
            updates.append(EventAppended(event))
            running = running_after(event)
            if running is not None:
                updates += self._set_running(running, event.seq)
        return updates

    def _follow_streams(self, event: Event) -> None:
        """The logged record ends the streamed text it completes."""
        kind = event.WhichOneof("body")
        if kind == "step_start":
            self._step = (event.step_start.turn_id, event.step_start.step)
        elif kind == "assistant_message" and self._step is not None:
            self.live.end_step(*self._step)
        elif kind == "tool_result":
            self.live.end_output(event.tool_result.call_id)
        elif kind == "turn_end":
            self._step = None
            self.live.end_turn(event.turn_end.turn_id)

    def _repair_soon(self) -> None:
        if self.closed or self.history.missing() is None:
            return
        if self._repair_task is None or self._repair_task.done():
            self._repair_task = asyncio.create_task(self._repair(), name=f"repair-{self.id}")

    async def _repair(self) -> None:
        """Fetch the events missing before ones that arrived beyond a gap."""
        client = self._client
        while (gap := self.history.missing()) is not None and not self.closed:
            pages: list[list[Event]] = []
            before_seq = gap.before
            try:
                while True:
                    page: gw.HistoryPageResponse = await client.call(
                        client.stub.HistoryPage,
                        gw.HistoryPageRequest(
                            session_id=self.id,
                            before_seq=before_seq,
                            message_limit=REPAIR_MESSAGE_LIMIT,
                        ),
                    )
                    pages.append(valid_events(list(page.events), self.id))
                    if not page.events or page.events[0].seq <= gap.after + 1 or not page.has_more:
                        break
                    before_seq = page.before_seq
            except AgentHostError as error:
                log.info("session %s: gap repair failed (%s)", self.id, error)
                return
            self.repairs += 1
            self._ingest([event for events in reversed(pages) for event in events])
            if self.history.missing() == gap:
                return  # the log does not have them (yet): the next event retries

    # -- plan mode ----------------------------------------------------------------------------

    def _query_plan_soon(self) -> None:
        """A background query (after a load, a plan projection frame, …).
        Coalesced, and deferred while a selection is in flight: begun after
        it, the query would be the newer request, and a reply read before the
        selection took effect would shadow the selection's own reply."""
        if self.closed:
            return
        if self._selecting:
            self._plan_deferred = True
            return
        if self._plan_task is not None and not self._plan_task.done():
            self._plan_again = True
            return
        self._plan_task = asyncio.create_task(self._plan_loop(), name=f"plan-{self.id}")

    async def _plan_loop(self) -> None:
        while not self.closed:
            if self._selecting:
                self._plan_deferred = True
                return
            self._plan_again = False
            with contextlib.suppress(AgentHostError):  # recorded in plan_error
                await self.refresh_plan()
            if not self._plan_again:
                return

    async def refresh_plan(self, *, deadline: float | None = None) -> PlanReply:
        """Query the full plan state. A failure raises and leaves the state
        (and the history) as it was; `plan_error` records it."""
        client = self._client
        ticket = self.plan_tracker.begin(RequestKind.QUERY, client.generation)
        try:
            reply: gw.PlanModeResponse = await client.call(
                client.stub.PlanMode, client.plan_read(self.id), deadline=deadline
            )
            value = plan_value(reply.plan)
        except AgentHostError as error:
            if self.plan_tracker.on_failure(ticket).verdict is Verdict.FAILED:
                self.plan_error = error
            self._notify()
            raise
        return self._plan_reply(ticket, value, reply.seq, None)

    async def set_plan(self, active: bool, *, deadline: float | None = None) -> PlanReply:
        """Select plan mode on or off: committed now when idle, pending until
        the next model request while a turn runs. A failure (STALE, transport,
        business error) raises and leaves the state as it was."""
        client = self._client
        ticket = self.plan_tracker.begin(RequestKind.SELECT, client.generation)
        self._selecting += 1
        try:
            reply: gw.SetPlanModeResponse = await client.call(
                client.stub.SetPlanMode,
                gw.SetPlanModeRequest(fence=client.fence(), session_id=self.id, active=active),
                deadline=deadline,
            )
            client.plan_written(self.id, reply.seq)
            value = plan_value(reply.plan)
        except AgentHostError as error:
            self.plan_tracker.on_failure(ticket)
            self.plan_error = error
            self._notify()
            raise
        finally:
            self._selecting -= 1
            if not self._selecting and self._plan_deferred:
                self._plan_deferred = False
                self._query_plan_soon()
        return self._plan_reply(ticket, value, reply.seq, outcome_name(reply.outcome))

    def _plan_reply(
        self, ticket: PlanTicket, value: PlanValue, seq: int, outcome: str | None
    ) -> PlanReply:
        before = self.plan
        decision = self.plan_tracker.on_reply(ticket, value, seq)
        if decision.verdict not in (Verdict.SUPERSEDED, Verdict.OLDER_REQUEST):
            self.plan_error = None
        self._notify(*([PlanChanged(self.plan)] if self.plan != before else []))
        return PlanReply(value, seq, decision, outcome)

    # -- turns, commands, questions ---------------------------------------------------------

    async def prompt(
        self,
        text: str,
        mode: PromptMode = PromptMode.SEND,
        *,
        plan_target: bool | None = None,
        resources: Sequence[Resource] = (),
        images: Sequence[ImageLike] = (),
    ) -> PromptResult:
        """Send (AGENT_BUSY while a turn runs), queue or steer a user message;
        with `plan_target`, plan mode is set to it first (rolled back by the
        gateway when the send is rejected). A prompt that targets plan mode
        while the latest plan selection failed is refused here, unsent
        (PlanSelectionFailedError): select again first. Each `@path` of the
        text, and each of `resources`, is attached to the message; one the
        agent may not read refuses it (InvalidArgumentError, reason
        FILE_REFERENCE_REFUSED). `images` (bytes, a file's path, an Image)
        are sent with it (images.py: IMAGE_REFUSED for what is no image,
        MODEL_TAKES_NO_IMAGES when the session's model takes none)."""
        failed = self.plan_tracker.selection_failed
        if plan_target is not None and failed is not None:
            raise PlanSelectionFailedError(
                f"the last plan selection (request {failed.number}) failed; select again",
                reason=PLAN_SELECTION_FAILED,
            )
        client = self._client
        request = gw.PromptRequest(
            fence=client.fence(),
            session_id=self.id,
            text=text,
            resources=[resource.to_proto() for resource in resources],
            images=image_inputs(images),
        )
        request.mode = mode.value
        if plan_target is not None:
            request.plan_target = plan_target
        reply: gw.PromptResponse = await client.call(client.stub.Prompt, request)
        # Accepted means the user message is in the log: the session is no blank.
        client.session_list.engaged(self.id)
        self._notify(*self._set_running(reply.running, reply.seq))
        if plan_target is not None:
            self._query_plan_soon()
        return PromptResult(PromptMode(reply.mode), reply.running, reply.seq)

    async def cancel(self) -> bool:
        """Stop the running request; a pending plan selection is kept."""
        client = self._client
        reply: gw.CancelResponse = await client.call(
            client.stub.Cancel, gw.CancelRequest(fence=client.fence(), session_id=self.id)
        )
        return reply.cancelled

    async def execute_command(self, name: str, args: str | None = None) -> CommandResult:
        """Run a slash command (`plan` with "", "<message>" or "off"). After
        `/plan` the plan state is queried before this returns."""
        client = self._client
        request = gw.ExecuteCommandRequest(fence=client.fence(), session_id=self.id, name=name)
        if args is not None:
            request.args = args
        reply: gw.ExecuteCommandResponse = await client.call(client.stub.ExecuteCommand, request)
        if name == "plan":
            with contextlib.suppress(AgentHostError):  # recorded in plan_error
                await self.refresh_plan()
        return CommandResult(reply.ok, reply.message, reply.seq)

    async def read_image(self, digest: str) -> tuple[str, bytes]:
        """An image a message of this session sent (its digest, as the
        user/message's ImageRef holds it): its media type and bytes."""
        client = self._client
        request = gw.ReadImageRequest(session_id=self.id, digest=digest)
        reply: gw.ReadImageResponse = await client.call(client.stub.ReadImage, request)
        return reply.image.media_type, reply.data

    # -- the way back: checkpoints, undo, redo, rewind -----------------------------------

    @property
    def checkpoints(self) -> list[TurnCheckpoint]:
        """The conversation's turns that changed files, oldest first, each
        with its files and whether it was undone (the `checkpoints`
        projection); turns that changed nothing are left out."""
        return checkpoints_value(self.projections.get("checkpoints"))

    async def undo(
        self, turn: int | None = None, *, force: bool = False, check: bool = False
    ) -> Restored:
        """Put back the files the last turn (or turn `turn`) changed. A file
        changed since by someone else is left alone (`skipped`) unless
        `force`; `check` only says what would happen."""
        return await self._restore("undo", [] if turn is None else [str(turn)], force, check)

    async def redo(
        self, turn: int | None = None, *, force: bool = False, check: bool = False
    ) -> Restored:
        """Apply the last undone turn's (or turn `turn`'s) changes again."""
        return await self._restore("redo", [] if turn is None else [str(turn)], force, check)

    async def rewind(
        self, turn: int, what: str = "both", *, force: bool = False, check: bool = False
    ) -> Restored:
        """Go back to the end of turn `turn` (0: before the first): its
        "files", the "conversation" (the model's view drops every later turn;
        the log keeps them), or "both"."""
        if what not in REWIND_WHAT:
            raise ValueError(f"what is one of {', '.join(REWIND_WHAT)}")
        return await self._restore("rewind", [str(turn), what], force, check)

    async def _restore(self, name: str, words: list[str], force: bool, check: bool) -> Restored:
        words += ["--force"] if force else []
        words += ["--check"] if check else []
        reply = await self.execute_command(name, " ".join(words))
        return restored_from(reply.ok, reply.message, reply.seq, check)

    async def turn_diff(self, turn: int | None = None) -> TurnDiff:
        """The unified diff of the last turn's (or turn `turn`'s) changes,
        cut at the service's bound with a note."""
        reply = await self.execute_command("diff", None if turn is None else str(turn))
        return diff_from(reply.ok, reply.message)

    @property
    def subagents(self) -> list[Subagent]:
        """The subagents this session's `task` calls started, oldest first
        (the `subagents` projection): type, description, running, usage.
        `AgentHostClient.open_session(child.session_id)` opens one's
        transcript."""
        return subagents_value(self.projections.get("subagents"))

    async def list_paths(self, prefix: str = "", limit: int = 0) -> PathList:
        """The paths of the session's folder that start with `prefix` (what
        follows an `@`), as the agent's file tools see the folder."""
        client = self._client
        request = gw.ListPathsRequest(session_id=self.id, prefix=prefix, limit=limit)
        reply: gw.ListPathsResponse = await client.call(client.stub.ListPaths, request)
        entries = [PathEntry(entry.path, entry.folder) for entry in reply.entries]
        return PathList(entries, reply.truncated)

    async def list_commands(self) -> list[rt.CommandInfo]:
        """The slash commands this session offers (e.g. /plan)."""
        return await self._client.list_commands(self.id)

    async def answer_question(
        self,
        question_id: str,
        *,
        approve: bool = False,
        feedback: str | None = None,
        dismiss: bool = False,
        allow_once: bool = False,
        allow_for_session: bool = False,
        always_allow_session: bool = False,
        always_allow_workspace: bool = False,
        deny: str | None = None,
    ) -> int:
        """Answer an open question with exactly one of: a plan review's
        approve, keep planning with `feedback`, or dismiss; a tool approval's
        allow_once, allow_for_session, always_allow_session /
        always_allow_workspace (run it, and record a permission rule that
        skips the question for calls like it in this session / every session
        of this folder), or `deny` (a reason, may be "").
        The first answer wins (QUESTION_ANSWERED after). Returns its seq."""
        kinds = {
            "approve": approve,
            "feedback": feedback,
            "dismiss": dismiss,
            "allow_once": allow_once,
            "allow_for_session": allow_for_session,
            "always_allow_session": always_allow_session,
            "always_allow_workspace": always_allow_workspace,
            "deny": deny,
        }
        given = {kind: value for kind, value in kinds.items() if value not in (False, None)}
        if len(given) != 1:
            raise ValueError("give exactly one answer")
        answer = events_pb2.QuestionAnswer()
        [(kind, value)] = given.items()
        setattr(answer, kind, value)
        client = self._client
        reply: gw.AnswerQuestionResponse = await client.call(
            client.stub.AnswerQuestion,
            gw.AnswerQuestionRequest(
                fence=client.fence(), session_id=self.id, question_id=question_id, answer=answer
            ),
        )
        return reply.seq

    async def set_settings(
        self,
        *,
        sandbox: str | None = None,
        approvals: str | None = None,
        model: str | None = None,
        network: bool | None = None,
    ) -> Settings:
        """Change the sandbox ("read-only", "workspace-write", "full"), the
        approval policy ("ask", "ask-for-commands", "never"), the model (a
        name of `list_models`, "" for the default; an unknown one is
        InvalidArgumentError UNKNOWN_MODEL and changes nothing) and/or whether
        confined commands reach the network; recorded in the session's log,
        effective for the next tool call or model request. `settings` shows
        them at once (SettingsChanged), unless a newer change came first."""
        client = self._client
        request = gw.UpdateSessionSettingsRequest(fence=client.fence(), session_id=self.id)
        if sandbox is not None:
            request.sandbox = wire_sandbox(sandbox)
        if approvals is not None:
            request.approvals = wire_approvals(approvals)
        if model is not None:
            request.model = model
        if network is not None:
            request.network = network
        reply: gw.UpdateSessionSettingsResponse = await client.call(
            client.stub.UpdateSessionSettings, request
        )
        recorded = reply.settings
        settings = Settings(
            SANDBOXES[recorded.sandbox],
            APPROVAL_POLICIES[recorded.approvals],
            recorded.model,
            recorded.network,
            SETTINGS_ORIGINS.get(recorded.origin, ORIGIN_SESSION),
            tuple(recorded.sources),
            tuple(recorded.problems),
        )
        self._notify(*self._settings_at(settings, reply.seq))
        return settings

    async def set_model(self, name: str) -> Settings:
        """Switch the session's model (see `set_settings`)."""
        return await self.set_settings(model=name)

    async def list_models(self) -> list[ModelInfo]:
        """The models this session can switch to, the default marked."""
        return await self._client.list_models(self.id)

    async def load_older(self, message_limit: int | None = None) -> list[Event]:
        """The page before the window; returns the events added to it. A page
        that does not end right before the window is refused (HistoryGapError)
        and the history stays as it was, still able to load."""
        if not self.history.has_more:
            return []
        client = self._client
        page: gw.HistoryPageResponse = await client.call(
            client.stub.HistoryPage,
            gw.HistoryPageRequest(
                session_id=self.id,
                before_seq=self.history.before_seq,
                message_limit=message_limit or self.message_limit,
            ),
        )
        try:
            added = self.history.prepend(
                valid_events(list(page.events), self.id),
                has_more=page.has_more,
                before_seq=page.before_seq,
            )
        except HistoryGap as gap:
            raise HistoryGapError(str(gap), reason=HISTORY_GAP) from None
        self._notify()
        return added

    async def close(self) -> None:
        """Stop following the session (the client keeps running)."""
        if self.closed:
            return
        self.closed = True
        self._client.closed(self)
        tasks = [t for t in (self._loader, self._plan_task, self._repair_task) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if not self._first_load.done():
            self._first_load.cancel()
        for subscriber in list(self._subscribers):
            subscriber.close()

    async def __aenter__(self) -> Session:
        """`async with session:` closes it at the end."""
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Close the session."""
        await self.close()

    def __repr__(self) -> str:
        return f"Session({self.id!r}, last_seq={self.last_seq}, plan={self.plan.describe()!r})"


def user_texts(events: Iterable[Event]) -> list[str]:
    """The texts of the user messages among `events`."""
    return [e.user_message.text for e in events if e.HasField("user_message")]


def assistant_texts(events: Iterable[Event]) -> list[str]:
    """The texts of the assistant messages among `events`."""
    return [e.assistant_message.text for e in events if e.HasField("assistant_message")]
