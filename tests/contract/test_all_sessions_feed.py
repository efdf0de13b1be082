"""What the all-sessions followers read (`read_all`, behind subscribe_all)
is what the store holds, on every backend: the SQLite store answers the
positions it just committed from memory (services/sessionlog/log_tail.py),
so after each change its answers are checked against a second store on the
same data, which reads them from disk: concurrent appends, a repeated one,
a fork and a deletion, each read before anything else is appended."""

from __future__ import annotations

import asyncio

from agenthost.sessionlog.v1 import events_pb2 as ev

from tests.support.events import assistant, user
from tests.support.stores import OpenLog, Store

PAGE = 7  # smaller than the whole feed: pages end mid-append

Page = list[tuple[str, int, int, bytes]]


async def _every_page(store: Store) -> list[Page]:
    """The page after every position up to the end, as followers see it."""
    pages = []
    for after in range(await store.last_position() + 1):
        events = await store.read_all(after, PAGE)
        pages.append([(e.session_id, e.seq, e.position, _body(e)) for e in events])
    return pages


def _body(event: ev.Event) -> bytes:
    return event.SerializeToString(deterministic=True)


async def _as_stored(reopen: OpenLog) -> list[Page]:
    """The feed as the log's store answers it, which must be as stored."""
    pages = await _every_page(reopen.store)
    async with reopen.another() as stored:
        assert await _every_page(stored) == pages
    return pages


async def test_the_feed_reads_what_the_store_holds(reopen: OpenLog) -> None:
    log = await reopen()
    for session_id in ("a", "b", "c"):
        await log.create_session(session_id, "/w")
    # Concurrent appenders share commits (group commit waves).
    await asyncio.gather(
        *(
            log.append(session_id, [user(f"{session_id}{i}"), assistant(f"{session_id}{i}")])
            for i in range(5)
            for session_id in ("a", "b", "c")
        )
    )
    await _as_stored(reopen)
    await log.append("a", [user("once", event_id="dup")])
    await log.append("a", [user("once", event_id="dup")])  # nothing new is written
    await _as_stored(reopen)
    await log.fork("a", new_session_id="f")
    forked = await _as_stored(reopen)
    assert any(session == "f" for page in forked for session, *_ in page)
    await log.append("b", [user("held")])  # the tail holds b's last events
    await _as_stored(reopen)
    await log.delete_session("b")
    deleted = await _as_stored(reopen)
    assert not any(session == "b" for page in deleted for session, *_ in page)
    await log.append("c", [user("after")])
    await _as_stored(reopen)
