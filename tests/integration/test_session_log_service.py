"""The session-log service over gRPC on loopback."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from pathlib import Path

import grpc
import pytest
from agenthost.planmode.v1 import plan_mode_pb2
from agenthost.sessionlog.v1 import events_pb2 as ev
from agenthost.sessionlog.v1 import session_log_pb2 as pb
from agenthost.sessionlog.v1 import session_log_pb2_grpc as pb_grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from agenthost_core.folds import SessionState, fold_events
from services.common.client import open_channel
from services.common.config import ServiceConfig
from services.common.errors import (
    ImageNotFound,
    ImageRefused,
    SessionConflict,
    SessionNotFound,
    WrongExpectedSeq,
)
from services.common.server import ServiceDefinition, ServiceHost
from services.common.status import MAX_VIOLATIONS, error_info
from services.common.validation import violations_of
from services.sessionlog.client import SessionLogClient
from services.sessionlog.port import CaughtUp
from services.sessionlog.service import session_log_service
from services.sessionlog.servicer import SharedBatchReplies
from tests.support.events import assistant, plan_mode, title, turn_start, user
from tests.support.hosts import health_status, running_host
from tests.support.images import NOT_AN_IMAGE, png
from tests.support.rpc import expect_rpc_error, reason_of, violated_fields

Stub = pb_grpc.SessionLogServiceStub
INVALID = grpc.StatusCode.INVALID_ARGUMENT


async def test_same_id_and_cwd_is_the_same_session_other_cwd_conflicts(stub: Stub) -> None:
    first = await stub.CreateSession(pb.CreateSessionRequest(session_id="s1", cwd="/a"))
    again = await stub.CreateSession(pb.CreateSessionRequest(session_id="s1", cwd="/a"))
    assert first.created and not again.created and again.session.id == "s1"
    error = await expect_rpc_error(
        stub.CreateSession(pb.CreateSessionRequest(session_id="s1", cwd="/b")),
        grpc.StatusCode.ALREADY_EXISTS,
    )
    assert reason_of(error) == "SESSION_CONFLICT"


async def test_wrong_expected_seq_is_typed_with_current_last_seq(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", cwd="/a"))
    await stub.Append(pb.AppendRequest(session_id="s", events=[user("a"), assistant("b")]))
    error = await expect_rpc_error(
        stub.Append(pb.AppendRequest(session_id="s", expected_last_seq=0, events=[user("x")])),
        grpc.StatusCode.FAILED_PRECONDITION,
    )
    assert reason_of(error) == "WRONG_EXPECTED_SEQ"
    got = await stub.GetSession(pb.GetSessionRequest(session_id="s"))
    assert got.session.last_seq == 1


async def test_client_raises_the_same_domain_errors(session_log_channel: grpc.aio.Channel) -> None:
    client = SessionLogClient(session_log_channel)
    await client.create_session("s", "/a")
    await client.append("s", [user("a")])
    with pytest.raises(WrongExpectedSeq) as raised:
        await client.append("s", [user("b")], expected_last_seq=5)
    assert raised.value.current_last_seq == 0
    with pytest.raises(SessionConflict):
        await client.create_session("s", "/elsewhere")


async def test_images_over_grpc_raise_the_same_domain_errors(
    session_log_channel: grpc.aio.Channel,
) -> None:
    """What the runtime and the gateway of separate processes call."""
    client = SessionLogClient(session_log_channel)
    await client.create_session("s", "/a")
    shot = png()
    [ref] = await client.put_images("s", [ev.ImageInput(data=shot, name="shot.png")])
    assert (ref.media_type, ref.size, ref.name) == ("image/png", len(shot), "shot.png")
    read = await client.read_image("s", ref.digest)
    assert (read.digest, read.media_type, read.data) == (ref.digest, "image/png", shot)
    with pytest.raises(ImageRefused) as refused:
        await client.put_images("s", [ev.ImageInput(data=NOT_AN_IMAGE, name="doc.png")])
    assert refused.value.metadata["image"] == "doc.png"
    await client.create_session("other", "/a")
    with pytest.raises(ImageNotFound):
        await client.read_image("other", ref.digest)


async def test_the_folded_state_over_grpc_is_the_fold_of_the_log(
    session_log_channel: grpc.aio.Channel,
) -> None:
    client = SessionLogClient(session_log_channel)
    await client.create_session("s", "/a")
    assert await client.load_state("s") == SessionState()  # not appended yet
    events = [turn_start("t"), user("fix it"), plan_mode(True), title("Fixing")]
    await client.append("s", events)
    read = (await client.read("s")).events
    assert await client.load_state("s") == fold_events(SessionState(), read)
    with pytest.raises(SessionNotFound):
        await client.load_state("nobody")


async def test_the_tail_page_over_grpc_carries_the_summary(
    session_log_channel: grpc.aio.Channel,
) -> None:
    client = SessionLogClient(session_log_channel)
    await client.create_session("s", "/a")
    assert (await client.tail_page("s")).session == await client.get_session("s")
    await client.append("s", [user("fix it"), title("Fixing"), assistant("done")])
    page = await client.tail_page("s")
    assert page.session == await client.get_session("s")
    assert page.session.last_seq == page.last_seq == 2 and page.session.title == "Fixing"


async def test_subscription_over_grpc_catches_up_then_follows(
    session_log_channel: grpc.aio.Channel,
) -> None:
    client = SessionLogClient(session_log_channel)
    await client.create_session("s", "/a")
    await client.append("s", [user("a"), assistant("b")])
    seqs: list[int] = []
    async with asyncio.timeout(10):
        async for item in client.subscribe("s", after_seq=0, heartbeat_s=0.05):
            if isinstance(item, CaughtUp):
                assert item.last_seq == 1
                await client.append("s", [user("c")])
            elif isinstance(item, ev.Event):
                seqs.append(item.seq)
                if item.seq == 2:
                    break
    assert seqs == [1, 2]


async def _feed_messages(
    stub: Stub, request: pb.SubscribeAllRequest, events_wanted: int
) -> list[pb.SubscribeAllResponse]:
    """The all-sessions feed's messages up to its `events_wanted`th event."""
    messages: list[pb.SubscribeAllResponse] = []
    seen = 0
    stream = stub.SubscribeAll(request)
    async with asyncio.timeout(10):
        async for message in stream:
            messages.append(message)
            kind = message.WhichOneof("message")
            seen += len(message.events.events) if kind == "events" else kind == "event"
            if seen >= events_wanted:
                break
    stream.cancel()
    return messages


