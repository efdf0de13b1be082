"""`agenthost exec PROMPT`: one prompt, one turn, for scripts and CI.

The answer streams to stdout as the model writes it, so stdout holds only
the answer; each tool call leaves one line on stderr. With `--json` every
line of stdout is one JSON object instead: the session, each logged event
(protobuf JSON, with its kind), the live text, the turn's end. Nobody is
there to answer questions: a tool approval or a plan review is answered by
denying it, with a reason that says how to allow such calls, and stderr
says so. With no stack running it starts one in this process for the call
(the `agenthost.stacks` entry point: the client imports no service) and
stops it after. The exit code says how the turn ended (exit_codes.py)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, TextIO

from agenthost.sessionlog.v1 import events_pb2 as ev
from google.protobuf import json_format

from agenthost_core.folds import Question, asked
from clients.sdk import (
    AgentBusyError,
    AgentHostClient,
    AgentHostError,
    ConnectionChanged,
    EventAppended,
    InvalidArgumentError,
    NotFoundError,
    QuestionAnsweredError,
    Session,
    Settings,
    TextStreamed,
    TransportError,
    UnauthenticatedError,
    UnknownModelError,
    Updates,
)

from .common import most_recent, workspace_session
from .config import (
    ConfigError,
    GatewayAddress,
    find_gateway,
    resolve_token,
    tls_roots,
    token_source,
    unexpected_answer,
)
from .exit_codes import ExitCode
from .reach import WrongGateway, answers
from .render import call_line, hook_line, result_line

REASONS = {
    ev.TURN_END_REASON_COMPLETED: ("completed", ExitCode.COMPLETED),
    ev.TURN_END_REASON_ERROR: ("error", ExitCode.TURN_FAILED),
    ev.TURN_END_REASON_CANCELLED: ("cancelled", ExitCode.CANCELLED),
    ev.TURN_END_REASON_INTERRUPTED: ("interrupted", ExitCode.CANCELLED),
}
# How long a lost gateway may stay away before exec gives up on the turn.
LOST_S = 30.0
# The tools that change files: `--approvals ask-for-commands` lets them run unasked.
FILE_TOOLS = frozenset({"write_file", "edit_file"})
PLAN_REVIEW_REFUSED = (
    "agenthost exec runs without a person to review plans, so this plan was not approved. "
    "End your turn now with the plan as your answer. (To have exec carry plans out, leave "
    "plan mode first: `agenthost plan set SESSION off`.)"
)


class ExecError(Exception):
    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class ExecOptions:
    prompt: str
    # The folder whose workspace a new (or --continue'd) session is in.
    folder: str
    session_id: str | None = None
    continue_last: bool = False
    # What to set before the prompt: sandbox, approvals, model, network.
    settings: dict[str, Any] = field(default_factory=dict)
    as_json: bool = False


def note(text: str) -> None:
    print(f"agenthost exec: {text}", file=sys.stderr, flush=True)


def run_exec(options: ExecOptions, gateway: str | None, token: str | None, data_dir: Path) -> int:
    """One turn for `options`; its exit code."""
    try:
        return int(asyncio.run(_exec(options, gateway, token, data_dir)))
    except ExecError as error:
        print(f"error: {error.message}", file=sys.stderr, flush=True)
        return int(error.code)
    except (KeyboardInterrupt, asyncio.CancelledError):
        note("cancelled")
        return int(ExitCode.CANCELLED)


async def _exec(
    options: ExecOptions, gateway: str | None, token: str | None, data_dir: Path
) -> ExitCode:
    main = asyncio.current_task()
    assert main is not None
    interrupts = Interrupts(main)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, interrupts)
    out: Output = JsonOutput(sys.stdout) if options.as_json else TextOutput(sys.stdout)
    async with reach_stack(gateway, token, data_dir) as (found, bearer):
        client = AgentHostClient(found.address, bearer, tls_roots=tls_roots())
        try:
            return await _one_turn(client, options, out, interrupts)
        except ExecError:
            raise
        except AgentHostError as error:
            raise _classified(error, found, token_source(token, data_dir)) from None
        finally:
            await client.close()


class Interrupts:
    """Ctrl-C (or SIGTERM): the first cancels the turn once one runs (and
    exec waits for its end to be recorded); before that, or a second one,
    stops exec at once."""

    def __init__(self, main: asyncio.Task[Any]) -> None:
        self._main = main
        self._count = 0
        self.cancel_turn: Callable[[], None] | None = None

    def __call__(self) -> None:
        self._count += 1
        if self._count == 1 and self.cancel_turn is not None:
            self.cancel_turn()
        else:
            self._main.cancel()


# -- the stack ------------------------------------------------------------------------


@asynccontextmanager
async def reach_stack(
    gateway: str | None, token: str | None, data_dir: Path
) -> AsyncIterator[tuple[GatewayAddress, str]]:
    """The stack to use and its token: the gateway named or recorded by
    `agenthost up` when it answers; else (nothing named, nothing answers at
    the recorded address) one started in this process for the call."""
    found = find_gateway(gateway, data_dir)
    token_from = token_source(token, data_dir)
    if found.given or found.recorded:
        try:
            bearer = resolve_token(token, data_dir)
            if await answers(found, bearer, token_from):
                yield found, bearer
                return
        except (ConfigError, WrongGateway) as error:
            raise ExecError(ExitCode.NO_STACK, str(error)) from None
        if found.given:
            raise ExecError(
                ExitCode.NO_STACK, f"nothing answers at {found.address} (from {found.source})"
            )
        note(f"nothing answers at {found.address} (from {found.source})")
    async with _own_stack(data_dir) as address:
        yield GatewayAddress(address, "the stack exec started"), resolve_token(None, data_dir)


@asynccontextmanager
async def _own_stack(data_dir: Path) -> AsyncIterator[str]:
    start = _stack_starter()
    note(f"no agenthost stack is running: starting one for this call (data in {data_dir})")
    async with contextlib.AsyncExitStack() as stack:
        try:
            address: str = await stack.enter_async_context(start(data_dir))
        except Exception as error:
            raise ExecError(
                ExitCode.NO_STACK, f"could not start a stack (data in {data_dir}): {error}"
            ) from None
        yield address


def _stack_starter() -> Callable[[Path], AbstractAsyncContextManager[str]]:
    """The stack this installation can run in-process (services/launcher.py,
    through the `agenthost.stacks` entry point)."""
    for entry in entry_points(group="agenthost.stacks"):
        if entry.name == "embedded":
            starter: Callable[[Path], AbstractAsyncContextManager[str]] = entry.load()
            return starter
    raise ExecError(
        ExitCode.NO_STACK,
        "no agenthost stack is running, and this installation cannot start one: "
        "run `agenthost up` somewhere and set AGENTHOST_GATEWAY",
    )


def _classified(error: AgentHostError, found: GatewayAddress, token_from: str) -> ExecError:
    """The exit code and message of a failed call."""
    if isinstance(error, UnknownModelError):
        known = error.metadata.get("known", "")
        return ExecError(ExitCode.USAGE, f"{error.message} (configured: {known})")
    if isinstance(error, AgentBusyError):
        return ExecError(
            ExitCode.USAGE, "the session is running a turn: wait for its end, or cancel it"
        )
    if isinstance(error, NotFoundError | InvalidArgumentError):
        return ExecError(ExitCode.USAGE, f"{error.message} ({error.reason or error.code})")
    if isinstance(error, TransportError | UnauthenticatedError):
        said = unexpected_answer(error, found, token_from)
        return ExecError(ExitCode.NO_STACK, said or f"lost the gateway at {found.address}")
    return ExecError(ExitCode.TURN_FAILED, f"{error.message} ({error.reason or error.code})")


# -- the turn -------------------------------------------------------------------------


async def _one_turn(
    client: AgentHostClient, options: ExecOptions, out: Output, interrupts: Interrupts
) -> ExitCode:
    session_id, continued = await _session_of(client, options)
    session = await client.open_session(session_id)
    updates = session.updates()
    try:
        before = session.last_seq
        summary = session.summary
        settings = session.settings
        if options.settings:
            settings = await session.set_settings(**options.settings)
        out.session(session_id, summary.cwd if summary is not None else "", continued, settings)
        turn = Turn(session, out, before)
        interrupts.cancel_turn = turn.request_cancel
        await session.prompt(options.prompt)
        return await turn.follow(updates)
    finally:
        interrupts.cancel_turn = None
        updates.close()
        await session.close()


async def _session_of(client: AgentHostClient, options: ExecOptions) -> tuple[str, bool]:
    """(session id, whether it continues an earlier one)."""

    if options.session_id is not None:
        return options.session_id, True
    choose = most_recent if options.continue_last else None
    session_id = await workspace_session(client, options.folder, choose, say=note)
    return session_id, options.continue_last


@dataclass
class TurnUsage:
    """The model requests of the turn (its model/usage events), summed."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost: float | None = None
    model: str = ""

    def add(self, usage: ev.ModelUsage) -> None:
        self.requests += 1
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.cached_prompt_tokens += usage.cached_prompt_tokens
        if usage.HasField("cost"):
            self.cost = (self.cost or 0.0) + usage.cost
        self.model = usage.model


