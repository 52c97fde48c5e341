"""Floors: the very rows erstwhile writes, written raw into its own tables.

A memory is more than one row: the log's row, the memory's key, its rows in the
memories and versions projections (each with its indexes), its two full-text rows
(every memory, and the live ones), the writer's count, the projections' tracked
positions. The floor captures those rows from a ledger that wrote the same batches,
then writes them with the bare driver into a store holding the ledger's own tables and
indexes (``INSERT OR REPLACE`` through ``executemany`` on SQLite, ``COPY`` on
PostgreSQL), one durable transaction per batch, with no Python between: no program
keeping the same tables can write a batch faster. Beside erstwhile it tells how much of
a bulk write is erstwhile's own work; beside raw ``executemany`` of one row per memory,
how far the schema alone stands from it.

A rebuild has a floor too: reading the log raw, then writing every row the rebuilt
projections hold into empty tables, in transactions of about as many events as the
build folds in one, as the build commits them (not synced one by one).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.sql import SQL, Identifier

from erstwhile import Ledger

FLOOR_VS_RAW = "the rows remember_many writes, written raw (the floor)"
"""The floor's row: its memories/s against raw ``executemany`` of one row per memory."""
OURS_VS_FLOOR = "remember_many against its rows written raw"
"""erstwhile's row: its memories/s against the floor's."""
LOG_TABLES = ("erstwhile_events", "erstwhile_keys", "erstwhile_idempotency")
"""The tables a rebuild reads or leaves alone: everything else is its projections'."""
FTS5_SHADOWS = ("_data", "_idx", "_docsize", "_content", "_config")
"""The tables FTS5 keeps behind each full-text table: written through the table itself."""


@dataclass(frozen=True)
class TableRows:
    """What one batch wrote to one table: rows it added, and rows it changed in place
    (found by the table's primary key). A table without a primary key whose rows changed
    is ``replaced``: emptied, then given all its rows again as added ones."""

    columns: tuple[str, ...]
    added: list[tuple[Any, ...]]
    changed: list[tuple[Any, ...]]
    replaced: bool = False


Batch = dict[str, TableRows]
"""What one batch wrote, by table."""


def capture(
    ledger: Ledger, snapshot: TableReader, batches: Sequence[list[dict[str, Any]]]
) -> list[Batch]:
    """Run ``remember_many`` for every batch on ``ledger`` (a fresh one) and return what
    each batch wrote, table by table, read through ``snapshot`` before and after it."""
    captured = []
    before = snapshot.rows()
    for batch in batches:
        ledger.remember_many(batch)
        after = snapshot.rows()
        captured.append(difference(snapshot, before, after))
        before = after
    return captured


def difference(
    reader: TableReader,
    before: dict[str, set[tuple[Any, ...]]],
    after: dict[str, set[tuple[Any, ...]]],
) -> Batch:
    """The rows in ``after`` that ``before`` did not hold, split into added rows and
    rows whose primary key ``before`` already had."""
    written: Batch = {}
    for table, rows in after.items():
        new = rows - before.get(table, set())
        if not new:
            continue
        if not reader.keys[table] and before.get(table, set()) - rows:
            written[table] = TableRows(reader.columns[table], list(rows), [], replaced=True)
            continue
        key = reader.key_of(table)
        known = {key(row) for row in before.get(table, set())}
        changed = [row for row in new if key(row) in known]
        added = [row for row in new if key(row) not in known]
        written[table] = TableRows(reader.columns[table], added, changed)
    return written


def split(batch: Batch, parts: int) -> list[Batch]:
    """Cut one batch into ``parts`` batches, each with its share of every table's rows."""
    cut = []
    for part in range(parts):
        cut.append(
            {
                table: TableRows(
                    written.columns,
                    _share(written.added, part, parts),
                    _share(written.changed, part, parts),
                    written.replaced and part == 0,
                )
                for table, written in batch.items()
            }
        )
    return cut


def _share(rows: list[tuple[Any, ...]], part: int, parts: int) -> list[tuple[Any, ...]]:
    return rows[part * len(rows) // parts : (part + 1) * len(rows) // parts]


def projection_rows(reader: TableReader, empty: TableReader) -> Batch:
    """Every row of the projections ``reader``'s store holds, as one batch that would
    bring the store ``empty`` reads (one a ledger created, without events) to them."""
    ours = {t: rows for t, rows in reader.rows().items() if t not in LOG_TABLES}
    theirs = {t: rows for t, rows in empty.rows().items() if t not in LOG_TABLES}
    return difference(empty, theirs, ours)


class TableReader:
    """Reads every row of every table of one ledger store, as sets of tuples."""

    columns: dict[str, tuple[str, ...]]
    keys: dict[str, tuple[int, ...]]
    """Each table's primary key, as the positions of its columns."""

    def rows(self) -> dict[str, set[tuple[Any, ...]]]:
        raise NotImplementedError

    def key_of(self, table: str) -> Any:
        positions = self.keys[table]
        return lambda row: tuple(row[i] for i in positions) if positions else row

    def close(self) -> None:
        raise NotImplementedError


class SQLiteTables(TableReader):
    """The tables of a SQLite ledger file (full-text tables by rowid and columns; their
    FTS5 shadow tables and SQLite's own left out)."""

    def __init__(self, path: str) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None)
        listed = self.connection.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
        full_text = {name for name, sql in listed if "fts5" in (sql or "").lower()}
        shadows = {f + end for f in full_text for end in FTS5_SHADOWS}
        self.full_text = full_text
        self.columns, self.keys = {}, {}
        for name, _ in listed:
            if name in shadows:
                continue
            info = self.connection.execute(f"PRAGMA table_info({name})").fetchall()
            columns = tuple(row[1] for row in info)
            if name in full_text:
                self.columns[name], self.keys[name] = ("rowid", *columns), (0,)
                continue
            primary = sorted((row[5], i) for i, row in enumerate(info) if row[5])
            self.columns[name], self.keys[name] = columns, tuple(i for _, i in primary)

    def rows(self) -> dict[str, set[tuple[Any, ...]]]:
        return {
            table: set(self.connection.execute(f"SELECT {', '.join(columns)} FROM {table}"))
            for table, columns in self.columns.items()
        }

    def close(self) -> None:
        self.connection.close()


