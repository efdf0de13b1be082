"""The sandbox and approval table, by properties over every combination."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from services.agentruntime.gates import (
    APPROVAL_POLICIES,
    ASK_FOR_COMMANDS,
    FULL,
    NEVER,
    READ_ONLY,
    SANDBOXES,
    Effect,
    Gate,
    confines_paths,
    decide,
    rule_covers,
)

effects = st.sampled_from(list(Effect))
sandboxes = st.sampled_from(SANDBOXES)
policies = st.sampled_from(APPROVAL_POLICIES)


@given(sandboxes, policies, st.booleans())
def test_reads_and_conversation_only_calls_always_run(
    sandbox: str, approvals: str, granted: bool
) -> None:
    for effect in (Effect.READ, Effect.NONE):
        assert decide(effect, sandbox, approvals, granted=granted).gate is Gate.ALLOW


@given(policies, st.booleans())
def test_read_only_refuses_file_changes_without_asking_whatever_was_granted(
    approvals: str, granted: bool
) -> None:
    decision = decide(Effect.WRITE, READ_ONLY, approvals, granted=granted)
    assert decision.gate is Gate.REFUSE
    assert "read-only" in decision.reason and "/sandbox" in decision.reason


@given(policies)
def test_read_only_runs_commands_as_the_policy_says_they_are_confined_read_only(
    approvals: str,
) -> None:
    asked = decide(Effect.COMMAND, READ_ONLY, approvals, granted=False).gate
    assert asked is (Gate.ALLOW if approvals == NEVER else Gate.ASK)


@given(effects, st.sampled_from([s for s in SANDBOXES if s != READ_ONLY]), policies)
def test_within_the_sandbox_a_grant_or_never_runs_without_asking(
    effect: Effect, sandbox: str, approvals: str
) -> None:
    assert decide(effect, sandbox, approvals, granted=True).gate is Gate.ALLOW
    assert decide(effect, sandbox, NEVER, granted=False).gate is Gate.ALLOW


@given(st.sampled_from([s for s in SANDBOXES if s != READ_ONLY]))
def test_ask_asks_for_every_change_and_command_ask_for_commands_only_for_commands(
    sandbox: str,
) -> None:
    for effect in (Effect.WRITE, Effect.COMMAND):
        assert decide(effect, sandbox, "ask", granted=False).gate is Gate.ASK
    assert decide(Effect.WRITE, sandbox, ASK_FOR_COMMANDS, granted=False).gate is Gate.ALLOW
    assert decide(Effect.COMMAND, sandbox, ASK_FOR_COMMANDS, granted=False).gate is Gate.ASK


@given(effects, sandboxes, policies, st.booleans())
def test_a_grant_never_makes_a_call_less_allowed(
    effect: Effect, sandbox: str, approvals: str, granted: bool
) -> None:
    order = [Gate.REFUSE, Gate.ASK, Gate.ALLOW]
    without = decide(effect, sandbox, approvals, granted=False).gate
    with_grant = decide(effect, sandbox, approvals, granted=True).gate
    assert order.index(with_grant) >= order.index(without)


def test_only_the_full_sandbox_lets_file_tools_out() -> None:
    assert [confines_paths(s) for s in SANDBOXES] == [s != FULL for s in SANDBOXES]


def test_a_command_rule_covers_the_command_and_plain_arguments_only() -> None:
    rule = "shell:npm test"
    assert rule_covers(rule, "shell:npm test")
    assert rule_covers(rule, "shell:npm test -- -k parser")
    for other in (
        "shell:npm tests",
        "shell:npm test && curl evil.example",
        "shell:npm test; rm -rf ~",
        "shell:npm test | tee out",
        "shell:npm test $(id)",
        "shell:npm test `id`",
        "shell:npm test > /etc/passwd",
        "shell:npm test\nrm -rf ~",
        "shell:npx test",
        "edit",
    ):
        assert not rule_covers(rule, other), other


def test_a_tool_rule_covers_that_tool_only() -> None:
    assert rule_covers("edit", "edit")
    assert not rule_covers("edit", "shell:edit")
    assert not rule_covers("shell:", "shell:ls")
