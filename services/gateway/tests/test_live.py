"""LiveTexts orders a command's streamed output against its logged result:
whatever arrives, a client gets all of the output before the result, once."""

from __future__ import annotations

from agenthost.runtime.v1 import runtime_pb2 as rt
from agenthost.sessionlog.v1 import events_pb2 as ev
from hypothesis import given
from hypothesis import strategies as st

from services.agentruntime.shell import ShellResult, format_shell_result
from services.gateway.live import COMMAND_TOOL, LiveTexts, command_output

SESSION, TURN, CALL = "s-1", "t-1", "call-1"


def logged_result(output: str, exit_code: int = 0) -> ev.ToolResult:
    """The tool/result the shell tool logs for a command that printed `output`."""
    outcome = format_shell_result("make", ShellResult(exit_code, output, False, False, 0.1))
    return ev.ToolResult(call_id=CALL, ok=outcome.ok, output=outcome.output, error=outcome.error)


def piece(offset: int, text: str) -> rt.ToolOutputDelta:
    return rt.ToolOutputDelta(
        session_id=SESSION, turn_id=TURN, call_id=CALL, offset=offset, text=text
    )


def opened() -> LiveTexts:
    texts = LiveTexts()
    texts.start_output(SESSION, TURN, ev.ToolCall(call_id=CALL, name=COMMAND_TOOL))
    return texts


@given(st.text(max_size=200), st.integers(min_value=0, max_value=200), st.booleans())
def test_the_output_a_client_gets_is_the_commands_whatever_arrived_in_time(
    output: str, arrived: int, failed: bool
) -> None:
    texts = opened()
    shown = ""
    for start in range(0, min(arrived, len(output)), 7):
        fresh = texts.output(piece(start, output[start : start + 7]))
        shown += fresh.text if fresh else ""
    shown += "".join(
        d.text for d in texts.finish_output(SESSION, TURN, logged_result(output, int(failed)))
    )
    assert shown == output
    # Deltas after the result are late: dropped.
    assert texts.output(piece(0, output + "more")) is None


def test_a_result_with_nothing_new_owes_nothing() -> None:
    texts = opened()
    texts.output(piece(0, "all of it\n"))
    assert texts.finish_output(SESSION, TURN, logged_result("all of it\n")) == []


def test_a_capped_result_that_no_longer_extends_the_stream_owes_nothing() -> None:
    texts = opened()
    texts.output(piece(0, "line 1\nline 2\n"))
    capped = "line 1\n[… 900 bytes omitted …]\nlast\n"
    assert texts.finish_output(SESSION, TURN, logged_result(capped)) == []


def test_other_tools_results_stream_nothing() -> None:
    texts = LiveTexts()
    texts.start_output(SESSION, TURN, ev.ToolCall(call_id=CALL, name="read_file"))
    read = ev.ToolResult(call_id=CALL, ok=True, output="1 | first line\n2 | second\n")
    assert texts.finish_output(SESSION, TURN, read) == []


def test_command_output_reads_the_shell_tools_result() -> None:
    assert command_output(logged_result("a\nb\n")) == "a\nb\n"
    assert command_output(logged_result("oops\n", exit_code=2)) == "oops\n"
    assert command_output(logged_result("")) == ""
