"""Fuzzing the edges of the session-log contract: whatever a client sends, it
gets OK or a typed INVALID_ARGUMENT/ALREADY_EXISTS answer, and a refused
request writes nothing."""

from __future__ import annotations

import grpc
from agenthost.sessionlog.v1 import events_pb2 as ev
from agenthost.sessionlog.v1 import session_log_pb2 as pb
from agenthost.sessionlog.v1 import session_log_pb2_grpc as pb_grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.rpc import violated_fields

TYPED = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.ALREADY_EXISTS}
FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

ids = st.one_of(
    st.text(max_size=140), st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,20}", fullmatch=True)
)
cwds = st.one_of(st.text(max_size=50), st.builds(lambda s: "/" + s, st.text(max_size=50)))


@FUZZ
@given(session_id=ids, cwd=cwds)
async def test_create_answers_typed(
    session_log_stub: pb_grpc.SessionLogServiceStub, session_id: str, cwd: str
) -> None:
    try:
        await session_log_stub.CreateSession(
            pb.CreateSessionRequest(session_id=session_id, cwd=cwd)
        )
    except grpc.aio.AioRpcError as error:
        assert error.code() in TYPED, error.details()
        if error.code() == grpc.StatusCode.INVALID_ARGUMENT:
            assert set(violated_fields(error)) <= {"session_id", "cwd"}


@FUZZ
@given(
    texts=st.lists(st.one_of(st.text(max_size=30), st.just("x" * 262_145)), max_size=4),
    event_ids=st.lists(st.one_of(ids, st.sampled_from(["a", "b", ""])), max_size=4),
    expected=st.one_of(st.none(), st.integers(min_value=-5, max_value=5)),
)
async def test_append_refusals_write_nothing(
    session_log_stub: pb_grpc.SessionLogServiceStub,
    texts: list[str],
    event_ids: list[str],
    expected: int | None,
) -> None:
    stub = session_log_stub
    await stub.CreateSession(pb.CreateSessionRequest(session_id="fuzz", cwd="/fuzz"))
    before = (await stub.GetSession(pb.GetSessionRequest(session_id="fuzz"))).session.last_seq
    events = [
        ev.Event(
            id=(event_ids[i] if i < len(event_ids) else ""), user_message=ev.UserMessage(text=t)
        )
        for i, t in enumerate(texts)
    ]
    request = pb.AppendRequest(session_id="fuzz", events=events)
    if expected is not None:
        request.expected_last_seq = expected
    try:
        reply = await stub.Append(request)
    except grpc.aio.AioRpcError as error:
        assert error.code() in {
            grpc.StatusCode.INVALID_ARGUMENT,
            grpc.StatusCode.FAILED_PRECONDITION,
        }, error.details()
        after = (await stub.GetSession(pb.GetSessionRequest(session_id="fuzz"))).session
        assert after.last_seq == before
        return
    if not reply.duplicate:
        assert reply.seqs == list(range(before + 1, before + 1 + len(events)))
