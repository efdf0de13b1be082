"""The projection service over gRPC on loopback, fed by a real session-log host.

Both services run in-process on SQLite files under tmp_path; the test drives
the session log through its gRPC client, as the runtime and plan mode do, and
reads the plan view through the projection service.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from agenthost.projection.v1 import projection_pb2 as pb
from agenthost.projection.v1 import projection_pb2_grpc as pb_grpc
from agenthost.sessionlog.v1 import events_pb2 as ev

from services.common.client import open_channel
from services.common.errors import SessionNotFound, Unavailable
from services.common.server import ServiceHost
from services.planmode.events import command_done_event, plan_mode_event, plan_selection_event
from services.planmode.projection_unit import PlanProjectionUnit
from services.projection.client import ProjectionClient
from services.projection.engine import ProjectionEngine
from services.projection.model import CaughtUp, Change, WatchItem
from services.projection.registry import UnitInfo, UnitRegistry
from services.projection.service import ProjectionServiceDefinition, projection_service
from services.sessionlog.client import SessionLogClient
from services.sessionlog.service import session_log_service
from tests.support.events import turn_start, user
from tests.support.hosts import running_host
from tests.support.rpc import expect_rpc_error, reason_of, violated_fields

WAIT_S = 10.0
# The `plan` value has PlanModeState's shape: `pending` only while it differs.
IDLE = {"active": False}
ENTERING = {"active": False, "pending": True}
ACTIVE = {"active": True}
LEAVING = {"active": True, "pending": False}
PLAN_ONLY = UnitRegistry((PlanProjectionUnit(),))


def select(active: bool) -> ev.Event:
    return plan_selection_event(active)


def other_command(command_id: str) -> ev.Event:
    return ev.Event(command_run=ev.CommandRun(command_id=command_id, name="compact", args=""))


@pytest.fixture
async def log_host(tmp_path: Path) -> AsyncIterator[ServiceHost]:
    definition = session_log_service(tmp_path / "sessionlog.db")
    async with running_host("sessionlog", definition, tmp_path) as (host, _):
        yield host


@pytest.fixture
async def log(log_host: ServiceHost) -> AsyncIterator[SessionLogClient]:
    """The test's own connection to the session log."""
    channel = open_channel(log_host.address)
    try:
        yield SessionLogClient(channel)
    finally:
        await channel.close()


@dataclass
class Projection:
    definition: ProjectionServiceDefinition
    host: ServiceHost
    # The test's channel; it outlives the host, so a client sees how the
    # service ends its calls when it stops.
    channel: grpc.aio.Channel

    @property
    def engine(self) -> ProjectionEngine:
        return self.definition.engine

    def client(self) -> ProjectionClient:
        return ProjectionClient(self.channel)


@asynccontextmanager
async def projection_host(
    data_dir: Path, log_host: ServiceHost, registry: UnitRegistry | None = PLAN_ONLY
) -> AsyncIterator[Projection]:
    """The projection service with its own channel to the session log, as
    deployed; restartable on the same data folder. The plan unit alone by
    default (None: every unit of the deployment)."""
    log_channel = open_channel(log_host.address)
    definition = projection_service(data_dir, SessionLogClient(log_channel), registry=registry)
    channels: list[grpc.aio.Channel] = []
    try:
        async with running_host("projection", definition, data_dir) as (host, _):
            channels.append(open_channel(host.address))
            yield Projection(definition, host, channels[0])
    finally:
        for channel in channels:
            await channel.close()
        await log_channel.close()


@pytest.fixture
def projection_dir(tmp_path: Path) -> Path:
    return tmp_path / "projection"


@pytest.fixture
async def projection(projection_dir: Path, log_host: ServiceHost) -> AsyncIterator[Projection]:
    async with projection_host(projection_dir, log_host) as running:
        yield running


@pytest.fixture
def client(projection: Projection) -> ProjectionClient:
    return projection.client()


@pytest.fixture
def stub(projection: Projection) -> pb_grpc.ProjectionServiceStub:
    return pb_grpc.ProjectionServiceStub(projection.channel)


async def next_frame(frames: AsyncIterator[WatchItem]) -> WatchItem:
    return await asyncio.wait_for(anext(frames), WAIT_S)