def _fed_events(messages: list[pb.SubscribeAllResponse]) -> list[ev.Event]:
    return [
        event
        for message in messages
        for event in (
            message.events.events
            if message.WhichOneof("message") == "events"
            else [message.event]
            if message.WhichOneof("message") == "event"
            else []
        )
    ]


async def test_a_batched_follower_gets_each_append_in_one_message_in_order(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="a", cwd="/a"))
    await stub.CreateSession(pb.CreateSessionRequest(session_id="b", cwd="/a"))
    for round_ in range(3):
        for session_id in ("a", "b"):
            texts = [f"{session_id}{round_}.{i}" for i in range(40)]
            await stub.Append(
                pb.AppendRequest(session_id=session_id, events=[user(t) for t in texts])
            )
    request = pb.SubscribeAllRequest(heartbeat_ms=50, batched=True)
    messages = await _feed_messages(stub, request, 240)
    fed = _fed_events(messages)
    assert [e.position for e in fed] == sorted({e.position for e in fed})  # once each, in order
    assert len(fed) == 240 and {m.WhichOneof("message") for m in messages} == {"events"}
    assert len(messages) < 10  # the catch-up reads come whole, not one event a message

    # Live: one append of 30 events reaches the follower as one message.
    live = stub.SubscribeAll(pb.SubscribeAllRequest(from_end=True, heartbeat_ms=50, batched=True))
    async with asyncio.timeout(10):
        async for message in live:
            if message.WhichOneof("message") == "caught_up":
                await stub.Append(
                    pb.AppendRequest(session_id="a", events=[user(str(i)) for i in range(30)])
                )
            elif message.WhichOneof("message") == "events":
                assert [e.user_message.text for e in message.events.events] == [
                    str(i) for i in range(30)
                ]
                break
    live.cancel()


async def test_batched_followers_reading_from_different_places_each_get_their_own_events(
    stub: Stub,
) -> None:
    # Followers share the replies of a batch they are all sent: one that
    # started elsewhere must still get exactly the events after its place.
    await stub.CreateSession(pb.CreateSessionRequest(session_id="a", cwd="/a"))
    texts = [str(i) for i in range(60)]
    await stub.Append(pb.AppendRequest(session_id="a", events=[user(t) for t in texts[:30]]))
    await stub.Append(pb.AppendRequest(session_id="a", events=[user(t) for t in texts[30:]]))
    first = _fed_events(await _feed_messages(stub, pb.SubscribeAllRequest(batched=True), 60))
    starts = [0, first[9].position, first[29].position, first[44].position]
    fed = await asyncio.gather(
        *(
            _feed_messages(stub, pb.SubscribeAllRequest(after_position=p, batched=True), 60 - n)
            for p, n in zip(starts, [0, 10, 30, 45], strict=True)
        )
    )
    for skipped, messages in zip([0, 10, 30, 45], fed, strict=True):
        assert [e.user_message.text for e in _fed_events(messages)] == texts[skipped:]