class Turn:
    """Follows the turn the prompt started, from the events after `before`
    to its turn/end: shows them, denies the questions it raises."""

    def __init__(self, session: Session, out: Output, before: int) -> None:
        self._session = session
        self._out = out
        self._before = before
        self.turn_id: str | None = None
        self.usage = TurnUsage()
        # Plan reviews refused so far: the first tells the model to answer
        # with its plan; a later one is dismissed (the model stops asking).
        self._reviews = 0
        self._cancel: asyncio.Task[bool] | None = None

    def request_cancel(self) -> None:
        """Ask the runtime to cancel the turn (its end is then recorded)."""
        if self._cancel is None:
            note("cancelling the turn (Ctrl-C again stops at once)")
            self._cancel = asyncio.create_task(self._session.cancel())

    async def follow(self, updates: Updates) -> ExitCode:
        connected = True
        while True:
            try:
                update = await updates.next(within=None if connected else LOST_S)
            except TimeoutError:
                raise ExecError(
                    ExitCode.NO_STACK,
                    f"lost the gateway for {LOST_S:.0f}s; the turn may go on "
                    "(agenthost chat --continue shows it)",
                ) from None
            if isinstance(update, ConnectionChanged):
                connected = update.connected
            elif isinstance(update, TextStreamed):
                if self.turn_id is None or update.turn_id == self.turn_id:
                    self._out.text(update)
            elif isinstance(update, EventAppended) and update.event.seq > self._before:
                ended = await self._on_event(update.event)
                if ended is not None:
                    return ended

    async def _on_event(self, event: ev.Event) -> ExitCode | None:
        kind = event.WhichOneof("body")
        if kind == "turn_start" and self.turn_id is None:
            self.turn_id = event.turn_start.turn_id
        self._out.event(event)
        if kind == "model_usage" and event.model_usage.turn_id == self.turn_id:
            self.usage.add(event.model_usage)
        elif (question := asked(event)) is not None:
            await self._refuse(question)
        elif kind == "turn_end" and event.turn_end.turn_id == self.turn_id:
            reason, code = REASONS.get(event.turn_end.reason, ("error", ExitCode.TURN_FAILED))
            self._out.turn_end(event.turn_end, reason, self.usage, code)
            return code
        return None

    async def _refuse(self, question: Question) -> None:
        """Answer a question nobody is there to answer, and say so."""
        answer: dict[str, Any]
        if question.presentation == "tool-approval" and question.approval is not None:
            how = _how_to_allow(question.approval.tool)
            answer = {
                "deny": f"agenthost exec cannot ask for approval, so this call was denied. "
                f"To let such calls run, {how}."
            }
            said = f"denied `{question.approval.summary}`: exec cannot ask for approval; {how}"
        elif question.presentation == "plan-review":
            self._reviews += 1
            answer = {"feedback": PLAN_REVIEW_REFUSED} if self._reviews == 1 else {"dismiss": True}
            said = (
                "the plan was not approved: exec cannot ask for a review "
                "(leave plan mode to have exec carry plans out)"
            )
        else:
            answer = {"deny": "agenthost exec cannot ask questions."}
            said = f"not answered: {question.title} (exec cannot ask questions)"
        self._out.refused(question.call_id, said)
        with contextlib.suppress(QuestionAnsweredError):
            await self._session.answer_question(question.question_id, **answer)


