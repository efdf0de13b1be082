"""The reads of `cold_open` and `request_build` with every store on
PostgreSQL, beside the same on SQLite measured in the same run.

Both backends get the same sessions, built the same way; then the restarts
of the cold open take turns (one on SQLite, one on PostgreSQL, the order
swapping each time), and the request builds of both run interleaved. The
PostgreSQL is the one on loopback the tests use (AGENTHOST_BENCH_POSTGRES_URL,
default postgresql://postgres@127.0.0.1:5432/test), in a schema of the
run's own, dropped afterwards."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import psycopg
from psycopg import sql

from bench import request_build
from bench.cold_open import ColdOpens
from bench.harness import Sizes
from bench.ratio import Figure, Target, interleaved, latency_side
from services.common.database import Database

NAME = "postgres_reads"
# The cold open's big session: smaller than cold_open's 100k, which the
# projection service takes minutes to fold over PostgreSQL before the first
# restart can be measured; the ratio compares the backends at one size.
BIG_SESSION = 20_000
POSTGRES_URL = os.environ.get(
    "AGENTHOST_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


@asynccontextmanager
async def _schema(name: str) -> AsyncIterator[Database]:
    async def drop() -> None:
        async with await psycopg.AsyncConnection.connect(POSTGRES_URL, autocommit=True) as db:
            await db.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name))
            )

    await drop()
    try:
        yield Database.postgres(POSTGRES_URL, name)
    finally:
        await drop()


async def _cold_opens(
    sizes: Sizes, data_dir: Path, database: Database
) -> tuple[ColdOpens, ColdOpens]:
    sqlite = ColdOpens(data_dir / "sqlite")
    postgres = ColdOpens(data_dir / "postgres", database)
    for opens in (sqlite, postgres):
        await opens.build(sizes)
    for index in range(sizes.restarts):
        pair = (sqlite, postgres) if index % 2 == 0 else (postgres, sqlite)
        for opens in pair:
            await opens.restart(index)
    return sqlite, postgres


async def run(sizes: Sizes, data_dir: Path) -> list[Figure]:
    sizes = replace(sizes, big_session=min(sizes.big_session, BIG_SESSION))
    schema = f"bench_reads_{os.getpid()}"
    async with _schema(schema) as database:
        sqlite, postgres = await _cold_opens(sizes, data_dir, database)
    async with (
        _schema(schema) as database,
        request_build.session_log(data_dir / "rb-sqlite") as sqlite_log,
        request_build.session_log(data_dir / "rb-postgres", database) as postgres_log,
    ):
        sqlite_build = await request_build.prepared(sizes, sqlite_log)
        postgres_build = await request_build.prepared(sizes, postgres_log)
        postgres_s, sqlite_s = await interleaved(
            postgres_build, sqlite_build, sizes.rounds, sizes.per_round // 4
        )
    compacted_at = int(sizes.compacted_session * request_build.COMPACTED_SHARE)
    return [
        Figure(
            name=f"first OpenSession after restart, {sizes.big_session}-event session, PostgreSQL",
            compared="p50",
            unit="ms",
            measured=latency_side("every store on PostgreSQL", postgres.big_s, "p50"),
            baseline=latency_side("every store on SQLite", sqlite.big_s, "p50"),
            target=Target("<=", 1.5),
            notes=(
                f"one sample per restart ({sizes.restarts} restarts of each, taking turns)",
                f"the {sizes.small_session}-event session, PostgreSQL / SQLite p50: "
                f"{_p50_ms(postgres.small_s):.1f} / {_p50_ms(sqlite.small_s):.1f} ms",
            ),
        ),
        Figure(
            name=(
                f"model request built after a restart, {sizes.compacted_session}-event session "
                f"compacted at {compacted_at}, PostgreSQL"
            ),
            compared="p50",
            unit="ms",
            measured=latency_side("session log on PostgreSQL", postgres_s, "p50"),
            baseline=latency_side("session log on SQLite", sqlite_s, "p50"),
            target=Target("<=", 1.5),
            notes=("as request_build: a new agent per sample, through the session log's gRPC",),
        ),
    ]


def _p50_ms(samples_s: list[float]) -> float:
    return latency_side("", samples_s, "p50").value
