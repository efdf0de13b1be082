"""SearchSessions through the gateway and the Python SDK, on the embedded
stack over SQLite and over PostgreSQL: a session is found by a word of its
third prompt and by a path a tool touched, with the word marked in its
snippet; another account's sessions, which say the same, never appear; a
query with nothing to search by and a page token not handed out are typed
errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, timedelta
from pathlib import Path

import pytest
from agenthost.gateway.v1 import gateway_pb2 as gw
from agenthost.sessionlog.v1 import session_log_pb2 as sl
from google.protobuf.timestamp_pb2 import Timestamp

from clients.sdk import AgentHostClient
from clients.sdk.errors import InvalidArgumentError
from services.agentruntime.models.builtin import ScriptedReply, ScriptedToolCall
from tests.support.gateway import ALICE, BOB, GatewayHarness, running_gateway
from tests.support.postgres import stack_on_postgres

WAIT_S = 30.0
SECOND, HOUR = timedelta(seconds=1), timedelta(hours=1)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def gateway(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[GatewayHarness]:
    if request.param == "postgres":
        async with (
            stack_on_postgres(tmp_path, monkeypatch, "search"),
            running_gateway(tmp_path / "data") as harness,
        ):
            yield harness
    else:
        async with running_gateway(tmp_path / "data") as harness:
            yield harness


async def worked_session(
    gateway: GatewayHarness, token: str, folder: Path, prompts: list[str], read: str
) -> str:
    """A session in `folder` whose turns answer `prompts` in order, the
    first reading the file `read` with read_file; its id."""
    (folder / read).parent.mkdir(parents=True, exist_ok=True)
    (folder / read).write_text("notes\n")
    async with AgentHostClient(gateway.address, token) as client:
        summary = await client.create_session(cwd=str(folder))
        session = await client.open_session(summary.id)
        gateway.model.enqueue(
            ScriptedReply(
                text="Reading.", tool_calls=[ScriptedToolCall("read_file", {"path": read})]
            )
        )
        gateway.model.enqueue(ScriptedReply(text="I read the notes."))
        for n, text in enumerate(prompts):
            await session.prompt(text)

            def answered(_: object, count: int = n + 1) -> bool:
                ends = [e for e in session.events if e.HasField("turn_end")]
                return len(ends) >= count

            await session.wait_until(answered, within=WAIT_S)
        return summary.id


def marked(hit: object) -> str:
    return "".join(f"[{p.text}]" if p.highlighted else p.text for p in hit.snippet)  # type: ignore[attr-defined]


async def test_a_session_is_found_by_its_third_prompt_and_a_path_and_never_by_another_account(
    gateway: GatewayHarness, tmp_path: Path
) -> None:
    prompts = ["set up the project", "add a readme", "repair the flaky kaleidoscope handshake"]
    alices = await worked_session(
        gateway, ALICE, tmp_path / "alice", prompts, "notes/zephyr_plan.md"
    )
    bobs = await worked_session(
        gateway, BOB, tmp_path / "bob", ["the kaleidoscope is mine"], "notes/zephyr_plan.md"
    )

    async with AgentHostClient(gateway.address, ALICE) as alice:
        by_prompt = await alice.search_sessions("kaleidoscope")
        by_path = await alice.search_sessions("zephyr_plan")
        nothing = await alice.search_sessions("mine")
    async with AgentHostClient(gateway.address, BOB) as bob:
        bob_finds = await bob.search_sessions("kaleidoscope")

    assert [h.session_id for h in by_prompt.hits] == [alices]
    hit = by_prompt.hits[0]
    assert hit.snippet_match == sl.SEARCH_MATCH_PROMPT
    assert "[kaleidoscope]" in marked(hit) and hit.cwd == str(tmp_path / "alice")
    assert [h.session_id for h in by_path.hits] == [alices]
    assert list(by_path.hits[0].matched) == [sl.SEARCH_MATCH_PATH]
    assert "notes/[zephyr" in marked(by_path.hits[0])
    assert nothing.hits == []
    assert [h.session_id for h in bob_finds.hits] == [bobs]


async def test_bad_queries_and_page_tokens_are_typed_errors(gateway: GatewayHarness) -> None:
    async with AgentHostClient(gateway.address, ALICE) as alice:
        for query in ("", "?!", "x" * 501):
            with pytest.raises(InvalidArgumentError) as refused:
                await alice.search_sessions(query)
            assert refused.value.reason == "INVALID_REQUEST"
        with pytest.raises(InvalidArgumentError) as bad_token:
            await alice.search_sessions("anything", page_token="not-ours")
        assert bad_token.value.reason == "BAD_PAGE_TOKEN"
        # A time no calendar holds (a raw request: the SDK takes datetimes).
        past_the_calendar = Timestamp(seconds=2**63 - 1)
        with pytest.raises(InvalidArgumentError) as bad_time:
            await alice.call(
                alice.stub.SearchSessions,
                gw.SearchSessionsRequest(query="anything", updated_after=past_the_calendar),
            )
        assert bad_time.value.reason == "INVALID_REQUEST"


async def test_workspace_archived_and_time_filters_narrow_the_search_and_pages_follow(
    gateway: GatewayHarness, tmp_path: Path
) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    async with AgentHostClient(gateway.address, ALICE) as alice:
        first = await alice.create_session(cwd=str(tmp_path / "one"))
        second = await alice.create_session(cwd=str(tmp_path / "two"))
        third = await alice.create_session(cwd=str(tmp_path / "two"))
        for summary, title in ((first, "walrus"), (second, "walrus tusk"), (third, "walrus")):
            await alice.rename_session(summary.id, f"The {title} work")
        one = await alice.create_workspace(str(tmp_path / "one"))

        def ids(reply: object) -> list[str]:
            return sorted(h.session_id for h in reply.hits)  # type: ignore[attr-defined]

        everything = await alice.search_sessions("walrus")
        in_one = await alice.search_sessions("walrus", workspace_id=one.id)
        await alice.archive_session(third.id)
        unarchived = await alice.search_sessions("walrus")
        with_archived = await alice.search_sessions("walrus", include_archived=True)
        latest = max(h.updated_at.ToDatetime(tzinfo=UTC) for h in with_archived.hits)
        after_all = await alice.search_sessions("walrus", updated_after=latest + SECOND)
        within = await alice.search_sessions("walrus", updated_after=latest - HOUR)
        pages = [await alice.search_sessions("walrus", page_size=1)]
        while pages[-1].next_page_token:
            pages.append(
                await alice.search_sessions(
                    "walrus", page_size=1, page_token=pages[-1].next_page_token
                )
            )
        await alice.delete_session(second.id)
        after_delete = await alice.search_sessions("walrus")

    assert ids(everything) == sorted([first.id, second.id, third.id])
    assert ids(in_one) == [first.id] and in_one.hits[0].workspace_id == one.id
    assert ids(unarchived) == sorted([first.id, second.id])
    archived = [h for h in with_archived.hits if h.session_id == third.id]
    assert len(with_archived.hits) == 3 and archived and archived[0].archived
    assert ids(after_all) == [] and ids(within) == ids(unarchived)
    assert sorted(h.session_id for page in pages for h in page.hits) == ids(unarchived)
    assert ids(after_delete) == [first.id]
