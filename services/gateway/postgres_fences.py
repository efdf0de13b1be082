"""The gateway replicas' shared fences in PostgreSQL (see fence_store.py).

Each operation is one statement or one short transaction, so replicas never
hold a lock across a call to a peer: a mutation takes its request id
(`reserve`) before the call and gives its outcome (`release`) after it. A
reservation serializes on a transaction-scoped advisory lock of its (client,
session) key, since the first one for a key has no row to lock. Rows of a
gateway that died mid-call stay in flight: their outcome is unknown, so
their ids stay used, which is what a single gateway does too.
"""

from __future__ import annotations

from services.common.postgres import PostgresStore

from .fence_store import ClientKey, Order, RequestKey

# Released migrations never change; a change is a new entry at the end.
TABLES = (
    """
    CREATE TABLE gateway_generations (
        account TEXT NOT NULL,
        client_id TEXT NOT NULL,
        generation BIGINT NOT NULL,
        PRIMARY KEY (account, client_id)
    );
    CREATE TABLE gateway_applied (
        account TEXT NOT NULL,
        client_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        generation BIGINT NOT NULL,
        request_id BIGINT NOT NULL,
        PRIMARY KEY (account, client_id, session_id)
    );
    CREATE TABLE gateway_in_flight (
        account TEXT NOT NULL,
        client_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        generation BIGINT NOT NULL,
        request_id BIGINT NOT NULL,
        PRIMARY KEY (account, client_id, session_id, generation, request_id)
    );
    """,
)

ADVANCE = (
    "INSERT INTO gateway_generations (account, client_id, generation) VALUES (%s, %s, %s) "
    "ON CONFLICT (account, client_id) DO UPDATE "
    "SET generation = GREATEST(gateway_generations.generation, EXCLUDED.generation) "
    "RETURNING generation"
)
LOCK_KEY = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
NEWEST = (
    "SELECT generation, request_id FROM ("
    " SELECT generation, request_id FROM gateway_applied"
    "  WHERE account = %s AND client_id = %s AND session_id = %s"
    " UNION ALL"
    " SELECT generation, request_id FROM gateway_in_flight"
    "  WHERE account = %s AND client_id = %s AND session_id = %s"
    ") AS orders ORDER BY generation DESC, request_id DESC LIMIT 1"
)
TAKE = (
    "INSERT INTO gateway_in_flight (account, client_id, session_id, generation, request_id) "
    "VALUES (%s, %s, %s, %s, %s)"
)
DONE = (
    "DELETE FROM gateway_in_flight WHERE account = %s AND client_id = %s "
    "AND session_id = %s AND generation = %s AND request_id = %s"
)
APPLIED = (
    "INSERT INTO gateway_applied (account, client_id, session_id, generation, request_id) "
    "VALUES (%s, %s, %s, %s, %s) "
    "ON CONFLICT (account, client_id, session_id) DO UPDATE "
    "SET generation = EXCLUDED.generation, request_id = EXCLUDED.request_id "
    "WHERE (gateway_applied.generation, gateway_applied.request_id) "
    "< (EXCLUDED.generation, EXCLUDED.request_id)"
)


class PostgresFenceStore(PostgresStore):
    STORE = "gateway_fences"
    MIGRATIONS = TABLES

    async def advance_generation(self, client: ClientKey, generation: int) -> int:
        rows = await self.db.fetch(ADVANCE, (*client, generation))
        return int(rows[0]["generation"])

    async def reserve(self, key: RequestKey, order: Order) -> Order | None:
        async with self.db.transaction() as db:
            await db.execute(LOCK_KEY, ("\x1f".join(key),))
            row = await (await db.execute(NEWEST, (*key, *key))).fetchone()
            newest = None if row is None else (int(row["generation"]), int(row["request_id"]))
            if newest is not None and order <= newest:
                return newest
            await db.execute(TAKE, (*key, *order))
            return None

    async def release(self, key: RequestKey, order: Order, *, applied: bool) -> None:
        async with self.db.transaction() as db:
            await db.execute(DONE, (*key, *order))
            if applied:
                await db.execute(APPLIED, (*key, *order))
