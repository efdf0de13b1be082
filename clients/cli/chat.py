"""`agenthost chat`: an interactive session in the terminal.

Line based: the terminal edits the line, the CLI reads whole lines and prints
what happens in the session as it happens (assistant messages, the plan state
with its pending marker, plan reviews). Ctrl-C cancels a running turn; at the
prompt a second Ctrl-C, or Ctrl-D, leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections import deque
from collections.abc import Coroutine
from typing import Any

from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2
from rich.console import Console
from rich.markdown import Markdown
from rich.rule import Rule
from rich.text import Text

from clients.sdk import (
    AgentHostError,
    ConnectionChanged,
    EventAppended,
    HistoryLoaded,
    PlanChanged,
    PromptMode,
    QuestionAsked,
    QuestionClosed,
    Session,
    StatusChanged,
    Update,
    Updates,
)
from clients.sdk.plan import PlanView

HELP = (
    "Type a message to send it. /plan enters plan mode, /plan <message> enters it and "
    "sends the message, /plan off leaves it. /quit leaves. Ctrl-C cancels a running turn."
)
REVIEW_CHOICES = "Approve the plan? [a] approve  [k] keep planning  [d] dismiss"
HISTORY_SHOWN = 10
PLAN_STYLE = "bold magenta"


def plan_line(view: PlanView) -> str:
    return f"plan: {view.describe()}"


class Chat:
    def __init__(self, session: Session, console: Console, fd: int | None = None) -> None:
        self.session = session
        self.console = console
        self.fd = sys.stdin.fileno() if fd is None else fd
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._buffer = b""
        self._interrupts = 0
        # The question whose choice (or feedback) the next line answers.
        self._reviewing: rt.Question | None = None
        self._wants_feedback = False
        # Messages typed here, not printed again when the log shows them.
        self._typed: deque[str] = deque(maxlen=32)
        self._prompt_shown = False
        self._lost = False
        self._background: set[asyncio.Task[None]] = set()

    # -- output ---------------------------------------------------------------------------

    def say(self, text: str, style: str = "") -> None:
        """One line of output (a single style span, no markup)."""
        if self._prompt_shown:
            self.console.print()
            self._prompt_shown = False
        self.console.print(Text(text, style=style), soft_wrap=True)

    def show_prompt(self) -> None:
        if self._prompt_shown:
            return
        label = "choice> " if self._reviewing and not self._wants_feedback else "> "
        if self._wants_feedback:
            label = "feedback> "
        self.console.print(Text(label, style="bold"), end="")
        self.console.file.flush()
        self._prompt_shown = True

    def show_header(self) -> None:
        summary = self.session.summary
        where = f" in {summary.cwd}" if summary is not None and summary.cwd else ""
        self.say(f"agenthost chat: session {self.session.id}{where}", "bold")
        self.say(HELP, "dim")
        messages = [
            e
            for e in self.session.events
            if e.HasField("user_message") or e.HasField("assistant_message")
        ]
        for event in messages[-HISTORY_SHOWN:]:
            self.show_event(event, history=True)
        self.say(plan_line(self.session.plan), PLAN_STYLE)

    def show_event(self, event: events_pb2.Event, *, history: bool = False) -> None:
        kind = event.WhichOneof("body")
        if kind == "user_message":
            message = event.user_message
            if message.source.kind == events_pb2.SOURCE_KIND_PLUGIN:
                self.say(f"notice: {message.text}", "dim")
            elif history or message.text not in self._typed:
                self.say(f"you: {message.text}", "green")
            else:
                self._typed.remove(message.text)
        elif kind == "assistant_message":
            if event.assistant_message.text:
                self.say(f"assistant: {event.assistant_message.text}", "cyan")
        elif kind == "tool_call":
            self.say(f"· tool {event.tool_call.name}", "dim")
        elif kind == "tool_result" and not event.tool_result.ok:
            self.say(f"· tool failed: {event.tool_result.error}", "dim")
        elif kind == "turn_end":
            reason = event.turn_end.reason
            if reason == events_pb2.TURN_END_REASON_CANCELLED:
                self.say("turn cancelled", "yellow")
            elif reason == events_pb2.TURN_END_REASON_ERROR:
                self.say(f"turn failed: {event.turn_end.error}", "red")
        elif kind == "command_done":
            done = event.command_done
            style = "red" if done.kind == events_pb2.COMMAND_DONE_KIND_ERROR else "green"
            self.say(done.message, style)

    def ask(self, question: rt.Question) -> None:
        self._reviewing = question
        self._wants_feedback = False
        review = question.presentation == rt.QUESTION_PRESENTATION_PLAN_REVIEW
        if self._prompt_shown:
            self.console.print()
            self._prompt_shown = False
        self.console.print(Rule(question.title or ("Plan review" if review else "Question")))
        self.console.print(Markdown(question.body))
        self.console.print(Rule())
        self.say(REVIEW_CHOICES, "bold")
        self.show_prompt()

    def render(self, update: Update) -> None:
        if isinstance(update, EventAppended):
            self.show_event(update.event)
        elif isinstance(update, PlanChanged):
            self.say(plan_line(update.plan), PLAN_STYLE)
        elif isinstance(update, StatusChanged):
            if not update.running:
                self.show_prompt()
        elif isinstance(update, QuestionAsked):
            self.ask(update.question)
        elif isinstance(update, QuestionClosed):
            if self._reviewing is not None and self._reviewing.question_id == update.question_id:
                self._reviewing, self._wants_feedback = None, False
                self.say("(the review is closed)", "dim")
        elif isinstance(update, ConnectionChanged):
            if not update.connected and not self._lost:
                self._lost = True
                self.say("connection lost; reconnecting…", "yellow")
            elif update.connected and self._lost:
                self._lost = False
                self.say("reconnected", "yellow")
        elif isinstance(update, HistoryLoaded) and update.replaced:
            self.say("(history reloaded)", "dim")

    # -- input ------------------------------------------------------------------------------

    def _on_readable(self) -> None:
        try:
            data = os.read(self.fd, 4096)
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.fd)
            self._lines.put_nowait(None)
            return
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        self._buffer += data
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            self._lines.put_nowait(line.decode("utf-8", "replace").rstrip("\r"))

    def _read_in_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        """For stdin that the event loop cannot watch (a regular file)."""
        for line in sys.stdin:
            loop.call_soon_threadsafe(self._lines.put_nowait, line.rstrip("\r\n"))
        loop.call_soon_threadsafe(self._lines.put_nowait, None)

    def _on_interrupt(self) -> None:
        self._prompt_shown = False
        self.console.print()
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
        self.show_prompt()

    async def _cancel(self) -> None:
        try:
            cancelled = await self.session.cancel()
        except AgentHostError as error:
            self.say(f"could not cancel: {error.message}", "red")
            return
        if not cancelled:
            self.say("nothing was running", "dim")
            self.show_prompt()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def handle(self, line: str) -> bool:
        """One line typed by the user; False to leave."""
        self._prompt_shown = False
        self._interrupts = 0
        text = line.strip()
        if text in ("/quit", "/exit"):
            return False
        if self._reviewing is not None and not text.startswith("/"):
            await self._answer(self._reviewing, text)
            return True
        if not text:
            self.show_prompt()
            return True
        if text == "/help":
            self.say(HELP, "dim")
        elif text.startswith("/"):
            # Commands work during a review too (e.g. /plan off).
            name, _, args = text[1:].partition(" ")
            result = await self.session.execute_command(name, args.strip() or None)
            if not result.ok:
                self.say(result.message, "red")
            if self._reviewing is not None:
                self.say(REVIEW_CHOICES, "bold")
                self.show_prompt()
                return True
        else:
            self._typed.append(text)
            mode = PromptMode.QUEUE if self.session.running else PromptMode.SEND
            await self.session.prompt(text, mode)
        if not self.session.running and self._reviewing is None:
            self.show_prompt()
        return True

    async def _answer(self, question: rt.Question, text: str) -> None:
        if self._wants_feedback:
            if not text:
                self.say("feedback for the agent (what should change?)", "bold")
                self.show_prompt()
                return
            self._reviewing, self._wants_feedback = None, False
            await self.session.answer_question(question.question_id, feedback=text)
            self.say("sent your feedback; the agent keeps planning", "yellow")
            return
        choice = text.lower()
        if choice in ("a", "approve", "y", "yes"):
            self._reviewing = None
            await self.session.answer_question(question.question_id, approve=True)
            self.say("plan approved", "green")
        elif choice in ("k", "keep", "keep planning"):
            self._wants_feedback = True
            self.say("feedback for the agent (what should change?)", "bold")
            self.show_prompt()
        elif choice in ("d", "dismiss"):
            self._reviewing = None
            await self.session.answer_question(question.question_id, dismiss=True)
            self.say("review dismissed; plan mode stays on", "yellow")
        else:
            self.say(REVIEW_CHOICES, "bold")
            self.show_prompt()

    # -- the loop ---------------------------------------------------------------------------

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        updates = self.session.updates()
        self.show_header()
        try:
            loop.add_reader(self.fd, self._on_readable)
            watching = True
        except (PermissionError, OSError):
            threading.Thread(target=self._read_in_thread, args=(loop,), daemon=True).start()
            watching = False
        loop.add_signal_handler(signal.SIGINT, self._on_interrupt)
        printer = asyncio.create_task(self._print(updates))
        try:
            for question in list(self.session.questions.values()):
                self.ask(question)
            self.show_prompt()
            while (line := await self._lines.get()) is not None:
                try:
                    if not await self.handle(line):
                        break
                except AgentHostError as error:
                    self.say(f"error: {error.message}", "red")
                    self.show_prompt()
        finally:
            loop.remove_signal_handler(signal.SIGINT)
            if watching:
                loop.remove_reader(self.fd)
            updates.close()
            printer.cancel()
            for task in [printer, *self._background]:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self.say("bye", "dim")
        return 0

    async def _print(self, updates: Updates) -> None:
        async for update in updates:
            self.render(update)
