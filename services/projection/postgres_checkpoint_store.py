"""PostgreSQL backend of the projection checkpoints, for stacks whose
replicas share one database (AGENTHOST_DATABASE_URL=postgresql://…).

The same rows as the SQLite backend (checkpoint_store.py says what they
mean), in tables named for the service: the schema is shared with the other
stores. Replicas may checkpoint one session at once; each save first writes
the session's row, whose lock makes the other save wait until this one
commits, so one checkpoint's units replace the other's whole and never mix.
Either may win: both are checkpoints the log can continue from.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.common.postgres import Connection, PostgresStore

from .checkpoint_store import SessionCheckpoint, to_checkpoint, unit_rows

# Released migrations never change; a change is a new entry at the end.
TABLES = (
    """
    CREATE TABLE projection_sessions (
        session_id TEXT PRIMARY KEY,
        watermark BIGINT NOT NULL
    );
    CREATE TABLE projection_units (
        session_id TEXT NOT NULL REFERENCES projection_sessions (session_id),
        unit_key TEXT NOT NULL,
        state_version INTEGER NOT NULL,
        state BYTEA NOT NULL,
        changed_at_seq BIGINT NOT NULL,
        PRIMARY KEY (session_id, unit_key)
    );
    CREATE TABLE projection_feeder (
        id INTEGER PRIMARY KEY CHECK (id = 0),
        position BIGINT NOT NULL
    );
    """,
)


class PostgresCheckpointStore(PostgresStore):
    STORE = "projection"
    MIGRATIONS = TABLES

    # -- sessions ----------------------------------------------------------------

    async def load_session(self, session_id: str) -> SessionCheckpoint | None:
        async with self.db.session() as connection, connection.pipeline():
            # Both sent before either is read: one round trip.
            session = await connection.execute(
                "SELECT watermark FROM projection_sessions WHERE session_id = %s", (session_id,)
            )
            units = await connection.execute(
                "SELECT unit_key, state_version, state, changed_at_seq FROM projection_units "
                "WHERE session_id = %s",
                (session_id,),
            )
            row = await session.fetchone()
            unit_values = [
                (u["unit_key"], u["state_version"], u["state"], u["changed_at_seq"])
                for u in await units.fetchall()
            ]
        return None if row is None else to_checkpoint(session_id, row["watermark"], unit_values)

    async def save_sessions(
        self, checkpoints: Sequence[SessionCheckpoint], position: int | None = None
    ) -> int:
        async with self.db.transaction() as connection:
            for checkpoint in checkpoints:
                await _replace(connection, checkpoint)
            if position is not None:
                await _advance_position(connection, position)
        return len(checkpoints)

    # -- feeder position -----------------------------------------------------------

    async def load_position(self) -> int:
        rows = await self.db.fetch("SELECT position FROM projection_feeder WHERE id = 0")
        return int(rows[0]["position"]) if rows else 0

    async def save_position(self, position: int) -> None:
        async with self.db.session() as connection:
            await _advance_position(connection, position)


async def _replace(connection: Connection, checkpoint: SessionCheckpoint) -> None:
    await connection.execute(
        "INSERT INTO projection_sessions (session_id, watermark) VALUES (%s, %s) "
        "ON CONFLICT (session_id) DO UPDATE SET watermark = excluded.watermark",
        (checkpoint.session_id, checkpoint.watermark),
    )
    await connection.execute(
        "DELETE FROM projection_units WHERE session_id = %s", (checkpoint.session_id,)
    )
    async with connection.cursor() as cursor:
        await cursor.executemany(
            "INSERT INTO projection_units (session_id, unit_key, state_version, state, "
            "changed_at_seq) VALUES (%s, %s, %s, %s, %s)",
            unit_rows(checkpoint),
        )


async def _advance_position(connection: Connection, position: int) -> None:
    await connection.execute(
        "INSERT INTO projection_feeder (id, position) VALUES (0, %s) ON CONFLICT (id) "
        "DO UPDATE SET position = GREATEST(projection_feeder.position, excluded.position)",
        (position,),
    )
