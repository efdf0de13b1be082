"""A writer waiting for a restarted session log gets through within 1.5 s of
the log serving again, however long it was away: internal channels try to
reconnect at least every second (services/common/client.py), not after
gRPC's default backoff, which grows to minutes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from datetime import datetime
from pathlib import Path

from grpc_health.v1 import health_pb2

from services.common.client import open_channel
from services.sessionlog.client import SessionLogClient
from tests.support.events import user
from tests.support.hosts import ServiceProcess, wait_for_health

SERVING = health_pb2.HealthCheckResponse.SERVING
# Long enough for gRPC's default backoff to grow past 6 s between attempts.
OUTAGE_S = 12.0
BACK_WITHIN_S = 1.5


def _says_serving(line: str) -> bool:
    with contextlib.suppress(json.JSONDecodeError):
        return bool(json.loads(line).get("msg") == "serving")
    return False


async def test_a_writer_is_back_within_a_second_and_a_half_of_the_log_serving_again(
    tmp_path: Path,
) -> None:
    service = ServiceProcess("services.sessionlog", tmp_path / "sessionlog")
    channel = open_channel(await service.start())
    try:
        log = SessionLogClient(channel)
        await wait_for_health(channel, SERVING)
        await log.create_session("s", "/w")
        await log.append("s", [user("before", event_id="before")])

        service.kill()
        writing = asyncio.create_task(log.append("s", [user("during", event_id="during")]))
        await asyncio.sleep(OUTAGE_S)  # the outage itself, not synchronisation
        assert not writing.done()

        service.lines.clear()  # the lines of the restarted process only
        await service.start()
        async with asyncio.timeout(30):
            result = await writing
        back_at = time.time()
        serving = json.loads(await service.wait_for_line(_says_serving))
        serving_at = datetime.fromisoformat(serving["ts"].replace("Z", "+00:00")).timestamp()
        back_after = back_at - serving_at
        assert back_after <= BACK_WITHIN_S, f"back {back_after:.2f} s after the log served again"
        assert result.seqs == [1]
    finally:
        await channel.close()
        service.kill()
