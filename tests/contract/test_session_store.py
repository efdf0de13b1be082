"""The session-log contract every storage backend must pass.

Each test runs the domain (lazy sessions, signals) over one backend (the
fixtures are in conftest.py); a new backend only adds an entry to
tests/support/stores.BACKENDS.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import pytest
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.common import page_tokens
from services.common.errors import (
    BadPageToken,
    EventIdConflict,
    InvalidArgument,
    SessionConflict,
    SessionNotFound,
    WrongExpectedSeq,
)
from services.common.ranges import INT64_MAX, INT64_MIN
from services.sessionlog.domain import SessionLog
from services.sessionlog.port import CaughtUp, Direction, Heartbeat
from services.sessionlog.store import PENDING_TTL_US, SharedStore
from tests.support.clocks import ManualClock
from tests.support.events import (
    assistant,
    kinds,
    plan_mode,
    title,
    tool_call,
    tool_result,
    turn_start,
    user,
)
from tests.support.stores import OpenLog

WAIT_S = 10.0


async def test_create_is_idempotent_for_same_cwd_and_conflicts_on_another(log: SessionLog) -> None:
    first, created = await log.create_session("s1", "/work/a")
    again, created_again = await log.create_session("s1", "/work/a")
    assert (created, created_again) == (True, False)
    assert again.id == first.id == "s1"
    with pytest.raises(SessionConflict):
        await log.create_session("s1", "/work/b")
    await log.append("s1", [user("hi")])
    with pytest.raises(SessionConflict) as raised:
        await log.create_session("s1", "/work/b")
    assert raised.value.reason == "SESSION_CONFLICT"


async def test_generated_ids_are_distinct(log: SessionLog) -> None:
    a, _ = await log.create_session(None, "/w")
    b, _ = await log.create_session(None, "/w")
    assert a.id and b.id and a.id != b.id


async def test_never_appended_session_is_not_listed_and_gone_after_restart(
    reopen: OpenLog,
) -> None:
    """Over a store only this process writes, a restart of the service
    forgets a lazy session. Over a shared store the other replicas still
    serve it, so a restart of one keeps it (pending, never listed); it is
    gone when the store restarts after a crash (an UNLOGGED table), which
    this suite cannot cause."""
    log = await reopen()
    await log.create_session("lazy", "/w")
    await log.create_session("kept", "/w")
    assert (await log.append("lazy", [])).seqs == []
    await log.append("kept", [user("hello")])
    listed, _ = await log.list_sessions()
    assert [s.id for s in listed] == ["kept"]
    assert (await log.get_session("lazy")).last_seq == -1

    log = await reopen()
    if isinstance(reopen.store, SharedStore):
        assert (await log.get_session("lazy")).last_seq == -1
    else:
        with pytest.raises(SessionNotFound):
            await log.get_session("lazy")
    assert [s.id for s in (await log.list_sessions())[0]] == ["kept"]
    assert (await log.get_session("kept")).last_seq == 0


async def test_a_later_create_sweeps_sessions_pending_longer_than_the_ttl(
    reopen: OpenLog,
) -> None:
    await reopen()
    clock = ManualClock()
    log = SessionLog(reopen.store, clock)
    await log.create_session("abandoned", "/w")
    await log.create_session("used", "/w")
    await log.append("used", [user("hello")])
    clock.advance(PENDING_TTL_US / 1_000_000 + 1)
    await log.create_session("fresh", "/w")
    with pytest.raises(SessionNotFound):
        await log.get_session("abandoned")
    assert (await log.get_session("fresh")).last_seq == -1
    assert (await log.get_session("used")).last_seq == 0


async def test_append_assigns_gapless_seqs_from_zero(log: SessionLog) -> None:
    await log.create_session("s", "/w")
    first = await log.append("s", [user("a"), assistant("b")], expected_last_seq=-1)
    second = await log.append("s", [user("c")], expected_last_seq=1)
    assert first.seqs == [0, 1] and second.seqs == [2] and second.last_seq == 2
    read = await log.read("s", from_seq=0, direction=Direction.FORWARD, limit=10)
    assert [e.seq for e in read.events] == [0, 1, 2]
    assert read.events[2].user_message.text == "c"
    assert all(e.session_id == "s" and e.id for e in read.events)


async def test_wrong_expected_seq_reports_current_and_writes_nothing(log: SessionLog) -> None:
    await log.create_session("s", "/w")
    await log.append("s", [user("a"), assistant("b")])
    with pytest.raises(WrongExpectedSeq) as raised:
        await log.append("s", [user("late")], expected_last_seq=0)
    assert raised.value.current_last_seq == 1
    assert raised.value.reason == "WRONG_EXPECTED_SEQ"
    assert (await log.get_session("s")).last_seq == 1


async def test_retried_batch_returns_original_seqs_and_writes_nothing(log: SessionLog) -> None:
    await log.create_session("s", "/w")
    batch = [user("a", event_id="e1"), assistant("b", event_id="e2")]
    first = await log.append("s", batch, expected_last_seq=-1)
    await log.append("s", [user("c", event_id="e3")])
    retry = await log.append("s", batch, expected_last_seq=-1)
    assert retry.seqs == first.seqs == [0, 1] and retry.duplicate
    assert (await log.get_session("s")).last_seq == 2


async def test_batch_mixing_used_and_new_ids_is_refused_whole(log: SessionLog) -> None:
    await log.create_session("s", "/w")
    await log.append("s", [user("a", event_id="e1")])
    with pytest.raises(EventIdConflict):
        await log.append("s", [user("b", event_id="e2"), user("a", event_id="e1")])
    assert (await log.get_session("s")).last_seq == 0


async def test_batch_repeating_an_id_is_invalid(log: SessionLog) -> None:
    await log.create_session("s", "/w")
    with pytest.raises(InvalidArgument) as raised:
        await log.append("s", [user("a", event_id="d"), user("b", event_id="d")])
    assert raised.value.reason == "DUPLICATE_EVENT_ID"
    assert (await log.get_session("s")).last_seq == -1


async def test_concurrent_appenders_lose_nothing_and_duplicate_nothing(log: SessionLog) -> None:
    await log.create_session("s", "/w")
    acknowledged: list[str] = []

    async def appender(worker: int) -> None:
        for n in range(15):
            event_id = f"w{worker}-{n}"
            while True:
                last = (await log.get_session("s")).last_seq
                try:
                    await log.append("s", [user(event_id, event_id=event_id)], last)
                except WrongExpectedSeq:
                    continue
                acknowledged.append(event_id)
                break

    await asyncio.gather(*(appender(w) for w in range(8)))
    events = (await log.read("s", from_seq=0, limit=1000)).events
    assert [e.seq for e in events] == list(range(len(events)))
    assert sorted(e.id for e in events) == sorted(acknowledged)
    assert len(acknowledged) == 8 * 15


async def test_read_backwards_from_a_seq_and_from_the_end(log: SessionLog) -> None:
    await log.create_session("s", "/w")
    await log.append("s", [user(str(n)) for n in range(10)])
    tail = await log.read("s", direction=Direction.BACKWARD, limit=3)
    assert [e.seq for e in tail.events] == [9, 8, 7]
    middle = await log.read("s", from_seq=4, direction=Direction.BACKWARD, limit=10)
    assert [e.seq for e in middle.events] == [4, 3, 2, 1, 0]
    forward = await log.read("s", from_seq=8, limit=10)
    assert [e.seq for e in forward.events] == [8, 9] and forward.last_seq == 9


async def test_unknown_session_is_not_found(log: SessionLog) -> None:
    for call in (
        log.get_session("nope"),
        log.append("nope", [user("x")]),
        log.read("nope", limit=1),
        log.tail_page("nope"),
    ):
        with pytest.raises(SessionNotFound):
            await call


async def _conversation(log: SessionLog, session_id: str, messages: int) -> None:
    """`messages` user/assistant messages with tool and plan events between."""
    batch = []
    for n in range(messages):
        if n % 2 == 0:
            batch.append(user(f"m{n}"))
        else:
            batch += [tool_call(f"c{n}"), tool_result(f"c{n}"), assistant(f"m{n}")]
        if n % 10 == 0:
            batch.append(plan_mode(n % 20 == 0))
    await log.append(session_id, batch)


async def test_tail_pages_cut_on_messages_are_contiguous(log: SessionLog) -> None:
    await log.create_session("s", "/w")
    await _conversation(log, "s", 120)
    last_seq = (await log.get_session("s")).last_seq

    page = await log.tail_page("s")
    pages = [page]
    while page.has_more:
        page = await log.tail_page("s", before_seq=page.before_seq)
        pages.append(page)

    messages = [
        sum(k in ("user_message", "assistant_message") for k in kinds(p.events)) for p in pages
    ]
    assert messages == [50, 50, 20]
    assert [p.has_more for p in pages] == [True, True, False]
    assert pages[0].events[-1].seq == last_seq
    assert pages[0].events[0].WhichOneof("body") in ("user_message", "assistant_message")
    seqs = [e.seq for p in reversed(pages) for e in p.events]
    assert seqs == list(range(last_seq + 1)), "pages overlap or leave a gap"


async def test_tail_page_of_lazy_and_small_sessions(log: SessionLog) -> None:
    await log.create_session("s", "/w")
    empty = await log.tail_page("s")
    assert (empty.events, empty.has_more) == ([], False)
    await log.append("s", [plan_mode(True), user("only")])
    page = await log.tail_page("s")
    assert kinds(page.events) == ["plan_mode", "user_message"] and not page.has_more


async def test_a_tail_page_of_exactly_its_messages_starts_at_the_log_start(
    log: SessionLog,
) -> None:
    await log.create_session("s", "/w")
    await log.append("s", [plan_mode(True), *(user(f"m{n}") for n in range(50))])
    page = await log.tail_page("s", message_limit=50)
    assert (page.events[0].seq, len(page.events), page.has_more) == (0, 51, False)
    await log.append("s", [user("one more")])
    page = await log.tail_page("s", message_limit=50)
    assert (page.events[0].seq, len(page.events), page.has_more) == (2, 50, True)


async def test_tail_page_carries_the_sessions_summary(log: SessionLog) -> None:
    await log.create_session("s", "/w")
    lazy = await log.tail_page("s")
    assert lazy.session == await log.get_session("s") and lazy.session.last_seq == -1
    await _conversation(log, "s", 60)
    await log.append("s", [title("named")])
    summary = await log.get_session("s")
    for page in (await log.tail_page("s"), await log.tail_page("s", before_seq=5)):
        assert page.session == summary
        assert page.session.last_seq == page.last_seq
    newest = await log.tail_page("s")
    assert newest.events[-1].seq == newest.session.last_seq
    assert newest.session.title == "named"


async def test_subscriber_gets_every_later_event_once_with_one_caught_up(log: SessionLog) -> None:
    await log.create_session("s", "/w")
    await log.append("s", [user(str(n)) for n in range(5)])
    live_written = asyncio.Event()
    received: list[int] = []
    markers: list[tuple[int, int]] = []  # (caught_up last_seq, events seen before it)

    async def subscriber() -> None:
        async for item in log.subscribe("s", after_seq=2, heartbeat_s=0.05):
            if isinstance(item, CaughtUp):
                markers.append((item.last_seq, len(received)))
            elif not isinstance(item, Heartbeat):
                received.append(item.seq)
            if len(received) == 2 + 30:
                return

    async def writer() -> None:
        for n in range(30):
            await log.append("s", [user(f"live{n}")])
        live_written.set()

    await asyncio.wait_for(asyncio.gather(subscriber(), writer()), WAIT_S)
    assert received == list(range(3, 35))
    assert len(markers) == 1
    caught_up_seq, seen_before = markers[0]
    assert received[seen_before - 1] == caught_up_seq


async def test_subscribe_all_sees_a_new_sessions_first_events(log: SessionLog) -> None:
    await log.create_session("old", "/w")
    await log.append("old", [user("before")])
    stream = log.subscribe_all(after_position=0, heartbeat_s=0.05)
    seen: list[tuple[str, int]] = []
    caught_up = False
    async with asyncio.timeout(WAIT_S):
        async for item in stream:
            if isinstance(item, CaughtUp):
                caught_up = True
                await log.create_session("new", "/w")
                await log.append("new", [user("first"), assistant("reply")])
            elif not isinstance(item, Heartbeat):
                seen.append((item.session_id, item.seq))
            if ("new", 1) in seen:
                break
    assert caught_up
    assert seen == [("old", 0), ("new", 0), ("new", 1)]


async def test_list_shows_summaries_with_blank_and_title(log: SessionLog) -> None:
    await log.create_session("planned", "/w")
    await log.append("planned", [plan_mode(True), title("Only plan")])
    await log.create_session("talked", "/w")
    await log.append("talked", [user("hi")])
    listed = {s.id: s for s in (await log.list_sessions())[0]}
    assert listed["planned"].blank and listed["planned"].title == "Only plan"
    assert not listed["talked"].blank
    newest_first = [s.id for s in (await log.list_sessions())[0]]
    assert newest_first == ["talked", "planned"]
    page, token = await log.list_sessions(page_size=1)
    rest, end = await log.list_sessions(page_size=1, page_token=token)
    assert [page[0].id, rest[0].id] == newest_first and end == ""
    only, _ = await log.list_sessions(session_ids=["planned"])
    assert [s.id for s in only] == ["planned"]


async def test_fork_inherits_events_up_to_seq(log: SessionLog) -> None:
    await log.create_session("src", "/w")
    await log.append("src", [user("a"), plan_mode(True), assistant("b"), plan_mode(False)])
    fork = await log.fork("src", up_to_seq=1, new_session_id="child")
    assert (fork.id, fork.cwd, fork.last_seq, fork.forked_from) == ("child", "/w", 1, "src")
    copied = (await log.read("child", limit=10)).events
    assert kinds(copied) == ["user_message", "plan_mode"] and copied[1].plan_mode.active
    await log.append("child", [user("diverge")])
    assert (await log.get_session("src")).last_seq == 3
    with pytest.raises(SessionConflict):
        await log.fork("src", new_session_id="child")


async def test_list_shows_the_last_message_and_whether_a_turn_runs_or_waits(
    log: SessionLog,
) -> None:
    await log.create_session("s", "/w")
    await log.append("s", [turn_start(), user("fix   the\nbug"), assistant("On it")])
    summary = (await log.list_sessions())[0][0]
    assert (summary.preview, summary.running, summary.waiting) == ("On it", True, "")
    asked = ev.QuestionAsked(
        question_id="q1", presentation=ev.QUESTION_PRESENTATION_TOOL_APPROVAL, title="Allow?"
    )
    await log.append("s", [ev.Event(question_asked=asked)])
    assert (await log.get_session("s")).waiting == "approval"
    end = ev.Event(turn_end=ev.TurnEnd(turn_id="t", reason=ev.TURN_END_REASON_COMPLETED))
    await log.append("s", [end, user("next   one")])
    summary = await log.get_session("s")
    assert (summary.preview, summary.running, summary.waiting) == ("next one", False, "")


async def test_delete_removes_the_session_and_its_log(log: SessionLog) -> None:
    await log.create_session("gone", "/w")
    await log.append("gone", [user("a"), assistant("b")])
    await log.create_session("kept", "/w")
    await log.append("kept", [user("c")])
    await log.delete_session("gone")
    with pytest.raises(SessionNotFound):
        await log.get_session("gone")
    with pytest.raises(SessionNotFound):
        await log.read("gone", limit=10)
    assert [s.id for s in (await log.list_sessions())[0]] == ["kept"]
    with pytest.raises(SessionNotFound):
        await log.delete_session("gone")
    # The id is free again, with an empty log.
    await log.create_session("gone", "/other")
    await log.append("gone", [user("fresh")])
    assert (await log.get_session("gone")).last_seq == 0


async def test_acknowledged_events_survive_restart(reopen: OpenLog) -> None:
    log = await reopen()
    await log.create_session("s", "/w")
    await log.append("s", [user("a"), assistant("b")])
    log = await reopen()
    events = (await log.read("s", limit=10)).events
    assert [e.assistant_message.text or e.user_message.text for e in events] == ["a", "b"]
    assert (await log.create_session("s", "/w"))[1] is False


# -- integers at and past the edge of what a store holds (both backends alike) ----


async def test_seqs_and_positions_at_the_int64_edges_answer_like_any_other(
    log: SessionLog,
) -> None:
    await log.create_session("s", "/w")
    await log.append("s", [user("a"), assistant("b")])
    for edge in (INT64_MAX, INT64_MIN):
        assert (await log.read("s", from_seq=edge, limit=5)).last_seq == 1
        backward = await log.read("s", from_seq=edge, direction=Direction.BACKWARD, limit=5)
        assert len(backward.events) == (2 if edge == INT64_MAX else 0)
        assert len((await log.tail_page("s", before_seq=edge)).events) == (2 if edge > 0 else 0)
    assert [e.seq for e in (await log.read("s", from_seq=INT64_MIN, limit=5)).events] == [0, 1]
    fork = await log.fork("s", up_to_seq=INT64_MAX, new_session_id="whole")
    assert fork.last_seq == 1
    assert (await log.fork("s", up_to_seq=INT64_MIN, new_session_id="none")).last_seq == -1
    page = await log.tail_page("s", message_limit=INT64_MAX)
    assert len(page.events) == 2 and not page.has_more


async def test_subscribing_after_the_largest_seq_catches_up_on_nothing(log: SessionLog) -> None:
    """Nothing comes after the largest seq a store holds: the subscription
    reports caught up at once and stays quiet (it used to fail: seq + 1 does
    not fit SQLite's INTEGER)."""
    await log.create_session("s", "/w")
    await log.append("s", [user("a")])
    items = []
    async with asyncio.timeout(WAIT_S):
        async for item in log.subscribe("s", after_seq=INT64_MAX, heartbeat_s=0.05):
            items.append(item)
            if isinstance(item, Heartbeat):
                break
    assert items == [CaughtUp(last_seq=INT64_MAX, position=0), Heartbeat()]
    async with asyncio.timeout(WAIT_S):
        async for item in log.subscribe_all(after_position=INT64_MAX, heartbeat_s=0.05):
            assert isinstance(item, CaughtUp) and item.position == INT64_MAX
            break


@pytest.mark.parametrize(
    "call",
    [
        lambda log: log.read("s", from_seq=INT64_MAX + 1, limit=1),
        lambda log: log.read("s", from_seq=INT64_MIN - 1, limit=1),
        lambda log: log.tail_page("s", before_seq=INT64_MAX + 1),
        lambda log: log.fork("s", up_to_seq=-(2**70)),
        lambda log: log.append("s", [user("x")], expected_last_seq=INT64_MAX + 1),
        lambda log: log.append("s", [user("x")], expected_last_seq=-2),
        lambda log: anext(log.subscribe("s", after_seq=INT64_MAX + 1)),
        lambda log: anext(log.subscribe_all(after_position=2**64)),
    ],
    ids=[
        "read-from-above",
        "read-from-below",
        "tail-before",
        "fork-up-to",
        "append-expected-above",
        "append-expected-below",
        "subscribe-after",
        "subscribe-all-after",
    ],
)
async def test_an_integer_no_store_can_hold_is_refused_before_the_store(
    log: SessionLog, call: Callable[[SessionLog], Awaitable[object]]
) -> None:
    await log.create_session("s", "/w")
    await log.append("s", [user("a")])
    with pytest.raises(InvalidArgument) as refused:
        await call(log)
    assert refused.value.reason == "INVALID_REQUEST" and refused.value.metadata["field"]
    assert (await log.get_session("s")).last_seq == 0


@pytest.mark.parametrize(
    ("call", "field"),
    [
        pytest.param(lambda log: log.read("s", limit=0), "limit", id="read-0"),
        pytest.param(lambda log: log.read("s", limit=-1), "limit", id="read-minus-1"),
        pytest.param(lambda log: log.read("s", limit=INT64_MAX + 1), "limit", id="read-huge"),
        pytest.param(lambda log: log.tail_page("s", message_limit=0), "message_limit", id="tail"),
        pytest.param(lambda log: log.list_sessions(page_size=0), "page_size", id="list-0"),
        # The store asks for page_size + 1 rows.
        pytest.param(lambda log: log.list_sessions(page_size=INT64_MAX), "page_size", id="list"),
    ],
)
async def test_limits_below_one_or_past_the_range_are_a_bad_page_size(
    log: SessionLog, call: Callable[[SessionLog], Awaitable[object]], field: str
) -> None:
    """SQLite reads LIMIT -1 as "everything", PostgreSQL refuses it: the
    domain refuses it for both."""
    await log.create_session("s", "/w")
    await log.append("s", [user("a")])
    with pytest.raises(InvalidArgument) as refused:
        await call(log)
    assert refused.value.reason == "BAD_PAGE_SIZE"
    assert refused.value.metadata["field"] == field


@pytest.mark.parametrize(
    "token",
    [
        str(INT64_MAX + 1),
        "9" * 200,
        "\u00b2",
        "\u0663",
        "-1",
        "1 ",
        page_tokens.encode((INT64_MAX + 1, "s")),  # no store holds the time
        page_tokens.encode((INT64_MIN, "s")),  # nor its negation
        page_tokens.encode((True, "s")),
    ],
)
async def test_a_page_token_we_never_issued_is_refused(log: SessionLog, token: str) -> None:
    with pytest.raises(BadPageToken) as refused:
        await log.list_sessions(page_token=token)
    assert refused.value.metadata["field"] == "page_token"


async def test_a_token_past_every_session_reads_an_empty_page(log: SessionLog) -> None:
    await log.create_session("s", "/w")
    await log.append("s", [user("a")])
    past_all = page_tokens.encode((INT64_MAX, "~"))  # updated at -INT64_MAX: below every row
    assert await log.list_sessions(page_size=1000, page_token=past_all) == ([], "")


async def listed_ids(log: SessionLog, page_size: int, session_ids: Sequence[str] = ()) -> list[str]:
    """Every id of the list, page after page."""
    ids: list[str] = []
    token = ""
    while True:
        page, token = await log.list_sessions(page_size, token, session_ids)
        ids += [s.id for s in page]
        if not token:
            return ids


async def test_sessions_made_while_someone_pages_neither_repeat_nor_hide_a_row(
    reopen: OpenLog,
) -> None:
    """Pages are cut after the last row shown (a keyset), not at an offset:
    sessions made while a client pages go to the top, and the pages it has
    yet to read show every older row once."""
    await reopen()
    clock = ManualClock()
    log = SessionLog(reopen.store, clock)
    for n in range(7):
        await log.create_session(f"s{n}", "/w")
        await log.append(f"s{n}", [user(f"hi {n}")])
        clock.advance()

    seen: list[str] = []
    page, token = await log.list_sessions(page_size=3)
    seen += [s.id for s in page]
    newer = 7
    while token:  # before each page, a newer session pushes every row down
        await log.create_session(f"s{newer}", "/w")
        await log.append(f"s{newer}", [user(f"hi {newer}")])
        clock.advance()
        newer += 1
        page, token = await log.list_sessions(page_size=3, page_token=token)
        seen += [s.id for s in page]
    assert newer == 9
    assert seen == [f"s{n}" for n in reversed(range(7))]
    assert await listed_ids(log, 3) == [f"s{n}" for n in reversed(range(9))]


async def test_sessions_updated_in_the_same_microsecond_page_by_id(reopen: OpenLog) -> None:
    await reopen()
    log = SessionLog(reopen.store, ManualClock())  # every one updated at the same time
    for n in range(5):
        await log.create_session(f"t{n}", "/w")
        await log.append(f"t{n}", [user("same time")])
    assert await listed_ids(log, 2) == [f"t{n}" for n in range(5)]
    assert await listed_ids(log, 2, ["t4", "t1", "t3"]) == ["t1", "t3", "t4"]
