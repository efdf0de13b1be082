"""Which store the session log opens: the stack's database setting, or its
own older one, which wins for it alone."""

from __future__ import annotations

from pathlib import Path

from services.sessionlog.postgres_store import PostgresSessionStore
from services.sessionlog.service import store_from_env
from services.sessionlog.sqlite_store import SqliteSessionStore

DATA = Path("/data")


def test_the_stack_setting_picks_the_session_logs_store() -> None:
    sqlite = store_from_env(DATA, {})
    folder = store_from_env(DATA, {"AGENTHOST_DATABASE_URL": "sqlite:///srv/stack"})
    postgres = store_from_env(
        DATA,
        {"AGENTHOST_DATABASE_URL": "postgresql://db/x", "AGENTHOST_DATABASE_SCHEMA": "stack_a"},
    )

    assert isinstance(sqlite, SqliteSessionStore) and sqlite.path == DATA / "sessionlog.db"
    assert isinstance(folder, SqliteSessionStore) and folder.path == Path(
        "/srv/stack/sessionlog.db"
    )
    assert isinstance(postgres, PostgresSessionStore)
    assert (postgres.dsn, postgres.schema) == ("postgresql://db/x", "stack_a")


def test_the_older_setting_still_puts_the_session_log_alone_in_postgresql() -> None:
    alone = store_from_env(
        DATA,
        {
            "AGENTHOST_DATABASE_URL": "sqlite:///srv/stack",
            "AGENTHOST_SESSIONLOG_DSN": "host=db dbname=log",
            "AGENTHOST_SESSIONLOG_SCHEMA": "log",
        },
    )
    default_schema = store_from_env(DATA, {"AGENTHOST_SESSIONLOG_DSN": "host=db dbname=log"})

    assert isinstance(alone, PostgresSessionStore)
    assert (alone.dsn, alone.schema) == ("host=db dbname=log", "log")
    assert isinstance(default_schema, PostgresSessionStore) and default_schema.schema == "public"