async def frames_until_caught_up(frames: AsyncIterator[WatchItem]) -> list[WatchItem]:
    seen: list[WatchItem] = []
    while not seen or not isinstance(seen[-1], CaughtUp):
        seen.append(await next_frame(frames))
    return seen


# -- the plan view through the service ------------------------------------------------


async def test_the_plan_view_follows_the_log(
    log: SessionLogClient, client: ProjectionClient
) -> None:
    await log.create_session("s", "/w")
    assert await client.get("s") == (-1, {"plan": IDLE})

    await log.append("s", [select(True)])
    assert await client.get("s") == (0, {"plan": ENTERING})

    await log.append("s", [command_done_event("c1", ok=True, message="plan mode selected")])
    assert await client.get("s") == (1, {"plan": ENTERING})

    await log.append("s", [plan_mode_event(True)])
    assert await client.get("s") == (2, {"plan": ACTIVE})

    await log.append("s", [select(False)])
    assert await client.get("s") == (3, {"plan": LEAVING})
    await log.append("s", [select(True)])  # the reverting selection: net zero
    assert await client.get("s") == (4, {"plan": ACTIVE})


def model_usage(prompt: int, completion: int, cost: float) -> ev.Event:
    used = ev.ModelUsage(
        turn_id="t",
        model="deepseek-chat",
        prompt_tokens=prompt,
        completion_tokens=completion,
        context_window=128_000,
        cost=cost,
    )
    return ev.Event(id=f"usage-{prompt}", model_usage=used)


async def test_units_and_key_selection(log: SessionLogClient, client: ProjectionClient) -> None:
    await log.create_session("s", "/w")
    await log.append("s", [select(True)])

    assert await client.units() == [UnitInfo("plan", 3)]
    assert await client.get("s", keys=["plan"]) == (0, {"plan": ENTERING})
    # A unit this deployment does not mount has no value; the seq is still served.
    assert await client.get("s", keys=["title"]) == (0, {})


async def test_every_session_view_is_folded_and_changes_of_all_sessions_are_watched(
    log: SessionLogClient, log_host: ServiceHost, projection_dir: Path
) -> None:
    async with projection_host(projection_dir, log_host, registry=None) as running:
        client, stub = running.client(), pb_grpc.ProjectionServiceStub(running.channel)
        await log.create_session("a", "/w")
        await log.create_session("b", "/w")
        watch = stub.WatchAllProjections(pb.WatchAllProjectionsRequest())
        first = await asyncio.wait_for(watch.read(), WAIT_S)
        assert first.HasField("live")
        await log.append("a", [turn_start(), user("hi")])
        await log.append("b", [select(True)])
        changes = [(await asyncio.wait_for(watch.read(), WAIT_S)).change for _ in range(2)]
        watch.cancel()
        assert [(c.session_id, c.key, c.seq) for c in changes] == [
            ("a", "status", 0),
            ("b", "plan", 0),
        ]
        assert await client.get("a") == (
            1,
            {
                "plan": IDLE,
                "questions": [],
                "settings": {
                    "sandbox": "workspace-write",
                    "approvals": "ask",
                    "model": "",
                    "network": False,
                    "origin": "built-in",
                    "sources": [],
                    "problems": [],
                },
                "status": {"running": True, "queued": 0},
                "usage": None,
                "permissions": [],
                "mcp": {"servers": []},
                "context": {"files": [], "budget_bytes": 32768},
                "checkpoints": {"turns": []},
                "todos": {"items": []},
                "subagents": {"children": []},
                "jobs": {"jobs": []},
            },
        )
        # The model's usage: the last request's context and the session's sums.
        await log.append("a", [model_usage(900, 100, 0.002), model_usage(4000, 500, 0.01)])
        seq, views = await client.get("a", keys=["usage"])
        assert seq == 3
        assert views["usage"] == {
            "model": "deepseek-chat",
            "context_tokens": 4500,
            "context_window": 128_000,
            "context_share": 4500 / 128_000,
            "prompt_tokens": 4900,
            "completion_tokens": 600,
            "cached_prompt_tokens": 0,
            "requests": 2,
            "cost": pytest.approx(0.012),
            "estimated": False,
        }


