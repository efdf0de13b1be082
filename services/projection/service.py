"""The projection service as a ServiceHost definition."""

from __future__ import annotations

from pathlib import Path

import grpc
from agenthost.projection.v1 import projection_pb2_grpc as pb_grpc

from services.common.database import Backend, Database, postgres_probe
from services.common.server import ServiceDefinition
from services.planmode.projection_unit import PlanProjectionUnit
from services.sessionlog.port import SessionLogPort

from .checkpoint_store import CheckpointStore, SqliteCheckpointStore
from .engine import ProjectionEngine
from .registry import UnitRegistry
from .servicer import SERVICE_NAME, ProjectionServicer
from .session_units import SESSION_UNITS


def default_registry(*, with_plan_mode: bool = True) -> UnitRegistry:
    """The units this deployment folds: the session units, and `plan` only
    where plan mode is composed (a missing key means the feature is absent)."""
    plan = (PlanProjectionUnit(),) if with_plan_mode else ()
    return UnitRegistry((*plan, *SESSION_UNITS))


class ProjectionServiceDefinition(ServiceDefinition):
    """The definition plus the running engine (`engine`), so tests and an
    embedding process can read its stats.

    open: the checkpoint store, then the engine (its feeder follows the
    session log from the stored position). Health turns SERVING without
    waiting for the feeder to catch up: a read folds what it needs from the
    log itself. before_stop: the engine stops, which ends every watch with
    UNAVAILABLE (clients reconnect with their last seq) instead of holding
    the shutdown for the whole grace period. close: a last checkpoint of what
    reads folded during the grace period, then the store.
    """

    def __init__(self, store: CheckpointStore, log: SessionLogPort, registry: UnitRegistry) -> None:
        self._store = store
        self._log = log
        self._registry = registry
        self._servicer = ProjectionServicer()
        super().__init__(
            [SERVICE_NAME],
            self._register,
            open=self._open,
            close=self._close,
            before_stop=[self._stop_engine],
            # PostgreSQL: NOT_SERVING while the server is away (see workspace).
            probe=postgres_probe(store),
        )

    @property
    def engine(self) -> ProjectionEngine:
        if self._servicer.engine is None:
            raise RuntimeError("the projection service is not open")
        return self._servicer.engine

    def _register(self, server: grpc.aio.Server) -> None:
        pb_grpc.add_ProjectionServiceServicer_to_server(self._servicer, server)

    async def _open(self) -> None:
        await self._store.open()
        engine = ProjectionEngine(self._log, self._registry, self._store)
        await engine.start()
        self._servicer.engine = engine

    async def _stop_engine(self) -> None:
        if self._servicer.engine is not None:
            await self._servicer.engine.stop()

    async def _close(self) -> None:
        # stop() again: checkpoints what was folded since before_stop.
        await self._stop_engine()
        self._servicer.engine = None
        await self._store.close()


def projection_service(
    data_dir: Path,
    log: SessionLogPort,
    *,
    registry: UnitRegistry | None = None,
    with_plan_mode: bool = True,
    database: Database | None = None,
) -> ProjectionServiceDefinition:
    """Checkpoints live in `database` (by default SQLite: `data_dir/projection.db`);
    the events come from `log`."""
    return ProjectionServiceDefinition(
        checkpoint_store(database or Database.sqlite(data_dir)),
        log,
        registry or default_registry(with_plan_mode=with_plan_mode),
    )


def checkpoint_store(database: Database) -> CheckpointStore:
    if database.backend is Backend.POSTGRES:
        from .postgres_checkpoint_store import PostgresCheckpointStore  # psycopg when used

        return PostgresCheckpointStore(database.postgres_dsn(), database.schema)
    return SqliteCheckpointStore(database.sqlite_file("projection.db"))
