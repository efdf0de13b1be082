"""What the chat prints of a session, each thing once.

The answer streams as the model writes it (rendered block by block, see
live_markdown); a spinner shows only while the model is being waited for
(never after the final answer) or a quiet command runs; a command's line
shows once (in its approval, or above its output, or as the one line
`· $ cmd (exit 1)` of a command that printed nothing), its output folded
to its first lines (`… 52 more lines (/output shows all)`); a file
change's diff shows once (in its approval, or with its result); a plan
change is one line; a cancelled answer is not printed again when it is
logged.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace

from agenthost.sessionlog.v1 import events_pb2 as ev
from rich.console import Console, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.rule import Rule
from rich.spinner import Spinner
from rich.text import Text

from agenthost_core.folds import CallAnswers
from clients.sdk import (
    ConnectionChanged,
    EventAppended,
    HistoryLoaded,
    OutputStreamed,
    PlanChanged,
    ProjectionChanged,
    Question,
    Session,
    Settings,
    SettingsChanged,
    StatusChanged,
    TextStreamed,
    Update,
    UsageChanged,
    todos_written,
)
from clients.sdk.plan import SessionPlan

from . import history, render, undo
from .live_markdown import AnswerStream
from .todos import checklist

PLAN_STYLE = history.PLAN_STYLE
THINKING = "thinking…"


def plan_line(view: SessionPlan) -> str:
    return f"plan: {view.describe()}"


def settings_line(settings: Settings, default_model: str = "") -> str:
    model = settings.model or default_model
    shown = f", model: {model}" if model else ""
    network = "on" if settings.network else "off"
    return (
        f"sandbox: {settings.sandbox}, approvals: {settings.approvals}{shown}, network: {network}"
    )


def question_body(question: Question) -> RenderableType | None:
    """A plan as markdown; a file change's diff coloured (three lines of
    context); a command not at all (the title names it); anything else as it is."""
    body = question.body
    if question.presentation == "plan-review":
        return Markdown(body)
    if body.startswith("--- "):
        return render.diff_text(body)
    if question.approval is not None and body.strip() in question.approval.summary:
        return None
    return Text(body) if body else None


@dataclass
class CallView:
    """A call of the running turn, as shown so far."""

    call: ev.ToolCall
    # Its command is on screen: a line of its own above its output, or its approval.
    headed: bool = False
    diff_shown: bool = False
    output: render.FoldedOutput = field(default_factory=render.FoldedOutput)


class Transcript:
    def __init__(self, session: Session, console: Console) -> None:
        self.session = session
        self.console = console
        # The name the toolbar and the settings line show when the session
        # chose no model (ListModels' default).
        self.default_model = ""
        # Messages typed here, not printed again when the log shows them.
        self.typed: deque[str] = deque(maxlen=32)
        # Calls whose question's answer here said how they ended (a denial,
        # a plan review's answer): their result adds no line.
        self.said_here: set[str] = set()
        # The result whose output was folded last (/output shows it).
        self.folded: tuple[ev.ToolCall, ev.ToolResult] | None = None
        self._streaming: tuple[str, ...] | None = None
        self._streamed_steps: set[tuple[str, int]] = set()
        # Answers a line interrupted: their rest continues without a new prefix.
        self._interrupted: set[tuple[str, ...]] = set()
        self._step: tuple[str, int] | None = None
        self._at_line_start = True
        self._answer_stream: AnswerStream | None = None
        self._spinner: Live | None = None
        self._spinner_label = ""
        self._waiting_for_model = False
        self._calls: dict[str, CallView] = {}
        self._answers = CallAnswers()  # each call's question's answer
        self._plan_shown: str | None = None
        self._lost = False
        # The subagents seen starting: child session id -> description.
        self._children: dict[str, str] = {}

    # -- output ---------------------------------------------------------------------------

    def say(self, text: str | Text, style: str = "") -> None:
        """One line of output, on a line of its own."""
        self.print(text if isinstance(text, Text) else Text(text, style=style))

    def print(self, renderable: RenderableType) -> None:
        self._end_stream()
        self.console.print(renderable, soft_wrap=isinstance(renderable, Text))

    def settle(self) -> None:
        """End what streams and the spinner: a prompt is coming."""
        self._end_stream()

    def say_plan(self, view: SessionPlan) -> None:
        """The plan state's line, once per change (a /plan's reply and the
        plan update it causes are one change)."""
        line = plan_line(view)
        if line != self._plan_shown:
            self._plan_shown = line
            self.say(line, PLAN_STYLE)

    def _write(self, piece: str, style: str = "") -> None:
        self.stop_spinner()
        self.console.print(Text(piece, style=style), end="", soft_wrap=True)
        self.console.file.flush()
        self._at_line_start = piece.endswith("\n")

    def _end_stream(self, finished: bool = False) -> None:
        """End what streams; `finished`: the answer is whole (its logged
        message or the turn's end), so its last block is rendered. A line
        said in the middle of it leaves that block raw: the rest of the
        answer continues below it, and half a code block is no block."""
        self.stop_spinner()
        if self._answer_stream is not None:
            self._at_line_start = self._answer_stream.end(render=finished)
            self._answer_stream = None
            if not finished and self._streaming is not None:
                self._interrupted.add(self._streaming)
        if not self._at_line_start:
            self.console.print()
            self._at_line_start = True
        self._streaming = None

    def _stream(self, key: tuple[str, ...], prefix: str, style: str) -> None:
        """Continue the stream `key`, or start it on a new line."""
        if self._streaming != key:
            self._end_stream()
            self._streaming = key
            if prefix and key not in self._interrupted:
                self._write(prefix, style)

    # -- the spinner ----------------------------------------------------------------------

    def spin_if_waiting(self, questions_open: bool) -> None:
        """A spinner while the session works and nothing else shows it."""
        label = None if questions_open or not self.session.running else self._waiting_label()
        if label is None:
            self.stop_spinner()
        elif self._spinner is None or label != self._spinner_label:
            self._start_spinner(label)

    def _waiting_label(self) -> str | None:
        if self._streaming is not None and self._streaming[0] == "text":
            return None
        for view in self._calls.values():
            if view.output.hidden:
                return f"{render.call_line(view.call)}  … {view.output.hidden} more lines"
            if view.call.name == "shell" and not view.headed:
                return render.call_line(view.call)
            if view.call.name == "task":
                return f"{render.call_line(view.call)} (subagent at work)"
        if self._streaming is not None:
            return None  # a command's output shows
        return THINKING if self._waiting_for_model else None

    def _start_spinner(self, label: str) -> None:
        if not self.console.is_terminal:
            return
        self._spinner_label = label
        shown = Spinner("dots", text=Text(label))
        if self._spinner is not None:
            self._spinner.update(shown)
            return
        # Not redirecting sys.stdout: prompt_toolkit swaps it too (patch_stdout)
        # and two swaps that end out of order leave it on a closed proxy,
        # where everything printed after is lost.
        self._spinner = Live(
            shown,
            console=self.console,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._spinner.start()

    def stop_spinner(self) -> None:
        if self._spinner is not None:
            self._spinner.stop()
            self._spinner = None

    def waiting_for_model(self) -> None:
        """A prompt was sent: the model is being waited for."""
        self._waiting_for_model = True

    # -- the past -------------------------------------------------------------------------

    def follow(self, events: list[ev.Event]) -> None:
        """Take in what the session's past says about what runs now (the
        step, the calls and their questions), showing nothing."""
        for event in events:
            self._track(event)

    def show_past(self, lines: list[RenderableType]) -> None:
        for line in lines:
            self.print(line)

    def show_live(self) -> None:
        """What a running turn streamed before this chat opened it, in full: its
        text from the first word and its running command's output so far (the
        updates that follow carry only what is new)."""
        live = self.session.live
        for key, text in list(live.texts.items()):
            self._show_text(TextStreamed(key.turn_id, key.step, key.kind, text, text))
        for call_id, output in list(live.outputs.items()):
            self._show_output(call_id, output)

    # -- updates --------------------------------------------------------------------------

    def render(self, update: Update) -> None:
        if isinstance(update, TextStreamed):
            self._show_text(update)
        elif isinstance(update, OutputStreamed):
            self._show_output(update.call_id, update.delta)
        elif isinstance(update, EventAppended):
            self.show_event(update.event)
        elif isinstance(update, PlanChanged):
            self.say_plan(update.plan)
        elif isinstance(update, SettingsChanged):
            self.say(settings_line(update.settings, self.default_model), "dim")
        elif isinstance(update, ProjectionChanged) and update.key == "mcp":
            # A server that failed is worth a line; /mcp shows them all.
            for line in render.mcp_failures(update.value):
                self.say(line)
        elif isinstance(update, ConnectionChanged):
            self._show_connection(update)
        elif isinstance(update, HistoryLoaded) and update.replaced:
            self.say("(history reloaded)", "dim")
        elif isinstance(update, StatusChanged) and not update.running:
            self._end_stream(finished=True)
            self._waiting_for_model = False
        elif isinstance(update, UsageChanged):
            pass  # the toolbar shows it

    def _track(self, event: ev.Event) -> None:
        """What an event says about what runs now."""
        kind = event.WhichOneof("body")
        if kind == "step_start":
            self._step = (event.step_start.turn_id, event.step_start.step)
        if kind in ("turn_start", "step_start", "tool_result"):
            self._waiting_for_model = True  # the next model request comes
        elif kind in ("assistant_message", "turn_end"):
            self._waiting_for_model = False
        if kind == "tool_call":
            self._calls[event.tool_call.call_id] = CallView(event.tool_call)
        elif kind == "tool_result":
            self._calls.pop(event.tool_result.call_id, None)
        elif kind == "turn_end":
            self._calls.clear()
        self._answers.add(event)

    def show_event(self, event: ev.Event) -> None:
        kind = event.WhichOneof("body")
        if kind == "tool_result":
            self._show_result(event.tool_result)  # before its call is forgotten
        self._track(event)
        if kind == "user_message":
            self._show_user(event.user_message)
        elif kind == "assistant_message":
            self._show_answer(event.assistant_message)
        elif kind == "turn_end":
            ending = render.turn_end_line(event.turn_end)
            if ending is not None:
                self.say(*ending)
        elif kind == "compaction":
            self.say(render.compaction_line(event.compaction), "dim")
        elif kind == "todos_updated":
            self.say(checklist(todos_written(event.todos_updated)))
        elif kind == "hook_run":
            self.say(render.hook_line(event.hook_run), "dim")
        elif kind == "subagent_started":
            started = event.subagent_started
            self._children[started.child_session_id] = started.description
            self.say(f"  ↳ {started.agent_type} · {started.description}: started", "dim")
        elif kind == "subagent_ended":
            ended = event.subagent_ended
            what = self._children.get(ended.child_session_id, ended.child_session_id)
            done = ended.reason == ev.TURN_END_REASON_COMPLETED
            self.say(f"  ↳ {what}: {'done' if done else 'stopped'}", "dim" if done else "yellow")
        # A plan switch: PlanChanged says it. A command's end: its reply, or
        # (/compact, /plan) the marker and the plan line.

    def _show_user(self, message: ev.UserMessage) -> None:
        if message.source.kind != ev.SOURCE_KIND_PLUGIN and message.text in self.typed:
            self.typed.remove(message.text)
            return
        for line in history.user_lines(message):
            self.print(line)

    def _show_answer(self, message: ev.AssistantMessage) -> None:
        if self._step is not None and self._step in self._streamed_steps:
            self._end_stream(finished=True)  # the deltas showed it already
            return
        if message.reasoning:
            self.say(f"thinking: {message.reasoning}", "dim")
        if message.text:
            for line in history.answer_lines(message.text):
                self.print(line)

    def _view(self, call_id: str) -> CallView | None:
        view = self._calls.get(call_id)
        if view is None:
            call = self._call_of(call_id)
            if call is not None:
                view = self._calls[call_id] = CallView(call)
        return view

    def _call_of(self, call_id: str) -> ev.ToolCall | None:
        for event in reversed(self.session.events):
            if event.HasField("tool_call") and event.tool_call.call_id == call_id:
                return event.tool_call
        return None

    def _show_output(self, call_id: str, delta: str) -> None:
        view = self._view(call_id)
        if view is not None and not view.headed:
            self.say(render.call_line(view.call), "bold")
            view.headed = True
        shown = view.output.take(delta) if view is not None else delta
        if shown:
            self._stream(("output", call_id), "", "dim")
            self._write(shown, "dim")
        elif self._streaming != ("output", call_id):
            self._end_stream()
            self._streaming = ("output", call_id)

    def _show_result(self, result: ev.ToolResult) -> None:
        view = self._calls.get(result.call_id)
        call = view.call if view is not None else self._call_of(result.call_id)
        answer = self._answers.answers.get(result.call_id)
        refused = answer is not None and answer.WhichOneof("kind") in render.ANSWER_LINES
        style = "yellow" if refused else "dim" if result.ok else "red"
        self._end_stream()
        if result.call_id in self.said_here:
            pass  # the answer's own line said it
        elif view is not None and view.headed and call is not None and call.name == "shell":
            # Its command is on screen, its output below it: how it ended.
            if view.output.hidden:
                self.say(f"… {view.output.hidden} more lines (/output shows all)", "dim")
                self.folded = (call, result)
            self.say(f"· {render.command_ending(result)}", style)
        else:
            self.say(f"· {render.result_line(result, call, answer)}", style)
        diff = result.display.diff if result.HasField("display") else ""
        if diff and not (view is not None and view.diff_shown):
            self.print(render.diff_text(diff))

    def _show_text(self, update: TextStreamed) -> None:
        self._waiting_for_model = False
        if (update.turn_id, update.step) not in self._streamed_steps:
            # The first piece seen of a step: its text so far, from the first word.
            update = replace(update, delta=update.text)
        self._streamed_steps.add((update.turn_id, update.step))
        if update.kind == "reasoning":
            self._stream(("text", update.turn_id, str(update.step), "r"), "thinking: ", "dim")
            self._write(update.delta, "dim")
            return
        key = ("text", update.turn_id, str(update.step), "a")
        if self._streaming != key:
            self._end_stream()
            self._streaming = key
            continued = key in self._interrupted
            self._answer_stream = AnswerStream(
                self.console, "" if continued else "assistant: ", "cyan", headed=continued
            )
            self._answer_stream.start()
        assert self._answer_stream is not None
        self.stop_spinner()
        self._answer_stream.write(update.delta)
        self._at_line_start = update.delta.endswith("\n")

    def _show_connection(self, update: ConnectionChanged) -> None:
        if not update.connected and not self._lost:
            self._lost = True
            self.say("connection lost; reconnecting…", "yellow")
        elif update.connected and self._lost:
            self._lost = False
            self.say("reconnected", "yellow")

    def child_step(self, child_id: str, line: str) -> None:
        """What a running subagent does, nested under its task call."""
        what = self._children.get(child_id, "subagent")
        self.say(f"  ↳ {what}: {line}", "dim")

    # -- questions ------------------------------------------------------------------------

    def show_question(self, question: Question) -> None:
        """A question's box: its title, what it is about (shown once: a
        command in the title, a change's diff in the body), a rule."""
        title = render.question_title(question)
        if question.child_session_id:
            child = next(
                (c for c in self.session.subagents if c.session_id == question.child_session_id),
                None,
            )
            title = f"{undo.subagent_label(child)} asks: {title}"
        self.print(Rule(Text(title)))
        body = question_body(question)
        if body is not None:
            self.print(body)
            self.print(Rule())
        view = self._view(question.call_id) if question.call_id else None
        if view is not None and question.presentation == "tool-approval":
            view.headed = True
            view.diff_shown = question.body.startswith("--- ")

    def toolbar_model(self) -> str:
        settings = self.session.settings
        return (settings.model if settings is not None else "") or self.default_model
