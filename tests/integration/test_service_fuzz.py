"""Every method of the session log and workspace services, fuzzed from their
descriptors (tests/support/fuzz.py): random valid-shaped requests and random
bytes get OK or a typed refusal, never INTERNAL or UNKNOWN; an
INVALID_ARGUMENT names its fields; a refused call writes no row; the
service keeps answering health.

Each method gets a bounded number of calls against one real service on
loopback over SQLite files, seeded with sessions and workspaces whose ids
and paths the requests reuse, so calls reach real rows and not only
NOT_FOUND.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from agenthost.sessionlog.v1 import session_log_pb2
from agenthost.workspace.v1 import workspace_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.common.client import open_channel
from services.sessionlog.client import SessionLogClient
from services.sessionlog.service import session_log_service
from services.workspace.client import WorkspaceClient
from services.workspace.service import workspace_service
from tests.support.events import assistant, user
from tests.support.folders import Folders
from tests.support.fuzz import Pool, ServiceFuzzer, fuzzable, sqlite_rows
from tests.support.hosts import running_host

SESSION_LOG = session_log_pb2.DESCRIPTOR.services_by_name["SessionLogService"]
WORKSPACE = workspace_pb2.DESCRIPTOR.services_by_name["WorkspaceService"]

# Calls per method: a few hundred across the two kinds, about 40 s in all on
# two cores for both services.
FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
MESSAGES = settings(FUZZ, max_examples=150)
BYTES = settings(FUZZ, max_examples=60)
# How finely a damaged request is cut short.
CUT_STEPS = 64


def payloads(fuzzer: ServiceFuzzer, name: str) -> st.SearchStrategy[bytes]:
    """Random bytes, and valid requests cut short or with bytes appended
    (closer to a real decoder's edge cases than noise alone)."""
    method = fuzzer.method(name)

    @st.composite
    def damaged(draw: st.DrawFn) -> bytes:
        encoded = fuzzer.draw_request(draw(st.data()), method).SerializeToString()
        # A share of the request, not a length: its length depends on the ids
        # the pool holds, and hypothesis needs each run to make the same draws.
        kept = draw(st.integers(0, CUT_STEPS))
        return encoded[: len(encoded) * kept // CUT_STEPS] + draw(st.binary(max_size=8))

    return st.one_of(st.binary(max_size=512), damaged())


def fixture_paths(folders: Folders) -> list[str]:
    """Real paths of every kind a workspace path can be."""
    project = Path(folders("/src/app"))
    (project / "file.txt").write_text("not a folder\n")
    link = project.parent / "link"
    link.symlink_to(project)
    return [
        str(project),
        folders("/src/other"),
        str(link),
        str(project / "file.txt"),
        str(project / "missing"),
    ]


@pytest.fixture
async def session_log_fuzzer(tmp_path: Path, folders: Folders) -> AsyncIterator[ServiceFuzzer]:
    db = tmp_path / "sessionlog.db"
    async with running_host("sessionlog", session_log_service(db), tmp_path) as (_, channel):
        log = SessionLogClient(channel)
        for session_id in ("s1", "s2"):
            await log.create_session(session_id, folders("/src/app"))
        await log.append("s1", [user("hello"), assistant("hi")])
        await log.create_session("lazy", folders("/src/app"))
        pool = Pool({"session_id": ["s1", "s2", "lazy"], "path": fixture_paths(folders)})
        yield ServiceFuzzer(SESSION_LOG, channel, pool, snapshot=sqlite_rows(db))


@pytest.fixture
async def workspace_fuzzer(tmp_path: Path, folders: Folders) -> AsyncIterator[ServiceFuzzer]:
    log_db = tmp_path / "log" / "sessionlog.db"
    async with running_host("sessionlog", session_log_service(log_db), log_db.parent) as (
        log_host,
        _,
    ):
        log_channel = open_channel(log_host.address)
        data_dir = tmp_path / "workspace"
        definition = workspace_service(data_dir, SessionLogClient(log_channel))
        try:
            async with running_host("workspace", definition, data_dir) as (_, channel):
                pool = Pool({"account_id": ["acct", "other-acct"], "path": fixture_paths(folders)})
                workspaces = WorkspaceClient(channel)
                for account in ("acct", "other-acct"):
                    workspace, _ = await workspaces.create(account, folders("/src/app"))
                    session = await workspaces.create_session(account, workspace.id)
                    pool.add("workspace_id", workspace.id)
                    pool.add("session_id", session.id)
                snapshot = sqlite_rows(data_dir / "workspace.db", log_db)
                yield ServiceFuzzer(WORKSPACE, channel, pool, snapshot=snapshot)
        finally:
            await log_channel.close()


@pytest.mark.parametrize("method", fuzzable(SESSION_LOG))
@MESSAGES
@given(data=st.data())
async def test_the_session_log_answers_any_request_typed(
    session_log_fuzzer: ServiceFuzzer, method: str, data: st.DataObject
) -> None:
    fuzzer = session_log_fuzzer
    request = fuzzer.draw_request(data, fuzzer.method(method))
    await fuzzer.check(fuzzer.method(method), request.SerializeToString())


@pytest.mark.parametrize("method", fuzzable(SESSION_LOG))
@BYTES
@given(data=st.data())
async def test_the_session_log_refuses_random_bytes_typed(
    session_log_fuzzer: ServiceFuzzer, method: str, data: st.DataObject
) -> None:
    fuzzer = session_log_fuzzer
    await fuzzer.check(fuzzer.method(method), data.draw(payloads(fuzzer, method)))


@pytest.mark.parametrize("method", fuzzable(WORKSPACE))
@MESSAGES
@given(data=st.data())
async def test_the_workspace_service_answers_any_request_typed(
    workspace_fuzzer: ServiceFuzzer, method: str, data: st.DataObject
) -> None:
    fuzzer = workspace_fuzzer
    request = fuzzer.draw_request(data, fuzzer.method(method))
    await fuzzer.check(fuzzer.method(method), request.SerializeToString())


@pytest.mark.parametrize("method", fuzzable(WORKSPACE))
@BYTES
@given(data=st.data())
async def test_the_workspace_service_refuses_random_bytes_typed(
    workspace_fuzzer: ServiceFuzzer, method: str, data: st.DataObject
) -> None:
    fuzzer = workspace_fuzzer
    await fuzzer.check(fuzzer.method(method), data.draw(payloads(fuzzer, method)))


@pytest.fixture
def growing_pool() -> Pool:
    return Pool()


# Methods whose requests carry ids and paths the pool holds.
@pytest.mark.parametrize("method", ["CreateSession", "ForkSession", "ReadEvents"])
@settings(FUZZ, max_examples=100, derandomize=True, database=None)
@given(data=st.data())
def test_the_draws_are_the_same_whatever_the_pool_holds(
    growing_pool: Pool, method: str, data: st.DataObject
) -> None:
    """The pool grows while a fuzz test runs (each reply adds its ids), and
    hypothesis, which replays and extends earlier choices, fails the test as
    "inconsistent data generation" when a draw depends on what it holds."""
    fuzzer = ServiceFuzzer(SESSION_LOG, channel=None, pool=growing_pool)  # draws only, no call
    data.draw(payloads(fuzzer, method))
    data.draw(st.builds(fuzzer.draw_request, st.data(), st.just(fuzzer.method(method))))
    # Ids of every length, as replies bring them.
    size = sum(len(known) for known in growing_pool.values.values())
    for name in ("session_id", "account_id", "workspace_id", "cwd"):
        growing_pool.add(name, "x" * (size % 7 + 1) + str(size))
