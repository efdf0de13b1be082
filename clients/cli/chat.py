"""`agenthost chat`: an interactive session in the terminal.

It shows the work as it happens, each thing once (transcript.py): the
answer streams as the model writes it (a spinner until the first token),
each tool call leaves one compact line (`read x.py:1-80`, `edit x.py (+3
-1)` with its diff, `$ pytest -q` with its output streamed and folded),
questions (a plan review, a tool approval) are asked inline, and a turn's
failure is one readable line. Opened on a session with a past, it shows
its last turns whole (history.py) and how many came before (/history shows
them). /help lists the commands, the session's (ListCommands) and the
chat's own (chat_commands.py); typing / opens a menu of them.

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
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any

from agenthost.runtime.v1 import runtime_pb2 as rt
from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, merge_completers
from prompt_toolkit.document import Document
from prompt_toolkit.input import Input, create_input
from prompt_toolkit.input.typeahead import get_typeahead
from prompt_toolkit.key_binding import KeyBindings, KeyPress, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.patch_stdout import patch_stdout
from rich.console import Console
from rich.text import Text

from clients.sdk import (
    AgentHostClient,
    AgentHostError,
    CommandsChanged,
    ProjectionChanged,
    PromptMode,
    Question,
    QuestionClosed,
    Restored,
    Session,
    SettingsChanged,
    UnknownModelError,
    Updates,
    UsageChanged,
    turn_calls,
)

from . import history, render, undo
from .chat_commands import (
    APPROVAL_POLICIES,
    NETWORK,
    OWN_COMMANDS,
    SANDBOXES,
    ChatCommand,
    help_table,
)
from .images import attach_images, dropped_image
from .references import PathCompleter
from .todos import checklist
from .transcript import PLAN_STYLE, Transcript, plan_line, settings_line

# The turns shown when a chat opens on a session with a past, and by /history.
TURNS_SHOWN = 3
HISTORY_TURNS = 10
# Pages read back to count the earlier turns (500 messages each).
COUNT_PAGES = 20
COUNT_PAGE_MESSAGES = 500
HINT = "/help lists the commands, typing / offers them; Ctrl-C cancels a turn"


class _Interrupted:
    """A read cut short because the session moved on (a turn, a question)."""


INTERRUPTED = _Interrupted()


class _PromptClosed(Exception):
    """How a prompt is closed from outside (see Chat._cancel_read)."""


Line = str | None | _Interrupted


class SlashCompleter(Completer):
    """Typing `/` opens a menu of the commands (the session's and the chat's own)."""

    def __init__(self, commands: Callable[[], Iterable[ChatCommand]]) -> None:
        self._commands = commands

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        typed = document.text_before_cursor
        if not typed.startswith("/") or " " in typed:
            return
        for command in self._commands():
            name = f"/{command.name}"
            if name.startswith(typed):
                yield Completion(name, start_position=-len(typed), display_meta=command.description)


def host_command(info: rt.CommandInfo) -> ChatCommand:
    return ChatCommand(info.name, info.usage or f"/{info.name}", info.description)


class Chat:
    def __init__(
        self,
        session: Session,
        console: Console,
        *,
        interactive: bool | None = None,
        client: AgentHostClient | None = None,
    ) -> None:
        self.session = session
        # Opens the subagents' sessions, to show what each running one does.
        self.client = client
        self._followed: set[str] = set()
        self.console = console
        self.out = Transcript(session, console)
        self.interactive = sys.stdin.isatty() if interactive is None else interactive
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._changed = asyncio.Event()
        self._interrupts = 0
        self._draft = ""
        self._answered: set[str] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._prompt: PromptSession[str] | None = None
        # The terminal's keys while a turn runs and no prompt reads them, and
        # the lines finished meanwhile.
        self._keys: Input | None = None
        self._typed_ahead: deque[str] = deque()
        # The session's commands (ListCommands), for /help and the menu.
        self._host_commands: list[ChatCommand] = []
        # The first turn on screen (/history shows the ones before it), and
        # how many turns the session had when the chat opened (when it
        # showed none of them, the turns since are the first on screen).
        self._first_shown: str | None = None
        self._turns_at_open = 0

    def say(self, text: str | Text, style: str = "") -> None:
        self.out.say(text, style)

    # -- what shows when the chat opens ---------------------------------------------------

    async def show_header(self) -> None:
        summary = self.session.summary
        where = f" in {summary.cwd}" if summary is not None and summary.cwd else ""
        self.say(f"agenthost chat: session {self.session.id}{where}", "bold")
        self.say(HINT, "dim")
        await self._count_back()
        past = self._past()
        self.out.follow(self.session.events)
        shown = past.turns[-TURNS_SHOWN:]
        earlier = len(past.turns) - len(shown)
        self._turns_at_open = len(past.turns)
        if earlier or self.session.history.has_more:
            self.say(history.earlier_line(earlier, more=self.session.history.has_more))
        if shown:
            self._first_shown = shown[0].turn_id
        elif past.before:
            self.out.show_past(history.event_lines(past.before))
        for turn in shown:
            self.out.show_past(history.event_lines(turn.events))
        self.out.say_plan(self.session.plan)
        if self.session.settings is not None:
            self.say(settings_line(self.session.settings, self.out.default_model), "dim")
        self.out.show_live()

    async def _count_back(self) -> None:
        """Read the session's earlier pages (within reason), so the hint can
        say how many turns came before."""
        for _ in range(COUNT_PAGES):
            if not self.session.history.has_more:
                return
            with contextlib.suppress(AgentHostError):
                if not await self.session.load_older(COUNT_PAGE_MESSAGES):
                    return

    def _past(self) -> history.Past:
        return history.split_turns(self.session.events, not self.session.history.has_more)

    async def _learn_the_session(self) -> None:
        """What the toolbar, /help and the menu need from the host: the
        default model's name, the session's commands."""
        with contextlib.suppress(AgentHostError):
            models = await self.session.list_models()
            self.out.default_model = next((m.name for m in models if m.is_default), "")
        await self._list_commands()

    async def _list_commands(self) -> None:
        with contextlib.suppress(AgentHostError):
            self._host_commands = [host_command(c) for c in await self.session.list_commands()]

    def _commands(self) -> list[ChatCommand]:
        own = {c.name for c in OWN_COMMANDS}
        return [*(c for c in self._host_commands if c.name not in own), *OWN_COMMANDS]

    def _toolbar(self) -> str:
        settings, usage = self.session.settings, self.session.usage
        shown = f"plan: {self.session.plan.describe()}"
        if settings is not None:
            shown += f" · sandbox: {settings.sandbox} · approvals: {settings.approvals}"
            # Like the model, shown when not at its default (the toolbar is one line).
            shown += " · network: on" if settings.network else ""
        model = self.out.toolbar_model()
        shown += f" · model: {model}" if model else ""
        if usage is not None:
            shown += f" · {render.usage_line(usage)}"
        return shown + " · shift-tab: plan mode"

    # -- input ----------------------------------------------------------------------------

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
            self.out.stop_spinner()
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
        self.out.settle()
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
            line = await self._lines.get()
            if line is None:  # the input's end stays the end for every later read
                self._lines.put_nowait(None)
            return line
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
        if text.startswith("/") and not dropped_image(text, Path.cwd()):
            await self._command(text)
        else:
            attached = attach_images(text, Path.cwd())
            for note in attached.notes():
                self.say(note, "dim")
            self.out.typed.append(attached.text)
            mode = PromptMode.QUEUE if self.session.running else PromptMode.SEND
            await self.session.prompt(attached.text, mode, images=attached.images)
            self.out.waiting_for_model()
            self._spin_if_waiting()
        return True

    async def _command(self, text: str) -> None:
        name, _, args = text[1:].partition(" ")
        args = args.strip()
        if name == "help":
            self.say("Type a message to send it, or a command:", "dim")
            self.out.print(help_table(self._host_commands))
        elif name == "mcp":
            for line in render.mcp_lines(self.session.projections.get("mcp")):
                self.say(line)
        elif name == "todos":
            self.say(checklist(self.session.todos))
        elif name in ("sandbox", "approvals", "network"):
            await self._setting(name, args)
        elif name == "model":
            await self._model(args)
        elif name == "history":
            await self._history(args)
        elif name == "output":
            self._output()
        elif name in ("undo", "redo"):
            await self._undo(name, args)
        elif name == "rewind":
            await self._rewind(args)
        elif name == "diff":
            await self._diff(args)
        elif name == "agents":
            await self._agents()
        else:
            await self._session_command(name, args)

    async def _session_command(self, name: str, args: str) -> None:
        """A command of the session (ListCommands): its reply, unless what it
        did shows by itself (/compact's marker, /plan's plan line)."""
        plan_before = plan_line(self.session.plan)
        result = await self.session.execute_command(name, args or None)
        if not result.ok:
            self.say(result.message, "red")
        elif name == "plan":
            if plan_line(self.session.plan) != plan_before:
                self.out.say_plan(self.session.plan)
            else:  # nothing changed ("Plan mode is already on.")
                self.say(result.message, PLAN_STYLE)
        elif name != "compact" and result.message:
            self.say(result.message, "dim")

    async def _setting(self, name: str, wanted: str) -> None:
        """/sandbox, /approvals, /network: the current value and the choices,
        or (given one of them) change it."""
        choices = {"sandbox": SANDBOXES, "approvals": APPROVAL_POLICIES, "network": NETWORK}[name]
        settings = self.session.settings
        if not wanted:
            current = "" if settings is None else getattr(settings, name)
            if isinstance(current, bool):
                current = "on" if current else "off"
            self.say(f"{name}: {current or 'unknown'}  (choices: {', '.join(choices)})")
            return
        if wanted not in choices:
            self.say(f"usage: /{name} {'|'.join(choices)}", "red")
        elif name == "sandbox":
            await self.session.set_settings(sandbox=wanted)
        elif name == "approvals":
            await self.session.set_settings(approvals=wanted)
        else:
            await self.session.set_settings(network=wanted == "on")

    async def _history(self, args: str) -> None:
        """/history [N]: the N turns before the first one on screen."""
        if args and not args.isdigit():
            self.say("usage: /history [N]", "red")
            return
        wanted = int(args) if args else HISTORY_TURNS
        await self._count_back()
        turns = list(self._past().turns)
        ids = [t.turn_id for t in turns]
        on_screen = self._first_shown if self._first_shown in ids else None
        end = ids.index(on_screen) if on_screen else min(self._turns_at_open, len(turns))
        start = max(0, end - wanted)
        if start == end:
            self.say("no earlier turns", "dim")
            return
        self.say(f"── turns {start + 1} to {end} of {len(turns)} ──", "dim")
        for turn in turns[start:end]:
            self.out.show_past(history.event_lines(turn.events))
        self._first_shown = turns[start].turn_id
        if start or self.session.history.has_more:
            self.say(history.earlier_line(start, more=self.session.history.has_more))
        else:
            self.say("── the first turn ──", "dim")

    def _output(self) -> None:
        """/output: the whole output of the last command folded here, else of
        the session's last command."""
        shown = self.out.folded or render.last_command(self.session.events)
        if shown is None:
            self.say("no command has run yet", "dim")
            return
        call, result = shown
        self.say(render.call_line(call), "bold")
        self.out.print(Text(render.command_output(result), style="dim"))

    # -- the way back ---------------------------------------------------------------------

    async def _undo(self, name: str, args: str) -> None:
        """/undo [N], /redo [N]: files changed since by someone else are
        listed first, and overwritten only if the user says so."""
        words = [w for w in args.split() if w != "--force"]
        if words and not words[0].isdigit():
            self.say(f"usage: /{name} [N]", "red")
            return
        turn = int(words[0]) if words else None
        restore = self.session.undo if name == "undo" else self.session.redo
        await self._restore(
            lambda check, force: restore(turn, check=check, force=force),
            asked="--force" not in args.split(),
        )

    async def _restore(
        self,
        restore: Callable[[bool, bool], Awaitable[Restored]],
        asked: bool = True,
        forced: bool = True,
    ) -> None:
        """Restore files (`restore(check, force)`): when `asked`, what would
        be left alone is checked first, and files changed since by someone
        else are overwritten only if the user says so; else with `forced`."""
        force = forced
        if asked:
            checked = await restore(True, False)
            if not checked.ok:
                self.say(checked.message, "red")
                return
            confirmed = await self._confirm_overwrite(checked.skipped)
            if confirmed is None:
                return
            force = confirmed
        done = await restore(False, force)
        self.say(done.message, "dim" if done.ok else "red")

    async def _confirm_overwrite(self, skipped: tuple[str, ...]) -> bool | None:
        """Whether to overwrite files changed since (False: none were); None
        when the user left."""
        if not skipped:
            return False
        for line in undo.overwrite_lines(skipped):
            self.say(line, "yellow")
        answer = await self._read("overwrite them? [y/N]> ", lambda: False)
        if not isinstance(answer, str):
            return None
        return answer.strip().lower() in ("y", "yes")

    async def _rewind(self, args: str) -> None:
        """/rewind: pick the prompt to go back to before (or give N), then
        what to take back (the code, the conversation, both)."""
        words = args.split()
        if words:
            if (
                not words[0].isdigit()
                or len(words) > 2
                or (len(words) == 2 and words[1] not in undo.REWIND_CHOICES)
            ):
                self.say("usage: /rewind [N [files|conversation|both]]", "red")
                return
            target = int(words[0])
            what = undo.REWIND_CHOICES[words[1]] if len(words) == 2 else None
        else:
            listed = await self.session.execute_command("rewind")
            turns = undo.listed_turns(listed.message) if listed.ok else []
            if not turns:
                self.say("No turns to rewind to.", "dim")
                return
            self.say("Go back to before which prompt?", "bold")
            for line in undo.picker_lines(turns, self.session.checkpoints):
                self.say(line)
            picked = await self._read("turn> ", lambda: False)
            numbers = [n for n, _ in turns]
            if not isinstance(picked, str) or not picked.strip().isdigit():
                self.say("rewind cancelled", "dim")
                return
            if int(picked.strip()) not in numbers:
                self.say(f"no turn {picked.strip()} to go back to", "red")
                return
            target, what = int(picked.strip()) - 1, None
        if what is None:
            said = await self._read(
                "restore (c)ode, c(o)nversation or (b)oth? [b]> ", lambda: False
            )
            if not isinstance(said, str) or said.strip().lower() not in undo.REWIND_CHOICES:
                self.say("rewind cancelled", "dim")
                return
            what = undo.REWIND_CHOICES[said.strip().lower()]
        chosen = what
        await self._restore(
            lambda check, force: self.session.rewind(target, chosen, check=check, force=force),
            asked=chosen != "conversation",
            forced=False,
        )

    async def _diff(self, args: str) -> None:
        """/diff [N]: the last turn's (or turn N's) changes as a diff."""
        if args and not args.isdigit():
            self.say("usage: /diff [N]", "red")
            return
        diff = await self.session.turn_diff(int(args) if args else None)
        if not diff.ok:
            self.say(diff.message, "red")
            return
        self.say(diff.message, "bold")
        self.out.print(undo.diff_lines(diff.text))

    async def _agents(self) -> None:
        """/agents: the session's subagents; then the agent types the host
        knows and the agent files it cannot use."""
        for line in undo.agents_lines(self.session.subagents):
            self.say(line)
        listed = await self.session.execute_command("agents")
        for line in listed.message.splitlines():
            if line.startswith(("agent types:", "cannot use")):
                self.say(line, "dim")

    # -- subagents at work ------------------------------------------------------------------

    def _follow_children(self) -> None:
        """Each running subagent not followed yet: what it does shows as
        nested lines under its task call."""
        if self.client is None:
            return
        for child in self.session.subagents:
            if child.running and child.session_id not in self._followed:
                self._followed.add(child.session_id)
                self._spawn(self._follow_child(child.session_id))

    async def _follow_child(self, child_id: str) -> None:
        assert self.client is not None
        shared = child_id in self.client.sessions  # closed at the end only when opened here
        try:
            opened = await self.client.open_session(child_id)
        except AgentHostError:
            self._followed.discard(child_id)
            return

        def expected() -> bool:
            return any(c.session_id == child_id and c.running for c in self.session.subagents)

        try:
            async for call in turn_calls(opened, expected):
                self.out.child_step(child_id, render.call_line(call))
        finally:
            self._followed.discard(child_id)
            if not shared:
                with contextlib.suppress(AgentHostError):
                    await opened.close()

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
        self.out.show_question(question)
        review = question.presentation != "tool-approval"
        choices = render.REVIEW_CHOICES if review else render.APPROVAL_CHOICES
        label = "choice> " if review else "allow> "
        while True:
            for shown in render.choice_lines(choices, self.console.width):
                self.say(shown, "bold")
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
                "always allowed in this session (a rule: /permissions lists and revokes it)",
                "green",
                always_allow_session=True,
            )
        elif choice in ("w", "workspace"):
            await self._answer(
                question,
                "always allowed in every session of this folder (a rule: /permissions lists it)",
                "green",
                always_allow_workspace=True,
            )
        elif choice in ("n", "no", "deny"):
            reason = await self._read(
                "why (optional)> ", lambda: question.question_id not in self.session.questions
            )
            if isinstance(reason, _Interrupted):
                return True
            await self._answer(question, "denied", "yellow", deny=(reason or "").strip())
        else:
            return False
        return True

    async def _answer(self, question: Question, said: str, style: str, **answer: Any) -> None:
        self._answered.add(question.question_id)
        await self.session.answer_question(question.question_id, **answer)
        self.say(said, style)
        # A denial's or a plan review's line says how the call ended.
        if question.call_id and (question.presentation != "tool-approval" or "deny" in answer):
            self.out.said_here.add(question.call_id)

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> int:
        loop = asyncio.get_running_loop()
        # Before anything shows: a Ctrl-C at the first line cancels the turn
        # rather than killing the chat.
        loop.add_signal_handler(signal.SIGINT, self._on_interrupt)
        updates = self.session.updates()
        if self.interactive:
            # Made before anything shows: making it writes to the terminal
            # (the cursor shown), which would land inside a running turn's text.
            self._prompt = PromptSession(
                bottom_toolbar=self._toolbar,
                key_bindings=self._key_bindings(),
                # `/` opens the commands while typing; Tab completes an @path
                # (from the gateway: asked on Tab only, not at each key).
                completer=merge_completers(
                    [SlashCompleter(self._commands), PathCompleter(self.session)]
                ),
                complete_while_typing=True,
            )
            self._keys = create_input()
        await self._learn_the_session()
        await self.show_header()
        if not self.interactive:
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
            self.out.stop_spinner()
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
            self.out.render(update)
            if isinstance(update, QuestionClosed):
                self._answered.discard(update.question_id)
            elif isinstance(update, SettingsChanged | UsageChanged):
                self._redraw_toolbar()
            elif isinstance(update, CommandsChanged):
                self._spawn(self._list_commands())
            elif isinstance(update, ProjectionChanged) and update.key == "subagents":
                self._follow_children()
            self._spin_if_waiting()
            changed, self._changed = self._changed, asyncio.Event()
            changed.set()

    def _spin_if_waiting(self) -> None:
        self.out.spin_if_waiting(bool(self._open_questions()))
