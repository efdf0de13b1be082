"""Hooks as Claude Code users write them, run by the real runtime over the
local OpenAI-compatible provider: settings files in Claude Code's format,
small scripts that read the event as JSON on stdin, confined by real
bubblewrap. What the model was told is checked at the provider."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.agentruntime.capabilities.hooks import MAX_GO_ONS
from services.agentruntime.confinement import probe
from services.agentruntime.models.tests.fake_provider import FakeProvider
from tests.integration.test_checkpoints import adapter, calls_reply, shell, text_reply
from tests.integration.test_subagents import is_child, task
from tests.support.rpc import reason_of
from tests.support.stack import Stack, running_stack

pytestmark = pytest.mark.skipif(
    probe() is not None, reason=f"commands cannot be confined here: {probe()}"
)

SID = "hooked"
WAIT_S = 10.0

GUARD = """\
import json, sys
event = json.load(sys.stdin)
command = event["tool_input"].get("command", "")
if "rm -rf" in command:
    print(f"Refusing {command!r}: use git clean in this repository.", file=sys.stderr)
    sys.exit(2)
"""
FORMATTER = """\
import json, sys
event = json.load(sys.stdin)
path = event["tool_input"]["file_path"]
with open(path) as file:
    lines = [line.rstrip() for line in file.read().replace("\\t", "    ").splitlines()]
with open(path, "w") as file:
    file.write("\\n".join(lines).strip("\\n") + "\\n")
"""
SPRINT = """\
import json, sys
event = json.load(sys.stdin)
print(f"Sprint goal: ship hooks (you were asked: {event['prompt']})")
"""
# Writes every event it is given to hooks.jsonl in the session's folder.
RECORDER = """\
import json, os, sys
event = json.load(sys.stdin)
with open(os.path.join(os.environ["CLAUDE_PROJECT_DIR"], "hooks.jsonl"), "a") as file:
    file.write(json.dumps(event) + "\\n")
"""


def command_hook(command: str, timeout: float | None = None) -> dict[str, Any]:
    hook: dict[str, Any] = {"type": "command", "command": command}
    if timeout is not None:
        hook["timeout"] = timeout
    return hook


def script(name: str) -> str:
    return f'python3 "$CLAUDE_PROJECT_DIR"/.claude/hooks/{name}'


class Project:
    """A project folder outside /tmp (confined commands get a /tmp of their
    own), a folder beside it, and Claude Code's settings in it."""

    def __init__(self, base: Path) -> None:
        self.folder = base / "project"
        self.outside = base / "outside"
        for folder in (self.folder, self.outside, self.folder / ".claude" / "hooks"):
            folder.mkdir(parents=True)

    def script(self, name: str, text: str) -> None:
        (self.folder / ".claude" / "hooks" / name).write_text(text)

    def settings(self, hooks: dict[str, list[dict[str, Any]]], name: str = "settings.json") -> None:
        settings = {"permissions": {"allow": ["Bash(npm test)"]}, "hooks": hooks}
        (self.folder / ".claude" / name).write_text(json.dumps(settings, indent=2))

    def recorded(self) -> list[dict[str, Any]]:
        path = self.folder / "hooks.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines]


