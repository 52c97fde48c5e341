"""Scratch stores for one run, and data sets loaded into them.

SQLite stores are files in a temporary folder; PostgreSQL stores are schemas in a
database created for the run. Both are removed when the run ends: nothing is cached
across runs.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit, urlunsplit
from uuid import UUID

import psycopg
from psycopg.sql import SQL, Identifier

from benchmarks.baselines import (
    RawEventReader,
    RawLedgerReader,
    RawPostgres,
    RawSQLite,
    RawStore,
    ReplayBaseline,
    postgres_replay_env,
    read_postgres_log,
    read_sqlite_log,
    sqlite_replay_env,
)
from benchmarks.datasets import VERSIONS, chunks, round_claims, subject_count
from benchmarks.floor import PostgresTables, SQLiteTables, TableReader
from benchmarks.floor_writers import FloorWriter, PostgresFloor, PostgresMemoryFloor, SQLiteFloor
from erstwhile import Ledger

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
BENCH_ACTOR = "bench"


def server_url() -> str:
    """Return the PostgreSQL server to use: ``$ERSTWHILE_BENCH_POSTGRES_URL`` or local."""
    return os.environ.get("ERSTWHILE_BENCH_POSTGRES_URL", DEFAULT_SERVER)


def postgres_reachable(url: str | None = None) -> bool:
    """Whether a PostgreSQL server answers at ``url``."""
    try:
        psycopg.connect(url or server_url(), connect_timeout=3).close()
    except psycopg.OperationalError:
        return False
    return True


class Scratch:
    """Fresh, empty stores on one backend, all removed when the context exits."""

    def __init__(self, backend: str, server: str | None = None) -> None:
        if backend not in ("sqlite", "postgres"):
            raise ValueError(f"unknown backend {backend!r}")
        self.backend = backend
        self.server = server or server_url()
        self.folder = ""
        self.database_url = ""

    def __enter__(self) -> Self:
        if self.backend == "sqlite":
            self.folder = tempfile.mkdtemp(prefix="erstwhile-bench-")
            return self
        name = f"erstwhile_bench_{os.getpid()}_{secrets.token_hex(3)}"
        with psycopg.connect(self.server, autocommit=True) as admin:
            admin.execute(SQL("CREATE DATABASE {0}").format(Identifier(name)))
        self.database_url = urlunsplit(urlsplit(self.server)._replace(path=f"/{name}"))
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.backend == "sqlite":
            shutil.rmtree(self.folder, ignore_errors=True)
            return
        name = urlsplit(self.database_url).path.lstrip("/")
        with psycopg.connect(self.server, autocommit=True) as admin:
            admin.execute(SQL("DROP DATABASE IF EXISTS {0} WITH (FORCE)").format(Identifier(name)))

    def path(self, name: str) -> str:
        """Return the path of SQLite file ``name`` in the scratch folder."""
        return os.path.join(self.folder, f"{name}.db")

    def ledger_url(self, name: str) -> str:
        """Return the URL of a fresh ledger store called ``name``."""
        if self.backend == "sqlite":
            return f"sqlite:///{self.path(name)}"
        return f"{self.database_url}?schema={name}"

    def open_ledger(self, name: str) -> Ledger:
        """Open a ledger on a fresh store called ``name``."""
        return Ledger.open(self.ledger_url(name), namespace="bench", actor=BENCH_ACTOR)

    def raw(self, name: str) -> RawStore:
        """Open plain tables in a fresh store called ``name``."""
        if self.backend == "sqlite":
            return RawSQLite(self.path(name))
        return RawPostgres(self.database_url, name)

    def replay(self, name: str) -> ReplayBaseline:
        """Open an eventsourcing application on a fresh store called ``name``."""
        if self.backend == "sqlite":
            return ReplayBaseline(sqlite_replay_env(self.path(name)))
        with psycopg.connect(self.database_url, autocommit=True) as connection:
            connection.execute(SQL("CREATE SCHEMA {0}").format(Identifier(name)))
        parts = urlsplit(self.database_url)
        env = postgres_replay_env(
            database=parts.path.lstrip("/"), schema=name, host=parts.hostname or "localhost",
            port=parts.port or 5432, user=parts.username or "postgres",
            password=parts.password or "",
        )  # fmt: skip
        return ReplayBaseline(env)

    def event_reader(self, name: str, table: str) -> RawEventReader:
        """Open a raw reader of one memory's events in ledger store ``name``."""
        if self.backend == "sqlite":
            return RawEventReader.sqlite(self.path(name), table)
        return RawEventReader.postgres(self.database_url, name, table)

    def ledger_reader(self, name: str) -> RawLedgerReader:
        """Open a raw reader of the projection tables of ledger store ``name``."""
        if self.backend == "sqlite":
            return RawLedgerReader.sqlite(self.path(name))
        return RawLedgerReader.postgres(self.database_url, name)

    def tables(self, name: str) -> TableReader:
        """Open a raw reader of every table of ledger store ``name``."""
        if self.backend == "sqlite":
            return SQLiteTables(self.path(name))
        return PostgresTables(self.database_url, name)

    def floor(self, name: str, durable: bool = True, single: bool = False) -> FloorWriter:
        """Create ledger store ``name`` (a ledger's tables, no event) and open it for
        writing captured rows raw (see :mod:`benchmarks.floor`); ``single``: each batch
        is one memory's rows, written durably."""
        if single and not durable:
            raise ValueError("one memory's floor is written as a durable remember writes it")
        self.open_ledger(name).close()
        if self.backend == "sqlite":
            return SQLiteFloor(self.path(name), durable)
        if single:
            return PostgresMemoryFloor(self.database_url, name)
        return PostgresFloor(self.database_url, name, durable)

    def read_log(self, name: str, table: str) -> int:
        """Read the whole log of ledger store ``name`` raw; return how many rows."""
        if self.backend == "sqlite":
            return read_sqlite_log(self.path(name), table)
        return read_postgres_log(self.database_url, name, table)


@dataclass
class Dataset:
    """A ledger loaded with a data set, and the instants at which each round was known."""

    memories: int
    store: str
    ledger: Ledger
    marks: list[datetime]
    seconds: float


def load_ledger(ledger: Ledger, memories: int, batch: int, seed: int) -> list[datetime]:
    """Remember every version of every subject with ``remember_many``, a round at a time,
    each version superseding the one before; return each round's last recorded instant."""
    previous: list[UUID | None] = [None] * subject_count(memories)
    marks = []
    for version in range(VERSIONS):
        claims = list(enumerate(round_claims(memories, version, seed)))
        for part in chunks(claims, batch):
            items = [
                {**c.arguments(), "supersedes": [previous[i]] if previous[i] else []}
                for i, c in part
            ]
            made = ledger.remember_many(items)
            for (i, _), memory in zip(part, made, strict=True):
                previous[i] = memory.id
        marks.append(made[-1].recorded_at)
    return marks