def test_a_shared_batch_reply_is_only_ever_the_reply_of_the_same_events() -> None:
    replies = SharedBatchReplies()
    events = {p: ev.Event(position=p, user_message=ev.UserMessage(text=str(p))) for p in range(6)}
    batches = [[1, 2, 4], [1, 3, 4], [1, 2, 4], [5], [1, 2, 4]]
    for positions in batches:
        (reply,) = replies.replies([events[p] for p in positions])
        assert [e.position for e in reply.events.events] == positions


async def test_a_follower_that_asks_no_batches_gets_one_event_a_message(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="a", cwd="/a"))
    await stub.Append(pb.AppendRequest(session_id="a", events=[user(str(i)) for i in range(5)]))
    messages = await _feed_messages(stub, pb.SubscribeAllRequest(heartbeat_ms=50), 5)
    assert [m.WhichOneof("message") for m in messages] == ["event"] * 5
    assert [e.seq for e in _fed_events(messages)] == [0, 1, 2, 3, 4]


async def test_batches_of_big_events_stay_under_what_a_peer_accepts(stub: Stub) -> None:
    # Each event is about 1.9 MiB: three of them would pass 4 MiB in one message.
    big = ["x" * (1_000_000 - 1) + str(i) for i in range(5)]
    await stub.CreateSession(pb.CreateSessionRequest(session_id="a", cwd="/a"))
    for text in big:
        event = ev.Event(assistant_message=ev.AssistantMessage(text=text, reasoning=text))
        await stub.Append(pb.AppendRequest(session_id="a", events=[event]))
    request = pb.SubscribeAllRequest(heartbeat_ms=50, batched=True)
    messages = await _feed_messages(stub, request, 5)
    assert [e.assistant_message.text for e in _fed_events(messages)] == big
    assert all(m.ByteSize() <= 4 * 1024 * 1024 + 1024 for m in messages)


@pytest.mark.parametrize(
    ("request_", "fields"),
    [
        (pb.CreateSessionRequest(session_id="ok", cwd="relative/dir"), ["cwd"]),
        (pb.CreateSessionRequest(session_id="bad id!", cwd="/a"), ["session_id"]),
        (pb.CreateSessionRequest(session_id="x" * 129, cwd="/a"), ["session_id"]),
        (pb.GetSessionRequest(session_id=""), ["session_id"]),
        (pb.TailPageRequest(session_id="s", message_limit=0), ["message_limit"]),
        (pb.TailPageRequest(session_id="s", message_limit=1_000_000), ["message_limit"]),
        (
            pb.ReadEventsRequest(session_id="s", direction=pb.READ_DIRECTION_FORWARD, limit=0),
            ["limit"],
        ),
        (pb.ListSessionsRequest(page_size=5000), ["page_size"]),
    ],
)
async def test_invalid_requests_name_the_violated_fields(
    stub: Stub, request_: object, fields: list[str]
) -> None:
    method = getattr(stub, type(request_).__name__.removesuffix("Request"))
    error = await expect_rpc_error(method(request_), INVALID)
    assert sorted(set(violated_fields(error))) == fields


