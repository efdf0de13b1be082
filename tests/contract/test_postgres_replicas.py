"""Two session-log replicas on one PostgreSQL: a subscriber of one sees what
the other appends, live (NOTIFY), and positions never run backwards."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from services.sessionlog.domain import SessionLog
from services.sessionlog.port import CaughtUp, Heartbeat
from services.sessionlog.postgres_store import PostgresSessionStore
from tests.support.events import user
from tests.support.postgres import POSTGRES_DSN, drop_schema

WAIT_S = 10.0


async def test_a_subscriber_on_one_replica_sees_appends_made_on_another(tmp_path: Path) -> None:
    schema = f"replicas_{os.getpid()}_{tmp_path.name.lower().replace('-', '_')}"
    stores = [PostgresSessionStore(POSTGRES_DSN, schema) for _ in range(2)]
    await drop_schema(stores[0])
    for store in stores:
        await store.open()
    first, second = SessionLog(stores[0]), SessionLog(stores[1])
    feeds = [asyncio.create_task(log.follow_shared_store()) for log in (first, second)]
    try:
        await second.create_session("s", "/w")
        await second.append("s", [user("from the second replica")])
        received: list[tuple[str, int]] = []
        async with asyncio.timeout(WAIT_S):
            async for item in first.subscribe_all(heartbeat_s=60):
                if isinstance(item, CaughtUp):
                    for n in range(3):
                        await second.append("s", [user(f"live {n}")])
                elif not isinstance(item, Heartbeat):
                    received.append((item.session_id, item.position))
                    if len(received) == 4:
                        break
        assert [p for _, p in received] == sorted(p for _, p in received)
        assert {s for s, _ in received} == {"s"}
    finally:
        for task in feeds:
            task.cancel()
        await asyncio.gather(*feeds, return_exceptions=True)
        for store in stores:
            await store.close()
        await drop_schema(stores[0])
