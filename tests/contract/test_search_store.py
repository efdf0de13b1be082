"""The search index on every backend (SQLite FTS5, PostgreSQL full-text): a
session found by what its log says (titles, prompts, answers, the paths its
tools touched), ranked, with marked snippets, within the sessions a caller
may see, by filters and pages; kept in step with the log, across restarts,
and rebuilt from the log when the index is gone."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.common.errors import BadPageToken, InvalidRequest
from services.sessionlog import search as search_module
from services.sessionlog.domain import SessionLog
from services.sessionlog.search import SearchPage, SearchQuery, SearchStore, decode_token
from tests.support.events import assistant, title, tool_call, user
from tests.support.stores import BACKENDS, OpenLog, StoreBackend, search_store_backend


class Searched:
    """A session log with its search index on one backend; `restarted()`
    opens both again on the same data."""

    def __init__(self, name: str, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.logs = OpenLog(BACKENDS[name](tmp_path))
        self.index: StoreBackend[SearchStore] = search_store_backend(name, tmp_path)

    async def drop_index(self) -> None:
        """The index gone: its schema dropped, its file deleted."""
        await self.index.clean()
        for leftover in self.tmp_path.glob("search.db*"):
            leftover.unlink()

    @asynccontextmanager
    async def opened(self) -> AsyncIterator[SessionLog]:
        async with self.index.opened() as search:
            await self.logs()  # opens the log's store
            yield SessionLog(self.logs.store, search=search)
            await self.logs.close()


@pytest.fixture(params=sorted(BACKENDS))
async def searched(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Searched]:
    backend = Searched(request.param, tmp_path)
    await backend.logs.clean()
    async with backend.index.cleaned():
        yield backend
    await backend.logs.close()
    await backend.logs.clean()


@pytest.fixture
async def log(searched: Searched) -> AsyncIterator[SessionLog]:
    async with searched.opened() as opened:
        yield opened


async def session(log: SessionLog, session_id: str, *events: ev.Event) -> None:
    await log.create_session(session_id, "/src/app")
    await log.append(session_id, list(events))


async def find(log: SessionLog, text: str, scope: list[str], **filters: object) -> SearchPage:
    assert log.search is not None
    return await log.search.search(SearchQuery(text=text, scope=scope, **filters))  # type: ignore[arg-type]


def ids(page: SearchPage) -> list[str]:
    return [hit.session_id for hit in page.hits]


def shown(page: SearchPage, n: int = 0) -> str:
    """The hit's snippet with its marked parts in [brackets]."""
    return "".join(f"[{p.text}]" if p.highlighted else p.text for p in page.hits[n].snippet)


def edit(path: str) -> ev.Event:
    return tool_call("c1", "edit_file", json.dumps({"path": path, "old_string": "a"}))


async def test_a_session_is_found_by_a_word_of_its_third_prompt(log: SessionLog) -> None:
    await session(
        log,
        "s1",
        user("set up the project"),
        assistant("done"),
        user("add a readme"),
        assistant("added"),
        user("now repair the flaky authentication handshake"),
    )
    await session(log, "s2", user("something else entirely"))

    page = await find(log, "authentication", ["s1", "s2"])

    assert ids(page) == ["s1"]
    assert page.hits[0].matched == ("prompt",)
    assert "[authentication]" in shown(page)


async def test_a_session_is_found_by_a_path_a_tool_touched(log: SessionLog) -> None:
    checkpoint = ev.Event(
        checkpoint=ev.Checkpoint(
            turn_id="t1", files=[ev.FileChange(path="docs/removed_notes.md", change="deleted")]
        )
    )
    await session(log, "s1", user("tidy up"), edit("src/auth/login_view.py"), checkpoint)
    await session(log, "s2", user("the login is slow"))

    by_part = await find(log, "login_view", ["s1", "s2"])
    by_command = await find(log, "removed_notes", ["s1", "s2"])

    assert ids(by_part) == ["s1"] and by_part.hits[0].matched == ("path",)
    assert "[login" in shown(by_part) and "src/auth/" in shown(by_part)
    assert ids(by_command) == ["s1"]


async def test_titles_answers_and_what_matched(log: SessionLog) -> None:
    await session(log, "s1", title("Parser rewrite"), user("go"), assistant("the parser is fast"))
    await session(log, "s2", title("Old name"), title("Renamed gadget"))

    parser = await find(log, "parser", ["s1", "s2"])
    old = await find(log, "old", ["s1", "s2"])
    gadget = await find(log, "gadget", ["s1", "s2"])

    assert ids(parser) == ["s1"] and parser.hits[0].matched == ("answer", "title")
    assert ids(old) == []  # only the newest title is searchable
    assert ids(gadget) == ["s2"] and gadget.hits[0].matched == ("title",)


async def test_sessions_outside_the_scope_are_never_found(log: SessionLog) -> None:
    """Scope is a condition of the ranking query: a session outside it is
    not returned whatever its rank, and the page is full of the scope's."""
    for n in range(5):
        await session(log, f"other{n}", user("kangaroo " * 20))
    await session(log, "mine", user("one kangaroo"))

    page = await find(log, "kangaroo", ["mine", "unknown"], limit=1)

    assert ids(page) == ["mine"] and page.next_token == ""
    assert ids(await find(log, "kangaroo", [])) == []


