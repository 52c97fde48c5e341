"""The floors' writers: captured rows (see :mod:`benchmarks.floor`) written back raw,
with the bare driver, into a store holding the ledger's own tables."""

from __future__ import annotations

import sqlite3
from typing import Any, Protocol

import psycopg
from psycopg.sql import SQL, Composed, Identifier

from benchmarks.floor import Batch, TableRows
from erstwhile.eventstore.sqlite import BULK_CHECKPOINT_PAGES
from erstwhile.projections.search import MERGE_PENDING_ROWS


class FloorWriter(Protocol):
    """Writes captured batches raw into a store a ledger created."""

    def write(self, batch: Batch) -> None: ...

    def close(self) -> None: ...


class SQLiteFloor:
    """Writes captured batches into a SQLite file a ledger created (and never wrote to),
    as the ledger's store is set: WAL, ``synchronous=FULL``, ``secure_delete``; not
    ``durable``: ``synchronous=NORMAL`` and a checkpoint every 10,000 pages, as a
    rebuild's build commits."""

    def __init__(self, path: str, durable: bool = True) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        self.connection.execute("PRAGMA secure_delete=ON")
        if not durable:
            self.connection.execute(f"PRAGMA wal_autocheckpoint={BULK_CHECKPOINT_PAGES}")

    def write(self, batch: Batch) -> None:
        self.connection.execute("BEGIN IMMEDIATE")
        for table, written in batch.items():
            if written.replaced:
                self.connection.execute(f"DELETE FROM {table}")
            if written.removed:
                where = " AND ".join(f"{written.columns[i]} = ?" for i in written.key)
                self.connection.executemany(f"DELETE FROM {table} WHERE {where}", written.removed)
            marks = ", ".join("?" * len(written.columns))
            self.connection.executemany(
                f"INSERT OR REPLACE INTO {table} ({', '.join(written.columns)}) VALUES ({marks})",
                written.changed + written.added,
            )
        self.connection.execute("COMMIT")

    def close(self) -> None:
        self.connection.close()


class Statements:
    """The statements a floor sends to one schema, each composed once and kept as text
    (composing one with ``psycopg.sql`` on every write cost more than a one-memory
    write: 1.5 ms of its 3.5)."""

    def __init__(self, connection: psycopg.Connection[Any], schema: str) -> None:
        self.connection = connection
        self.schema = Identifier(schema)
        self.texts: dict[tuple[str, str, tuple[str, ...]], str] = {}

    def text(self, kind: str, table: str, written: TableRows) -> str:
        """``empty`` (delete every row), ``delete`` (a row by its key), ``update`` (a
        row's other columns by its key), ``insert`` (a row) or ``copy`` (rows) on
        ``table``, for rows shaped as ``written``'s."""
        key = (kind, table, written.columns)
        if key not in self.texts:
            self.texts[key] = self._compose(kind, table, written).as_string(self.connection)
        return self.texts[key]

    def _compose(self, kind: str, table: str, written: TableRows) -> Composed:
        name = SQL("{0}.{1}").format(self.schema, Identifier(table))
        columns = SQL(", ").join(map(Identifier, written.columns))
        if kind == "empty":
            return SQL("DELETE FROM {0}").format(name)
        if kind == "delete":
            return SQL("DELETE FROM {0} WHERE {1}").format(name, _matching(written))
        if kind == "update":
            rest = [i for i in range(len(written.columns)) if i not in written.key]
            assignments = SQL(", ").join(
                SQL("{0} = %s").format(Identifier(written.columns[i])) for i in rest
            )
            return SQL("UPDATE {0} SET {1} WHERE {2}").format(name, assignments, _matching(written))
        if kind == "copy":
            return SQL("COPY {0} ({1}) FROM STDIN").format(name, columns)
        marks = SQL(", ").join(SQL("%s") for _ in written.columns)
        return SQL("INSERT INTO {0} ({1}) VALUES ({2})").format(name, columns, marks)