def _how_to_allow(tool: str) -> str:
    edits = " (or --approvals ask-for-commands for file changes)" if tool in FILE_TOOLS else ""
    return (
        f"run agenthost exec with --approvals never{edits}, or add a permission rule "
        '(answer "always allow" once in agenthost chat)'
    )


# -- output ---------------------------------------------------------------------------


class Output:
    """What exec prints as the turn goes."""

    def session(
        self, session_id: str, cwd: str, continued: bool, settings: Settings | None
    ) -> None:
        pass

    def text(self, update: TextStreamed) -> None:
        pass

    def event(self, event: ev.Event) -> None:
        pass

    def refused(self, call_id: str, said: str) -> None:
        """A question exec answered no to (for the call `call_id`), said on stderr."""
        note(said)

    def turn_end(self, end: ev.TurnEnd, reason: str, usage: TurnUsage, code: ExitCode) -> None:
        pass


def _put(stdout: TextIO, text: str) -> None:
    """Write at once. A reader that went away (`exec ... | head -1`) gets no
    more, and the turn still runs to its end: what it does (files changed,
    commands run) is the point of a script's call, and the exit code says how
    it ended."""
    try:
        stdout.write(text)
        stdout.flush()
    except BrokenPipeError:
        # What is left in the buffer and what comes later go nowhere, quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stdout.fileno())
        os.close(devnull)