async def test_oversize_or_bodiless_events_are_refused_and_nothing_is_written(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", cwd="/a"))
    await stub.Append(pb.AppendRequest(session_id="s", events=[user("ok")]))
    oversize = user("x" * 300_000)
    error = await expect_rpc_error(
        stub.Append(pb.AppendRequest(session_id="s", events=[user("fine"), oversize])), INVALID
    )
    assert violated_fields(error) == ["events[1].user_message.text"]
    error = await expect_rpc_error(
        stub.Append(pb.AppendRequest(session_id="s", events=[ev.Event(id="no-body")])), INVALID
    )
    assert violated_fields(error) == ["events[0].body"]
    error = await expect_rpc_error(stub.Append(pb.AppendRequest(session_id="", events=[])), INVALID)
    assert set(violated_fields(error)) == {"session_id"}
    got = await stub.GetSession(pb.GetSessionRequest(session_id="s"))
    assert got.session.last_seq == 0


async def test_a_thousand_bad_events_answer_invalid_argument_that_fits_a_default_client(
    stub: Stub,
) -> None:
    """Listing every violation would overflow the client's 16 KiB metadata
    limit (RESOURCE_EXHAUSTED); the answer lists the first few and the count."""
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", cwd="/a"))
    empty = [ev.Event() for _ in range(1000)]
    error = await expect_rpc_error(
        stub.Append(pb.AppendRequest(session_id="s", events=empty)), INVALID
    )
    assert reason_of(error) == "INVALID_REQUEST"
    assert len(violated_fields(error)) == MAX_VIOLATIONS
    assert violated_fields(error)[0].startswith("events[0].")
    info = error_info(error)
    assert info is not None and int(info.metadata["violations"]) >= 1000
    assert f"{MAX_VIOLATIONS} of " in (error.details() or "")


async def test_subscribing_after_the_largest_seq_answers_caught_up_not_unknown(
    stub: Stub,
) -> None:
    """after_seq = 2^63-1 used to fail with UNKNOWN (OverflowError: seq + 1
    does not fit SQLite's INTEGER); nothing comes after it, so: caught up."""
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", cwd="/a"))
    await stub.Append(pb.AppendRequest(session_id="s", events=[user("a")]))
    largest = 2**63 - 1
    call = stub.Subscribe(pb.SubscribeRequest(session_id="s", after_seq=largest), timeout=10)
    first = await call.read()
    call.cancel()
    assert first == pb.SubscribeResponse(caught_up=pb.CaughtUp(last_seq=largest))


@pytest.mark.parametrize("token", ["\u00b2", "9" * 30, "next"])
async def test_a_bad_page_token_names_the_field_in_a_bad_request(stub: Stub, token: str) -> None:
    error = await expect_rpc_error(
        stub.ListSessions(pb.ListSessionsRequest(page_token=token)), INVALID
    )
    assert reason_of(error) == "BAD_PAGE_TOKEN"
    assert violated_fields(error) == ["page_token"]


async def test_a_repeated_event_id_names_the_second_one_in_a_bad_request(stub: Stub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", cwd="/a"))
    batch = [user("a", event_id="e"), user("b", event_id="f"), user("c", event_id="e")]
    error = await expect_rpc_error(
        stub.Append(pb.AppendRequest(session_id="s", events=batch)), INVALID
    )
    assert reason_of(error) == "DUPLICATE_EVENT_ID"
    assert violated_fields(error) == ["events[2].id"]


def test_plan_state_with_pending_equal_to_active_is_invalid() -> None:
    bad = plan_mode_pb2.PlanModeState(active=True, pending=True)
    assert violations_of(bad) == [
        ("", "plan_state.pending_differs: pending must differ from active")
    ]
    assert violations_of(plan_mode_pb2.PlanModeState(active=True, pending=False)) == []
    assert violations_of(plan_mode_pb2.PlanModeState(active=False)) == []


async def test_reflection_lists_the_service(session_log_grpc_channel: grpc.aio.Channel) -> None:
    stub = reflection_pb2_grpc.ServerReflectionStub(session_log_grpc_channel)

    async def ask() -> reflection_pb2.ServerReflectionRequest:
        yield reflection_pb2.ServerReflectionRequest(list_services="")

    names: list[str] = []
    async for reply in stub.ServerReflectionInfo(ask()):
        names = [s.name for s in reply.list_services_response.service]
    assert "agenthost.sessionlog.v1.SessionLogService" in names
    assert "grpc.health.v1.Health" in names


@dataclass
class GatedLog:
    """A session-log service whose storage opens only once `release` is set."""

    definition: ServiceDefinition
    opening: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


def gated_session_log(db: Path) -> GatedLog:
    real = session_log_service(db)
    gated = GatedLog(real)

    async def slow_open() -> None:
        gated.opening.set()
        await gated.release.wait()
        assert real.open is not None
        await real.open()

    gated.definition = replace(real, open=slow_open)
    return gated


async def test_nothing_is_served_until_storage_opens(tmp_path: Path) -> None:
    gated = gated_session_log(tmp_path / "sessionlog.db")
    config = ServiceConfig(name="sessionlog", data_dir=tmp_path, grace_s=1)
    host = ServiceHost(config, gated.definition)
    starting = asyncio.create_task(host.start())
    await asyncio.wait_for(gated.opening.wait(), 10)
    channel = open_channel(host.address)
    try:
        assert await health_status(channel) == health_pb2.HealthCheckResponse.NOT_SERVING
        name = "agenthost.sessionlog.v1.SessionLogService"
        assert await health_status(channel, name) == health_pb2.HealthCheckResponse.NOT_SERVING
        # A call that arrives meanwhile is refused, typed, and retried later.
        log = pb_grpc.SessionLogServiceStub(channel)
        create = pb.CreateSessionRequest(session_id="s-early", cwd="/work")
        error = await expect_rpc_error(log.CreateSession(create), grpc.StatusCode.UNAVAILABLE)
        assert reason_of(error) == "NOT_READY"
        gated.release.set()
        await asyncio.wait_for(starting, 10)
        assert await health_status(channel) == health_pb2.HealthCheckResponse.SERVING
        assert await health_status(channel, name) == health_pb2.HealthCheckResponse.SERVING
        await log.CreateSession(create)
    finally:
        await channel.close()
        await host.stop()


async def test_a_writer_rides_out_a_restart_of_the_log(tmp_path: Path) -> None:
    """The session log's client sends a batch again while the log answers
    UNAVAILABLE (here: restarted, still opening its storage), with the same
    event ids, so the batch is written once when the log serves again."""
    db = tmp_path / "sessionlog.db"
    first = ServiceHost(
        ServiceConfig(name="sessionlog", data_dir=tmp_path, grace_s=1), session_log_service(db)
    )
    await first.start()
    channel = open_channel(first.address)
    log = SessionLogClient(channel)
    await log.create_session("s-1", "/work")
    await log.append("s-1", [user("before")])
    await first.stop()

    gated = gated_session_log(db)
    config = ServiceConfig(name="sessionlog", listen=first.address, data_dir=tmp_path, grace_s=1)
    second = ServiceHost(config, gated.definition)
    starting = asyncio.create_task(second.start())
    await asyncio.wait_for(gated.opening.wait(), 10)
    try:
        writing = asyncio.create_task(log.append("s-1", [user("one"), user("two")]))
        # The log refuses while it opens; the writer keeps trying.
        stub = pb_grpc.SessionLogServiceStub(channel)
        await expect_rpc_error(
            stub.ListSessions(pb.ListSessionsRequest()), grpc.StatusCode.UNAVAILABLE
        )
        assert not writing.done()
        gated.release.set()
        await asyncio.wait_for(starting, 10)
        written = await asyncio.wait_for(writing, 10)
        assert written.seqs == [1, 2]
        events = (await log.read("s-1")).events
        assert [e.user_message.text for e in events] == ["before", "one", "two"]
    finally:
        await channel.close()
        await second.stop()


@pytest.fixture
def stub(session_log_stub: Stub) -> Stub:
    return session_log_stub


async def test_in_process_host_fixture_cleans_up(tmp_path: Path) -> None:
    async with running_host("sessionlog", session_log_service(tmp_path / "db"), tmp_path) as (
        host,
        channel,
    ):
        assert await health_status(channel) == health_pb2.HealthCheckResponse.SERVING
    assert host.port > 0


async def test_reflection_is_also_served_as_v1(
    session_log_grpc_channel: grpc.aio.Channel,
) -> None:
    """grpcurl asks grpc.reflection.v1 first: it lists and describes the
    services there too (reflection itself included, under v1's names)."""
    pool = descriptor_pool.Default()
    request_type = message_factory.GetMessageClass(
        pool.FindMessageTypeByName("grpc.reflection.v1.ServerReflectionRequest")
    )
    response_type = message_factory.GetMessageClass(
        pool.FindMessageTypeByName("grpc.reflection.v1.ServerReflectionResponse")
    )
    info = session_log_grpc_channel.stream_stream(
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        request_serializer=request_type.SerializeToString,
        response_deserializer=response_type.FromString,
    )
    asked = [
        request_type(list_services=""),
        request_type(file_containing_symbol="agenthost.sessionlog.v1.SessionLogService"),
        request_type(file_containing_symbol="grpc.reflection.v1.ServerReflection"),
    ]
    replies = [reply async for reply in info(iter(asked), timeout=10)]
    names = {s.name for s in replies[0].list_services_response.service}
    assert {
        "agenthost.sessionlog.v1.SessionLogService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
    } <= names
    described = [
        descriptor_pb2.FileDescriptorProto.FromString(
            reply.file_descriptor_response.file_descriptor_proto[0]
        )
        for reply in replies[1:]
    ]
    assert [file.package for file in described] == ["agenthost.sessionlog.v1", "grpc.reflection.v1"]
    assert (
        described[1].service[0].method[0].input_type
        == ".grpc.reflection.v1.ServerReflectionRequest"
    )