async def test_a_batched_watch_of_all_sessions_gets_the_changes_folded_together_in_one_message(
    log: SessionLogClient, log_host: ServiceHost, projection_dir: Path
) -> None:
    async with projection_host(projection_dir, log_host, registry=None) as running:
        stub = pb_grpc.ProjectionServiceStub(running.channel)
        await log.create_session("a", "/w")
        await log.create_session("b", "/w")
        watch = stub.WatchAllProjections(pb.WatchAllProjectionsRequest(batched=True))
        assert (await asyncio.wait_for(watch.read(), WAIT_S)).HasField("live")
        await log.append("a", [turn_start(), select(True)])
        together = await asyncio.wait_for(watch.read(), WAIT_S)
        await log.append("b", [select(True)])
        alone = await asyncio.wait_for(watch.read(), WAIT_S)
        watch.cancel()
        assert [(c.session_id, c.key, c.seq) for c in together.changes.changes] == [
            ("a", "status", 0),
            ("a", "plan", 1),
        ]
        assert [(c.session_id, c.key, c.seq) for c in alone.changes.changes] == [("b", "plan", 0)]


async def test_a_get_after_a_restart_reads_from_the_checkpoint(
    log: SessionLogClient, log_host: ServiceHost, projection_dir: Path
) -> None:
    await log.create_session("long", "/w")
    await log.append("long", [select(True)])
    for batch in range(10):
        await log.append("long", [user(f"m{batch}-{n}") for n in range(1000)])
    expected = (10_000, {"plan": ENTERING})

    async with projection_host(projection_dir, log_host) as first:
        assert await first.client().get("long") == expected
        folded_first = first.engine.stats.events_folded
    assert folded_first == 10_001  # every event, once

    async with projection_host(projection_dir, log_host) as second:
        client = second.client()
        assert await client.get("long") == expected
        assert second.engine.stats.events_read == 0
        assert second.engine.stats.events_folded == 0

        await log.append("long", [plan_mode_event(True), user("after"), user("restart")])
        assert await client.get("long") == (10_003, {"plan": ACTIVE})
        # Only the new events were folded, not the session from seq 0.
        assert second.engine.stats.events_folded == 3
        assert second.engine.stats.events_read <= 3


# -- watch -------------------------------------------------------------------------------


async def test_a_watch_resumed_with_the_last_seq_has_no_duplicate_and_no_gap(
    log: SessionLogClient, client: ProjectionClient
) -> None:
    await log.create_session("s", "/w")
    await log.append("s", [select(True)])  # 0
    changes: list[Change] = []

    async with aclosing(client.watch("s")) as frames:
        assert await frames_until_caught_up(frames) == [
            Change("plan", ENTERING, 0),
            CaughtUp(0),
        ]
        changes.append(Change("plan", ENTERING, 0))
        await log.append("s", [turn_start(), plan_mode_event(True)])  # 1 changes nothing, 2
        frame = await next_frame(frames)
        assert frame == Change("plan", ACTIVE, 2)
        changes.append(frame)
    last_seq = changes[-1].seq

    # While nobody watches: a change, then an event that changes nothing.
    await log.append("s", [select(False)])  # 3
    await log.append("s", [user("hello")])  # 4

    async with aclosing(client.watch("s", after_seq=last_seq)) as frames:
        assert await frames_until_caught_up(frames) == [Change("plan", LEAVING, 3), CaughtUp(4)]
        changes.append(Change("plan", LEAVING, 3))
        await log.append("s", [plan_mode_event(False)])  # 5
        frame = await next_frame(frames)
        assert frame == Change("plan", IDLE, 5)
        changes.append(frame)

    async with aclosing(client.watch("s", after_seq=changes[-1].seq)) as frames:
        assert await frames_until_caught_up(frames) == [CaughtUp(5)]

    assert [c.seq for c in changes] == [0, 2, 3, 5]
    assert [c.value for c in changes] == [ENTERING, ACTIVE, LEAVING, IDLE]


async def test_watching_after_the_largest_seq_is_caught_up_with_nothing_to_send(
    log: SessionLogClient, client: ProjectionClient
) -> None:
    """No seq comes after 2^63-1: the watch says it is caught up (as of the
    log's end) instead of failing on arithmetic past the range of a store."""
    await log.create_session("s", "/w")
    await log.append("s", [select(True)])
    async with aclosing(client.watch("s", after_seq=2**63 - 1)) as frames:
        assert await frames_until_caught_up(frames) == [CaughtUp(0)]