class TextOutput(Output):
    """The answer's text on stdout as it streams (each step's on a line of
    its own); one line per tool call and the turn's error on stderr."""

    def __init__(self, stdout: TextIO) -> None:
        self._stdout = stdout
        self._step: tuple[str, int] | None = None
        # Per step, the answer text written so far.
        self._written: dict[tuple[str, int], str] = {}
        self._last: tuple[str, int] | None = None
        self._at_line_start = True
        self._calls: dict[str, ev.ToolCall] = {}
        # Calls whose refusal was said already: their result leaves no line.
        self._refused: set[str] = set()

    def text(self, update: TextStreamed) -> None:
        if update.kind == "answer":
            self._write((update.turn_id, update.step), update.delta)

    def event(self, event: ev.Event) -> None:
        kind = event.WhichOneof("body")
        if kind == "step_start":
            self._step = (event.step_start.turn_id, event.step_start.step)
        elif kind == "assistant_message" and self._step is not None:
            # What the live text missed (none, mostly).
            text, written = event.assistant_message.text, self._written.get(self._step, "")
            if text.startswith(written):
                self._write(self._step, text[len(written) :])
        elif kind == "tool_call":
            self._calls[event.tool_call.call_id] = event.tool_call
        elif kind == "tool_result":
            self._tool_line(event.tool_result)
        elif kind == "hook_run":
            self._end_line()
            print(hook_line(event.hook_run), file=sys.stderr, flush=True)

    def refused(self, call_id: str, said: str) -> None:
        self._refused.add(call_id)
        self._end_line()
        note(said)

    def _tool_line(self, result: ev.ToolResult) -> None:
        """One line per finished call: its summary (`edit x.py (+1 -1)`,
        `$ pytest -q (exit 1)`), or what it did and why it failed."""
        call = self._calls.pop(result.call_id, None)
        if result.call_id in self._refused:
            return
        shown = call_line(call) if call is not None else result.call_id
        if result.HasField("display") and result.display.summary:
            shown = result_line(result)
        elif not result.ok:
            shown = f"{shown}: {result_line(result)}"
        self._end_line()
        print(f"{'✓' if result.ok else '✗'} {shown}", file=sys.stderr, flush=True)

    def turn_end(self, end: ev.TurnEnd, reason: str, usage: TurnUsage, code: ExitCode) -> None:
        self._end_line()
        if reason == "error":
            print(f"error: {end.error or 'the turn failed'}", file=sys.stderr)
        elif reason != "completed":
            note(f"the turn was {reason}")

    def _write(self, step: tuple[str, int], text: str) -> None:
        if not text:
            return
        if self._last is not None and step != self._last:
            self._end_line()
        self._last = step
        self._written[step] = self._written.get(step, "") + text
        _put(self._stdout, text)
        self._at_line_start = text.endswith("\n")

    def _end_line(self) -> None:
        if not self._at_line_start:
            _put(self._stdout, "\n")
            self._at_line_start = True


class JsonOutput(Output):
    """One JSON object per line on stdout."""

    def __init__(self, stdout: TextIO) -> None:
        self._stdout = stdout

    def _line(self, data: dict[str, Any]) -> None:
        _put(self._stdout, json.dumps(data) + "\n")

    def session(
        self, session_id: str, cwd: str, continued: bool, settings: Settings | None
    ) -> None:
        """The session, and the settings its turn runs with (where they came from)."""
        line: dict[str, Any] = {
            "type": "session",
            "session_id": session_id,
            "cwd": cwd,
            "continued": continued,
        }
        line["settings"] = None if settings is None else dataclasses.asdict(settings)
        self._line(line)

    def text(self, update: TextStreamed) -> None:
        self._line(
            {
                "type": "text",
                "turn_id": update.turn_id,
                "step": update.step,
                "kind": update.kind,
                "delta": update.delta,
            }
        )

    def event(self, event: ev.Event) -> None:
        body = json_format.MessageToDict(event)
        self._line(
            {"type": "event", "seq": event.seq, "kind": event.WhichOneof("body"), "event": body}
        )

    def turn_end(self, end: ev.TurnEnd, reason: str, usage: TurnUsage, code: ExitCode) -> None:
        self._line(
            {
                "type": "turn_end",
                "turn_id": end.turn_id,
                "reason": reason,
                "error": end.error,
                "usage": {
                    "requests": usage.requests,
                    "prompt_tokens": usage.prompt_tokens,
                    "completion_tokens": usage.completion_tokens,
                    "cached_prompt_tokens": usage.cached_prompt_tokens,
                    "cost": usage.cost,
                    "model": usage.model,
                },
                "exit_code": int(code),
            }
        )