class PostgresTables(TableReader):
    """The tables of a PostgreSQL ledger schema."""

    def __init__(self, database_url: str, schema: str) -> None:
        self.connection = psycopg.connect(database_url, autocommit=True)
        self.schema = schema
        tables = [
            row[0]
            for row in self.connection.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename",
                (schema,),
            )
        ]
        self.columns, self.keys = {}, {}
        for table in tables:
            relation = f"{schema}.{table}"
            columns = tuple(
                row[0]
                for row in self.connection.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass "
                    "AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                    (relation,),
                )
            )
            primary = [
                row[0]
                for row in self.connection.execute(
                    "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
                    "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                    "WHERE i.indrelid = %s::regclass AND i.indisprimary "
                    "ORDER BY array_position(i.indkey, a.attnum)",
                    (relation,),
                )
            ]
            self.columns[table] = columns
            self.keys[table] = tuple(columns.index(name) for name in primary)

    def rows(self) -> dict[str, set[tuple[Any, ...]]]:
        return {
            table: set(
                self.connection.execute(
                    SQL("SELECT {0} FROM {1}.{2}").format(
                        SQL(", ").join(map(Identifier, columns)),
                        Identifier(self.schema),
                        Identifier(table),
                    )
                )
            )
            for table, columns in self.columns.items()
        }

    def close(self) -> None:
        self.connection.close()


class SQLiteFloor:
    """Writes captured batches into a SQLite file a ledger created (and never wrote to),
    as the ledger's store is set: WAL, ``synchronous=FULL`` (``NORMAL`` when not
    ``durable``, as a rebuild's build commits), ``secure_delete``."""

    def __init__(self, path: str, durable: bool = True) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        self.connection.execute("PRAGMA secure_delete=ON")

    def write(self, batch: Batch) -> None:
        self.connection.execute("BEGIN IMMEDIATE")
        for table, written in batch.items():
            if written.replaced:
                self.connection.execute(f"DELETE FROM {table}")
            marks = ", ".join("?" * len(written.columns))
            self.connection.executemany(
                f"INSERT OR REPLACE INTO {table} ({', '.join(written.columns)}) VALUES ({marks})",
                written.changed + written.added,
            )
        self.connection.execute("COMMIT")

    def close(self) -> None:
        self.connection.close()


class PostgresFloor:
    """Writes captured batches into a PostgreSQL schema a ledger created (and never
    wrote to): added rows by ``COPY``, changed rows by ``UPDATE`` on their primary key;
    not ``durable``: with ``synchronous_commit = off``, as a rebuild's build commits."""

    def __init__(
        self, database_url: str, schema: str, keys: dict[str, tuple[int, ...]], durable: bool = True
    ) -> None:
        self.connection = psycopg.connect(database_url, autocommit=True)
        self.schema = Identifier(schema)
        self.keys = keys
        self.durable = durable

    def write(self, batch: Batch) -> None:
        with self.connection.transaction(), self.connection.cursor() as cursor:
            if not self.durable:
                cursor.execute("SET LOCAL synchronous_commit = off")
            for table, written in batch.items():
                name = SQL("{0}.{1}").format(self.schema, Identifier(table))
                if written.replaced:
                    cursor.execute(SQL("DELETE FROM {0}").format(name))
                if written.changed:
                    cursor.executemany(*self._update(name, written, table))
                if written.added:
                    columns = SQL(", ").join(map(Identifier, written.columns))
                    with cursor.copy(
                        SQL("COPY {0} ({1}) FROM STDIN").format(name, columns)
                    ) as copy:
                        for row in written.added:
                            copy.write_row(row)

    def _update(self, name: Any, written: TableRows, table: str) -> tuple[Any, list[list[Any]]]:
        key = self.keys[table]
        rest = [i for i in range(len(written.columns)) if i not in key]
        statement = SQL("UPDATE {0} SET {1} WHERE {2}").format(
            name,
            SQL(", ").join(SQL("{0} = %s").format(Identifier(written.columns[i])) for i in rest),
            SQL(" AND ").join(SQL("{0} = %s").format(Identifier(written.columns[i])) for i in key),
        )
        return statement, [
            [row[i] for i in rest] + [row[i] for i in key] for row in written.changed
        ]

    def close(self) -> None:
        self.connection.close()
