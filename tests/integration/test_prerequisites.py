"""`make test` on a machine where no Docker engine or PostgreSQL answers: as
root it starts them (.ci/prepare-docker, the installed PostgreSQL); otherwise
it stops in one line that says what to do."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.hosts import REPO


def stub(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


def test_without_an_engine_or_root_it_stops_in_one_line(tmp_path: Path) -> None:
    stub(tmp_path, "docker", "echo 'Cannot connect to the Docker daemon' >&2; exit 1")
    stub(tmp_path, "id", "echo 1000")  # not root
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    run = subprocess.run(
        [str(REPO / "tools" / "need-docker")], env=env, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Docker engine" in lines[0] and ".ci/prepare-docker" in lines[0]


def test_with_an_engine_it_does_nothing(tmp_path: Path) -> None:
    stub(tmp_path, "docker", "exit 0")
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    run = subprocess.run(
        [str(REPO / "tools" / "need-docker")], env=env, capture_output=True, text=True, timeout=60
    )
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")


def run_need_postgres(folder: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{folder}:{os.environ['PATH']}"}
    env.pop("AGENTHOST_TEST_POSTGRES_DSN", None)
    return subprocess.run(
        [str(REPO / "tools" / "need-postgres")], env=env, capture_output=True, text=True, timeout=60
    )


def test_without_postgres_or_root_it_stops_in_one_line(tmp_path: Path) -> None:
    stub(tmp_path, "pg_isready", "exit 2")
    stub(tmp_path, "id", "echo 1000")  # not root
    run = run_need_postgres(tmp_path)
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "PostgreSQL on 127.0.0.1:5432" in lines[0]


def test_with_postgres_answering_it_does_nothing(tmp_path: Path) -> None:
    stub(tmp_path, "pg_isready", "exit 0")
    run = run_need_postgres(tmp_path)
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")
