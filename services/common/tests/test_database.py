"""The one setting that picks the stack's database."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.common.database import (
    Backend,
    Database,
    InvalidDatabaseUrl,
    database_from_env,
    parse_database_url,
)

DATA = Path("/var/lib/agenthost")


def test_unset_means_sqlite_files_in_the_data_folder() -> None:
    database = database_from_env({}, DATA)

    assert database == Database.sqlite(DATA)
    assert database.sqlite_file("workspace.db") == DATA / "workspace.db"


def test_a_sqlite_url_names_the_folder_of_the_files() -> None:
    assert parse_database_url("sqlite:///srv/data", DATA) == Database.sqlite(Path("/srv/data"))
    assert parse_database_url("sqlite://", DATA) == Database.sqlite(DATA)


def test_a_postgresql_url_is_the_dsn_and_the_schema_comes_beside_it() -> None:
    env = {
        "AGENTHOST_DATABASE_URL": "postgresql://agenthost:pw@db:5432/agenthost",
        "AGENTHOST_DATABASE_SCHEMA": "stack_a",
    }

    database = database_from_env(env, DATA)

    assert database.backend is Backend.POSTGRES
    assert database.postgres_dsn() == "postgresql://agenthost:pw@db:5432/agenthost"
    assert database.schema == "stack_a"
    assert parse_database_url("postgres://db/x", DATA).schema == "public"


@pytest.mark.parametrize(
    "url",
    ["mysql://db/x", "sqlite://host/data", "/just/a/path", "sqlite:///d?mode=ro", ""],
)
def test_a_url_that_cannot_be_used_is_refused(url: str) -> None:
    with pytest.raises(InvalidDatabaseUrl):
        parse_database_url(url, DATA)


@pytest.mark.parametrize("schema", ["Public", "1st", "a-b", 'x"; DROP', "s" * 64])
def test_a_schema_name_that_would_need_quoting_is_refused(schema: str) -> None:
    with pytest.raises(InvalidDatabaseUrl):
        database_from_env({"AGENTHOST_DATABASE_SCHEMA": schema}, DATA)


def test_each_backend_refuses_what_belongs_to_the_other() -> None:
    with pytest.raises(InvalidDatabaseUrl):
        Database.sqlite(DATA).postgres_dsn()
    with pytest.raises(InvalidDatabaseUrl):
        Database.postgres("postgresql://db/x").sqlite_file("workspace.db")