class PostgresFloor:
    """Writes captured batches into a PostgreSQL schema a ledger created (and never
    wrote to): removed rows by ``DELETE`` and changed rows by ``UPDATE`` on their
    primary key, added rows by ``COPY``, then the schema's GIN pending lists merged (as
    erstwhile merges its search tables' within the write); not ``durable``: with
    ``synchronous_commit = off``, as a rebuild's build commits."""

    def __init__(self, database_url: str, schema: str, durable: bool = True) -> None:
        self.connection = psycopg.connect(database_url, autocommit=True)
        self.statements = Statements(self.connection, schema)
        self.schema_name = schema
        self.durable = durable

    def write(self, batch: Batch) -> None:
        text = self.statements.text
        with self.connection.transaction(), self.connection.cursor() as cursor:
            if not self.durable:
                cursor.execute("SET LOCAL synchronous_commit = off")
            for table, written in batch.items():
                if written.replaced:
                    cursor.execute(text("empty", table, written))
                if written.removed:
                    cursor.executemany(text("delete", table, written), written.removed)
                if written.changed:
                    cursor.executemany(text("update", table, written), _update_rows(written))
                if written.added:
                    with cursor.copy(text("copy", table, written)) as copy:
                        for row in written.added:
                            copy.write_row(row)
            cursor.execute(MERGE_PENDING, (self.schema_name,))

    def close(self) -> None:
        self.connection.close()


class PostgresMemoryFloor:
    """Writes one memory's captured rows (a few to a table) into a PostgreSQL schema a
    ledger created, as one durable ``remember`` writes them: ``BEGIN``, a prepared
    statement per row and ``COMMIT`` in one pipeline, so one round trip (a ``COPY`` per
    table would cost a round trip each; one query of many statements bound in the
    client, planned every time, measured slower), each statement composed once (see
    :class:`Statements`); the schema's GIN pending lists are merged in every
    :data:`MERGE_PENDING_ROWS`-th write, as erstwhile merges them once its writes have
    added that many memories."""

    def __init__(self, database_url: str, schema: str) -> None:
        self.connection = psycopg.connect(database_url, autocommit=True)
        self.statements = Statements(self.connection, schema)
        self.schema_name = schema
        self.writes = 0

    def write(self, batch: Batch) -> None:
        self.writes += 1
        text = self.statements.text
        with self.connection.pipeline(), self.connection.cursor() as cursor:
            cursor.execute("BEGIN")
            for table, written in batch.items():
                if written.replaced:
                    cursor.execute(text("empty", table, written))
                for key in written.removed:
                    cursor.execute(text("delete", table, written), key, prepare=True)
                for update in _update_rows(written):
                    cursor.execute(text("update", table, written), update, prepare=True)
                for row in written.added:
                    cursor.execute(text("insert", table, written), row, prepare=True)
            if self.writes % MERGE_PENDING_ROWS == 0:
                cursor.execute(MERGE_PENDING, (self.schema_name,))
            cursor.execute("COMMIT")

    def close(self) -> None:
        self.connection.close()


MERGE_PENDING = (
    "SELECT gin_clean_pending_list(i.indexrelid) FROM pg_index i "
    "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND a.amname = 'gin'"
)
"""Merge the GIN pending lists of every GIN index in a schema."""


def _matching(written: TableRows) -> Composed:
    """``key1 = %s AND key2 = %s ...`` over a table's primary key."""
    return SQL(" AND ").join(
        SQL("{0} = %s").format(Identifier(written.columns[i])) for i in written.key
    )


def _update_rows(written: TableRows) -> list[list[Any]]:
    """The parameters of an ``update`` (see :class:`Statements`) for each changed row: its
    other columns, then its key."""
    rest = [i for i in range(len(written.columns)) if i not in written.key]
    return [[row[i] for i in rest] + [row[i] for i in written.key] for row in written.changed]
