"""Which database every service of a stack keeps its data in, from one URL.

One setting for the whole stack, because a stack split across two kinds of
storage is a stack half of which cannot scale out: AGENTHOST_DATABASE_URL is
`sqlite:///folder` (each service its own SQLite file in that folder, the
embedded default; unset means the data folder) or `postgresql://…` (every
service in one PostgreSQL, shared by replicas). AGENTHOST_DATABASE_SCHEMA
(default `public`) names the PostgreSQL schema, so stacks or tests can share
a server without sharing tables. A setting that cannot be read fails at
start-up with InvalidDatabaseUrl rather than quietly falling back to SQLite.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from urllib.parse import unquote, urlsplit

DATABASE_URL_ENV = "AGENTHOST_DATABASE_URL"
DATABASE_SCHEMA_ENV = "AGENTHOST_DATABASE_SCHEMA"
DEFAULT_SCHEMA = "public"
# An unquoted PostgreSQL identifier (at most 63 bytes), so a schema name is
# never an injection vector and never needs quoting rules in logs or docs.
_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class InvalidDatabaseUrl(ValueError):
    """AGENTHOST_DATABASE_URL or AGENTHOST_DATABASE_SCHEMA cannot be used."""


class Backend(Enum):
    SQLITE = "sqlite"
    POSTGRES = "postgresql"


@dataclass(frozen=True)
class Database:
    """Where the stores live: a folder of SQLite files, or a PostgreSQL
    server (its DSN) and the schema to use there."""

    backend: Backend
    folder: Path | None = None
    dsn: str | None = None
    schema: str = DEFAULT_SCHEMA

    @classmethod
    def sqlite(cls, folder: Path) -> Database:
        return cls(Backend.SQLITE, folder=folder)

    @classmethod
    def postgres(cls, dsn: str, schema: str = DEFAULT_SCHEMA) -> Database:
        return cls(Backend.POSTGRES, dsn=dsn, schema=checked_schema(schema))

    def sqlite_file(self, name: str) -> Path:
        """The SQLite file of one store (`name`, e.g. "workspace.db")."""
        if self.folder is None:
            raise InvalidDatabaseUrl(f"{self.backend.value} keeps no SQLite files")
        return self.folder / name

    def postgres_dsn(self) -> str:
        if self.dsn is None:
            raise InvalidDatabaseUrl(f"{self.backend.value} has no PostgreSQL DSN")
        return self.dsn


def parse_database_url(url: str, data_dir: Path, schema: str = DEFAULT_SCHEMA) -> Database:
    """`sqlite:///folder` (`sqlite://` alone: `data_dir`) or `postgresql://…`
    (`postgres://…` too; psycopg takes the URL as it is)."""
    parts = urlsplit(url.strip())
    if parts.scheme in ("postgresql", "postgres"):
        # What it leaves out, libpq takes from its defaults (PGHOST…), as psql does.
        return Database.postgres(url.strip(), schema)
    if parts.scheme == "sqlite":
        if parts.netloc or parts.query:
            raise InvalidDatabaseUrl(f"{url!r}: write sqlite:///folder (three slashes)")
        folder = unquote(parts.path)
        return Database.sqlite(Path(folder) if folder else data_dir)
    raise InvalidDatabaseUrl(f"{url!r} is neither sqlite:///folder nor postgresql://…")


def database_from_env(env: Mapping[str, str], data_dir: Path) -> Database:
    """The stack's database: AGENTHOST_DATABASE_URL, or SQLite in `data_dir`."""
    schema = env.get(DATABASE_SCHEMA_ENV) or DEFAULT_SCHEMA
    url = env.get(DATABASE_URL_ENV, "").strip()
    if not url:
        checked_schema(schema)  # a typo here must not wait for the day PostgreSQL is used
        return Database.sqlite(data_dir)
    return parse_database_url(url, data_dir, schema)


def checked_schema(schema: str) -> str:
    if not _SCHEMA.fullmatch(schema):
        raise InvalidDatabaseUrl(
            f"schema {schema!r}: lower-case letters, digits and _ (63 at most), "
            "not starting with a digit"
        )
    return schema


def postgres_probe(store: object) -> Callable[[], Awaitable[None]] | None:
    """The store's probe if it is a PostgreSQL store (services/common/postgres.py),
    else None (SQLite is a local file: nothing to probe). Imports nothing: a
    process that never made a PostgreSQL store never loaded psycopg, and
    need not load it to learn that."""
    module = sys.modules.get("services.common.postgres")
    if module is None or not isinstance(store, module.PostgresStore):
        return None
    probe: Callable[[], Awaitable[None]] = store.probe
    return probe
