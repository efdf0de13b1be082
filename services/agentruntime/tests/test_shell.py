"""The shell tool with real processes in a temporary folder."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import pytest

from services.agentruntime import shell
from services.agentruntime.shell import (
    SHELL_DESCRIPTION,
    SHELL_PARAMETERS,
    ShellResult,
    format_shell_result,
    run_shell,
    shell_environment,
)

WAIT_S = 10.0


class Chunks:
    """An on_output callback the test can wait on."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self._changed = asyncio.Event()

    def __call__(self, text: str) -> None:
        self.parts.append(text)
        self._changed.set()

    @property
    def text(self) -> str:
        return "".join(self.parts)

    async def wait_for(self, needle: str) -> None:
        async with asyncio.timeout(WAIT_S):
            while needle not in self.text:
                self._changed.clear()
                await self._changed.wait()


async def exited(pid: int) -> bool:
    """Whether pid has exited (a zombie counts), waiting on its pidfd."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    loop, done = asyncio.get_running_loop(), asyncio.Event()
    loop.add_reader(fd, done.set)
    try:
        async with asyncio.timeout(WAIT_S):
            await done.wait()
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def kill_if_alive(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


async def run(command: str, cwd: Path, **options: object) -> ShellResult:
    return await run_shell(command, cwd, timeout_s=WAIT_S, **options)  # type: ignore[arg-type]


# --- exit codes and output ------------------------------------------------------------


async def test_exit_code_and_output(tmp_path: Path) -> None:
    result = await run("echo hello; exit 3", tmp_path)
    assert (result.exit_code, result.output) == (3, "hello\n")
    assert not result.timed_out and not result.truncated
    assert 0 <= result.duration_s < WAIT_S


async def test_success(tmp_path: Path) -> None:
    assert (await run("true", tmp_path)).exit_code == 0


async def test_stderr_is_merged_in_order(tmp_path: Path) -> None:
    result = await run("echo one; echo two >&2; echo three", tmp_path)
    assert result.output == "one\ntwo\nthree\n"


async def test_runs_in_cwd_with_empty_stdin(tmp_path: Path) -> None:
    result = await run("pwd; cat; echo done", tmp_path)
    assert result.output == f"{tmp_path}\ndone\n"


async def test_runs_bash(tmp_path: Path) -> None:
    result = await run("echo $0; [[ 1 == 1 ]] && echo bash-ok", tmp_path)
    assert result.output == "/bin/bash\nbash-ok\n"


async def test_falls_back_to_sh_without_bash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell, "BASH", str(tmp_path / "no-bash"))
    assert (await run("echo $0", tmp_path)).output == "/bin/sh\n"


async def test_a_death_by_signal_reports_128_plus_n(tmp_path: Path) -> None:
    assert (await run("kill -SEGV $$", tmp_path)).exit_code == 128 + signal.SIGSEGV


async def test_runs_in_its_own_process_group(tmp_path: Path) -> None:
    result = await run("cut -d' ' -f5 /proc/$$/stat; echo $$", tmp_path)
    group, pid = result.output.split()
    assert group == pid and int(group) != os.getpgrp()


async def test_a_command_that_cannot_start(tmp_path: Path) -> None:
    missing = await run("echo hi", tmp_path / "missing")
    assert missing.exit_code == shell.CANNOT_START
    assert missing.output.startswith("cannot start the command: ")
    nul = await run("echo \0", tmp_path)
    assert nul.exit_code == shell.CANNOT_START and "NUL" in nul.output


async def test_non_utf8_output_is_replaced(tmp_path: Path) -> None:
    chunks = Chunks()
    result = await run(r"printf 'ok \xff\xfe end\n'", tmp_path, on_output=chunks)
    assert result.output == "ok \ufffd\ufffd end\n"
    assert chunks.text == result.output


# --- streaming ------------------------------------------------------------------------


async def test_output_streams_while_the_command_runs(tmp_path: Path) -> None:
    chunks = Chunks()
    command = "echo first; while [ ! -e go ]; do sleep 0.01; done; echo second"
    task = asyncio.create_task(run(command, tmp_path, on_output=chunks))
    await chunks.wait_for("first\n")
    assert not task.done()
    (tmp_path / "go").touch()
    result = await task
    assert result.output == "first\nsecond\n"
    assert chunks.text == result.output


async def test_chunks_arrive_in_order(tmp_path: Path) -> None:
    chunks = Chunks()
    command = "for i in $(seq 1 20); do echo line$i; sleep 0.01; done"
    result = await run(command, tmp_path, on_output=chunks)
    expected = "".join(f"line{i}\n" for i in range(1, 21))
    assert result.output == expected and chunks.text == expected
    assert len(chunks.parts) > 1


async def test_a_multibyte_character_is_never_split(tmp_path: Path) -> None:
    chunks = Chunks()
    result = await run(r"printf '\xc3'; sleep 0.1; printf '\xa9\n'", tmp_path, on_output=chunks)
    assert result.output == "é\n"
    assert chunks.text == "é\n" and all("\ufffd" not in part for part in chunks.parts)


async def test_a_failing_callback_stops_streaming_only(tmp_path: Path) -> None:
    def broken(text: str) -> None:
        raise RuntimeError("ui gone")

    result = await run("echo a; sleep 0.05; echo b", tmp_path, on_output=broken)
    assert (result.exit_code, result.output) == (0, "a\nb\n")


# --- output cap -----------------------------------------------------------------------


async def test_output_is_capped_with_head_tail_and_marker(tmp_path: Path) -> None:
    chunks = Chunks()
    full = "".join(f"{n}\n" for n in range(1, 20001))
    result = await run("seq 1 20000", tmp_path, output_cap=1000, on_output=chunks)
    assert result.truncated and result.exit_code == 0
    head, tail = full[:500], full[-500:]
    newline = "" if head.endswith("\n") else "\n"
    omitted = len(full) - 1000
    assert result.output == f"{head}{newline}[… {omitted} bytes omitted …]\n{tail}"
    assert chunks.text == full[:1000]


async def test_the_cap_never_cuts_a_character(tmp_path: Path) -> None:
    result = await run("for i in $(seq 1 300); do printf 'é'; done", tmp_path, output_cap=102)
    assert result.truncated and "\ufffd" not in result.output
    head, _, tail = result.output.partition("\n[… ")
    assert set(head) == {"é"} and set(tail.split("…]\n")[1]) == {"é"}
    omitted = int(tail.split()[0])
    assert len(head.encode()) + omitted + len(tail.split("…]\n")[1].encode()) == 600


async def test_output_at_the_cap_is_whole(tmp_path: Path) -> None:
    result = await run("printf '%0100d' 0", tmp_path, output_cap=100)
    assert not result.truncated and result.output == "0" * 100


# --- timeouts, cancellation and process groups ----------------------------------------


async def test_a_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    command = "sleep 1000 & echo $! > child.pid; echo started; wait"
    result = await run_shell(command, tmp_path, timeout_s=1)
    child = int((tmp_path / "child.pid").read_text())
    try:
        assert result.timed_out and result.exit_code is None
        assert result.output == "started\n"
        assert await exited(child)
    finally:
        kill_if_alive(child)


async def test_a_process_ignoring_sigterm_gets_sigkill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell, "KILL_GRACE_S", 0.2)
    command = "trap '' TERM; sleep 1000 & echo $! > child.pid; wait"
    result = await run_shell(command, tmp_path, timeout_s=0.5)
    child = int((tmp_path / "child.pid").read_text())
    try:
        assert result.timed_out
        assert await exited(child)
    finally:
        kill_if_alive(child)


async def test_cancellation_kills_the_group_and_reraises(tmp_path: Path) -> None:
    chunks = Chunks()
    command = "sleep 1000 & echo $! > child.pid; echo started; wait"
    task = asyncio.create_task(run(command, tmp_path, on_output=chunks))
    await chunks.wait_for("started\n")
    child = int((tmp_path / "child.pid").read_text())
    try:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await exited(child)
    finally:
        kill_if_alive(child)


async def test_background_jobs_do_not_outlive_the_command(tmp_path: Path) -> None:
    result = await run("sleep 1000 & echo $!", tmp_path)
    child = int(result.output)
    try:
        assert result.exit_code == 0 and not result.timed_out
        assert result.duration_s < WAIT_S / 2
        assert await exited(child)
    finally:
        kill_if_alive(child)


# --- environment ----------------------------------------------------------------------


def test_shell_environment_drops_secrets() -> None:
    base = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "AGENTHOST_MODEL_API_KEY": "k",
        "AGENTHOST_GATEWAY": "127.0.0.1:7100",
        "OPENAI_API_KEY": "k",
        "GITHUB_TOKEN": "t",
        "aws_secret_access_key": "s",
        "DB_PASSWORD": "p",
    }
    assert shell_environment(base) == {"PATH": "/usr/bin", "HOME": "/home/u", "LANG": "C.UTF-8"}


async def test_commands_do_not_see_the_runtime_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTHOST_MODEL_API_KEY", "sk-very-secret")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-secret")
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    output = (await run("env", tmp_path)).output
    assert "AGENTHOST_MODEL_API_KEY" not in output and "sk-very-secret" not in output
    assert "tok-secret" not in output
    assert "HARMLESS_SETTING=visible" in output and "PATH=" in output


async def test_an_explicit_env_is_used_as_given(tmp_path: Path) -> None:
    result = await run("echo $ONLY; echo ${PATH:-none}", tmp_path, env={"ONLY": "me"})
    assert result.output.splitlines()[0] == "me"


# --- formatting for the model ---------------------------------------------------------


def result(code: int | None, output: str, timed_out: bool = False) -> ShellResult:
    return ShellResult(code, output, timed_out, truncated=False, duration_s=5.04)


def test_format_success() -> None:
    outcome = format_shell_result("ls", result(0, "a\nb\n"))
    assert outcome.ok and outcome.output == "exit code 0\na\nb\n" and outcome.error == ""


def test_format_failure_keeps_the_output_in_the_error() -> None:
    outcome = format_shell_result("make", result(2, "boom\n"))
    assert not outcome.ok and outcome.error == "exit code 2\nboom\n"


def test_format_timeout_and_kill() -> None:
    timed_out = format_shell_result("sleep 9", result(None, "partial\n", timed_out=True))
    assert not timed_out.ok
    assert timed_out.error.startswith("timed out after 5.0 s")
    assert timed_out.error.endswith("\npartial\n")
    killed = format_shell_result("x", result(None, ""))
    assert killed.error == "killed\n(no output)"


def test_format_without_output() -> None:
    assert format_shell_result("true", result(0, "")).output == "exit code 0\n(no output)"


def test_the_schema() -> None:
    assert SHELL_PARAMETERS["required"] == ["command"]
    assert SHELL_PARAMETERS["additionalProperties"] is False
    timeout = SHELL_PARAMETERS["properties"]["timeout_s"]
    assert (timeout["type"], timeout["minimum"], timeout["maximum"]) == ("number", 1, 600.0)
    assert shell.DEFAULT_TIMEOUT_S == 120.0 and shell.MAX_TIMEOUT_S == 600.0
    assert SHELL_DESCRIPTION and "\n" not in SHELL_DESCRIPTION


async def test_a_command_reads_what_it_is_given_and_its_stderr_can_be_kept_apart(
    tmp_path: Path,
) -> None:
    """A hook reads its event on stdin, says why on stderr (exit 2), and its
    stdout stays its answer: the two are not mixed."""
    command = 'read -r line; echo "got $line"; echo "not that" >&2; exit 2'
    result = await run_shell(
        command, tmp_path, timeout_s=WAIT_S, stdin=b'{"a": 1}\n', errors_apart=True
    )
    assert (result.exit_code, result.output, result.errors) == (2, 'got {"a": 1}\n', "not that\n")


async def test_a_command_that_leaves_its_input_unread_still_ends(tmp_path: Path) -> None:
    """More input than a pipe holds, never read: the command's end is all
    that is waited for."""
    result = await run_shell(
        "exit 0", tmp_path, timeout_s=WAIT_S, stdin=b"x" * (4 << 20), errors_apart=True
    )
    assert (result.exit_code, result.timed_out, result.errors) == (0, False, "")
