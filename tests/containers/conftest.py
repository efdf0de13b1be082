"""The container suite: a real Docker engine and the image `make image` builds.

Marked `containers` (deselect with `-m "not containers"`). Never skipped: when
no engine answers the tests fail and say how to get one (.ci/prepare-docker,
which CI runs before `make test`).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import uuid
from collections.abc import Iterator

import pytest

# Before testcontainers reads its configuration: no Ryuk reaper (its image
# cannot be pulled here; these tests remove what they start), and containers
# are reached through ports published on the Docker host (loopback).
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
os.environ.setdefault("TESTCONTAINERS_CONNECTION_MODE", "docker_host")

from testcontainers.core.network import Network

from tests.containers.stack import LABEL, REPO

IMAGE = os.environ.get("AGENTHOST_IMAGE", "agenthost:dev")
BUILD_TIMEOUT_S = 900


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "containers: needs a Docker engine (tests/containers)")


def docker(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def docker_engine() -> None:
    try:
        answer = docker("info", "--format", "{{.ServerVersion}}", timeout=30)
    except FileNotFoundError:
        pytest.fail("no docker CLI: run .ci/prepare-docker (installs Debian's docker.io)")
    if answer.returncode != 0:
        pytest.fail(f"no Docker engine answers ({answer.stderr.strip()}): run .ci/prepare-docker")


def make(*args: str) -> None:
    """Run a make target of deploy/image.mk. make is incremental (wheelhouse
    stamp, Docker's layer cache, images built once): a second run takes
    seconds. A lock keeps two test runs in one tree from building at once."""
    lock_path = REPO / "build" / ".make-image.lock"
    lock_path.parent.mkdir(exist_ok=True)
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        build = subprocess.run(
            ["make", "--no-print-directory", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
        )
    if build.returncode != 0:
        pytest.fail(
            f"`make {' '.join(args)}` failed:\n{build.stdout[-4000:]}\n{build.stderr[-4000:]}"
        )


@pytest.fixture(scope="session")
def agenthost_image(docker_engine: None) -> str:
    """The one image for every service, built (or brought up to date) by `make image`."""
    make("image", f"AGENTHOST_IMAGE={IMAGE}")
    return IMAGE


@pytest.fixture(scope="session")
def postgres_image(docker_engine: None) -> str:
    """postgres:15-bookworm when present or pullable, else one built from Debian's packages."""
    make("postgres-image")
    return (REPO / "build" / "postgres-image").read_text().strip()


@pytest.fixture(scope="session")
def test_session(docker_engine: None) -> Iterator[str]:
    """A label value for this run's containers and networks; removes leftovers at the end."""
    session = uuid.uuid4().hex[:12]
    yield session
    selector = f"label={LABEL}={session}"
    leftover = docker("ps", "--all", "--quiet", "--filter", selector).stdout.split()
    if leftover:
        docker("rm", "--force", "--volumes", *leftover)
    networks = docker("network", "ls", "--quiet", "--filter", selector).stdout.split()
    if networks:
        docker("network", "rm", *networks)


@pytest.fixture
def network(test_session: str) -> Iterator[Network]:
    """A user-defined network (Docker's DNS resolves containers by alias there)."""
    with Network(docker_network_kw={"labels": {LABEL: test_session}}) as created:
        yield created