@pytest.fixture
def project() -> Iterator[Project]:
    base = Path(tempfile.mkdtemp(prefix="agenthost-hooks-", dir="/var/tmp"))
    try:
        yield Project(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
async def stack(tmp_path: Path, provider: FakeProvider, project: Project) -> AsyncIterator[Stack]:
    async with running_stack(tmp_path / "data", model=adapter(provider)) as running:
        yield running


async def open_session(
    stack: Stack,
    project: Project,
    approvals: ev.ApprovalPolicy.ValueType = ev.APPROVAL_POLICY_NEVER,
) -> None:
    """The session, created once its settings are written (hooks are read
    when the runtime first runs a session)."""
    await stack.log.create_session(SID, str(project.folder))
    await stack.runtime.UpdateSettings(
        rt.UpdateSettingsRequest(session_id=SID, approvals=approvals)
    )


async def turn(stack: Stack, text: str) -> None:
    await stack.runtime.Prompt(rt.PromptRequest(session_id=SID, text=text))
    await stack.wait_idle(SID)


async def events(stack: Stack, kind: str) -> list[ev.Event]:
    read = (await stack.log.read(SID, limit=1000)).events
    return [e for e in read if e.WhichOneof("body") == kind]


async def runs(stack: Stack) -> list[ev.HookRun]:
    return [e.hook_run for e in await events(stack, "hook_run")]


def tool_messages(provider: FakeProvider, request: int) -> dict[str, str]:
    messages = provider.requests[request].body["messages"]
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


def user_texts(provider: FakeProvider, request: int) -> list[str]:
    messages = provider.requests[request].body["messages"]
    return [m["content"] for m in messages if m["role"] == "user"]


def write(path: str, content: str) -> tuple[str, dict[str, Any]]:
    return "write_file", {"path": path, "content": content}


async def test_a_claude_code_projects_hooks_work_unchanged(
    stack: Stack, provider: FakeProvider, project: Project
) -> None:
    """A guard on Bash that exits 2 for `rm -rf`, a formatter after Edit and
    Write, and context on every prompt: the command is refused with the
    hook's message as the model's result, the file is formatted after the
    write, and the context reaches the model before the prompt."""
    project.script("guard.py", GUARD)
    project.script("format.py", FORMATTER)
    project.script("sprint.py", SPRINT)
    project.settings(
        {
            "PreToolUse": [{"matcher": "Bash", "hooks": [command_hook(script("guard.py"))]}],
            "PostToolUse": [
                {"matcher": "Edit|Write", "hooks": [command_hook(script("format.py"))]}
            ],
            "UserPromptSubmit": [{"hooks": [command_hook(script("sprint.py"))]}],
        }
    )
    (project.folder / "build").mkdir()
    await open_session(stack, project)
    provider.enqueue(
        calls_reply(shell("rm -rf build"), write("notes.txt", "first\t \n\n\nsecond   \n\n")),
        text_reply("Cleaned up."),
    )
    await turn(stack, "tidy the project")

    assert (project.folder / "build").is_dir()
    assert (project.folder / "notes.txt").read_text() == "first\n\n\nsecond\n"
    results = tool_messages(provider, 1)
    refused = results["call-0-shell"]
    assert refused.startswith("Not run: PreToolUse hook: Refusing 'rm -rf build'")
    assert "use git clean in this repository." in refused
    (first_prompt,) = user_texts(provider, 0)[-1:]
    assert "Sprint goal: ship hooks (you were asked: tidy the project)" in first_prompt
    assert first_prompt.rstrip().endswith("tidy the project")

    shown = [
        (r.event, r.decision, r.exit_code if r.HasField("exit_code") else None)
        for r in await runs(stack)
    ]
    assert shown == [
        ("UserPromptSubmit", "context", 0),
        ("PreToolUse", "deny", 2),
        ("PostToolUse", "", 0),
    ]


def exit_code(run: ev.HookRun) -> int | None:
    return run.exit_code if run.HasField("exit_code") else None


async def ended(stack: Stack) -> list[int]:
    return [e.turn_end.reason for e in await events(stack, "turn_end")]


async def test_a_hook_can_do_no_more_than_a_command_of_its_session(
    stack: Stack, provider: FakeProvider, project: Project
) -> None:
    """A hook that writes beside the workspace or reaches the network (off
    in the session) fails as the same command of the model does; the run
    is noted and the turn goes on."""
    reached = asyncio.Event()

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reached.set()
        writer.close()

    server = await asyncio.start_server(on_connection, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    planting = f"echo planted > {project.outside}/planted"
    calling = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3)\""
    project.settings(
        {"UserPromptSubmit": [{"hooks": [command_hook(planting), command_hook(calling)]}]}
    )
    await open_session(stack, project)
    provider.enqueue(calls_reply(shell(planting), shell(calling)), text_reply("Neither worked."))
    async with server:
        await turn(stack, "try to get out")

    assert not reached.is_set() and list(project.outside.iterdir()) == []
    wrote, called = await runs(stack)
    assert exit_code(wrote) == 1 and "Read-only file system" in wrote.errors
    assert "non-blocking error" in wrote.note and wrote.decision == ""
    # The session's network namespace has a loopback of its own: nothing listens there.
    assert exit_code(called) == 1 and "Connection refused" in called.errors
    results = tool_messages(provider, 1)
    assert "Read-only file system" in results["call-0-shell"]
    assert called.errors.strip().splitlines()[-1] in results["call-1-shell"]
    assert await ended(stack) == [ev.TURN_END_REASON_COMPLETED]


async def test_a_hanging_hook_is_cut_at_its_timeout_and_the_turn_goes_on(
    stack: Stack, provider: FakeProvider, project: Project
) -> None:
    project.settings(
        {"PreToolUse": [{"matcher": "*", "hooks": [command_hook("sleep 60 & sleep 60", 1)]}]}
    )
    await open_session(stack, project)
    provider.enqueue(calls_reply(shell("echo ran")), text_reply("It ran."))
    await turn(stack, "run it")

    (hung,) = await runs(stack)
    assert hung.timed_out and exit_code(hung) is None
    assert hung.note == "timed out after 1 s and was stopped"
    assert 1000 <= hung.duration_ms < 5000
    assert tool_messages(provider, 1)["call-0-shell"].startswith("exit code 0\nran")
    assert await ended(stack) == [ev.TURN_END_REASON_COMPLETED]


STOP_ONCE = """\
import json, sys
event = json.load(sys.stdin)
if not event["stop_hook_active"]:
    print("Run the tests before you stop.", file=sys.stderr)
    sys.exit(2)
"""
STOP_NEVER = (
    RECORDER
    + """\
print(json.dumps({"decision": "block", "reason": "Not yet."}))
"""
)


async def test_a_stop_hook_keeps_the_turn_going_once(
    stack: Stack, provider: FakeProvider, project: Project
) -> None:
    project.script("stop.py", STOP_ONCE)
    project.settings({"Stop": [{"hooks": [command_hook(script("stop.py"))]}]})
    await open_session(stack, project)
    provider.enqueue(text_reply("Done."), text_reply("The tests pass; done."))
    await turn(stack, "fix it")

    assert len(provider.requests) == 2
    told = user_texts(provider, 1)[-1]
    assert "Run the tests before you stop." in told and "did not let you stop" in told
    assert [(r.decision, exit_code(r)) for r in await runs(stack)] == [("block", 2), ("", 0)]
    assert await ended(stack) == [ev.TURN_END_REASON_COMPLETED]


async def test_a_stop_hook_that_never_lets_go_is_heeded_only_so_often(
    stack: Stack, provider: FakeProvider, project: Project
) -> None:
    """Claude Code's loop guard: stop_hook_active says the turn already went
    on for a Stop hook; one that ignores it still lets the turn end."""
    project.script("stop.py", STOP_NEVER)
    project.settings({"Stop": [{"hooks": [command_hook(script("stop.py"))]}]})
    await open_session(stack, project)
    provider.responder = lambda body: text_reply("Done.")
    await turn(stack, "fix it")

    assert len(provider.requests) == 1 + MAX_GO_ONS
    assert [e["stop_hook_active"] for e in project.recorded()] == [False] + [True] * MAX_GO_ONS
    stops = await runs(stack)
    assert [r.decision for r in stops] == ["block"] * (1 + MAX_GO_ONS)
    assert [bool(r.note) for r in stops] == [False] * MAX_GO_ONS + [True]
    assert "not heeded" in stops[-1].note
    assert await ended(stack) == [ev.TURN_END_REASON_COMPLETED]


PERMISSIONS = """\
import json, sys
event = json.load(sys.stdin)
command = event["tool_input"].get("command", "")
if event["tool_name"] == "Write":
    decision, reason = "allow", "notes are fine"
elif "deploy" in command:
    decision, reason = "ask", "deploys need a person"
elif "curl" in command:
    decision, reason = "deny", "no network calls from this project"
else:
    sys.exit(0)
output = {"permissionDecision": decision, "permissionDecisionReason": reason}
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", **output}}))
"""


async def test_a_hooks_json_allows_asks_and_denies_but_never_widens_the_sandbox(
    stack: Stack, provider: FakeProvider, project: Project
) -> None:
    project.script("permissions.py", PERMISSIONS)
    matcher = {"matcher": "Bash|Write", "hooks": [command_hook(script("permissions.py"))]}
    project.settings({"PreToolUse": [matcher]})
    await open_session(stack, project, approvals=ev.APPROVAL_POLICY_ASK)
    provider.enqueue(
        calls_reply(write("notes.txt", "hi\n"), shell("curl example.com"), shell("./deploy")),
        text_reply("Done."),
    )
    await stack.runtime.Prompt(rt.PromptRequest(session_id=SID, text="go"))
    # Allowed: the write ran without asking. Denied: not run. Asked: the
    # policy is "ask", and so is the hook; answered, it runs.
    question = await stack.next_question(SID)
    assert question.title == "Allow $ ./deploy?"
    allow = ev.QuestionAnswer(allow_once=True)
    await stack.runtime.AnswerQuestion(
        rt.AnswerQuestionRequest(session_id=SID, question_id=question.question_id, answer=allow)
    )
    await stack.wait_idle(SID)
    assert (project.folder / "notes.txt").read_text() == "hi\n"
    results = tool_messages(provider, 1)
    assert results["call-1-shell"] == "Not run: PreToolUse hook: no network calls from this project"
    assert "./deploy" in results["call-2-shell"]
    assert len(await events(stack, "question_asked")) == 1

    # A read-only sandbox refuses the write the hook allows.
    await stack.runtime.UpdateSettings(
        rt.UpdateSettingsRequest(session_id=SID, sandbox=ev.SANDBOX_READ_ONLY)
    )
    provider.enqueue(calls_reply(write("other.txt", "no\n")), text_reply("Refused."))
    await turn(stack, "again")
    assert not (project.folder / "other.txt").exists()
    assert tool_messages(provider, 3)["call-0-write_file"].startswith(
        "Not run: the sandbox is read-only"
    )


async def test_a_hook_asks_where_the_policy_would_not(
    stack: Stack, provider: FakeProvider, project: Project
) -> None:
    project.script("permissions.py", PERMISSIONS)
    project.settings({"PreToolUse": [{"hooks": [command_hook(script("permissions.py"))]}]})
    await open_session(stack, project)  # approvals: never
    provider.enqueue(calls_reply(shell("./deploy")), text_reply("Not deployed."))
    await stack.runtime.Prompt(rt.PromptRequest(session_id=SID, text="deploy"))
    question = await stack.next_question(SID)
    deny = ev.QuestionAnswer(deny="not today")
    await stack.runtime.AnswerQuestion(
        rt.AnswerQuestionRequest(session_id=SID, question_id=question.question_id, answer=deny)
    )
    await stack.wait_idle(SID)
    assert tool_messages(provider, 1)["call-0-shell"] == "The user denied this call: not today"
    (asked,) = await runs(stack)
    assert (asked.decision, asked.reason) == ("ask", "deploys need a person")


async def test_a_prompt_a_hook_blocks_is_refused_with_its_reason(
    stack: Stack, provider: FakeProvider, project: Project
) -> None:
    guard = "grep -q password && { echo 'No secrets in prompts.' >&2; exit 2; }; exit 0"
    project.settings({"UserPromptSubmit": [{"hooks": [command_hook(guard)]}]})
    await open_session(stack, project)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stack.runtime.Prompt(rt.PromptRequest(session_id=SID, text="my password is x"))
    assert reason_of(refused.value) == "PROMPT_BLOCKED"
    assert "No secrets in prompts." in (refused.value.details() or "")
    kinds = [e.WhichOneof("body") for e in (await stack.log.read(SID, limit=100)).events]
    assert "user_message" not in kinds and "turn_start" not in kinds
    (blocked,) = await runs(stack)
    assert (blocked.event, blocked.decision, exit_code(blocked)) == ("UserPromptSubmit", "block", 2)
    assert provider.requests == []

    provider.enqueue(text_reply("Hello."))
    await turn(stack, "hello")
    assert user_texts(provider, 0)[-1] == "hello"


async def test_continue_false_ends_the_turn_after_the_step(
    stack: Stack, provider: FakeProvider, project: Project
) -> None:
    stopper = 'echo \'{"continue": false, "stopReason": "Build broken: stopping."}\''
    project.settings({"PostToolUse": [{"matcher": "Bash", "hooks": [command_hook(stopper)]}]})
    await open_session(stack, project)
    provider.enqueue(calls_reply(shell("echo one")), text_reply("never asked"))
    await turn(stack, "build")
    assert len(provider.requests) == 1
    (stopped,) = await runs(stack)
    assert (stopped.decision, stopped.reason) == ("stop", "Build broken: stopping.")
    assert await ended(stack) == [ev.TURN_END_REASON_COMPLETED]


async def test_every_event_fires_at_its_point_with_claude_codes_input(
    stack: Stack, provider: FakeProvider, project: Project
) -> None:
    project.script("record.py", RECORDER)
    recorder = [{"hooks": [command_hook(script("record.py"))]}]
    branch = {"matcher": "startup", "hooks": [command_hook("echo 'On branch main.'")]}
    project.settings(
        {
            "SessionStart": [*recorder, branch],
            "Notification": recorder,
            "SubagentStop": recorder,
            "Stop": recorder,
            "PreCompact": recorder,
            "SessionEnd": recorder,
        }
    )
    await open_session(stack, project, approvals=ev.APPROVAL_POLICY_ASK)
    parent = [
        calls_reply(shell("echo hi")),
        calls_reply(task("look", "look around")),
        text_reply("All done."),
        text_reply("Summary of the work."),
        text_reply("Again."),
    ]
    provider.responder = lambda body: text_reply("Looked.") if is_child(body) else parent.pop(0)
    await stack.runtime.Prompt(rt.PromptRequest(session_id=SID, text="start"))
    question = await stack.next_question(SID)
    await wait_for_run(stack, "Notification")
    allow = ev.QuestionAnswer(allow_once=True)
    await stack.runtime.AnswerQuestion(
        rt.AnswerQuestionRequest(session_id=SID, question_id=question.question_id, answer=allow)
    )
    await stack.wait_idle(SID)
    assert "On branch main." in user_texts(provider, 0)[0]
    await stack.runtime.ExecuteCommand(
        rt.ExecuteCommandRequest(session_id=SID, name="compact", args="keep the plan")
    )
    await turn(stack, "again")
    await stack.restart("agentruntime")  # the session ends where it ran

    fired = project.recorded()
    child = next(e["session_id"] for e in fired if e["hook_event_name"] == "SubagentStop")
    assert [(e["hook_event_name"], e["session_id"]) for e in fired] == [
        ("SessionStart", SID),
        ("Notification", SID),
        ("SubagentStop", child),
        ("Stop", SID),
        ("PreCompact", SID),
        ("SessionStart", SID),
        ("Stop", SID),
        ("SessionEnd", SID),
    ]
    assert child != SID and all(e["cwd"] == str(project.folder) for e in fired)
    start, notification, subagent, stop, compact, again, _, end = fired
    assert (start["source"], again["source"]) == ("startup", "compact")
    assert notification["message"] == "agenthost needs your answer: Allow $ echo hi?"
    assert notification["notification_type"] == "permission_prompt"
    assert (subagent["stop_hook_active"], subagent["last_assistant_message"]) == (False, "Looked.")
    assert (stop["stop_hook_active"], stop["last_assistant_message"]) == (False, "All done.")
    assert (compact["trigger"], compact["custom_instructions"]) == ("manual", "keep the plan")
    assert end["reason"] == "other" and start["permission_mode"] == "default"
    assert [r.event for r in await runs(stack)][-1] == "SessionEnd"


async def wait_for_run(stack: Stack, event: str) -> ev.HookRun:
    async with asyncio.timeout(WAIT_S):
        async for item in stack.log.subscribe(SID, after_seq=-1):
            if isinstance(item, ev.Event) and item.hook_run.event == event:
                return item.hook_run
    raise AssertionError("the log subscription ended")


async def test_a_queued_prompts_context_reaches_the_model_after_the_running_calls_results(
    stack: Stack, provider: FakeProvider, project: Project
) -> None:
    """A prompt queued while a command runs gets its hook's context at once
    (recorded before its input/queued); the model reads it after the
    command's result, since nothing may come between a call and its result."""
    project.script("sprint.py", SPRINT)
    project.settings({"UserPromptSubmit": [{"hooks": [command_hook(script("sprint.py"))]}]})
    await open_session(stack, project)
    waiting = "while [ ! -e go ]; do sleep 0.05; done; echo went"
    provider.enqueue(calls_reply(shell(waiting)), text_reply("First done."), text_reply("Next."))
    await stack.runtime.Prompt(rt.PromptRequest(session_id=SID, text="first"))
    await wait_for_call(stack)
    queued = rt.PromptRequest(session_id=SID, text="second", mode=rt.PROMPT_MODE_QUEUE)
    await stack.runtime.Prompt(queued)
    (project.folder / "go").touch()
    await stack.wait_idle(SID)

    roles = [m["role"] for m in provider.requests[1].body["messages"]]
    assert roles[-3:] == ["assistant", "tool", "user"]
    assert "you were asked: second" in user_texts(provider, 1)[-1]
    assert user_texts(provider, 2)[-1] == "second"
    assert [r.decision for r in await runs(stack)] == ["context", "context"]


async def wait_for_call(stack: Stack) -> None:
    async with asyncio.timeout(WAIT_S):
        async for item in stack.log.subscribe(SID, after_seq=-1):
            if isinstance(item, ev.Event) and item.HasField("tool_call"):
                return
