"""`agenthost chat`: an interactive session in the terminal.

It shows the work as it happens: the answer streams as the model writes it
(a spinner until the first token), each tool call leaves one compact line
(`read x.py:1-80`, `edit x.py (+3 -1)` with its diff, `$ pytest -q` with its
output streamed), questions (a plan review, a tool approval) are asked
inline, and a turn's failure is one readable line.

In a terminal the input line is prompt_toolkit's: output that arrives on
its own is printed above it and the prompt is redrawn with what was typed;
the bottom toolbar shows the plan state, the sandbox and approval
settings, the session's model and its usage (`ctx 41% · 52k/128k · $0.08`:
the share of the model's context window the last request filled, and what
the session cost), and Shift-Tab toggles plan mode. While a turn runs no prompt is
shown, yet Ctrl-C cancels the turn, Shift-Tab still toggles plan mode and
Ctrl-D leaves (the turn goes on); at the prompt a first Ctrl-C warns and a
second one (or Ctrl-D) leaves. Without a terminal (a pipe) lines are read
as they come.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

from agenthost.sessionlog.v1 import events_pb2 as ev
from prompt_toolkit import PromptSession
from prompt_toolkit.input import Input, create_input
from prompt_toolkit.input.typeahead import get_typeahead
from prompt_toolkit.key_binding import KeyBindings, KeyPress, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.patch_stdout import patch_stdout
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.rule import Rule
from rich.spinner import Spinner
from rich.text import Text

from clients.sdk import (
    AgentHostError,
    ConnectionChanged,
    EventAppended,
    HistoryLoaded,
    OutputStreamed,
    PlanChanged,
    ProjectionChanged,
    PromptMode,
    Question,
    QuestionClosed,
    Session,
    Settings,
    SettingsChanged,
    StatusChanged,
    TextStreamed,
    UnknownModelError,
    Update,
    Updates,
    UsageChanged,
    committed_plan,
    todos_written,
)
from clients.sdk.plan import SessionPlan

from . import render
from .live_markdown import AnswerStream, has_markdown
from .references import PathCompleter
from .todos import checklist

HELP = (
    "Type a message to send it. /plan enters plan mode, /plan <message> enters it and "
    "sends the message, /plan off leaves it (Shift-Tab toggles it). /sandbox read-only|"
    "workspace-write|full, /approvals ask|ask-for-commands|never and /network on|off "
    "change what the agent may do; /permissions lists the rules that skip approval "
    "questions, /permissions revoke RULE_ID revokes one. /model lists the models (yours "
    "marked *), /model NAME switches to one (from the next model request). /compact [focus] "
    "summarises the conversation so far for the model. /mcp shows the MCP servers. /todos "
    "shows the agent's task list. @path attaches a file to a message (Tab completes it). "
    "/quit leaves. Ctrl-C cancels a running turn."
)
HISTORY_SHOWN = 10
PLAN_STYLE = "bold magenta"
SANDBOXES = ("read-only", "workspace-write", "full")
APPROVAL_POLICIES = ("ask", "ask-for-commands", "never")


def _question_body(question: Question) -> Text | Markdown:
    """A plan as markdown; a file change's diff coloured (three lines of context);
    anything else as it is."""
    body = question.body
    if question.presentation == "plan-review":
        return Markdown(body)
    if body.startswith("--- "):
        return render.diff_text(body)
    return Text(body)


def plan_line(view: SessionPlan) -> str:
    return f"plan: {view.describe()}"


def settings_line(settings: Settings) -> str:
    model = f", model: {settings.model}" if settings.model else ""
    network = "on" if settings.network else "off"
    return (
        f"sandbox: {settings.sandbox}, approvals: {settings.approvals}{model}, network: {network}"
    )


class _Interrupted:
    """A read cut short because the session moved on (a turn, a question)."""


INTERRUPTED = _Interrupted()


class _PromptClosed(Exception):
    """How a prompt is closed from outside (see Chat._cancel_read)."""


Line = str | None | _Interrupted


class Chat:
    def __init__(
        self, session: Session, console: Console, *, interactive: bool | None = None
    ) -> None:
        self.session = session
        self.console = console
        self.interactive = sys.stdin.isatty() if interactive is None else interactive
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._changed = asyncio.Event()
        self._interrupts = 0
        # Messages typed here, not printed again when the log shows them.
        self._typed: deque[str] = deque(maxlen=32)
        # The stream being written (a step's text or a command's output).
        self._streaming: tuple[str, ...] | None = None
        self._streamed_steps: set[tuple[str, int]] = set()
        self._step: tuple[str, int] | None = None
        self._at_line_start = True
        # The answer being streamed, rendered as markdown block by block.
        self._answer_stream: AnswerStream | None = None
        self._spinner: Live | None = None
        self._lost = False
        self._draft = ""
        self._answered: set[str] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._prompt: PromptSession[str] | None = None
        # The terminal's keys while a turn runs and no prompt reads them, and
        # the lines finished meanwhile.
        self._keys: Input | None = None
        self._typed_ahead: deque[str] = deque()

    # -- output ---------------------------------------------------------------------------

    def say(self, text: str | Text, style: str = "") -> None:
        """One line of output, on a line of its own."""
        self._end_stream()
        shown = text if isinstance(text, Text) else Text(text, style=style)
        self.console.print(shown, soft_wrap=True)

    def _write(self, piece: str, style: str = "") -> None:
        self._stop_spinner()
        self.console.print(Text(piece, style=style), end="", soft_wrap=True)
        self.console.file.flush()
        self._at_line_start = piece.endswith("\n")

    def _end_stream(self, finished: bool = False) -> None:
        """End what streams; `finished`: the answer is whole (its logged
        message or the turn's end), so its last block is rendered. A line
        said in the middle of it leaves that block raw: the rest of the
        answer continues below it, and half a code block is no block."""
        self._stop_spinner()
        if self._answer_stream is not None:
            self._at_line_start = self._answer_stream.end(render=finished)
            self._answer_stream = None
        if not self._at_line_start:
            self.console.print()
            self._at_line_start = True
        self._streaming = None

    def _stream(self, key: tuple[str, ...], prefix: str, style: str) -> None:
        """Continue the stream `key`, or start it on a new line."""
        if self._streaming != key:
            self._end_stream()
            self._streaming = key
            if prefix:
                self._write(prefix, style)

    def _start_spinner(self) -> None:
        if self._spinner is None and self.console.is_terminal:
            # Not redirecting sys.stdout: prompt_toolkit swaps it too (patch_stdout)
            # and two swaps that end out of order leave it on a closed proxy,
            # where everything printed after is lost.
            self._spinner = Live(
                Spinner("dots", text="thinking…"),
                console=self.console,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._spinner.start()

    def _stop_spinner(self) -> None:
        if self._spinner is not None:
            self._spinner.stop()
            self._spinner = None

    def show_header(self) -> None:
        summary = self.session.summary
        where = f" in {summary.cwd}" if summary is not None and summary.cwd else ""
        self.say(f"agenthost chat: session {self.session.id}{where}", "bold")
        self.say(HELP, "dim")
        messages = [
            e
            for e in self.session.events
            if e.HasField("user_message")
            or e.HasField("assistant_message")
            or e.HasField("compaction")
            # Every switch, so that two notices to the model in a row read right.
            or committed_plan(e) is not None
        ]
        for event in messages[-HISTORY_SHOWN:]:
            self.show_event(event, history=True)
        self.say(plan_line(self.session.plan), PLAN_STYLE)
        if self.session.settings is not None:
            self.say(settings_line(self.session.settings), "dim")
        self.show_live()

    def show_live(self) -> None:
        """What a running turn streamed before this chat opened it, in full: its
        text from the first word and its running command's output so far (the
        updates that follow carry only what is new)."""
        live = self.session.live
        for key, text in list(live.texts.items()):
            self._show_text(TextStreamed(key.turn_id, key.step, key.kind, text, text))
        for call_id, output in list(live.outputs.items()):
            call = self._call_of(call_id)
            if call is not None:
                self._show_call(call)
            self._stream(("output", call_id), "", "dim")
            self._write(output, "dim")

    def _call_of(self, call_id: str) -> ev.ToolCall | None:
        for event in reversed(self.session.events):
            if event.HasField("tool_call") and event.tool_call.call_id == call_id:
                return event.tool_call
        return None

    def show_event(self, event: ev.Event, history: bool = False) -> None:
        kind = event.WhichOneof("body")
        if kind == "user_message":
            self._show_user(event.user_message, history)
        elif kind == "step_start":
            self._step = (event.step_start.turn_id, event.step_start.step)
        elif kind == "assistant_message":
            self._show_answer(event.assistant_message)
        elif kind == "tool_call":
            self._show_call(event.tool_call)
        elif kind == "tool_result":
            self._show_result(event.tool_result)
        elif kind == "turn_end":
            ending = render.turn_end_line(event.turn_end)
            if ending is not None:
                self.say(*ending)
        elif kind == "compaction":
            self.say(render.compaction_line(event.compaction), "dim")
        elif kind == "todos_updated" and not history:
            self.say(checklist(todos_written(event.todos_updated)))
        elif history and (active := committed_plan(event)) is not None:
            # Live, PlanChanged says it.
            self.say(f"plan mode {'on' if active else 'off'}", PLAN_STYLE)
        elif kind == "command_done":
            done = event.command_done
            style = "red" if done.kind == ev.COMMAND_DONE_KIND_ERROR else "green"
            self.say(done.message, style)

    def _show_user(self, message: ev.UserMessage, history: bool) -> None:
        if message.source.kind == ev.SOURCE_KIND_PLUGIN:
            self.say(f"notice: {message.text}", "dim")
        elif history or message.text not in self._typed:
            self.say(f"you: {message.text}", "green")
        else:
            self._typed.remove(message.text)

    def _show_answer(self, message: ev.AssistantMessage) -> None:
        if self._step is not None and self._step in self._streamed_steps:
            self._end_stream(finished=True)  # the deltas showed it already
            return
        if message.reasoning:
            self.say(f"thinking: {message.reasoning}", "dim")
        if message.text:
            self._show_markdown(message.text)

    def _show_markdown(self, text: str) -> None:
        """An answer not streamed here (history, a step that ended before this
        chat saw it): one plain line stays a line, anything more is markdown."""
        if "\n" not in text.strip() and not has_markdown(text):
            self.say(f"assistant: {text}", "cyan")
        else:
            self.say("assistant:", "cyan")
            self.console.print(Markdown(text))

    def _show_call(self, call: ev.ToolCall) -> None:
        if call.name == "shell":
            self.say(render.call_line(call), "bold")
            self._streaming = ("output", call.call_id)

    def _show_result(self, result: ev.ToolResult) -> None:
        self._end_stream()
        style = "dim" if result.ok else "red"
        self.say(f"· {render.result_line(result)}", style)
        if result.HasField("display") and result.display.diff:
            self.say(render.diff_text(result.display.diff))

    def render(self, update: Update) -> None:
        if isinstance(update, TextStreamed):
            self._show_text(update)
        elif isinstance(update, OutputStreamed):
            self._stream(("output", update.call_id), "", "dim")
            self._write(update.delta, "dim")
        elif isinstance(update, EventAppended):
            self.show_event(update.event)
        elif isinstance(update, PlanChanged):
            self.say(plan_line(update.plan), PLAN_STYLE)
        elif isinstance(update, SettingsChanged):
            self.say(settings_line(update.settings), "dim")
            self._redraw_toolbar()
        elif isinstance(update, UsageChanged):
            self._redraw_toolbar()
        elif isinstance(update, ProjectionChanged) and update.key == "mcp":
            # A server that failed is worth a line; /mcp shows them all.
            for line in render.mcp_failures(update.value):
                self.say(line)
        elif isinstance(update, QuestionClosed):
            self._answered.discard(update.question_id)
        elif isinstance(update, ConnectionChanged):
            self._show_connection(update)
        elif isinstance(update, HistoryLoaded) and update.replaced:
            self.say("(history reloaded)", "dim")
        elif isinstance(update, StatusChanged) and not update.running:
            self._end_stream(finished=True)
        self._spin_if_waiting()

    def _spin_if_waiting(self) -> None:
        """The spinner shows while a turn runs and nothing else is on screen."""
        if self.session.running and self._streaming is None and not self._open_questions():
            self._start_spinner()

    def _show_text(self, update: TextStreamed) -> None:
        if (update.turn_id, update.step) not in self._streamed_steps:
            # The first piece seen of a step: its text so far, from the first word.
            update = replace(update, delta=update.text)
        self._streamed_steps.add((update.turn_id, update.step))
        if update.kind == "reasoning":
            self._stream(("text", update.turn_id, str(update.step), "r"), "thinking: ", "dim")
            self._write(update.delta, "dim")
        else:
            key = ("text", update.turn_id, str(update.step), "a")
            if self._streaming != key:
                self._end_stream()
                self._streaming = key
                self._answer_stream = AnswerStream(self.console, "assistant: ", "cyan")
                self._answer_stream.start()
            assert self._answer_stream is not None
            self._stop_spinner()
            self._answer_stream.write(update.delta)
            self._at_line_start = update.delta.endswith("\n")

    def _show_connection(self, update: ConnectionChanged) -> None:
        if not update.connected and not self._lost:
            self._lost = True
            self.say("connection lost; reconnecting…", "yellow")
        elif update.connected and self._lost:
            self._lost = False
            self.say("reconnected", "yellow")

    # -- input ----------------------------------------------------------------------------

    def _toolbar(self) -> str:
        settings, usage = self.session.settings, self.session.usage
        shown = f"plan: {self.session.plan.describe()}"
        if settings is not None:
            shown += f" · sandbox: {settings.sandbox} · approvals: {settings.approvals}"
            shown += f" · model: {settings.model}" if settings.model else ""
            # Like the model, shown when not at its default (the toolbar is one line).
            shown += " · network: on" if settings.network else ""
        if usage is not None:
            shown += f" · {render.usage_line(usage)}"
        return shown + " · shift-tab: plan mode"

    def _redraw_toolbar(self) -> None:
        """The toolbar shows changes that arrive while the prompt waits."""
        app = self._prompt.app if self._prompt is not None else None
        if app is not None and app.is_running:
            app.invalidate()

    def _key_bindings(self) -> KeyBindings:
        bindings = KeyBindings()

        @bindings.add("s-tab")
        def _toggle_plan(event: KeyPressEvent) -> None:
            self._spawn(self._toggle_plan())

        return bindings

    async def _keys_while_running(self) -> bool:
        """While a turn runs there is no prompt, but the keys still work:
        Ctrl-C cancels the turn, Shift-Tab toggles plan mode (it applies at
        the next model request) and Ctrl-D leaves, the turn going on in the
        runtime. What is typed meanwhile is kept for the prompt: the line
        under way as its draft, finished lines to be sent when the turn is
        over. True when the user left. Returns when the turn ends or asks a
        question; without a terminal, at the session's next change."""
        if self._keys is None:
            await self._changed.wait()
            return False
        keys = self._keys
        left = asyncio.Event()

        def on_keys(presses: list[KeyPress]) -> None:
            for press in presses:
                if press.key == Keys.ControlC:
                    self._on_interrupt()
                elif press.key == Keys.ControlD:
                    left.set()
                elif press.key == Keys.BackTab:
                    self._spawn(self._toggle_plan())
                else:
                    self._type_ahead(press.key, press.data)

        # Keys typed in one burst with the last prompt's Enter ("y", Enter,
        # Ctrl-D) were read by the prompt, which keeps them for the next reader.
        on_keys(get_typeahead(keys))
        leaving = asyncio.ensure_future(left.wait())
        # The terminal is raw (see run): the keys arrive one by one and
        # unechoed, Ctrl-C as a key.
        with keys.attach(lambda: on_keys(keys.read_keys())):
            while self.session.running and not self._open_questions() and not left.is_set():
                changed = asyncio.ensure_future(self._changed.wait())
                await asyncio.wait([changed, leaving], return_when="FIRST_COMPLETED")
                changed.cancel()
        leaving.cancel()
        if left.is_set():
            self._stop_spinner()
            self.say("(the turn goes on; agenthost chat --continue comes back to it)", "dim")
        return left.is_set()

    def _type_ahead(self, key: str, data: str) -> None:
        if key in (Keys.ControlM, Keys.ControlJ):  # Enter (a terminal's, or a newline)
            self._typed_ahead.append(self._draft)
            self._draft = ""
        elif key == Keys.ControlH:  # Backspace
            self._draft = self._draft[:-1]
        elif data.isprintable():
            self._draft += data

    async def _toggle_plan(self) -> None:
        state = self.session.plan.state
        if state is None:
            return
        target = state.pending if state.pending is not None else state.active
        try:
            await self.session.set_plan(not target)
        except AgentHostError as error:
            self.say(f"could not switch plan mode: {error.message}", "red")

    async def _read(self, label: str, moved_on: Callable[[], bool]) -> Line:
        """A line typed by the user; INTERRUPTED when `moved_on()` became true
        first (the draft is kept for the next prompt); None at the end."""
        self._end_stream()
        reader = asyncio.ensure_future(self._read_once(label))
        while not reader.done():
            if moved_on():
                self._cancel_read(reader)
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
                return INTERRUPTED
            changed = self._changed
            await asyncio.wait(
                [reader, asyncio.ensure_future(changed.wait())], return_when="FIRST_COMPLETED"
            )
        return reader.result()

    async def _read_once(self, label: str) -> str | None:
        if self._prompt is None:
            return await self._lines.get()
        if self._typed_ahead:  # typed while the turn ran: shown as if at the prompt
            line = self._typed_ahead.popleft()
            self.say(f"{label}{line}")
            return line
        draft, self._draft = self._draft, ""
        while True:
            try:
                with patch_stdout(raw=True):
                    line = await self._prompt.prompt_async(
                        label, default=draft, handle_sigint=False
                    )
            except _PromptClosed:
                raise asyncio.CancelledError from None
            except KeyboardInterrupt:
                self._interrupts += 1
                if self._interrupts >= 2:
                    return None
                self.say("(Ctrl-C again or Ctrl-D to leave)", "dim")
                draft = ""
                continue
            except EOFError:
                return None
            self._interrupts = 0
            return line

    def _cancel_read(self, reader: asyncio.Future[str | None]) -> None:
        """End the prompt the way prompt_toolkit ends one (so the terminal and
        its input are handed back intact), keeping what was typed."""
        app = self._prompt.app if self._prompt is not None else None
        if app is not None and app.is_running:
            self._draft = app.current_buffer.text
            app.exit(exception=_PromptClosed())
        else:
            reader.cancel()

    def _on_readable_line(self, line: str | None) -> None:
        self._lines.put_nowait(line)

    def _read_in_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        """Lines of a stdin that is no terminal (a pipe, a file)."""
        for line in sys.stdin:
            loop.call_soon_threadsafe(self._on_readable_line, line.rstrip("\r\n"))
        loop.call_soon_threadsafe(self._on_readable_line, None)

    def _on_interrupt(self) -> None:
        if self.session.running:
            self._interrupts = 0
            self.say("cancelling the turn…", "yellow")
            self._spawn(self._cancel())
            return
        self._interrupts += 1
        if self._interrupts >= 2:
            self._lines.put_nowait(None)
            return
        self.say("(Ctrl-C again or Ctrl-D to leave)", "dim")

    async def _cancel(self) -> None:
        try:
            cancelled = await self.session.cancel()
        except AgentHostError as error:
            self.say(f"could not cancel: {error.message}", "red")
            return
        if not cancelled:
            self.say("nothing was running", "dim")

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- what a line does -------------------------------------------------------------

    async def handle(self, line: str) -> bool:
        """One line typed at the prompt; False to leave."""
        self._interrupts = 0
        text = line.strip()
        if text in ("/quit", "/exit"):
            return False
        if not text:
            return True
        if text == "/help":
            self.say(HELP, "dim")
        elif text.startswith("/"):
            await self._command(text)
        else:
            self._typed.append(text)
            mode = PromptMode.QUEUE if self.session.running else PromptMode.SEND
            await self.session.prompt(text, mode)
            self._spin_if_waiting()
        return True

    async def _command(self, text: str) -> None:
        name, _, args = text[1:].partition(" ")
        args = args.strip()
        if name == "mcp":
            for line in render.mcp_lines(self.session.projections.get("mcp")):
                self.say(line)
        elif name == "todos":
            self.say(checklist(self.session.todos))
        elif name == "sandbox":
            await self._settings(name, args, SANDBOXES)
        elif name == "approvals":
            await self._settings(name, args, APPROVAL_POLICIES)
        elif name == "model":
            await self._model(args)
        elif name == "network":
            if args not in ("on", "off"):
                self.say("usage: /network on|off", "red")
            else:
                await self.session.set_settings(network=args == "on")
        else:
            result = await self.session.execute_command(name, args or None)
            if not result.ok:
                self.say(result.message, "red")
            elif name == "permissions":
                self.say(result.message, "dim")

    async def _settings(self, name: str, wanted: str, choices: tuple[str, ...]) -> None:
        """/sandbox MODE or /approvals POLICY: change that one setting."""
        if wanted not in choices:
            self.say(f"usage: /{name} {'|'.join(choices)}", "red")
            return
        if name == "sandbox":
            await self.session.set_settings(sandbox=wanted)
        else:
            await self.session.set_settings(approvals=wanted)

    async def _model(self, name: str) -> None:
        """/model: the models, the session's marked; /model NAME: switch."""
        if not name:
            current = self.session.settings.model if self.session.settings else ""
            self.say(render.models_table(await self.session.list_models(), current))
            return
        try:
            await self.session.set_model(name)
        except UnknownModelError as error:
            self.say(error.message, "red")

    # -- questions ------------------------------------------------------------------------

    def _open_questions(self) -> list[Question]:
        return [q for q in self.session.questions.values() if q.question_id not in self._answered]

    async def _ask(self, question: Question) -> bool:
        """Ask one question until it is answered or closed; False to leave."""
        self._end_stream()
        self.console.print(Rule(render.question_title(question)))
        if question.body:
            self.console.print(_question_body(question))
        self.console.print(Rule())
        review = question.presentation != "tool-approval"
        choices = render.REVIEW_CHOICES if review else render.APPROVAL_CHOICES
        label = "choice> " if review else "allow> "
        while True:
            self.say(choices, "bold")
            line = await self._read(
                label, lambda: question.question_id not in self.session.questions
            )
            if line is None:
                return False
            if isinstance(line, _Interrupted):
                self.say("(the question is closed)", "dim")
                return True
            if line.strip().startswith("/"):
                await self._command(line.strip())
                continue
            answered = await (
                self._review(question, line) if review else self._approve(question, line)
            )
            if answered:
                return True

    async def _review(self, question: Question, line: str) -> bool:
        choice = line.strip().lower()
        if choice in ("a", "approve", "y", "yes"):
            await self._answer(question, "plan approved", "green", approve=True)
        elif choice in ("k", "keep", "keep planning"):
            feedback = await self._read(
                "feedback> ", lambda: question.question_id not in self.session.questions
            )
            if not isinstance(feedback, str) or not feedback.strip():
                return isinstance(feedback, _Interrupted)
            await self._answer(
                question,
                "sent your feedback; the agent keeps planning",
                "yellow",
                feedback=feedback.strip(),
            )
        elif choice in ("d", "dismiss"):
            await self._answer(
                question, "review dismissed; plan mode stays on", "yellow", dismiss=True
            )
        else:
            return False
        return True

    async def _approve(self, question: Question, line: str) -> bool:
        choice = line.strip().lower()
        if choice in ("y", "yes", "allow", "once"):
            await self._answer(question, "allowed once", "green", allow_once=True)
        elif choice in ("a", "session"):
            await self._answer(
                question, "allowed for this session", "green", allow_for_session=True
            )
        elif choice in ("s", "always"):
            await self._answer(
                question,
                "always allowed in this session (/permissions lists and revokes rules)",
                "green",
                always_allow_session=True,
            )
        elif choice in ("w", "workspace"):
            await self._answer(
                question,
                "always allowed in this workspace (/permissions lists and revokes rules)",
                "green",
                always_allow_workspace=True,
            )
        elif choice in ("n", "no", "deny"):
            reason = await self._read(
                "why (optional)> ", lambda: question.question_id not in self.session.questions
            )
            if isinstance(reason, _Interrupted) or reason is None:
                return True
            await self._answer(question, "denied", "yellow", deny=reason.strip())
        else:
            return False
        return True

    async def _answer(self, question: Question, said: str, style: str, **answer: Any) -> None:
        self._answered.add(question.question_id)
        await self.session.answer_question(question.question_id, **answer)
        self.say(said, style)

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        # Before anything shows: a Ctrl-C at the first line cancels the turn
        # rather than killing the chat.
        loop.add_signal_handler(signal.SIGINT, self._on_interrupt)
        updates = self.session.updates()
        self.show_header()
        if self.interactive:
            self._prompt = PromptSession(
                bottom_toolbar=self._toolbar,
                key_bindings=self._key_bindings(),
                # Tab completes an @path (from the gateway: not while typing).
                completer=PathCompleter(self.session),
                complete_while_typing=False,
            )
            self._keys = create_input()
        else:
            threading.Thread(target=self._read_in_thread, args=(loop,), daemon=True).start()
        printer = asyncio.ensure_future(self._print(updates))
        try:
            # The terminal stays raw for the whole chat (the prompt's own raw
            # mode nests in it): a key pressed while nothing reads, as an
            # answer is being sent, waits for the next reader as a key. A
            # cooked terminal would drop a Ctrl-D and act on a Ctrl-C itself.
            with self._keys.raw_mode() if self._keys else contextlib.nullcontext():
                await self._converse()
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            updates.close()
            printer.cancel()
            for task in [printer, *self._background]:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            self._stop_spinner()
        self.say("bye", "dim")
        return 0

    async def _converse(self) -> None:
        while True:
            try:
                if not await self._next_move():
                    return
            except AgentHostError as error:
                self.say(f"error: {error.message}", "red")

    async def _next_move(self) -> bool:
        """Answer a question, wait for the turn, or read a line; False to leave."""
        questions = self._open_questions()
        if questions:
            return await self._ask(questions[0])
        if self.session.running:
            self._spin_if_waiting()
            return not await self._keys_while_running()
        line = await self._read("> ", lambda: self.session.running or bool(self._open_questions()))
        if line is None:
            return False
        if isinstance(line, _Interrupted):
            return True
        return await self.handle(line)

    async def _print(self, updates: Updates) -> None:
        async for update in updates:
            self.render(update)
            changed, self._changed = self._changed, asyncio.Event()
            changed.set()
