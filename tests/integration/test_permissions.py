"""Permission rules that last, and confined commands, through the gateway
with the SDK: what a user notices when they answer "always allow".

A rule granted in one session with workspace scope is honoured by a turn of
another session of the same folder started from another client, survives a
restart of every service, and is gone once revoked with `/permissions
revoke`. A rule only skips the question: the sandbox still refuses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from clients.sdk import AgentHostClient, Backoff, Session
from services.agentruntime.confinement import probe
from tests.support.coding import (
    WAIT_S,
    Coding,
    asked,
    coding_stack,
    finished,
    question_for,
    results,
    tool,
)
from tests.support.gateway import BOB

pytestmark = pytest.mark.skipif(probe() is not None, reason=f"no confinement here: {probe()}")

RUN = "echo run >> runs.txt"


@pytest.fixture
async def coding(tmp_path: Path) -> AsyncIterator[Coding]:
    async with coding_stack(tmp_path) as stack:
        yield stack


async def run_unasked(coding: Coding, session: Session, call_id: str, turns: int) -> None:
    """A turn of `session` runs RUN with no question asked."""
    coding.script(tool("shell", call_id, command=f"{RUN} --again"))
    await session.prompt(f"run it ({call_id})")
    await finished(session, turns)
    assert [q.call_id for q in asked(session.events)] == []
    assert results(session.events)[call_id].ok


async def test_a_workspace_rule_is_honoured_elsewhere_survives_restarts_and_is_revoked(
    coding: Coding,
) -> None:
    granting = await coding.session()
    coding.script(tool("shell", "s-1", command=RUN))
    await granting.prompt("run it")
    question = await question_for(granting, "s-1")
    await granting.answer_question(question.question_id, always_allow_workspace=True)
    await finished(granting)
    await granting.wait_until(lambda s: len(s.permissions) == 1, WAIT_S)
    [rule] = granting.permissions
    assert rule["grant"] == f"shell:{RUN}" and rule["scope"] == "workspace"
    assert rule["workspace_path"] == str(coding.folder)

    # Another client, another session of the same folder: no question.
    other = await coding.session(client=coding.client())
    await run_unasked(coding, other, "s-2", 1)
    listed = await other.execute_command("permissions")
    assert listed.ok and rule["rule_id"] in listed.message and RUN in listed.message

    # Every service restarts: the rule is in the log, so it still holds.
    for name in coding.harness.stack.names:
        await coding.harness.stack.restart(name)
    after = await coding.session(client=coding.client())
    await run_unasked(coding, after, "s-3", 1)

    # Revoked from another session of the workspace: asked again.
    revoked = await after.execute_command("permissions", f"revoke {rule['rule_id']}")
    assert revoked.ok, revoked.message
    reader = await coding.client().open_session(granting.id)
    await reader.wait_until(lambda s: s.permissions == [], WAIT_S)
    coding.script(tool("shell", "s-4", command=f"{RUN} --again"))
    await after.prompt("run it once more")
    await question_for(after, "s-4")
    assert (coding.folder / "runs.txt").read_text() == "run\n" + "run --again\n" * 2


async def test_a_workspace_rule_stays_with_its_account(coding: Coding) -> None:
    granting = await coding.session()
    coding.script(tool("shell", "s-1", command=RUN))
    await granting.prompt("run it")
    question = await question_for(granting, "s-1")
    await granting.answer_question(question.question_id, always_allow_workspace=True)
    await finished(granting)

    # Bob's session of the same folder is in Bob's workspace: he is asked.
    bob = AgentHostClient(coding.harness.address, BOB, backoff=Backoff(0.02, 0.2))
    coding.opened.append(bob)
    session = await coding.session(client=bob)
    coding.script(tool("shell", "s-2", command=RUN))
    await session.prompt("run it")
    await question_for(session, "s-2")
    listed = await session.execute_command("permissions")
    assert listed.message == "no permission rules"


async def test_a_command_prefix_rule_does_not_cover_a_chained_command(coding: Coding) -> None:
    session = await coding.session()
    coding.script(tool("shell", "s-1", command=RUN))
    await session.prompt("run it")
    question = await question_for(session, "s-1")
    await session.answer_question(question.question_id, always_allow_session=True)
    await finished(session)
    coding.script(tool("shell", "s-2", command=f"{RUN} && echo more"))
    await session.prompt("run more")
    await question_for(session, "s-2")  # asked: the rule covers RUN and its arguments only


async def test_a_rule_never_widens_the_sandbox(coding: Coding) -> None:
    session = await coding.session()
    coding.script(tool("write_file", "w-1", path="a.txt", content="a\n"))
    await session.prompt("write a")
    question = await question_for(session, "w-1")
    await session.answer_question(question.question_id, always_allow_session=True)
    await finished(session)
    await session.wait_until(lambda s: [r["grant"] for r in s.permissions] == ["edit"], WAIT_S)

    wanted = await session.set_settings(sandbox="read-only")
    await session.wait_until(lambda s: s.settings == wanted, WAIT_S)
    coding.script(
        tool("write_file", "w-2", path="b.txt", content="b\n"),
        tool("shell", "s-1", command="echo b > b.txt"),
    )
    await session.prompt("write b")
    question = await question_for(session, "s-1")  # commands still ask: the rule is for edits
    await session.answer_question(question.question_id, allow_once=True)
    await finished(session, 2)
    done = results(session.events)
    assert "sandbox is read-only" in done["w-2"].error
    assert "Read-only file system" in done["s-1"].error
    assert not (coding.folder / "b.txt").exists()


async def test_a_confined_command_through_the_gateway_cannot_read_the_stacks_data(
    coding: Coding,
) -> None:
    data = coding.harness.stack.data_dir
    token = (data / "token").read_text() if (data / "token").exists() else ""
    session = await coding.session(approvals="never")
    command = f"ls -a {data}; cat {data}/token; echo x > {coding.outside}/planted; echo end"
    coding.script(tool("shell", "s-1", command=command))
    await session.prompt("look at the data")
    await finished(session)
    result = results(session.events)["s-1"]
    shown = result.output + result.error
    assert "end" in shown and "sessionlog.db" not in shown
    assert not token or token not in shown
    assert not (coding.outside / "planted").exists()