async def test_events_that_change_no_view_send_no_frame(
    log: SessionLogClient, client: ProjectionClient
) -> None:
    await log.create_session("s", "/w")
    async with aclosing(client.watch("s")) as frames:
        assert await next_frame(frames) == CaughtUp(-1)
        await log.append("s", [turn_start(), user("hi")])  # 0, 1
        await log.append("s", [other_command("k1")])  # 2: not /plan
        await log.append(
            "s", [ev.Event(command_run=ev.CommandRun(command_id="k2", name="plan"))]
        )  # 3: display only
        await log.append("s", [plan_mode_event(False)])  # 4: already inactive
        await log.append("s", [select(True)])  # 5: the first real change

        # Frames come in seq order: nothing was sent for seqs 0 to 4.
        assert await next_frame(frames) == Change("plan", ENTERING, 5)


async def test_a_watch_resumes_on_a_restarted_projection_host(
    log: SessionLogClient, log_host: ServiceHost, projection_dir: Path
) -> None:
    await log.create_session("s", "/w")
    await log.append("s", [select(True)])  # 0

    async with (
        projection_host(projection_dir, log_host) as first,
        aclosing(first.client().watch("s")) as frames,
    ):
        assert await frames_until_caught_up(frames) == [Change("plan", ENTERING, 0), CaughtUp(0)]
        last_seq = 0
        await first.host.stop()
        # The host stopped under the open watch: it ends, and says to come back.
        with pytest.raises(Unavailable) as ended:
            await next_frame(frames)
        assert ended.value.reason == "SHUTTING_DOWN"

    await log.append("s", [plan_mode_event(True)])  # 1, while the service is down

    async with (
        projection_host(projection_dir, log_host) as second,
        aclosing(second.client().watch("s", after_seq=last_seq)) as frames,
    ):
        assert await frames_until_caught_up(frames) == [Change("plan", ACTIVE, 1), CaughtUp(1)]
        await log.append("s", [select(False)])  # 2
        assert await next_frame(frames) == Change("plan", LEAVING, 2)


# -- errors --------------------------------------------------------------------------------


async def test_an_unknown_session_is_not_found(
    client: ProjectionClient, stub: pb_grpc.ProjectionServiceStub
) -> None:
    error = await expect_rpc_error(
        stub.GetProjection(pb.GetProjectionRequest(session_id="nope")),
        grpc.StatusCode.NOT_FOUND,
    )
    assert reason_of(error) == "SESSION_NOT_FOUND"
    watch = stub.WatchProjection(pb.WatchProjectionRequest(session_id="nope"))
    error = await expect_rpc_error(watch.read(), grpc.StatusCode.NOT_FOUND)
    assert reason_of(error) == "SESSION_NOT_FOUND"

    with pytest.raises(SessionNotFound):
        await client.get("nope")
    with pytest.raises(SessionNotFound):
        async with aclosing(client.watch("nope")) as frames:
            await next_frame(frames)


@pytest.mark.parametrize(
    ("request_", "fields"),
    [
        (pb.GetProjectionRequest(session_id=""), ["session_id"]),
        (pb.GetProjectionRequest(session_id="bad id!"), ["session_id"]),
        (pb.GetProjectionRequest(session_id="x" * 129), ["session_id"]),
        (pb.GetProjectionRequest(session_id="s", keys=["plan", ""]), ["keys[1]"]),
        (pb.GetProjectionRequest(session_id="s", keys=["k" * 65]), ["keys[0]"]),
        (pb.GetProjectionRequest(session_id="s", keys=["plan"] * 65), ["keys"]),
        (pb.WatchProjectionRequest(session_id=""), ["session_id"]),
        (pb.WatchProjectionRequest(session_id="s", after_seq=-2), ["after_seq"]),
    ],
)
async def test_invalid_requests_name_the_violated_fields(
    log: SessionLogClient,
    stub: pb_grpc.ProjectionServiceStub,
    request_: pb.GetProjectionRequest | pb.WatchProjectionRequest,
    fields: list[str],
) -> None:
    await log.create_session("s", "/w")
    if isinstance(request_, pb.GetProjectionRequest):
        error = await expect_rpc_error(
            stub.GetProjection(request_), grpc.StatusCode.INVALID_ARGUMENT
        )
    else:
        error = await expect_rpc_error(
            stub.WatchProjection(request_).read(), grpc.StatusCode.INVALID_ARGUMENT
        )
    assert sorted(set(violated_fields(error))) == fields