async def test_hits_are_ranked_and_paged(log: SessionLog) -> None:
    await session(log, "weak", user("zebra"), assistant(" ".join(["filler"] * 200)))
    await session(log, "strong", user("zebra zebra zebra"))
    for n in range(3):
        await session(log, f"mid{n}", user(f"zebra and zebra {n}"))
    scope = ["weak", "strong", "mid0", "mid1", "mid2"]

    first = await find(log, "zebra", scope, limit=2)
    second = await find(log, "zebra", scope, limit=2, after=decode_token(first.next_token))
    third = await find(log, "zebra", scope, limit=2, after=decode_token(second.next_token))
    everything = await find(log, "zebra", scope, limit=10)

    assert ids(everything)[0] == "strong" and ids(everything)[-1] == "weak"
    assert ids(first) + ids(second) + ids(third) == ids(everything)
    assert third.next_token == ""
    scores = [hit.score for hit in everything.hits]
    assert scores == sorted(scores, reverse=True)


async def test_phrases_exclusions_and_alternatives(log: SessionLog) -> None:
    await session(log, "a", user("the red apple fell"))
    await session(log, "b", user("an apple that is red"))
    await session(log, "c", user("a banana"))
    scope = ["a", "b", "c"]

    assert ids(await find(log, '"red apple"', scope)) == ["a"]
    assert sorted(ids(await find(log, "apple -fell", scope))) == ["b"]
    assert sorted(ids(await find(log, "banana or fell", scope))) == ["a", "c"]
    assert ids(await find(log, 'apple) NEAR("*', scope)) == []  # never query syntax


async def test_filters_by_creation_and_update_times(log: SessionLog) -> None:
    await session(log, "s1", user("walrus"))
    await session(log, "s2", user("walrus"))
    scope = ["s1", "s2"]
    times = {h.session_id: h.updated_us for h in (await find(log, "walrus", scope)).hits}
    s1, s2 = times["s1"], times["s2"]
    assert s1 < s2

    assert ids(await find(log, "walrus", scope, updated_after_us=s2)) == ["s2"]
    assert ids(await find(log, "walrus", scope, updated_before_us=s1)) == ["s1"]
    assert ids(await find(log, "walrus", scope, created_after_us=s2 + 1)) == []


async def test_a_deleted_session_vanishes_from_results(log: SessionLog) -> None:
    await session(log, "s1", user("platypus"))
    await session(log, "s2", user("platypus"))
    assert sorted(ids(await find(log, "platypus", ["s1", "s2"]))) == ["s1", "s2"]

    await log.delete_session("s1")

    assert ids(await find(log, "platypus", ["s1", "s2"])) == ["s2"]


async def test_a_fork_is_found_like_its_source(log: SessionLog) -> None:
    await session(log, "s1", user("narwhal"))
    await log.fork("s1", new_session_id="s2")

    assert sorted(ids(await find(log, "narwhal", ["s1", "s2"]))) == ["s1", "s2"]


async def test_appends_while_closed_are_indexed_after_a_restart(searched: Searched) -> None:
    async with searched.opened() as log:
        await session(log, "s1", user("ocelot"))
        assert ids(await find(log, "ocelot", ["s1"])) == ["s1"]
    # The log alone, without its index: the index must catch up on its own.
    plain = await searched.logs()
    await plain.append("s1", [user("lynx")])
    await searched.logs.close()

    async with searched.opened() as log:
        assert log.search is not None
        assert ids(await find(log, "lynx", ["s1"])) == ["s1"]
        assert ids(await find(log, "ocelot", ["s1"])) == ["s1"]


async def test_a_missing_index_is_rebuilt_from_the_log(searched: Searched) -> None:
    async with searched.opened() as log:
        await session(log, "s1", user("axolotl"), edit("pond/water.txt"))
        await log.search.catch_up()  # type: ignore[union-attr]
    await searched.drop_index()  # the index is gone (a deleted file, a dropped schema)

    async with searched.opened() as log:
        assert await log.search.store.position() == 0  # type: ignore[union-attr]
        assert ids(await find(log, "axolotl", ["s1"])) == ["s1"]
        assert ids(await find(log, "water", ["s1"])) == ["s1"]


@pytest.mark.parametrize("query", ["", "   ", "!!! ???", "-only -excluded", "x" * 501])
async def test_a_query_with_nothing_to_search_by_is_refused(log: SessionLog, query: str) -> None:
    await session(log, "s1", user("heron"))

    with pytest.raises(InvalidRequest):
        await find(log, query, ["s1"])


@pytest.mark.parametrize("token", ["not-base64!", "WzEsMl0", "bnVsbA"])
def test_a_page_token_not_handed_out_is_refused(token: str) -> None:
    with pytest.raises(BadPageToken):
        decode_token(token)


async def test_a_search_while_the_index_is_far_behind_answers_from_what_it_has(
    searched: Searched, log: SessionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild of a large log takes longer than a caller waits: the search
    answers from what is indexed, and the index goes on catching up."""
    assert log.search is not None
    await session(log, "s1", user("gecko"))
    await log.search.catch_up()
    await session(log, "s2", user("gecko"))
    store, reading = searched.logs.store, asyncio.Event()
    read_all = store.read_all

    async def held_read(after_position: int, limit: int) -> list[ev.Event]:
        await reading.wait()  # the log's read is slow (a big rebuild)
        return await read_all(after_position, limit)

    monkeypatch.setattr(store, "read_all", held_read)
    monkeypatch.setattr(search_module, "FRESH_WAIT_S", 0.05)

    partial = await find(log, "gecko", ["s1", "s2"])
    reading.set()

    assert ids(partial) == ["s1"] and log.search.stats.stale_answers == 1
    assert sorted(ids(await find(log, "gecko", ["s1", "s2"]))) == ["s1", "s2"]
